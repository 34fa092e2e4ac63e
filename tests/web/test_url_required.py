"""A -32042 error (URLElicitationRequiredError) read for its call card: the URLs, their hosts, what opens."""

from __future__ import annotations

from django.template.loader import render_to_string

from sessions.web.reviews import url_elicitations, url_parts


def error(*elicitations: object, code: int = -32042) -> dict[str, object]:
    return {"code": code, "message": "URL elicitation required", "data": {"elicitations": list(elicitations)}}


def test_the_host_a_url_really_opens_is_told_apart_from_user_info_that_imitates_one() -> None:
    assert url_parts("https://bank.example@evil.example:8443/login?x=1") == {
        "before": "https://bank.example@",
        "host": "evil.example:8443",
        "after": "/login?x=1",
    }
    assert url_parts("http://a.example")["host"] == "a.example"
    assert url_parts("https://a.example#frag")["after"] == "#frag"
    assert url_parts("javascript:alert(1)") == {"before": "javascript:alert(1)", "host": "", "after": ""}


def test_only_a_32042_errors_url_elicitations_are_read_and_only_http_urls_are_links() -> None:
    one = {"mode": "url", "elicitationId": "e1", "url": "https://auth.example/a", "message": "Sign in"}
    bad = {"mode": "url", "elicitationId": "e2", "url": "javascript:alert(1)", "message": "Click"}
    found = url_elicitations(error(one, bad, "junk", {"message": "no url"}))
    assert [(f["elicitation_id"], f["link"]) for f in found] == [("e1", "https://auth.example/a"), ("e2", "")]
    assert url_elicitations(error(one, code=-32603)) == []
    assert url_elicitations({"code": -32042, "message": "m", "data": "text"}) == []
    assert url_elicitations({"code": -32042, "message": "m", "data": {"elicitations": {"a": 1}}}) == []
    assert url_elicitations("not an error") == []
    assert len(url_elicitations(error(*[one] * 50))) == 10


def test_the_card_escapes_what_the_server_sent_and_links_no_script_url() -> None:
    bad = {"url": "javascript:alert(1)", "message": "<img src=x onerror=alert(1)>", "elicitationId": "<b>"}
    outcome = {"error": error(bad)}
    needed = url_elicitations(outcome["error"])
    context = {"needed": needed, "outcome": outcome, "method": "tools/call", "shared": True}
    page = render_to_string("sessions/reviews/_url_required.html", context)
    assert "<img" not in page and "<b>" not in page and "&lt;img" in page
    assert 'href="javascript' not in page and "will not open it" in page
