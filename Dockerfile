# syntax=docker/dockerfile:1

# --- build: a virtualenv with the app and its dependencies, plus collected static files ---
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /venv
ENV PATH=/venv/bin:$PATH

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
FROM python:3.11-slim

ENV PATH=/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    INSPECTOR_DATA_DIR=/data \
    STATIC_ROOT=/app/staticfiles

RUN groupadd --system inspector \
    && useradd --system --gid inspector --home-dir /data --no-create-home inspector \
    && mkdir /data && chown inspector:inspector /data

COPY --from=build /venv /venv
COPY --from=build /app /app

WORKDIR /app
USER inspector
VOLUME ["/data"]
EXPOSE 6274

HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request, sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:6274/healthz', timeout=4).status != 200)"]

# Inside the container the port is only reachable through Docker's port mapping, so binding
# all interfaces is deliberate; --allow-remote says so. Publish it as 127.0.0.1:6274:6274.
CMD ["mcp-inspector", "--host", "0.0.0.0", "--port", "6274", "--allow-remote", "--no-browser"]
