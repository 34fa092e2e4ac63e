"""Start the test provider: ``python -m support.oidc_provider PORT CONFIG_JSON`` (tests/ on the path).

CONFIG_JSON: ``{"client_id", "client_secret", "redirect_uris": [...], "people": [{"username",
"password", "email", "first_name", "last_name"}]}``. OIDC_PROVIDER_DIR and OIDC_PROVIDER_ISSUER are set
in the environment by the caller.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    port, config = sys.argv[1], json.loads(sys.argv[2])
    os.environ["DJANGO_SETTINGS_MODULE"] = "support.oidc_provider.settings"
    import django
    from django.core.management import call_command

    django.setup()
    from django.contrib.auth.models import User
    from oauth2_provider.models import Application

    call_command("migrate", interactive=False, verbosity=0)
    for person in config["people"]:
        User.objects.create_user(**person)
    Application.objects.create(
        name="MCP Inspector",
        client_id=config["client_id"],
        client_secret=config["client_secret"],  # stored hashed by the toolkit
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=" ".join(config["redirect_uris"]),
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=True,
    )
    call_command("runserver", f"127.0.0.1:{port}", "--noreload", "--skip-checks")


if __name__ == "__main__":
    main()
