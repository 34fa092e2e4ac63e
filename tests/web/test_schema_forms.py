"""JSON Schema → form fields → submitted arguments, without a server."""

from __future__ import annotations

import re
from typing import Any

from django.template.loader import render_to_string

from sessions.web.schema_forms import FormField, build_form, default_arguments, parse_submission


def fields(schema: dict[str, Any], data: dict[str, str] | None = None) -> dict[str, FormField]:
    """Return every field of the form by HTML name."""
    found: dict[str, FormField] = {}

    def walk(spec: FormField) -> None:
        found[spec.name] = spec
        for child in spec.children:
            walk(child)

    walk(build_form(schema, data=data))
    return found


def selected(spec: FormField) -> str:
    return next(o.value for o in spec.options if o.selected)


OBJECT = {"type": "object"}


def test_strings_numbers_and_integers_come_back_with_their_json_types() -> None:
    schema = {
        **OBJECT,
        "properties": {"s": {"type": "string"}, "n": {"type": "number"}, "i": {"type": "integer"}},
    }
    args, errors = parse_submission(schema, {"arg.s": "42", "arg.n": "2.5", "arg.i": "7"})
    assert (args, errors) == ({"s": "42", "n": 2.5, "i": 7}, {})


def test_bad_numbers_are_reported_per_field() -> None:
    schema = {**OBJECT, "properties": {"n": {"type": "number"}, "i": {"type": "integer"}}}
    args, errors = parse_submission(schema, {"arg.n": "abc", "arg.i": "1.5"})
    assert args == {}
    assert errors == {"arg.n": "'abc' is not a number", "arg.i": "'1.5' is not an integer"}


def test_a_missing_required_field_is_an_error_and_empty_optional_ones_are_left_out() -> None:
    schema = {**OBJECT, "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a"]}
    assert parse_submission(schema, {"arg.a": "", "arg.b": ""}) == ({}, {"arg.a": "required"})
    assert parse_submission(schema, {"arg.a": "x", "arg.b": ""}) == ({"a": "x"}, {})


def test_defaults_are_prefilled_but_never_added_when_not_submitted() -> None:
    schema = {
        **OBJECT,
        "properties": {"n": {"type": "number", "default": 3}, "s": {"type": "string", "default": "hi"}},
    }
    form = fields(schema)
    assert form["arg.n"].value == "3" and form["arg.s"].value == "hi"
    assert parse_submission(schema, {}) == ({}, {})
    assert default_arguments(schema) == {"n": 3, "s": "hi"}


def test_enums_become_selects_and_keep_non_string_values() -> None:
    schema = {
        **OBJECT,
        "properties": {
            "city": {"type": "string", "enum": ["Paris", "Oslo"]},
            "level": {"enum": [1, 2, None]},
        },
        "required": ["city"],
    }
    form = fields(schema)
    assert form["arg.city"].kind == "select"
    assert [o.value for o in form["arg.city"].options] == ["", "Paris", "Oslo"]
    assert [o.value for o in form["arg.level"].options] == ["", "1", "2", "null"]
    args, errors = parse_submission(schema, {"arg.city": "Oslo", "arg.level": "2"})
    assert (args, errors) == ({"city": "Oslo", "level": 2}, {})
    assert parse_submission(schema, {"arg.city": "Rome"})[1] == {
        "arg.city": "'Rome' is not one of the choices"
    }


def test_a_required_choice_sent_back_unchosen_still_offers_and_shows_choose() -> None:
    schema = {
        **OBJECT,
        "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo"]}},
        "required": ["city"],
    }
    assert parse_submission(schema, {"arg.city": ""})[1] == {"arg.city": "required"}
    again = fields(schema, data={"arg.city": ""})["arg.city"]  # the form re-rendered with its error
    assert [o.value for o in again.options] == ["", "Paris", "Oslo"] and selected(again) == ""
    chosen = fields(schema, data={"arg.city": "Oslo"})["arg.city"]
    assert [o.value for o in chosen.options] == ["Paris", "Oslo"] and selected(chosen) == "Oslo"


