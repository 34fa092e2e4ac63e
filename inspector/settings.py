"""Django settings; every knob is an environment variable listed in .env.example."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from inspector.paths import data_dir, private_dir
from sessions.env import (
    envbool,
    envfloat,
    envint,
    envsecret,
    envstr,
    fernet_keys,
    stored_secret_key,
)

PACKAGE_DIR = Path(__file__).resolve().parent
# templates/ and static/: inside the package when installed from a wheel (pyproject force-includes them),
# at the top of the checkout otherwise (a checkout, an editable install).
RESOURCE_DIR = PACKAGE_DIR if (PACKAGE_DIR / "templates").is_dir() else PACKAGE_DIR.parent

# The user's data directory, never the install's: site-packages may be read-only or shared.
DATA_DIR = data_dir()
# It holds the database and the keys: the user's alone (0700).
private_dir(DATA_DIR)

DEBUG = envbool("DEBUG", False)
SECRET_KEY = envsecret("SECRET_KEY") or stored_secret_key(DATA_DIR / "secret_key")

_hosts = envstr("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]")
ALLOWED_HOSTS = [h.strip() for h in _hosts.split(",") if h.strip()]


def _trusted_origins(hosts: list[str]) -> list[str]:
    """Derive CSRF trusted origins from ALLOWED_HOSTS, for use behind a TLS-terminating proxy.

    Behind such a proxy the browser is at https://host while we see plain http: that is the one
    origin to trust besides our own. No http://host (a page on port 80 of the same host is another
    origin), and nothing for loopback names, which no remote proxy serves: https://127.0.0.1 would be
    a page on port 443 of this machine.
    """
    origins = []
    for host in hosts:
        if host in ("*", "127.0.0.1", "localhost", "[::1]"):
            continue
        # ".example.com" in ALLOWED_HOSTS means the domain and all its subdomains.
        name = f"*{host}" if host.startswith(".") else host
        origins.append(f"https://{name}")
    return origins


_csrf_origins = envstr("CSRF_TRUSTED_ORIGINS", "")
CSRF_TRUSTED_ORIGINS = (
    [o.strip() for o in _csrf_origins.split(",") if o.strip()]
    if _csrf_origins
    else _trusted_origins(ALLOWED_HOSTS)
)

INSTALLED_APPS = [
    # daphne first: it replaces runserver with an ASGI one and installs the Twisted reactor early.
    "daphne",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "sessions.apps.SessionsConfig",
    "sessions.teams.apps.TeamsConfig",
    "sessions.playground.apps.PlaygroundConfig",
]

# Django's middleware as inspector.loop_middleware runs it: on the event loop where a hook does no
# I/O, rather than a trip to a thread for every hook of every request.
MIDDLEWARE = [
    "inspector.loop_middleware.SecurityMiddleware",
    "inspector.middleware.ContentSecurityPolicyMiddleware",
    # Before everything else that answers, static files included: foreign origins get nothing.
    "inspector.middleware.SameOriginMiddleware",
    # An upload too big is refused by its declared length, before CSRF's check parses it.
    "inspector.middleware.BodySizeMiddleware",
    "inspector.middleware.StaticFilesMiddleware",
    # Everything past the static files is one person's: no cache may keep it.
    "inspector.middleware.NoStoreMiddleware",
    "inspector.loop_middleware.SessionMiddleware",
    "inspector.loop_middleware.CommonMiddleware",
    "inspector.loop_middleware.CsrfViewMiddleware",
    # After CSRF: a big form is parsed off the event loop (a small one in place).
    "inspector.middleware.NulParameterMiddleware",
    "inspector.loop_middleware.AuthenticationMiddleware",
    # Every view needs a login unless marked @login_not_required (health, login pages).
    "inspector.loop_middleware.LoginRequiredMiddleware",
    "inspector.loop_middleware.MessageMiddleware",
    "inspector.loop_middleware.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # A write the database refuses for a full disk is a 503 that says so, not a bare 500.
    "inspector.middleware.StorageFullMiddleware",
    # A view that meets the channel layer down answers 503 with why, not a 500.
    "inspector.engine_down.EngineDownMiddleware",
]

ROOT_URLCONF = "inspector.urls"
ASGI_APPLICATION = "inspector.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [RESOURCE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                # The login page's "Sign in with …" button, when single sign-on is set up.
                "inspector.sso.login_options",
                # The person's current team, role and teams, for the top bar (evaluated only when used).
                "sessions.web.people.people",
            ],
        },
    },
]

DB = envstr("DB", "sqlite")
DATABASES: dict[str, dict[str, Any]]
if DB == "sqlite":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            # Its file is made 0600 as each connection opens (sessions/apps.py).
            "NAME": envstr("DB_NAME", str(DATA_DIR / "inspector.sqlite3")),
            # WAL lets pages read while the recorder writes; IMMEDIATE takes the write lock up
            # front, so two writers queue (up to the timeout) instead of failing to upgrade.
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
            },
            # A file, not pytest's shared in-memory database (which locks whole tables across
            # threads); one per test process, so concurrent runs never share it.
            "TEST": {"NAME": str(Path(tempfile.gettempdir()) / f"mcp-inspector-test-{os.getpid()}.sqlite3")},
        }
    }
elif DB == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": envstr("DB_NAME", "mcp_inspector"),
            "USER": envstr("DB_USER", "postgres"),
            "PASSWORD": envsecret("DB_PASSWORD"),
            "HOST": envstr("DB_HOST", "localhost"),
            "PORT": envint("DB_PORT", 5432),
            "CONN_MAX_AGE": envint("DB_CONN_MAX_AGE", 0),
            # The runtime's database thread keeps its connection (sessions/runtime/store.py): check
            # it before reuse, so a server restart costs a reconnect, not a failed write.
            "CONN_HEALTH_CHECKS": True,
            "TEST": {"CHARSET": "UTF8"},
        }
    }
else:
    raise ImproperlyConfigured(f"DB must be 'sqlite' or 'postgres'; got {DB!r}")

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = envsecret("REDIS_URL")
# What this deployment's channel and group names start with on a Redis another deployment may share;
# unset, one is derived from the database (inspector/redis_layer.py).
INSPECTOR_CHANNEL_PREFIX = envstr("INSPECTOR_CHANNEL_PREFIX", "")
if INSPECTOR_CHANNEL_PREFIX and not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", INSPECTOR_CHANNEL_PREFIX):
    raise ImproperlyConfigured("INSPECTOR_CHANNEL_PREFIX: 1 to 64 letters, digits, '_', '.' or '-'")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            # channels-redis's, reconnecting when Redis drops its connections (inspector/redis_layer.py).
            "BACKEND": "inspector.redis_layer.RedisChannelLayer",
            "CONFIG": {
                # redis-py 8 reads with a 5 s socket timeout by default, the same as channels-redis's
                # blocking pop: raise it, or an idle receive fails with "Timeout reading"; a read that
                # long is a Redis gone, which the layer then reconnects to.
                "hosts": [{"address": REDIS_URL, "socket_timeout": 15, "socket_connect_timeout": 5}],
                "prefix": f"mcp-inspector:{INSPECTOR_CHANNEL_PREFIX}:" if INSPECTOR_CHANNEL_PREFIX else "",
            },
        }
    }
else:
    # Fine for one process; set REDIS_URL when running more than one. Channels' own, its clean-up
    # paced (inspector/layers.py).
    CHANNEL_LAYERS = {"default": {"BACKEND": "inspector.layers.InMemoryChannelLayer"}}

# The cache holds the login rate limits (sessions/teams/throttle.py), which every web process must
# share: Redis when REDIS_URL is set (the hosted set-up runs several), this process's memory otherwise.
CACHES: dict[str, dict[str, Any]]
# Login counters and sessions of deployments sharing one Redis stay apart when they set their prefix.
_CACHE_PREFIX = f"mcp-inspector:{INSPECTOR_CHANNEL_PREFIX}" if INSPECTOR_CHANNEL_PREFIX else "mcp-inspector"
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": _CACHE_PREFIX,
        },
        # The login sessions' (cached_db): pages still load while Redis is away (inspector/redis_cache.py).
        "sessions": {
            "BACKEND": "inspector.redis_cache.SessionCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": _CACHE_PREFIX,
        },
    }
    SESSION_CACHE_ALIAS = "sessions"
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Passwords people choose (hosted accounts, invitations, create_admin): Django's checks.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": envint("INSPECTOR_PASSWORD_MIN_LENGTH", 10)},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# An upload past this size goes to a temporary file as it arrives, not memory (Django's default, said
# here because recordings are big); a request past what any view takes is refused by its declared
# length first (inspector.middleware.BodySizeMiddleware).
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440

STATIC_URL = "/static/"
STATICFILES_DIRS = [RESOURCE_DIR / "static"]
# Unset locally: WhiteNoise then serves straight from RESOURCE_DIR/static. The Docker image
# sets it and runs collectstatic at build, so files are served compressed and hashed.
STATIC_ROOT = envstr("STATIC_ROOT", "") or None
WHITENOISE_USE_FINDERS = STATIC_ROOT is None
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if STATIC_ROOT is None
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

LOGIN_URL = "login"

X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# Cookies are not port-scoped: other apps on localhost:OTHER_PORT see cookies for localhost too,
# so ours get names of their own rather than Django's "sessionid" and "csrftoken".
SESSION_COOKIE_NAME = "mcp_inspector_session"
# Read from the cache (shared by every web process, as above) before the database: every request
# reads its login session, and the database read was a seventh of the app's CPU for one tool call.
# Ending a login (logout, "sign out elsewhere") goes through the store, which drops both.
# Django's cached_db; locally it keeps a login in memory alone while the disk is full (session_store.py).
SESSION_ENGINE = "inspector.session_store"
CSRF_COOKIE_NAME = "mcp_inspector_csrftoken"
SESSION_COOKIE_HTTPONLY = True
# Strict: a request another site starts, even a top-level navigation by link, arrives logged out,
# so no page elsewhere can act as the user. The cost: following such a link lands on the login
# page, whose "continue" link (same-site) carries the cookie again.
SESSION_COOKIE_SAMESITE = "Strict"
CSRF_COOKIE_SAMESITE = "Strict"
# Behind a TLS-terminating proxy: set SECURE_PROXY_SSL_HEADER=1 and the cookies become Secure.
if envbool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True

_LOG_LEVEL = envstr("LOG_LEVEL", "WARNING").upper()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Query strings can carry the login token (/auth/token?token=...) or a server's API key.
    # A request refused with a 4xx is one line, without a traceback: on django.request, so that every
    # handler gets it so, and on the console for django.security's loggers (one per kind of refusal).
    "filters": {
        "redact_query_strings": {"()": "inspector.auth.RedactQueryStrings"},
        "client_errors_in_one_line": {"()": "inspector.logs.ClientErrorsInOneLine"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["redact_query_strings", "client_errors_in_one_line"],
        },
    },
    "root": {"handlers": ["console"], "level": _LOG_LEVEL},
    "loggers": {
        # Access logs: ours (mcp-inspector), daphne's runserver and Django's. Django's default
        # config gives django.server a handler of its own; route it through the filter instead.
        **{
            name: {"handlers": ["console"], "level": _LOG_LEVEL, "propagate": False}
            for name in ("inspector.access", "django.channels.server", "django.server")
        },
        "django.request": {"filters": ["client_errors_in_one_line"]},
    },
}

# --- MCP sessions -------------------------------------------------------------------------
# Seconds a live session survives with no browser tab watching it (0: forever).
INSPECTOR_IDLE_TIMEOUT = envint("INSPECTOR_IDLE_TIMEOUT", 900)
# The largest message a server may send: a bigger one is kept as its head with a verdict.
INSPECTOR_MAX_MESSAGE_BYTES = envint("INSPECTOR_MAX_MESSAGE_BYTES", 16 * 1024 * 1024)
# Hosted set-up: engine workers heartbeat this often (seconds); three missed beats and the sessions
# they owned are marked lost.
INSPECTOR_WORKER_HEARTBEAT = envfloat("INSPECTOR_WORKER_HEARTBEAT", 5.0)
# Each open tab of a session tells the others it is still watching this often (seconds); a tab not
# heard from for three beats (its web process died) leaves everyone's "watching now".
INSPECTOR_PRESENCE_HEARTBEAT = envfloat("INSPECTOR_PRESENCE_HEARTBEAT", 15.0)
# Optional: an OpenAI-compatible chat completions API that drafts sampling replies for a person to
# review (sessions/web/llm.py), and the Playground's first model. Unset: sampling is answered by hand only.
INSPECTOR_LLM_URL = envstr("INSPECTOR_LLM_URL", "")
INSPECTOR_LLM_MODEL = envstr("INSPECTOR_LLM_MODEL", "")
INSPECTOR_LLM_API_KEY = envsecret("INSPECTOR_LLM_API_KEY")
# Optional: more models for the Playground, a JSON list (sessions/providers/_config.py); a secret,
# since its entries may carry keys.
INSPECTOR_LLM_MODELS = envsecret("INSPECTOR_LLM_MODELS")
# Run the session runtime inside the web process (the default); off when engine workers run it.
INSPECTOR_EMBEDDED_RUNTIME = envbool("INSPECTOR_EMBEDDED_RUNTIME", True)
# Local mode: start a stdio server as the pointer reaches (or the keyboard focuses) its Connect button,
# so the click finds it loaded (sessions/engine/_warm.py); unused, it is killed after 10 s.
INSPECTOR_WARM_START = envbool("INSPECTOR_WARM_START", True)

# --- Hosted team tool -----------------------------------------------------------------------
# Off (the default): one person on their own machine, logged in by the one-time token; stdio servers
# run any command with the user's environment (minus the app's own secrets); HTTP targets anywhere.
# On: accounts with passwords (and optional single sign-on), teams and roles, stdio servers only from
# a team's approved catalog, spawned servers get only their declared environment, HTTP targets pass
# the egress rules. Independent of how the runtime is deployed (embedded or engine workers).
INSPECTOR_HOSTED = envbool("INSPECTOR_HOSTED", False)
# Hosted: what HTTP targets may reach besides the public internet (loopback, private networks and
# the like are refused): comma-separated host names, addresses and CIDR blocks. A team's own list
# comes on top, in each session's config (``egress_allow``). Checked at start-up (inspector/checks.py).
INSPECTOR_EGRESS_ALLOW = [e.strip() for e in envstr("INSPECTOR_EGRESS_ALLOW", "").split(",") if e.strip()]
# Hosted: each stdio server runs in a bubblewrap sandbox (sessions/engine/_sandbox.py), and is refused
# where none can run (checked at start-up). Off only by an administrator's explicit choice: servers then
# run as the worker's user and can read its files and secrets.
INSPECTOR_SANDBOX = envbool("INSPECTOR_SANDBOX", True)
# Hosted, sandboxed: host paths a server may read besides the system's (where a catalog server's program
# lives: /opt/mcp, a virtualenv), comma-separated absolute paths, shown read-only at the same place.
INSPECTOR_SANDBOX_READ = [p.strip() for p in envstr("INSPECTOR_SANDBOX_READ", "").split(",") if p.strip()]

# --- Single sign-on (hosted mode; inspector/sso.py) -------------------------------------------------
# OpenID Connect: set the issuer and the client to show "Sign in with <INSPECTOR_OIDC_NAME>" on the
# login page. Unset (or the local mode): no single sign-on.
INSPECTOR_OIDC_ISSUER = envstr("INSPECTOR_OIDC_ISSUER", "")
INSPECTOR_OIDC_CLIENT_ID = envstr("INSPECTOR_OIDC_CLIENT_ID", "")
INSPECTOR_OIDC_CLIENT_SECRET = envsecret("INSPECTOR_OIDC_CLIENT_SECRET")
INSPECTOR_OIDC_SCOPES = envstr("INSPECTOR_OIDC_SCOPES", "openid email profile")
INSPECTOR_OIDC_NAME = envstr("INSPECTOR_OIDC_NAME", "single sign-on")
# A team every person who signs in this way joins at their first sign-in, with this role. Unset:
# a person needs an invitation (opened before choosing single sign-on) to get an account.
INSPECTOR_OIDC_TEAM = envstr("INSPECTOR_OIDC_TEAM", "")
INSPECTOR_OIDC_ROLE = envstr("INSPECTOR_OIDC_ROLE", "viewer")


def _oidc_problems() -> list[str]:
    """What is wrong with the single sign-on settings, when an issuer is set."""
    problems = []
    issuer = urlsplit(INSPECTOR_OIDC_ISSUER)
    loopback = issuer.hostname in ("localhost", "127.0.0.1", "::1")
    if issuer.scheme != "https" and not (issuer.scheme == "http" and loopback):
        # OpenID Connect requires an https issuer; plain http only for a provider on this machine.
        problems.append(f"INSPECTOR_OIDC_ISSUER must be an https:// URL; got {INSPECTOR_OIDC_ISSUER!r}")
    if issuer.query or issuer.fragment:
        problems.append("INSPECTOR_OIDC_ISSUER must have no query or fragment")
    if not INSPECTOR_OIDC_CLIENT_ID:
        problems.append("INSPECTOR_OIDC_CLIENT_ID must be set with INSPECTOR_OIDC_ISSUER")
    if "openid" not in INSPECTOR_OIDC_SCOPES.split():
        problems.append(f"INSPECTOR_OIDC_SCOPES must include openid; got {INSPECTOR_OIDC_SCOPES!r}")
    if INSPECTOR_OIDC_ROLE not in ("viewer", "operator", "admin"):
        problems.append(f"INSPECTOR_OIDC_ROLE must be viewer, operator or admin; got {INSPECTOR_OIDC_ROLE!r}")
    return problems


if INSPECTOR_OIDC_ISSUER and _oidc_problems():
    raise ImproperlyConfigured("; ".join(_oidc_problems()))

# How long a login lasts (seconds), counted from the login: Django's session cookie age. Locally two
# weeks, as before: the one-time token is burned, so a person logged out there must restart the
# inspector to get a new one. Hosted, twelve hours, a working day: a stolen or forgotten cookie is
# worth little for long, and logging in again is a password or single sign-on away. Not renewed on
# each request, which would write to the database on every GET.
SESSION_COOKIE_AGE = envint("INSPECTOR_SESSION_AGE", 12 * 3600 if INSPECTOR_HOSTED else 14 * 24 * 3600)
if SESSION_COOKIE_AGE <= 0:
    raise ImproperlyConfigured(f"INSPECTOR_SESSION_AGE must be more than 0 seconds; got {SESSION_COOKIE_AGE}")
# A cookie that dies with the browser would not bound anything: browsers that restore the last
# session restore such cookies too. The age above is what ends a login, on the server's side.
SESSION_EXPIRE_AT_BROWSER_CLOSE = False

# Fernet keys that encrypt secrets at rest (sessions/secrets.py): saved servers' tokens, environment
# and headers, and each session's config. Comma-separated, newest first: the first encrypts, any one
# decrypts; `manage.py rotate_secrets` re-encrypts everything with the first. Locally, when unset,
# one is generated once into the data folder. Hosted, it must be set, the same on every web process
# and engine worker (a start-up check says so: check_secret_keys in sessions/secrets.py).
INSPECTOR_SECRET_KEYS = fernet_keys(
    "INSPECTOR_SECRET_KEYS",
    envsecret("INSPECTOR_SECRET_KEYS")
    or (
        ""
        if INSPECTOR_HOSTED
        else stored_secret_key(DATA_DIR / "encryption_keys", lambda: Fernet.generate_key().decode())
    ),
)

# --- Limits (0: none) -----------------------------------------------------------------------------
# Per session, across reconnects: the frame that reaches either limit is stored, then a state frame
# says which limit, and the session ends (sessions/runtime/limits.py). Hosted: 1,000,000 frames and
# 1 GiB of frame bytes. Local: none, since the person watches their own server (a flood may be what
# they are looking at) and a session no tab watches ends after INSPECTOR_IDLE_TIMEOUT.
INSPECTOR_MAX_SESSION_FRAMES = envint(
    "INSPECTOR_MAX_SESSION_FRAMES", 1_000_000 if INSPECTOR_HOSTED else 0, minimum=0
)
INSPECTOR_MAX_SESSION_BYTES = envint(
    "INSPECTOR_MAX_SESSION_BYTES", 1 << 30 if INSPECTOR_HOSTED else 0, minimum=0
)
# While the database refuses a session's frames (a full disk), the recorder holds at most this many
# of them, and this many bytes of theirs, in memory; frames beyond are lost, counted, and recorded as a
# `not-stored` gap once the database takes writes again (sessions/runtime/recorder.py).
INSPECTOR_MAX_HELD_FRAMES = envint("INSPECTOR_MAX_HELD_FRAMES", 10_000, minimum=1)
INSPECTOR_MAX_HELD_BYTES = envint("INSPECTOR_MAX_HELD_BYTES", 32 * 1024 * 1024, minimum=1)
# Live sessions one team may run at once (hosted: 20; local: none).
INSPECTOR_MAX_LIVE_SESSIONS_PER_TEAM = envint(
    "INSPECTOR_MAX_LIVE_SESSIONS_PER_TEAM", 20 if INSPECTOR_HOSTED else 0, minimum=0
)
# Password logins (hosted): failed attempts allowed per username and per client address within the
# window (seconds), before the login page refuses with 429 until the window has passed.
INSPECTOR_LOGIN_FAILURES_PER_USER = envint("INSPECTOR_LOGIN_FAILURES_PER_USER", 5)
INSPECTOR_LOGIN_FAILURES_PER_ADDRESS = envint("INSPECTOR_LOGIN_FAILURES_PER_ADDRESS", 20)
INSPECTOR_LOGIN_WINDOW = envint("INSPECTOR_LOGIN_WINDOW", 15 * 60)
# How many reverse proxies in front of the web processes append to X-Forwarded-For (0: none, the
# client is REMOTE_ADDR). The client address limits logins and is shown in a person's login sessions.
INSPECTOR_PROXIES = envint("INSPECTOR_PROXIES", 0)
