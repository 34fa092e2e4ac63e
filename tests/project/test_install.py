"""Installed as Python users install tools: sdist → wheel → a fresh virtual environment → `mcp-inspector`.

The wheel is built from the sdist (as `python -m build` and pip do), so both are checked: the sdist is
complete enough to build from, and the wheel carries templates/ and static/. The fresh environment sees
this suite's dependencies through a path entry, so nothing is downloaded but the build backend; the
project's own code comes from the wheel (no PYTHONPATH, a temporary working directory, and a check).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path

import httpx
import pytest
from support.app_process import LOGIN_LINE, Output
from support.paths import REPO
from support.processes import free_port, stop_process

pytestmark = pytest.mark.slow

VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
# What a copy of the checkout leaves out: version control, environments, caches, build output.
NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "node_modules", "__pycache__", "build", "dist", "*.egg-info", ".*_cache", "staticfiles"
)
STATIC_REF = re.compile(r'(?:src|href)="(/static/[^"]+)"')
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
# Variables that would make the installed app import or configure anything but itself.
FOREIGN = frozenset(
    (
        "PYTHONPATH",
        "PYTHONHOME",
        "VIRTUAL_ENV",
        "DJANGO_SETTINGS_MODULE",
        "INSPECTOR_DATA_DIR",
        "XDG_DATA_HOME",
    )
    + ("INSPECTOR_TOKEN", "DB", "DB_NAME", "SECRET_KEY", "STATIC_ROOT")
)


def run(*argv: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{argv} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sdist, built from a clean copy of the checkout, and the wheel built from that sdist."""
    work = tmp_path_factory.mktemp("build")
    source = work / "source"
    shutil.copytree(REPO, source, ignore=NOT_SOURCE, symlinks=True)
    build_sdist = "import sys, hatchling.build as m; print(m.build_sdist(sys.argv[1]))"
    sdist = work / "dist" / run(sys.executable, "-c", build_sdist, work / "dist", cwd=source).split()[-1]
    # Isolated, as users build: pip installs the [build-system] requirements for it.
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", work / "dist", sdist, cwd=work)
    (wheel,) = (work / "dist").glob("*.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def installed(
    dists: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, str]]:
    """A fresh virtual environment with the wheel installed; its bin/ and the environment to run it in."""
    root = tmp_path_factory.mktemp("install")
    venv = root / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=root)
    python = venv / "bin" / "python"
    run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "--no-deps",
        "--no-index",
        dists[1],
        cwd=root,
    )
    # The dependencies: this suite's environment, after the new one's own site-packages on sys.path.
    site = Path(
        run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=root).strip()
    )
    (site / "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN}
    # A home of its own: where the app keeps its data when nothing says otherwise.
    env |= {"HOME": str(root / "home"), "PYTHONUNBUFFERED": "1", "PYTHONNOUSERSITE": "1"}
    (root / "home").mkdir()
    code = run(python, "-c", "import inspector; print(inspector.__file__)", cwd=root, env=env)
    assert Path(code.strip()).is_relative_to(site), f"inspector comes from {code}, not the wheel"
    return venv / "bin", env


def test_the_sdist_can_build_the_wheel_again_and_carries_the_docs_and_tests(dists: tuple[Path, Path]) -> None:
    with tarfile.open(dists[0]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    for needed in (
        "pyproject.toml",
        "README.md",
        "templates/auth/token.html",
        "static/inspector/app.css",
    ):
        assert needed in names
    assert {"docs/architecture.md", "tests/project/test_install.py", "tests/servers/sdk_server.py"} <= names
    assert not any("node_modules" in name or "__pycache__" in name for name in names)


def test_the_wheel_carries_templates_and_static_files_inside_the_package(dists: tuple[Path, Path]) -> None:
    with zipfile.ZipFile(dists[1]) as wheel:
        names = set(wheel.namelist())
    templates = {n for n in names if n.startswith("inspector/templates/")}
    assert {"inspector/templates/auth/token.html", "inspector/templates/sessions/session.html"} <= templates
    assert len(templates) == sum(1 for p in (REPO / "templates").rglob("*.html"))
    assert {
        f"inspector/static/{p.relative_to(REPO / 'static')}" for p in (REPO / "static").rglob("*.*")
    } <= names
    # Nothing lands at the top of site-packages but the two packages and the metadata.
    assert {n.split("/")[0] for n in names} == {"inspector", "sessions", f"mcp_inspector-{VERSION}.dist-info"}


def test_version_comes_from_the_installed_metadata(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    bin_dir, env = installed
    assert (
        run(bin_dir / "mcp-inspector", "--version", cwd=tmp_path, env=env).strip()
        == f"mcp-inspector {VERSION}"
    )


def test_the_installed_app_serves_its_pages_and_every_static_file(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    bin_dir, env = installed
    # A real recording to open: the installed CLI against the SDK test server.
    recording = tmp_path / "tools.jsonl"
    server = [str(bin_dir / "python"), str(REPO / "tests/servers/sdk_server.py"), "stdio"]
    run(
        bin_dir / "mcp-inspector",
        "--cli",
        *server,
        "--method",
        "tools/list",
        "--record",
        recording,
        cwd=tmp_path,
        env=env,
    )

    port = free_port()
    proc = subprocess.Popen(
        [str(bin_dir / "mcp-inspector"), "--no-browser", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = Output(proc)
    try:
        login = output.wait_for(LOGIN_LINE)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as browser:
            page = browser.get(login["url"])
            assert page.status_code == 200, page.text
            csrf = CSRF.search(page.text)
            assert csrf is not None
            assert (
                browser.post(
                    "/auth/token", data={"token": login["token"], "csrfmiddlewaretoken": csrf[1]}
                ).status_code
                == 302
            )
            static = set(STATIC_REF.findall(page.text))

            home = browser.get("/")
            assert home.status_code == 200, home.text
            static |= set(STATIC_REF.findall(home.text))
            csrf = CSRF.search(home.text)
            assert csrf is not None
            opened = browser.post(
                "/recordings/open",
                data={"csrfmiddlewaretoken": csrf[1]},
                files={"recording": ("tools.jsonl", recording.read_bytes(), "application/x-ndjson")},
                follow_redirects=True,
            )
            assert opened.status_code == 200, opened.text
            # The session page, with the server's facts read back from the recording.
            assert re.search(r"/s/[0-9a-f-]+/$", str(opened.url)) and "sdk-test-server" in opened.text
            static |= set(STATIC_REF.findall(opened.text))

            assert {"/static/inspector/app.css", "/static/inspector/app.js"} <= static
            for url in sorted(static):
                assert browser.get(url).status_code == 200, url
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    finally:
        stop_process(proc)
        output.finish()
    # The data went to the user's data directory, not into the install.
    assert (Path(env["HOME"]) / ".local/share/mcp-inspector/inspector.sqlite3").is_file()
    assert not list(bin_dir.parent.rglob("*.sqlite3"))


def test_the_data_directory_follows_xdg_data_home_when_it_is_absolute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from inspector.paths import user_data_dir

    monkeypatch.setenv("XDG_DATA_HOME", "/srv/data")
    assert user_data_dir() == Path("/srv/data")
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")
    assert user_data_dir() == Path.home() / ".local/share"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert user_data_dir() == Path.home() / ".local/share"


def test_the_app_and_the_cli_find_the_same_data_folder_with_a_tilde_in_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from inspector.cli.oauth import _cache_path
    from inspector.paths import data_dir

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("INSPECTOR_DATA_DIR", "~/inspector-data")
    assert data_dir() == Path.home() / "inspector-data"
    assert _cache_path() == Path.home() / "inspector-data" / "oauth-tokens.json"
