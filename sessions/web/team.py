"""The team page: members and their roles, invitations, the approved server catalog, settings; and the
team switcher. Members see the page; changes need an admin. Every id is looked up within the person's
current team, so another team's member, invitation or catalog entry is a 404.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from sessions.teams import access, members, team_models
from sessions.teams.models import CatalogServer, Invitation, Membership, Role, TapEndpoint, Team
from sessions.web.http import AuthedRequest
from sessions.web.shortcuts import int_param, person_scope
from sessions.web.team_forms import (
    CatalogForm,
    InvitationForm,
    RoleForm,
    TapEndpointForm,
    TeamModelForm,
    TeamSettingsForm,
)

__all__ = [
    "catalog_delete",
    "catalog_edit",
    "catalog_new",
    "invitation_create",
    "invitation_revoke",
    "member_remove",
    "member_role",
    "switch_team",
    "team_page",
    "team_settings",
]


def _admin(request: AuthedRequest) -> tuple[access.Scope, Team]:
    """The person's current team, if they are its admin (403 otherwise)."""
    scope = person_scope(request, Role.ADMIN)
    return scope, Team.objects.get(pk=scope.team_id)


def _page(request: AuthedRequest, status: int = 200, **extra: Any) -> HttpResponse:
    scope = person_scope(request)
    team = Team.objects.get(pk=scope.team_id)
    is_admin = scope.allows(Role.ADMIN)
    context: dict[str, Any] = {
        "team": team,
        "scope": scope,
        "is_admin": is_admin,
        "roles": Role.choices,
        "members": Membership.objects.filter(team=team).select_related("user").order_by("user__username"),
        "catalog": CatalogServer.objects.filter(team=team),
        "llm_models": team_models.listed(team.pk),  # sessions/web/team_models.py
    }
    if settings.INSPECTOR_HOSTED:  # tap endpoints: sessions/web/tap_endpoints.py
        context |= {
            "tap_endpoints": TapEndpoint.objects.filter(team=team).select_related("created_by")[:200],
            "tap_form": TapEndpointForm(),
            "may_tap": scope.allows(Role.OPERATOR),
        }
    if is_admin:
        context |= {
            "invitations": Invitation.objects.filter(team=team).select_related("created_by", "used_by")[:100],
            "invitation_form": InvitationForm(),
            "settings_form": TeamSettingsForm.of(team),
            "model_form": TeamModelForm(),
        }
    context |= extra
    return render(request, "team/team.html", context, status=status)


@never_cache
@require_GET
def team_page(request: AuthedRequest) -> HttpResponse:
    """The current team's page."""
    return _page(request)


@require_POST
def team_settings(request: AuthedRequest) -> HttpResponse:
    """Save the team's settings: command lines allowed, the egress allow-list, the live-session cap."""
    _, team = _admin(request)
    form = TeamSettingsForm(request.POST)
    if not form.is_valid():
        return _page(request, status=400, settings_form=form)
    form.save(team)
    messages.success(request, "Settings saved.")
    return redirect("team")


@require_POST
def member_role(request: AuthedRequest, member_id: int) -> HttpResponse:
    """Give a member another role (a team keeps at least one admin)."""
    scope, _ = _admin(request)
    # The id first: another team's member is a 404 whatever the form says.
    if not Membership.objects.filter(team_id=scope.team_id, pk=member_id).exists():
        raise Http404("No such member in this team")
    form = RoleForm(request.POST)
    if not form.is_valid():
        return _page(request, status=400, members_error="Choose viewer, operator or admin.")
    try:
        member = members.change_role(scope.team_id, member_id, form.cleaned_data["role"])
    except Membership.DoesNotExist:
        raise Http404("No such member in this team") from None
    except members.MemberError as error:
        return _page(request, status=409, members_error=str(error))
    messages.success(request, f"{member.user.get_username()} is now {member.role}.")
    return redirect("team")


