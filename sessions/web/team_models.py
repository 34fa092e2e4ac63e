"""The team's own models on the team page: its admins add, replace and remove them; every member sees
them listed, the key masked. A key goes in once, in a POST body, and is never shown again.

What a chat or an eval run does with them is ``sessions.teams.team_models`` and the Playground's.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST

from sessions.playground import turns
from sessions.teams import team_models
from sessions.teams.models import Role, TeamModel
from sessions.web.http import AuthedRequest
from sessions.web.shortcuts import person_scope
from sessions.web.team import _admin
from sessions.web.team import _page as team_page
from sessions.web.team_forms import TeamModelForm

__all__ = ["model_create", "model_delete", "model_edit"]


def _installation_names() -> set[str]:
    return {config.key for config in turns.configured()[0]}


@never_cache
@sensitive_post_parameters("api_key")
@require_POST
def model_create(request: AuthedRequest) -> HttpResponse:
    """Add a model to the team (admins); its key is stored encrypted and shown masked from now on."""
    _, team = _admin(request)
    form = TeamModelForm(request.POST)
    if not form.is_valid():
        return team_page(request, status=400, model_form=form)
    try:
        entry = team_models.save(team, None, form.cleaned_data, request.user, _installation_names())
    except ValueError as error:
        return team_page(request, status=400, model_form=form, model_error=str(error))
    messages.success(request, f"The model {entry.name} is the team's: its chats and evals may use it.")
    return redirect("team")


def _entry(team_id: int, model_id: int) -> TeamModel:
    entry = TeamModel.objects.filter(team_id=team_id, pk=model_id).defer("api_key").first()
    if entry is None:
        raise Http404("No such model in this team")
    return entry


def _edit_page(
    request: AuthedRequest, form: TeamModelForm, entry: TeamModel, status: int = 200, **extra: Any
) -> HttpResponse:
    return render(request, "team/model_form.html", {"form": form, "entry": entry, **extra}, status=status)


@never_cache
@sensitive_post_parameters("api_key")
@require_http_methods(["GET", "HEAD", "POST"])
def model_edit(request: AuthedRequest, model_id: int) -> HttpResponse:
    """Replace a model's settings; a key left empty keeps the stored one."""
    scope, team = _admin(request)
    entry = _entry(scope.team_id, model_id)
    if request.method != "POST":
        return _edit_page(request, TeamModelForm(initial=TeamModelForm.initial_of(entry)), entry)
    form = TeamModelForm(request.POST)
    if not form.is_valid():
        return _edit_page(request, form, entry, status=400)
    try:
        team_models.save(team, entry, form.cleaned_data, request.user, _installation_names())
    except ValueError as error:
        return _edit_page(request, form, entry, status=400, model_error=str(error))
    messages.success(request, f"The model {entry.name} is saved.")
    return redirect("team")


@require_POST
def model_delete(request: AuthedRequest, model_id: int) -> HttpResponse:
    """Take a model (and its key) out of the team; chats that used it say it is not configured any more."""
    scope = person_scope(request, Role.ADMIN)
    entry = _entry(scope.team_id, model_id)
    entry.delete()
    messages.success(request, f"The model {entry.name} and its key are removed.")
    return redirect("team")
