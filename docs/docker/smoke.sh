#!/bin/sh
# Build the Docker image, then prove it in use: an npx and a uvx server answer tools/list in it, and
# the web app keeps its data in a bind-mounted host folder that Docker made (root's), across a restart.
# Not part of tests/run: it needs a Docker daemon and PyPI, Debian and npm (no Docker Hub).
#
#   docs/docker/smoke.sh           (as a user of the Docker daemon; from anywhere in the checkout)
#
# BASE_IMAGE   the base to build on; by default debian:bookworm-slim if it is here or can be pulled,
#              else mcp-inspector-base:bookworm, made here by debian-base.sh (root) if missing
# IMAGE        the tag to build (mcp-inspector:smoke)
# NO_CACHE=1   build from scratch (a cold build's time)
# DOCKER       the docker client (docker)
#
# A daemon where none runs (Debian, as root; no systemd needed):
#   apt-get install docker.io debootstrap && dockerd --storage-driver=overlay2 >/tmp/dockerd.log 2>&1 &
# Builds and containers use the host's network (--network host): no bridge or NAT is needed.
set -eu

here="$(cd "$(dirname "$0")" && pwd)"
top="$(cd "$here/../.." && pwd)"
docker="${DOCKER:-docker}"
image="${IMAGE:-mcp-inspector:smoke}"
name="mcp-inspector-smoke-$$"
work="$(mktemp -d /tmp/mcp-inspector-smoke.XXXXXX)"