def test_optional_booleans_are_tri_state_and_defaults_are_selected() -> None:
    schema = {
        **OBJECT,
        "properties": {"flag": {"type": "boolean", "default": False}, "other": {"type": "boolean"}},
    }
    form = fields(schema)
    assert [o.value for o in form["arg.flag"].options] == ["", "true", "false"]
    assert selected(form["arg.flag"]) == "false" and selected(form["arg.other"]) == ""
    assert parse_submission(schema, {"arg.flag": "true", "arg.other": ""}) == ({"flag": True}, {})


def test_nested_objects_get_dotted_names_and_come_back_nested() -> None:
    schema = {
        **OBJECT,
        "properties": {
            "user": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "address": {"type": "object", "properties": {"zip": {"type": "integer"}}},
                },
                "required": ["name"],
            }
        },
    }
    form = fields(schema)
    assert {"arg.user.name", "arg.user.address.zip"} <= set(form)
    args, errors = parse_submission(schema, {"arg.user.name": "Ann", "arg.user.address.zip": "75001"})
    assert (args, errors) == ({"user": {"name": "Ann", "address": {"zip": 75001}}}, {})
    # An optional object left blank is left out (its required keys are not asked for).
    assert parse_submission(schema, {"arg.user.name": "", "arg.user.address.zip": ""}) == ({}, {})
    assert parse_submission(schema, {"arg.user.address.zip": "1"}) == (
        {"user": {"address": {"zip": 1}}},
        {"arg.user.name": "required"},
    )


def test_keys_with_dots_do_not_collide() -> None:
    schema = {
        **OBJECT,
        "properties": {
            "a.b": {"type": "string"},
            "a": {"type": "object", "properties": {"b": {"type": "string"}}},
        },
    }
    form = fields(schema)
    assert "arg.a%2Eb" in form and "arg.a.b" in form
    assert parse_submission(schema, {"arg.a%2Eb": "1", "arg.a.b": "2"})[0] == {"a.b": "1", "a": {"b": "2"}}


def test_arrays_of_scalars_have_slots_and_empty_slots_are_left_out() -> None:
    schema = {
        **OBJECT,
        "properties": {"tags": {"type": "array", "items": {"type": "string"}, "default": ["x"]}},
    }
    form = fields(schema)
    assert [c.name for c in form["arg.tags"].children] == ["arg.tags.0", "arg.tags.1", "arg.tags.2"]
    assert form["arg.tags.0"].value == "x"
    args, _ = parse_submission(schema, {"arg.tags.0": "a", "arg.tags.1": "", "arg.tags.2": "c"})
    assert args == {"tags": ["a", "c"]}
    # Re-rendered after a submission, every sent slot is kept plus one empty slot.
    again = fields(schema, {"arg.tags.0": "a", "arg.tags.1": "b", "arg.tags.2": "c"})
    assert [c.name for c in again["arg.tags"].children] == [f"arg.tags.{i}" for i in range(4)]


def test_arrays_of_numbers_convert_each_item() -> None:
    schema = {**OBJECT, "properties": {"xs": {"type": "array", "items": {"type": "integer"}}}}
    assert parse_submission(schema, {"arg.xs.0": "1", "arg.xs.1": "2"}) == ({"xs": [1, 2]}, {})


def test_arrays_of_objects_fall_back_to_json() -> None:
    schema = {
        **OBJECT,
        "properties": {"rows": {"type": "array", "items": {"type": "object", "properties": {"a": {}}}}},
    }
    assert fields(schema)["arg.rows"].kind == "json"
    assert parse_submission(schema, {"arg.rows": '[{"a": 1}]'}) == ({"rows": [{"a": 1}]}, {})
    assert "not valid JSON" in parse_submission(schema, {"arg.rows": "[{"})[1]["arg.rows"]