@require_POST
def member_remove(request: AuthedRequest, member_id: int) -> HttpResponse:
    """Take a member out of the team (never its last admin)."""
    scope, _ = _admin(request)
    try:
        member = members.remove(scope.team_id, member_id)
    except Membership.DoesNotExist:
        raise Http404("No such member in this team") from None
    except members.MemberError as error:
        return _page(request, status=409, members_error=str(error))
    messages.success(request, f"{member.user.get_username()} is no longer in the team.")
    if member.user_id == request.user.pk:
        return redirect("home")
    return redirect("team")


@never_cache
@require_POST
def invitation_create(request: AuthedRequest) -> HttpResponse:
    """Make an invitation link; the page shows it this once (only its digest is kept)."""
    _, team = _admin(request)
    if not settings.INSPECTOR_HOSTED:
        return _page(request, status=404, invitation_error="Invitations are for the hosted mode.")
    form = InvitationForm(request.POST)
    if not form.is_valid():
        return _page(request, status=400, invitation_form=form)
    invitation, token = Invitation.make(
        team, form.cleaned_data["role"], request.user, form.cleaned_data["note"], form.cleaned_data["days"]
    )
    link = request.build_absolute_uri(reverse("invite") + "?" + urlencode({"token": token}))
    return _page(request, new_link=link, new_invitation=invitation)


@require_POST
def invitation_revoke(request: AuthedRequest, invitation_id: int) -> HttpResponse:
    """Revoke an invitation of the team, so its link no longer works."""
    scope, _ = _admin(request)
    revoked = Invitation.objects.filter(team_id=scope.team_id, pk=invitation_id).update(revoked=True)
    if not revoked:
        raise Http404("No such invitation in this team")
    messages.success(request, "Invitation revoked.")
    return redirect("team")


def _catalog_page(
    request: AuthedRequest, form: CatalogForm, entry: CatalogServer | None, status: int = 200
) -> HttpResponse:
    context = {"form": form, "entry": entry}
    return render(request, "team/catalog_form.html", context, status=status)


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def catalog_new(request: AuthedRequest) -> HttpResponse:
    """Add a server to the team's catalog."""
    _, team = _admin(request)
    if request.method != "POST":
        return _catalog_page(request, CatalogForm(team=team), None)
    form = CatalogForm(request.POST, team=team)
    if not form.is_valid():
        return _catalog_page(request, form, None, status=400)
    entry = form.save()
    messages.success(request, f"{entry.name} is in the catalog.")
    return redirect("team")


def _entry(scope: access.Scope, entry_id: int) -> CatalogServer:
    entry = CatalogServer.objects.filter(team_id=scope.team_id, pk=entry_id).first()
    if entry is None:
        raise Http404("No such server in this team's catalog")
    return entry


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def catalog_edit(request: AuthedRequest, entry_id: int) -> HttpResponse:
    """Change a catalog entry (its fixed values shown masked; a masked line keeps its value)."""
    scope, team = _admin(request)
    entry = _entry(scope, entry_id)
    if request.method != "POST":
        return _catalog_page(
            request, CatalogForm(team=team, entry=entry, initial=CatalogForm.initial_of(entry)), entry
        )
    form = CatalogForm(request.POST, team=team, entry=entry)
    if not form.is_valid():
        return _catalog_page(request, form, entry, status=400)
    form.save()
    messages.success(request, f"{entry.name} saved.")
    return redirect("team")


@require_POST
def catalog_delete(request: AuthedRequest, entry_id: int) -> HttpResponse:
    """Take a server out of the catalog (sessions started from it keep their record)."""
    scope, _ = _admin(request)
    entry = _entry(scope, entry_id)
    entry.delete()
    messages.success(request, f"{entry.name} is out of the catalog.")
    return redirect("team")


@require_POST
def switch_team(request: AuthedRequest) -> HttpResponse:
    """Make another of the person's teams the current one (404 for a team they are not in)."""
    team_id = int_param(request.POST, "team", minimum=1)
    if team_id is None or access.role_in(request.user.pk, team_id) is None:
        raise Http404("Not a team of yours")
    request.session[access.TEAM_KEY] = team_id
    return redirect("home")
