"""Replay against…: a session's conversation sent again, as a new live session, to a saved server, the
session's own target or a new command or URL; and the side-by-side view of a replay beside its recording.

GET ``/s/<id>/replay`` shows the choice, POST ``/s/<id>/replay/start`` starts the replay (the runtime
owns the connection: ``sessions/runtime/replaying.py``) and opens ``/s/<new>/replayed``, the view, which
follows a live replay by asking for itself again until the replay has ended.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from sessions.models import McpSession, ServerConfig
from sessions.replay import RecordingProblem
from sessions.runtime import client
from sessions.teams import access, policy
from sessions.teams.models import Role
from sessions.timeline.replays import conversation_of, side_by_side
from sessions.web import together
from sessions.web.http import AuthedRequest, signed_in_user
from sessions.web.oauth import with_callback
from sessions.web.replay_forms import NEW, OWN, ReplayForm
from sessions.web.shortcuts import owned_session

__all__ = ["replay_form", "replay_view", "start_replay"]


def _own_target(session: McpSession) -> bool:
    """Whether the session has a server of its own to start again (not a recording, not a tap's)."""
    config = session.config if isinstance(session.config, dict) else {}
    return not session.is_imported and not session.is_tap and bool(config.get("command") or config.get("url"))


def _why_not(session: McpSession) -> str | None:
    """Why the session's conversation cannot be replayed, or None."""
    try:
        conversation = conversation_of(session)
    except RecordingProblem as exc:
        return f"This session cannot be replayed: {exc}."
    if not conversation.requests:
        return "This session sent no request after initialize: there is nothing to replay."
    return None


def _choices(session: McpSession) -> dict[str, Any]:
    servers = list(ServerConfig.objects.filter(team_id=session.team_id).order_by("name"))
    # The role in the session's team, as owned_session found it: a viewer is not offered what it may not do.
    can_start = Role.allows(getattr(session, "person_role", None) or Role.VIEWER, Role.OPERATOR)
    return {
        "session": session,
        "servers": servers,
        "own": _own_target(session),
        "problem": _why_not(session),
        "can_start": can_start,
        "form": ReplayForm(
            initial={"target": OWN if _own_target(session) else (servers[0].pk if servers else NEW)}
        ),
    }


@require_GET
async def replay_form(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Where to replay the session: a saved server of its team, its own server, or a new target."""
    session = await owned_session(request, public_id)
    context = await sync_to_async(_choices)(session)
    return await sync_to_async(render)(request, "replay/start.html", context)


def _replay_config(form: ReplayForm, session: McpSession, user_id: int) -> tuple[dict[str, Any], Any]:
    """The config to replay with and its saved server; ``ValueError`` (400) or ``PermissionError`` (403)
    says why not."""
    if not form.is_valid():
        raise ValueError(form.problem)
    choice = form.cleaned_data["target"]
    if choice == OWN:
        if not _own_target(session):
            raise ValueError(
                "This session has no server of its own to replay against: "
                "pick a saved server or a new target."
            )
        problem = policy.reconnect_problem(session)
        if problem:
            raise PermissionError(problem)
        return policy.reconnect_config(session), session.server_id
    scope = access.Scope(user_id, session.team_id, "", Role.OPERATOR)
    if choice == NEW:
        assert form.new_config is not None
        config, server_id = form.new_config, None
    else:
        assert form.saved_pk is not None
        server = ServerConfig.objects.filter(team_id=session.team_id, pk=form.saved_pk).first()
        if server is None:
            raise ValueError("No such saved server in this session's team.")
        config, server_id = server.snapshot(), server.pk
    problem = policy.connect_problem(scope, config)
    if problem:
        raise PermissionError(problem)
    return policy.prepared(scope, config), server_id


def _create(request: AuthedRequest, session: McpSession, user_id: int) -> McpSession:
    problem = _why_not(session)
    if problem:
        raise ValueError(problem)
    form = ReplayForm(request.POST)
    config, server_id = _replay_config(form, session, user_id)
    return McpSession.objects.create(
        team_id=session.team_id,
        owner_id=user_id,
        server_id=server_id,
        name=f"Replay of {session.name}"[:200],
        config=with_callback(request, config),
        roots=session.roots,
        replay_of=session,
        replay_latency=not form.cleaned_data["no_latency"],
    )


@require_POST
async def start_replay(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Start the replay as a new live session and open its side-by-side view."""
    session = await owned_session(request, public_id)
    user = await signed_in_user(request)
    try:
        replay = await sync_to_async(_create)(request, session, user.pk)
    except (ValueError, PermissionError) as exc:
        # The form is a plain one: the page again, saying why, rather than a bare fragment.
        context = {
            **await sync_to_async(_choices)(session),
            "refused": str(exc),
            "form": ReplayForm(request.POST),
        }
        status = 403 if isinstance(exc, PermissionError) else 400
        return await sync_to_async(render)(request, "replay/start.html", context, status=status)
    await together.record(replay, user.pk, "connected")
    await client.start_session(replay)
    return redirect(reverse("replay_view", args=[replay.public_id]))


def _view_context(replay: McpSession) -> dict[str, Any]:
    recording = replay.replay_of
    if recording is None or recording.team_id != replay.team_id:
        return {"session": replay, "recording": None}
    data = side_by_side(replay, recording)
    for step in data["report"]:
        sides = step.get("sides")
        if sides is None:
            continue
        sides["recorded_href"] = (
            f"{reverse('session', args=[recording.public_id])}?frame={sides['recorded_seq']}"
        )
        if sides["replayed_seq"]:
            page = reverse("session", args=[replay.public_id])
            sides["replayed_href"] = f"{page}?frame={sides['replayed_seq']}"
    own = replay.server_id is None and _target_text(replay) == _target_text(recording)
    return {
        "session": replay,
        "recording": recording,
        "replay": data,
        "new_target": not own and _target_text(replay),
    }


def _target_text(session: McpSession) -> str:
    """The session's command line or URL as the person typed it (its environment and headers left out)."""
    config = session.config if isinstance(session.config, dict) else {}
    if config.get("url"):
        return str(config["url"])
    return " ".join(str(word) for word in [config.get("command") or "", *(config.get("args") or [])]).strip()


@require_GET
async def replay_view(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """The replay beside its recording: the summary, then each step's two sides and its changes. While the
    replay is live the steps part asks for itself again (``?part=steps``) until it has ended."""
    session = await owned_session(request, public_id)
    if session.replay_of_id is None:
        raise Http404("This session is not a replay: open a session and use Replay against…")
    context = await sync_to_async(_view_context)(session)
    if request.GET.get("part") == "steps":
        return await sync_to_async(render)(request, "replay/_view_body.html", context)
    return await sync_to_async(render)(request, "replay/view.html", context)