def test_any_of_lets_the_person_pick_a_variant() -> None:
    schema = {
        **OBJECT,
        "properties": {"v": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
        "required": ["v"],
    }
    form = fields(schema)
    assert form["arg.v"].kind == "choice"
    assert [c.name for c in form["arg.v"].children] == ["arg.v.~0", "arg.v.~1"]
    data = {"arg.v.~variant": "1", "arg.v.~0": "ignored", "arg.v.~1": "5"}
    assert parse_submission(schema, data) == ({"v": 5}, {})
    assert parse_submission(schema, {"arg.v.~variant": "1", "arg.v.~1": ""}) == ({}, {"arg.v": "required"})


def test_one_of_objects_use_the_chosen_variants_fields() -> None:
    schema = {
        **OBJECT,
        "properties": {
            "shape": {
                "oneOf": [
                    {"title": "circle", "type": "object", "properties": {"r": {"type": "number"}}},
                    {"title": "square", "type": "object", "properties": {"side": {"type": "number"}}},
                ]
            }
        },
    }
    form = fields(schema)
    assert [o.label for o in form["arg.shape"].options] == ["(not set)", "circle", "square"]
    assert parse_submission(schema, {"arg.shape.~variant": "1", "arg.shape.~1.side": "2"})[0] == {
        "shape": {"side": 2}
    }
    assert parse_submission(schema, {"arg.shape.~variant": ""}) == ({}, {})


def test_optional_x_is_a_nullable_x_with_an_explicit_null_box() -> None:
    schema = {
        **OBJECT,
        "properties": {"n": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}},
    }
    form = fields(schema)
    assert form["arg.n"].kind == "integer" and form["arg.n"].nullable
    assert parse_submission(schema, {"arg.n": "4"})[0] == {"n": 4}
    assert parse_submission(schema, {"arg.n": "", "arg.n.~null": "1"})[0] == {"n": None}
    assert parse_submission(schema, {"arg.n": ""})[0] == {}


def test_type_lists_with_null_are_nullable_and_other_lists_are_choices() -> None:
    schema = {
        **OBJECT,
        "properties": {"a": {"type": ["string", "null"]}, "b": {"type": ["string", "number"]}},
    }
    form = fields(schema)
    assert form["arg.a"].kind == "text" and form["arg.a"].nullable
    assert form["arg.b"].kind == "choice"
    assert parse_submission(schema, {"arg.b.~variant": "1", "arg.b.~1": "3"})[0] == {"b": 3}


def test_refs_to_defs_resolve_and_cycles_fall_back_to_json() -> None:
    schema = {
        **OBJECT,
        "properties": {"p": {"$ref": "#/$defs/Point"}, "t": {"$ref": "#/definitions/Tree"}},
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
        "definitions": {
            "Tree": {
                "type": "object",
                "properties": {"child": {"$ref": "#/definitions/Tree"}, "v": {"type": "string"}},
            }
        },
    }
    form = fields(schema)
    assert form["arg.p.x"].kind == "number"
    assert form["arg.t.v"].kind == "text"
    assert form["arg.t.child"].kind == "json"
    args, errors = parse_submission(schema, {"arg.p.x": "1", "arg.t.v": "a", "arg.t.child": '{"v": "b"}'})
    assert (args, errors) == ({"p": {"x": 1}, "t": {"v": "a", "child": {"v": "b"}}}, {})


def test_unknown_refs_and_free_form_objects_fall_back_to_json() -> None:
    schema = {**OBJECT, "properties": {"a": {"$ref": "https://example.com/x"}, "b": {"type": "object"}}}
    form = fields(schema)
    assert form["arg.a"].kind == "json" and form["arg.b"].kind == "json"
    assert parse_submission(schema, {"arg.b": '{"k": [1]}'})[0] == {"b": {"k": [1]}}


def test_long_text_gets_a_textarea_and_multiline_text_is_kept_exactly() -> None:
    schema = {**OBJECT, "properties": {"message": {"type": "string"}, "id": {"type": "string"}}}
    form = fields(schema)
    assert form["arg.message"].kind == "textarea" and form["arg.id"].kind == "text"
    text = 'line 1\r\n  "quoted" \\n not escaped\r\n{"json": "stays a string"}\r\n'
    args, _ = parse_submission(schema, {"arg.message": text, "arg.id": '"x"'})
    assert args == {
        "message": 'line 1\n  "quoted" \\n not escaped\n{"json": "stays a string"}\n',
        "id": '"x"',
    }


def test_formats_and_limits_are_shown_as_hints() -> None:
    schema = {
        **OBJECT,
        "properties": {
            "n": {"type": "number", "minimum": 1, "maximum": 10},
            "u": {"type": "string", "format": "uri"},
            "r": {"type": "string", "x-mcp-header": "Region"},
        },
    }
    form = fields(schema)
    assert form["arg.n"].hints == ["≥ 1", "≤ 10"]
    assert form["arg.u"].hints == ["format uri"]
    assert form["arg.r"].hints == ["sent as header Mcp-Param-Region"]


