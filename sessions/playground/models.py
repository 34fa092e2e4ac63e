"""Chats with a model over a session's tools: the chat's settings, and what was said and called, in order."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from sessions.models import McpSession
from sessions.teams.models import Link


class Chat(models.Model):
    """A conversation with a model over the tools of one session (its Playground tab) or of several of
    the team's (the team's Playground page: ``ChatServer`` rows); it belongs to the team."""

    class Approval(models.TextChoices):
        WRITES = "writes", "tools not marked read-only"
        ALL = "all", "every tool call"
        NONE = "none", "no tool call"

    class Sampling(models.TextChoices):
        PERSON = "person", "by you (the session's review card)"
        MODEL = "model", "by the chat's model"

    session = models.ForeignKey(McpSession, on_delete=models.CASCADE, related_name="chats")
    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="chats")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    # A configured model's name (sessions.providers.ModelConfig.key): never its URL or key.
    model_key = models.CharField(max_length=64)
    system_prompt = models.TextField(blank=True, default="")
    temperature = models.FloatField(null=True, blank=True)
    approval = models.CharField(max_length=8, choices=Approval.choices, default=Approval.WRITES)
    # Who answers a sampling request a tool sends while the chat calls it.
    sampling = models.CharField(max_length=8, choices=Sampling.choices, default=Sampling.PERSON)
    # Tools the person chose not to offer the model (names as the chat lists them): a tool listed
    # later is offered until they say otherwise.
    tools_off = models.JSONField(default=list, blank=True)
    # Started on the team's Playground page (over ChatServer's sessions), not on a session's tab.
    team_page = models.BooleanField(default=False)
    # Set while a step runs (a model's answer, tool calls): a second tab's step waits for it.
    busy_until = models.DateTimeField(null=True, blank=True)
    # The text of the answer being streamed now, for the page to show as it comes; empty after it.
    streaming = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-pk"]

    def __str__(self) -> str:
        return f"chat {self.pk} with {self.model_key}"


class ChatServer(models.Model):
    """A session whose tools a team-page chat offers, and the prefix its tools get when another of the
    chat's sessions offers a tool of the same name."""

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="servers")
    session = models.ForeignKey(McpSession, on_delete=models.CASCADE, related_name="chat_servers")
    prefix = models.CharField(max_length=40)
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["position", "pk"]
        constraints = [models.UniqueConstraint(fields=["chat", "session"], name="unique_chat_server")]

    def __str__(self) -> str:
        return f"{self.prefix} in chat {self.chat_id}"


class ChatEntry(models.Model):
    """One thing in a chat: the person's words, the model's answer, a tool call it asked for, a sampling
    request the model answered for a tool, or an error the chat stopped on."""

    class Kind(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"
        SAMPLING = "sampling"
        ERROR = "error"

    class Status(models.TextChoices):
        PENDING = "pending", "waiting for approval"
        APPROVED = "approved", "approved"
        DONE = "done", "done"
        FAILED = "failed", "failed"
        DENIED = "denied", "denied"
        INVALID = "invalid", "cannot run"

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="entries")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    text = models.TextField(blank=True, default="")
    created = models.DateTimeField(auto_now_add=True)
    # The model's answer: which model answered, its token counts when given, how long it took.
    model_name = models.CharField(max_length=200, blank=True, default="")
    input_tokens = models.IntegerField(null=True, blank=True)
    output_tokens = models.IntegerField(null=True, blank=True)
    ms = models.FloatField(null=True, blank=True)
    # What the answer cost, when the model's prices are configured (INSPECTOR_LLM_MODELS).
    cost = models.FloatField(null=True, blank=True)
    # The session a tool call (or a sampling request) went through; null: the chat's own session.
    session = models.ForeignKey(
        McpSession, on_delete=models.SET_NULL, null=True, blank=True, related_name="chat_entries"
    )
    # A tool call: the model's call id and the name it used, the MCP tool's, the arguments it gave.
    call_id = models.CharField(max_length=200, blank=True, default="")
    tool_name = models.CharField(max_length=200, blank=True, default="")
    mcp_name = models.CharField(max_length=200, blank=True, default="")
    arguments = models.JSONField(null=True, blank=True)
    raw_arguments = models.TextField(blank=True, default="")
    status = models.CharField(max_length=10, choices=Status.choices, blank=True, default="")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # What the session said: the MCP result (or error), and where its frames are on the timeline.
    result = models.JSONField(null=True, blank=True)
    is_error = models.BooleanField(default=False)
    rpc_id = models.BigIntegerField(null=True, blank=True)
    request_seq = models.BigIntegerField(null=True, blank=True)
    response_seq = models.BigIntegerField(null=True, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    verdicts = models.JSONField(default=list, blank=True)
    # The call's MCP App view's last ui/update-model-context ({content, structuredContent}): what the
    # model is given on its next turns.
    view_context = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.kind} {self.pk} of chat {self.chat_id}"


