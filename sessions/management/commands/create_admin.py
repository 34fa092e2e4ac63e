"""``manage.py create_admin NAME --team TEAM``: the hosted set-up's first admin (and any admin after)."""

from __future__ import annotations

import getpass
import os
import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from sessions.teams.members import make_admin

PASSWORD_VARIABLE = "INSPECTOR_ADMIN_PASSWORD"


class Command(BaseCommand):
    help = (
        "Make a person an admin of a team: the account is created if missing (its password from "
        f"{PASSWORD_VARIABLE}, or asked for), and so is the team."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--team", required=True, help="the team's name (created if missing)")
        parser.add_argument("--email", default="", help="the new account's e-mail address")

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        username, team_name = str(options["username"]).strip(), str(options["team"]).strip()
        if not username or not team_name:
            raise CommandError("The username and the team name must not be empty.")
        user = User.objects.filter(username=username).first()
        new = user is None
        if user is None:
            user = User(username=username, email=options["email"])
            try:
                user.full_clean(exclude=["password"])
            except ValidationError as error:
                raise CommandError("; ".join(error.messages)) from None
            # Asked before the transaction, which would otherwise hold the database while a person types.
            user.set_password(self._password(user))
        with transaction.atomic():
            if new:
                user.save()
            team, created = make_admin(user, team_name)
        if new:
            self.stdout.write(f"Created the account {username}.")
        self.stdout.write(f"{username} is an admin of {'the new team ' if created else ''}{team.name}.")

    def _password(self, user: Any) -> str:
        """The new account's password: from the environment, or typed twice at a terminal; checked."""
        password = os.environ.get(PASSWORD_VARIABLE, "")
        if not password:
            if not sys.stdin.isatty():
                raise CommandError(
                    f"Set {PASSWORD_VARIABLE}, or run this at a terminal to type the password."
                )
            password = getpass.getpass("Password: ")
            if password != getpass.getpass("Password (again): "):
                raise CommandError("The two passwords differ.")
        try:
            validate_password(password, user)
        except ValidationError as error:
            raise CommandError("The password is refused: " + " ".join(error.messages)) from None
        return password
