"""Browser mode (issue 14 item 3): `rltui --serve` in a real headless Chromium, through a proxy.

The real command runs as a subprocess on one loopback port; a small aiohttp reverse proxy on
another port forwards its HTTP and websockets, playing Cloud Shell's Web Preview, and the
command is told that address with --public-url. Chromium (Debian's `chromium`) opens the page at
the proxy and is driven over the Chrome DevTools Protocol on its remote-debugging port, with
aiohttp's websocket client (already a dependency; no driver binary whose version must match the
browser's, no new package). Keys go in as browser key events (Input.dispatchKeyEvent) to the
page's terminal, as a user's keyboard does; the page's terminal text is read through xterm.js's
public buffer API; the screenshot (Page.captureScreenshot) is saved under the test's tmp_path.

No env.sh, no session sandbox: the wizard's screens all open without a cloud (the Monitor
screen then says it waits for the RayCluster), which is all browser mode adds to the wizard.
Without chromium the test is skipped, saying so.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install -y chromium; .ci/run does it)")

WIDTH, HEIGHT = 1280, 800
CLIENT = web.AppKey("client", aiohttp.ClientSession)

# xterm.js (bundled in textual-serve's textual.js) draws on a canvas and keeps its Terminal in a
# closure: `this.terminal = new Terminal(...)`. A setter on Object.prototype sees that first
# assignment, makes it an ordinary own property again and keeps the Terminal for the test.
HOOK = """
Object.defineProperty(Object.prototype, "terminal", {
  configurable: true,
  get() { return undefined; },
  set(value) {
    Object.defineProperty(this, "terminal", {value, writable: true, configurable: true, enumerable: true});
    if (value && value.buffer && value.buffer.active) { window.__rltuiTerminal = value; }
  },
});
"""
SCREEN_TEXT = """(() => {
  const t = window.__rltuiTerminal;
  if (!t) return null;
  const b = t.buffer.active, rows = [];
  for (let i = 0; i < t.rows; i++) { const l = b.getLine(b.viewportY + i); rows.push(l ? l.translateToString(true) : ""); }
  return rows.join("\\n");
})()"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proxy:
    """Web Preview's part: forwards every HTTP request and websocket to the served port."""

    def __init__(self, upstream: int) -> None:
        self.upstream = f"http://127.0.0.1:{upstream}"
        self.requests: list[str] = []
        self.websockets = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(request.path_qs)
        session = request.app[CLIENT]
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await self.websocket(request, session)
        async with session.request(request.method, self.upstream + request.path_qs,
                                   headers={"Accept": request.headers.get("Accept", "*/*")},
                                   data=await request.read()) as up:
            body = await up.read()
            return web.Response(body=body, status=up.status,
                                headers={"Content-Type": up.headers.get("Content-Type", "application/octet-stream")})

    async def websocket(self, request: web.Request, session: aiohttp.ClientSession) -> web.WebSocketResponse:
        self.websockets += 1
        down = web.WebSocketResponse()
        await down.prepare(request)
        async with session.ws_connect(self.upstream + request.path_qs) as up:
            async def pump(src, dst) -> None:
                async for msg in src:
                    if msg.type == aiohttp.WSMsgType.TEXT:
                        await dst.send_str(msg.data)
                    elif msg.type == aiohttp.WSMsgType.BINARY:
                        await dst.send_bytes(msg.data)
                    else:
                        break
                await dst.close()

            await asyncio.gather(pump(down, up), pump(up, down), return_exceptions=True)
        return down