say() { printf '\n== %s\n' "$*"; }
fail() {
    printf '\nFAILED: %s\n' "$*" >&2
    if "$docker" container inspect "$name" >/dev/null 2>&1; then
        echo "-- the container's log:" >&2
        "$docker" logs --tail 40 "$name" >&2 || true
    fi
    exit 1
}
cleanup() {
    "$docker" rm -f "$name" >/dev/null 2>&1 || true
    # The data folder's files are the container user's now: removed from a container, which may.
    "$docker" run --rm --network none --entrypoint rm -v "$work:/work" "$image" -rf /work/data >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

"$docker" info >/dev/null 2>&1 || fail "no Docker daemon answers (see the head of this script to start one)"

say "base image"
base="${BASE_IMAGE:-}"
if [ -z "$base" ]; then
    if "$docker" image inspect debian:bookworm-slim >/dev/null 2>&1 \
        || "$docker" pull -q debian:bookworm-slim >/dev/null 2>&1; then
        base=debian:bookworm-slim
    else
        base=mcp-inspector-base:bookworm
        "$docker" image inspect "$base" >/dev/null 2>&1 || DOCKER="$docker" "$here/debian-base.sh" "$base"
    fi
fi
echo "$base"

say "build $image"
started=$(date +%s)
cache=""
[ "${NO_CACHE:-}" = 1 ] && cache="--no-cache"
# shellcheck disable=SC2086
"$docker" build $cache --network host --build-arg BASE_IMAGE="$base" -t "$image" "$top" >"$work/build.log" 2>&1 \
    || { tail -30 "$work/build.log" >&2; fail "the build failed"; }
build_seconds=$(($(date +%s) - started))
size_mb=$(($("$docker" image inspect -f '{{.Size}}' "$image") / 1000000))
echo "built in ${build_seconds}s; ${size_mb} MB"

say "what the image holds"
"$docker" run --rm --network host "$image" sh -c \
    'echo "user: $(id -un) ($(id -u)), HOME=$HOME"; echo "node $(node --version), npx $(npx --version)"; uv --version; mcp-inspector --version'
# A hosted stdio server gets only the standard PATH and a fresh HOME: Node and uv must be on it.
"$docker" run --rm --network host "$image" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp \
    sh -c 'npx --version && uvx --version' >/dev/null || fail "npx or uvx is not on the standard PATH"

say "an npx server through the CLI: npx -y @modelcontextprotocol/server-everything, tools/list"
"$docker" run --rm --network host "$image" mcp-inspector --cli npx -y @modelcontextprotocol/server-everything \
    --method tools/list >"$work/npx.json" || fail "the npx server did not answer tools/list"
python3 -c 'import json, sys; tools = json.load(open(sys.argv[1]))["tools"]; print(len(tools), "tools:", ", ".join(t["name"] for t in tools))' \
    "$work/npx.json"
grep -q '"name": "echo"' "$work/npx.json" || fail "no echo tool in the npx server's tools/list"

say "a uvx server through the CLI: uvx mcp-server-time, tools/list"
"$docker" run --rm --network host "$image" mcp-inspector --cli uvx mcp-server-time --method tools/list \
    >"$work/uvx.json" || fail "the uvx server did not answer tools/list"
python3 -c 'import json, sys; tools = json.load(open(sys.argv[1]))["tools"]; print(len(tools), "tools:", ", ".join(t["name"] for t in tools))' \
    "$work/uvx.json"
grep -q '"name": "get_current_time"' "$work/uvx.json" || fail "no get_current_time in the uvx server's tools/list"

say "the hosted mode's sandbox: an npx server in bubblewrap, as the worker (user namespaces allowed, /proc unmasked)"
"$docker" run --rm --network host --security-opt seccomp=unconfined \
    --security-opt systempaths=unconfined -v "$here/sandbox_check.py:/tmp/sandbox_check.py:ro" \
    "$image" python /tmp/sandbox_check.py || fail "no npx server in the sandbox"

# The folder as Docker makes a missing bind-mount source: root's, 0755.
data="$work/data"
mkdir -m 0755 "$data"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base_url="http://127.0.0.1:$port"

# Start the web app on the data folder and wait for /healthz; web_check.py logs in with $token.
start_app() {
    token=$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')
    "$docker" rm -f "$name" >/dev/null 2>&1 || true
    "$docker" run -d --init --name "$name" --network host -v "$data:/data" -e INSPECTOR_TOKEN="$token" "$image" \
        mcp-inspector --host 127.0.0.1 --port "$port" --no-browser >/dev/null
    tries=0
    until curl -fsS -o /dev/null "$base_url/healthz" 2>/dev/null; do
        tries=$((tries + 1))
        [ "$tries" -le 60 ] || fail "the app did not answer /healthz within 30 s"
        [ "$("$docker" inspect -f '{{.State.Running}}' "$name")" = true ] || fail "the app stopped at start-up"
        sleep 0.5
    done
}

say "the web app with a bind-mounted data folder (docker run -v $data:/data)"
start_app
"$docker" logs "$name" 2>&1 | grep "giving /data" || fail "the entry point did not take the folder"
owner=$(stat -c %u "$data")
[ "$owner" = 10001 ] || fail "the data folder belongs to uid $owner, not the app's (10001)"
[ -s "$data/inspector.sqlite3" ] || fail "no database in the bind-mounted folder"
ls -ln "$data"

say "an npx server through the web app: connect (npx -y @modelcontextprotocol/server-everything), tools/list"
python3 "$here/web_check.py" "$base_url" "$token" connect "npx -y @modelcontextprotocol/server-everything" \
    >"$work/web.txt" || fail "the web app did not list the npx server's tools"
cat "$work/web.txt"
session=$(head -1 "$work/web.txt")
grep -q "tools:.*echo" "$work/web.txt" || fail "no echo tool in the web app's tools/list"

say "a restart on the same folder keeps the session"
start_app
python3 "$here/web_check.py" "$base_url" "$token" open "$session" || fail "the session is gone after a restart"
echo "session $session opens after the restart"

say "a folder the app cannot write: a message, no traceback"
"$docker" rm -f "$name" >/dev/null
if "$docker" run --rm --network host --user 4321 -v "$data:/data" "$image" >"$work/refused.log" 2>&1; then
    fail "the app started on a folder it cannot write"
fi
cat "$work/refused.log"
grep -q Traceback "$work/refused.log" && fail "a traceback instead of a message"

say "passed: image $image (${size_mb} MB, built in ${build_seconds}s on $base)"
