"""A session secret in every common encoding (sessions/timeline/secret_forms.py): each is found, wherever
it stands, and the search around anchors finds exactly what the one regular expression finds."""

from __future__ import annotations

import base64
import json
import re
from random import Random
from urllib.parse import quote, quote_plus

import pytest

from sessions.timeline.redaction import MASK, Redactor
from sessions.timeline.secret_forms import SecretForms, forms_of

SECRETS = [
    "ENVSECRET456",
    "sk-live_9f8e7d6c5b4a",
    "p@ss w/rd+%&?=#;,:~!*'()[]$",
    'quo"te\\back\ttab',
    "pässwörd-ünïcode-🔑",
    "MixedCase-Token-Zz09",
]
# What encodeURIComponent leaves as it is (JavaScript); Python's quote leaves fewer.
JS_SAFE = "-_.!~*'()"


def encodings(secret: str, random: Random) -> dict[str, str]:
    """``secret`` as common encoders write it; base64 inside longer base64 at every offset."""
    data = secret.encode()
    found = {
        "raw": secret,
        "json": json.dumps(secret)[1:-1],
        "json, not ASCII": json.dumps(secret, ensure_ascii=False)[1:-1],
        "url": quote(secret, safe=""),
        "url, lower hex": re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(secret, safe="")),
        "url, plus": quote_plus(secret),
        "url, encodeURIComponent": quote(secret, safe=JS_SAFE),
        "url, path": quote(secret),
        "url, every byte": "".join(
            f"%{b:02X}" if not (chr(b).isascii() and chr(b).isalnum()) else chr(b) for b in data
        ),
        "upper": secret.upper(),
        "lower": secret.lower(),
        "url of upper": quote(secret.upper(), safe=""),
        "hex": data.hex(),
        "HEX": data.hex().upper(),
    }
    for offset in range(3):
        before, after = (
            random.randbytes(offset + 3 * random.randint(0, 3)),
            random.randbytes(random.randint(0, 5)),
        )
        for name, encode in (("base64", base64.b64encode), ("base64url", base64.urlsafe_b64encode)):
            whole = encode(before + data + after).decode()
            found[f"{name} at {len(before)}"] = whole
            found[f"{name} at {len(before)}, unpadded"] = whole.rstrip("=")
            found[f"{name} at {len(before)}, in a URL"] = quote(whole, safe="")
        found[f"base64 alone at {offset}"] = base64.b64encode(bytes(offset) + data).decode()
    return found


@pytest.mark.parametrize("secret", SECRETS)
def test_every_common_encoding_of_a_secret_is_masked_wherever_it_stands(secret: str) -> None:
    random = Random(secret)
    redactor = Redactor([secret])
    for name, encoded in encodings(secret, random).items():
        for text in (
            encoded,
            f"got {encoded} back",
            f"x={encoded}&y=1",
            f'{{"v": "{encoded}"}}',
            f"a{encoded}z",
        ):
            shown = redactor.text(text)
            assert encoded not in shown and MASK in shown, (name, text, shown)
        # Inside a frame: JSON the server wrote, the encoding in a string (escaped as JSON escapes it).
        raw = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"text": f"see {encoded}."}]}})
        assert not redactor.plain(raw), name
        shown_raw = redactor.raw(raw.encode()).decode()
        assert encoded not in json.loads(shown_raw)["result"]["content"][0]["text"], (name, shown_raw)


@pytest.mark.slow
def test_a_secret_inside_longer_base64_is_found_at_any_offset_and_its_bits_masked() -> None:
    random = Random(5)
    for _ in range(300):
        secret = "".join(random.choice("abcdefghijkXYZ0123456789-_.") for _ in range(random.randint(6, 40)))
        data = secret.encode()
        forms = SecretForms([secret])
        before, after = random.randbytes(random.randint(0, 12)), random.randbytes(random.randint(0, 12))
        encoded = random.choice([base64.b64encode, base64.urlsafe_b64encode])(before + data + after).decode()
        shown = forms.mask(f"payload={encoded};", "*")
        assert shown != f"payload={encoded};", (secret, encoded)
        # What is left decodes to no more than 8 bits of the secret on either side.
        left = shown.removeprefix("payload=").removesuffix(";").split("*")
        for piece in left:
            usable = piece[: len(piece) - len(piece) % 4]
            decoded = (
                base64.b64decode(usable.replace("-", "+").replace("_", "/") + "=" * 0) if usable else b""
            )
            assert data not in decoded and data[1:-1] not in decoded


def test_the_three_base64_fragments_cover_every_offset() -> None:
    secret = "ENVSECRET456"
    fragments = [form.pattern(False) for form in forms_of(secret)[2:]]
    for offset in range(3):
        encoded = base64.b64encode(b"\xff" * offset + secret.encode() + b"\xee").decode()
        assert sum(bool(re.search(fragment, encoded)) for fragment in fragments) >= 1, offset


def test_short_secrets_are_not_hunted_and_plain_text_is_left_alone() -> None:
    forms = SecretForms(["abc12", "hunter2pass"])
    text = "abc12 hunter 2pass hunter2pas HUNTER-2PASS aHVudGVy 68756e746572 https://x/?q=hunter"
    assert forms.mask(text, "*") == text
    assert forms.mask("HUNTER2PASS and hunter2pass", "*") == "* and *"  # letters in any case


def test_searching_around_anchors_finds_exactly_what_the_one_expression_finds() -> None:
    random = Random(11)
    secrets = ["ENVSECRET456", "DBPASS789", "postgres://app:DBPASS789@db/app", "aaaaaaaa", "a b/c+d%e"]
    forms = SecretForms(secrets)
    assert forms.pattern is not None
    pieces = [*(v for s in secrets for v in encodings(s, random).values()), "a", " ", "%2", "=", "\n", "İ"]
    for _ in range(3000):
        text = "".join(random.choice(pieces) for _ in range(random.randint(0, 6)))
        if random.random() < 0.3:
            text = text[random.randint(0, len(text)) :]
        assert forms.matches(text) == [m.span() for m in forms.pattern.finditer(text)], text
        assert forms.mask(text, MASK) == forms.pattern.sub(MASK, text), text


def test_the_literal_matcher_finds_only_the_secret_as_it_is_and_json_escaped() -> None:
    literal = Redactor(['quo"te\\back'], encodings=False)
    assert literal.text('say quo\\"te\\\\back') == f"say {MASK}"
    assert literal.text(quote('quo"te\\back', safe="")) == quote('quo"te\\back', safe="")
    assert MASK in Redactor(['quo"te\\back']).text(quote('quo"te\\back', safe=""))