class DevTools:
    """One page of Chromium over the DevTools Protocol (commands by id, events ignored)."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws, self.next_id = ws, 0

    async def call(self, method: str, **params) -> dict:
        self.next_id += 1
        await self.ws.send_json({"id": self.next_id, "method": method, "params": params})
        while True:
            msg = await asyncio.wait_for(self.ws.receive_json(), 20)
            if msg.get("id") == self.next_id:
                assert "error" not in msg, f"{method}: {msg['error']}"
                return msg.get("result", {})

    async def evaluate(self, expression: str):
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    async def screen(self) -> str:
        return await self.evaluate(SCREEN_TEXT) or ""

    async def wait_for(self, *words: str, timeout: float = 15.0) -> str:
        deadline, text = time.monotonic() + timeout, ""
        while time.monotonic() < deadline:
            text = await self.screen()
            if all(w in text for w in words):
                return text
            await asyncio.sleep(0.1)
        raise AssertionError(f"{words} not in the page after {timeout:.0f} s:\n{text}")

    async def press(self, key: str, code: int) -> None:
        """A key as the keyboard sends it: keydown (xterm.js turns F-keys into escape
        sequences from keyCode) then keyup."""
        for kind in ("rawKeyDown", "keyUp"):
            await self.call("Input.dispatchKeyEvent", type=kind, key=key, code=key,
                            windowsVirtualKeyCode=code, nativeVirtualKeyCode=code)


async def stop(proc: asyncio.subprocess.Process) -> int:
    """End a process this test started (in its own session), by its PID; its exit code. If
    SIGTERM is not enough, SIGKILL to its process group: the apps a killed server leaves
    behind would run on (the served app does not end when its stdin closes)."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 40)
        except TimeoutError:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode


async def wait_http(url: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(url) as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientConnectionError:
                pass
            assert time.monotonic() < deadline, f"{url} did not answer in {timeout:.0f} s"
            await asyncio.sleep(0.1)


async def devtools_port(profile: Path, browser: asyncio.subprocess.Process, timeout: float = 20.0) -> int:
    """Chromium writes the port it chose (--remote-debugging-port=0) to DevToolsActivePort."""
    deadline, marker = time.monotonic() + timeout, profile / "DevToolsActivePort"
    while not (marker.exists() and marker.read_text().strip()):
        assert browser.returncode is None, f"chromium exited with {browser.returncode}"
        assert time.monotonic() < deadline, "chromium opened no DevTools port"
        await asyncio.sleep(0.05)
    return int(marker.read_text().splitlines()[0])


@needs_chromium
async def test_the_served_wizard_reaches_monitor_in_a_browser_through_a_proxy(tmp_path):
    t0 = time.monotonic()
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    # A path a shell would act on: it must reach the app as a path, never through the shell.
    env_sh = tmp_path / "my env $(touch PWNED).sh"
    served, proxied = free_port(), free_port()
    public = f"http://127.0.0.1:{proxied}"
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    env.pop("WEB_HOST", None)
    for var in ("COLUMNS", "LINES"):
        env.pop(var, None)
    log = artifacts / "serve.log"
    with log.open("wb") as sink:
        server = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "rltui.cli", "--serve", "--port", str(served), "--public-url", public,
            "--env", str(env_sh), cwd=tmp_path, env=env, stdout=sink, stderr=subprocess.STDOUT,
            start_new_session=True)
    proxy = Proxy(served)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", proxy.handle)
    client = aiohttp.ClientSession()
    app[CLIENT] = client
    runner = web.AppRunner(app)
    browser = None
    try:
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", proxied).start()
        await wait_http(f"http://127.0.0.1:{served}/")

        profile = tmp_path / "chromium"
        browser = await asyncio.create_subprocess_exec(
            CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--disable-background-networking", "--disable-dev-shm-usage",
             # the page also asks fonts.googleapis.com for a font: nothing leaves this machine
             "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
             f"--user-data-dir={profile}", "--remote-debugging-port=0",
             f"--window-size={WIDTH},{HEIGHT}", "about:blank",
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port = await devtools_port(profile, browser)
        async with client.get(f"http://127.0.0.1:{port}/json/list") as resp:
            targets = await resp.json()
        page = next(t for t in targets if t["type"] == "page")
        async with client.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            tools = DevTools(ws)
            await tools.call("Page.enable")
            await tools.call("Page.addScriptToEvaluateOnNewDocument", source=HOOK)
            await tools.call("Page.navigate", url=public + "/")

            # The Start screen, once it has read the env file it was given (by its path).
            first = await tools.wait_for("Start", "Preflight", env_sh.name, timeout=20)
            started = time.monotonic() - t0
            # The page was told the proxy's address: its terminal's websocket went through it.
            ws_url = await tools.evaluate("document.querySelector('#terminal').dataset.sessionWebsocketUrl")
            assert ws_url == f"ws://127.0.0.1:{proxied}/ws", ws_url
            assert proxy.websockets == 1, proxy.requests
            assert "/static/js/textual.js" in proxy.requests, proxy.requests   # so did its script
            (artifacts / "first.txt").write_text(first)
            assert not (tmp_path / "PWNED").exists(), "the env file's path went through a shell"

            await tools.evaluate("document.querySelector('.xterm-helper-textarea').focus()")
            await tools.press("F8", 119)
            text = await tools.wait_for("waits for the RayCluster", timeout=15)

            shot = await tools.call("Page.captureScreenshot", format="png")
            path = artifacts / "monitor.png"
            path.write_bytes(base64.b64decode(shot["data"]))
            (artifacts / "monitor.txt").write_text(text)
            print(f"screenshot of the Monitor screen: {path} (first screen after {started:.1f} s,"
                  f" {time.monotonic() - t0:.1f} s in all)")
            assert path.stat().st_size > 10_000, "an empty screenshot"
    finally:
        t_stop = time.monotonic()
        # Awaited: the proxy on this loop must pass the websocket's close on meanwhile.
        code = await stop(server)
        stopped = time.monotonic() - t_stop
        if browser is not None:
            await stop(browser)
        out = log.read_text(errors="replace")
        await client.close()
        await runner.cleanup()
    print(f"rltui --serve ended {stopped:.1f} s after SIGTERM, a browser still connected")
    assert code == 0, f"rltui --serve exited {code} on SIGTERM:\n{out}"
    assert f"open {public}/" in out, out
    # textual-serve alone waits up to aiohttp's 60 s for the open websocket (22 s seen here)
    assert stopped < 8, f"rltui --serve took {stopped:.1f} s to stop"


# ---- the command's own answers (no browser) ----------------------------------------------------

def rltui(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "WEB_HOST"}
    return subprocess.run([sys.executable, "-m", "rltui.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("args, field", [
    (["--port", "8080"], "--port: only with --serve"),
    (["--public-url", "https://example.com"], "--public-url: only with --serve"),
    (["--serve", "--port", "0"], "--port: 0 is not a TCP port"),
    (["--serve", "--public-url", "ftp://example.com"], "--public-url: 'ftp://example.com' is not an http(s) URL"),
    (["--serve", "--public-url", "https://h.example/?authuser=0"], "--public-url:"),
])
def test_bad_serve_flags_exit_2_with_one_line(args, field, tmp_path):
    result = rltui(*args, cwd=tmp_path)
    assert result.returncode == 2, result
    assert result.stderr.strip().startswith(field) and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stdout == ""


def test_a_taken_port_exits_2_naming_it(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = rltui("--serve", "--port", str(port), cwd=tmp_path)
    assert result.returncode == 2, result
    assert result.stderr.strip() == f"--port: {port} is in use on 127.0.0.1: pick another with --port"


def test_the_public_url_defaults_to_web_previews_address():
    from rltui.serve import app_command, public_url

    assert public_url(8080, environ={"WEB_HOST": "cs-1-default.cs-us-east1-abcd.cloudshell.dev"}) == \
        "https://8080-cs-1-default.cs-us-east1-abcd.cloudshell.dev"
    assert public_url(8081, environ={}) == "http://127.0.0.1:8081"
    assert public_url(8080, "https://proxy.example/rltui/", environ={"WEB_HOST": "x"}) == \
        "https://proxy.example/rltui"
    # The one shell string: this interpreter, then the module; nothing from the user.
    assert app_command("/opt/my python/bin/python") == "'/opt/my python/bin/python' -m rltui.serve"
