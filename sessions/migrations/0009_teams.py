"""Sessions and saved servers belong to a team: each person's existing ones go to a personal team."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def to_personal_teams(apps, schema_editor):
    """Give every person who owns anything a personal team (as its admin), and move their things there."""
    Team = apps.get_model("teams", "Team")
    Membership = apps.get_model("teams", "Membership")
    McpSession = apps.get_model("mcp_sessions", "McpSession")
    ServerConfig = apps.get_model("mcp_sessions", "ServerConfig")
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    owners = set(McpSession.objects.values_list("owner_id", flat=True)) | set(
        ServerConfig.objects.values_list("owner_id", flat=True)
    )
    for user in User.objects.filter(pk__in=owners):
        membership = Membership.objects.filter(user_id=user.pk).first()
        if membership is None:
            name, n = f"{user.username}'s team", 1
            while Team.objects.filter(name=name).exists():
                n += 1
                name = f"{user.username}'s team {n}"
            team = Team.objects.create(name=name, personal=True)
            Membership.objects.create(team=team, user_id=user.pk, role="admin")
        else:
            team = membership.team
        McpSession.objects.filter(owner_id=user.pk).update(team=team)
        ServerConfig.objects.filter(owner_id=user.pk).update(team=team)


class Migration(migrations.Migration):
    dependencies = [
        ("mcp_sessions", "0008_recording_imports"),
        ("teams", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="mcpsession",
            name="team",
            field=models.ForeignKey(
                null=True, on_delete=django.db.models.deletion.CASCADE, related_name="sessions", to="teams.team"
            ),
        ),
        migrations.AddField(
            model_name="serverconfig",
            name="team",
            field=models.ForeignKey(
                null=True, on_delete=django.db.models.deletion.CASCADE, related_name="servers", to="teams.team"
            ),
        ),
        migrations.RunPython(to_personal_teams, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="mcpsession",
            name="team",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="sessions", to="teams.team"
            ),
        ),
        migrations.AlterField(
            model_name="serverconfig",
            name="team",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="servers", to="teams.team"
            ),
        ),
        migrations.AlterField(
            model_name="mcpsession",
            name="owner",
            field=models.ForeignKey(
                help_text="who started it (or opened the recording)",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="mcp_sessions",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AlterField(
            model_name="serverconfig",
            name="owner",
            field=models.ForeignKey(
                help_text="who saved it",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="server_configs",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.RemoveConstraint(model_name="serverconfig", name="unique_server_name_per_owner"),
        migrations.AddConstraint(
            model_name="serverconfig",
            constraint=models.UniqueConstraint(fields=("team", "name"), name="unique_server_name_per_team"),
        ),
        migrations.RemoveIndex(model_name="mcpsession", name="session_recording"),
        migrations.AddIndex(
            model_name="mcpsession",
            index=models.Index(fields=["team", "recording_sha256"], name="session_recording"),
        ),
    ]