class EvalSuite(models.Model):
    """A team's saved eval suite: its tests as the CLI's suite file holds them (``sessions.evals``)."""

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="eval_suites")
    name = models.CharField(max_length=200)
    definition = models.JSONField(default=dict)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return f"eval suite {self.name}"


class EvalRun(models.Model):
    """A suite run against models over a live session's tools, N times; the suite as it was then, so
    the history stays true when the suite is edited."""

    class State(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        STOPPED = "stopped"

    suite = models.ForeignKey(EvalSuite, on_delete=models.CASCADE, related_name="runs")
    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="eval_runs")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    session = models.ForeignKey(
        McpSession, on_delete=models.SET_NULL, null=True, blank=True, related_name="eval_runs"
    )
    server_label = models.CharField(max_length=200, blank=True, default="")
    definition = models.JSONField(default=dict)
    model_keys = models.JSONField(default=list)
    runs = models.PositiveSmallIntegerField(default=1)
    state = models.CharField(max_length=8, choices=State.choices, default=State.RUNNING)
    note = models.TextField(blank=True, default="")
    # Set while a step runs one test: a second tab's step waits for it.
    busy_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-pk"]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.suite_id}"


class EvalResult(models.Model):
    """One test run once against one model: pending, or passed or failed with the reasons and the
    transcript (``sessions.evals.run_case``'s)."""

    class State(models.TextChoices):
        PENDING = "pending"
        PASSED = "passed"
        FAILED = "failed"

    run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="results")
    position = models.PositiveIntegerField()
    test = models.CharField(max_length=200)
    model_key = models.CharField(max_length=64)
    attempt = models.PositiveSmallIntegerField()
    state = models.CharField(max_length=8, choices=State.choices, default=State.PENDING)
    reasons = models.JSONField(default=list, blank=True)
    transcript = models.JSONField(default=list, blank=True)
    ms = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["position"]

    def __str__(self) -> str:
        return f"{self.test} with {self.model_key}, run {self.attempt}"


class ItemShare(Link):
    """A read-only, redacted link to a chat or an eval run (``teams.Share`` is a session's): an expiry,
    an audience, the token kept as its SHA-256 (``teams.models.token_digest``)."""

    class Audience(models.TextChoices):
        TEAM = "team"  # members of the team, signed in
        ANYONE = "anyone"  # anyone with the link, no account needed

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="item_shares")
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, null=True, blank=True, related_name="shares")
    run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, null=True, blank=True, related_name="shares")
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the link's token")
    audience = models.CharField(max_length=10, choices=Audience.choices, default=Audience.TEAM)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(chat__isnull=False, run__isnull=True)
                | models.Q(chat__isnull=True, run__isnull=False),
                name="item_share_of_one_thing",
            )
        ]

    def __str__(self) -> str:
        return f"share of {'chat ' + str(self.chat_id) if self.chat_id else 'run ' + str(self.run_id)}"