def test_a_submitted_form_re_renders_with_the_sent_values_and_errors() -> None:
    schema = {**OBJECT, "properties": {"n": {"type": "number", "default": 3}}}
    form = build_form(schema, data={"arg.n": "x"}, errors={"arg.n": "'x' is not a number"})
    assert form.children[0].value == "x" and form.children[0].error == "'x' is not a number"


def test_a_schema_without_properties_has_no_fields() -> None:
    assert build_form({"type": "object"}).children == []
    assert parse_submission({"type": "object"}, {}) == ({}, {})


SHAPES = {
    **OBJECT,
    "properties": {
        "shape": {
            "oneOf": [
                {
                    "title": "circle",
                    "type": "object",
                    "properties": {"r": {"type": "number"}},
                    "required": ["r"],
                },
                {
                    "title": "square",
                    "type": "object",
                    "properties": {"side": {"type": "number"}},
                    "required": ["side"],
                },
            ]
        }
    },
    "required": ["shape"],
}


def _variants(page: str) -> dict[str, tuple[bool, str]]:
    """Each variant block of a rendered choice: (hidden, its HTML up to the next one), by variant number."""
    found = {}
    for part in page.split('<div class="sf-variant" ')[1:]:
        head = re.match(r'data-variant="(\d+)"( hidden)?>', part)
        assert head is not None
        found[head[1]] = (bool(head[2]), part)
    return found


def test_a_one_of_shows_only_the_picked_variants_fields_and_their_stars() -> None:
    form = fields(SHAPES)
    assert [c.hidden for c in form["arg.shape"].children] == [
        False,
        True,
    ]  # required: the first, until picked
    assert [c.hidden for c in fields(SHAPES, {"arg.shape.~variant": "1"})["arg.shape"].children] == [
        True,
        False,
    ]
    optional = {**SHAPES, "required": []}
    assert [c.hidden for c in fields(optional)["arg.shape"].children] == [True, True]  # "(not set)"

    page = render_to_string("sessions/tools/_field.html", {"field": form["arg.shape"]})
    variants = _variants(page)
    assert set(variants) == {"0", "1"}
    shown, circle = variants["0"]
    assert not shown and 'name="arg.shape.~0.r"' in circle and 'class="req"' in circle
    assert variants["1"][0] and 'name="arg.shape.~1.side"' in variants["1"][1]  # hidden, star and all
    assert "data-variant-select" in page  # app.js shows another variant when it is picked


def test_the_browser_is_asked_to_check_only_what_must_be_filled_and_the_numeric_limits() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "enum": ["Paris", "Oslo"]},
            "count": {"type": "integer", "minimum": 1, "maximum": 5},
            "note": {"type": "string", "maxLength": 20, "minLength": "2"},
            "maybe": {"type": ["string", "null"]},
            "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]},
            "when": {"type": "object", "properties": {"day": {"type": "string"}}, "required": ["day"]},
            "shape": {
                "oneOf": [{"type": "object", "properties": {"r": {"type": "number"}}, "required": ["r"]}]
            },
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["city", "count", "note", "maybe", "when", "shape", "tags"],
    }
    fields = {f.key: f for f in build_form(schema).children}
    assert [key for key, f in fields.items() if f.enforced] == ["city", "count", "note"]
    assert fields["when"].children[0].enforced  # required inside a required object
    assert not fields["where"].children[0].enforced  # an optional object may be left blank
    assert not any(child.enforced for child in fields["tags"].children)
    assert fields["count"].bounds == {"min": "1", "max": "5"}
    assert fields["note"].bounds == {"maxlength": "20"}  # a limit that is not a number is the server's
    html = render_to_string("sessions/tools/_field.html", {"field": fields["count"]})
    assert re.search(r'<input [^>]*type="number"[^>]* required min="1" max="5"', html)
    html = render_to_string("sessions/tools/_field.html", {"field": fields["maybe"]})
    assert " required" not in html and 'aria-required="true"' in html
