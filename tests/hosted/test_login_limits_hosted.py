"""The login limit held by the hosted set-up as a team runs it: two web processes sharing Redis, on
PostgreSQL, with the real password hasher; and a password change that another browser can then end."""

from __future__ import annotations

import re
import threading
from collections import Counter
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet
from support.hosted import hosted_env, manage, password_login, prepare, web_process

pytestmark = pytest.mark.slow

REDIS_DB = 15  # test_hosted.py uses 12 to 14, test_oauth_hosted.py 11, test_together.py 10
PASSWORD = "alice-long-password-1"
ATTEMPTS = 60
WAIT = 60.0


def login_form(client: httpx.Client) -> dict[str, str]:
    page = client.get("/auth/login")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token, page.text[:500]
    return {"csrfmiddlewaretoken": token[1], "next": "/"}


def post_login(client: httpx.Client, form: dict[str, str], username: str, password: str) -> int:
    fields = {**form, "username": username, "password": password}
    return client.post("/auth/login", data=fields, headers={"Origin": str(client.base_url)}).status_code


@pytest.mark.usefixtures("services")
def test_sixty_parallel_wrong_passwords_on_two_web_processes_get_five_checks(
    hosted_database: str, tmp_path: Path
) -> None:
    env = hosted_env(
        hosted_database,
        REDIS_DB,
        INSPECTOR_DATA_DIR=str(tmp_path),
        INSPECTOR_HOSTED="true",
        INSPECTOR_SECRET_KEYS=Fernet.generate_key().decode(),
    )
    prepare(env, REDIS_DB)
    manage(env, "create_admin", "alice", "--team", "Team A", INSPECTOR_ADMIN_PASSWORD=PASSWORD)
    manage(env, "create_admin", "carol", "--team", "Team C", INSPECTOR_ADMIN_PASSWORD=PASSWORD)
    with web_process(env) as web_a, web_process(env) as web_b:
        clients = [
            httpx.Client(base_url=(web_a, web_b)[n % 2], follow_redirects=False, timeout=WAIT)
            for n in range(ATTEMPTS)
        ]
        try:
            forms = [login_form(client) for client in clients]
            start = threading.Barrier(ATTEMPTS, timeout=WAIT)
            answers: list[int] = []

            def guess(n: int) -> None:
                start.wait()
                answers.append(post_login(clients[n], forms[n], "alice", f"wrong-guess-{n}"))

            threads = [threading.Thread(target=guess, args=(n,)) for n in range(ATTEMPTS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(WAIT)
            # A 403 is a password that was checked; a 429 is one refused before its check.
            assert Counter(answers) == {403: 5, 429: ATTEMPTS - 5}
            # alice is locked on both processes, under any spelling that logs in as her.
            for client, form in zip(clients[:4], forms[:4], strict=True):
                for name in ("alice", "ａlice", "ＡＬＩＣＥ"):
                    assert post_login(client, form, name, PASSWORD) == 429, (client.base_url, name)
        finally:
            for client in clients:
                client.close()

        # carol changes her password on the laptop (web process A); her phone (B) then ends her other
        # sessions, and the laptop's next request is logged out.
        with (
            httpx.Client(base_url=web_a, follow_redirects=False, timeout=WAIT) as laptop,
            httpx.Client(base_url=web_b, follow_redirects=False, timeout=WAIT) as phone,
        ):
            headers = password_login(laptop, "carol", PASSWORD)
            new = "carol-new-password-2"
            changed = laptop.post(
                "/account/password",
                data={"old_password": PASSWORD, "new_password1": new, "new_password2": new},
                headers=headers,
            )
            assert changed.status_code == 302, changed.text[:1000]
            assert "this browser" in laptop.get("/account").text
            phone_headers = password_login(phone, "carol", new)
            # The phone lists the laptop, under its new session key, as a browser it can end.
            assert len(re.findall(r'action="/account/sessions/\d+/end"', phone.get("/account").text)) == 1
            ended = phone.post("/account/sessions/end-others", headers=phone_headers)
            assert ended.status_code == 302
            assert "Ended 1 other session." in phone.get("/account").text
            after = laptop.get("/")
            assert after.status_code == 302 and after.headers["location"].startswith("/auth/login")
            assert phone.get("/").status_code == 200
