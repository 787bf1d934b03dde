"""`rltui --serve`: the same wizard in a browser, through textual-serve, for Cloud Shell's Web Preview.

The server binds 127.0.0.1 only (HOST) and starts the wizard for each browser with one fixed
command (`app_command()`, no user input in it); the wizard's settings reach it as JSON in
RLTUI_SERVE_ARGS (`app_main()`), and `public_url()` is the address the browser is sent to
(`--public-url`, else Web Preview's `https://PORT-$WEB_HOST`, else http://127.0.0.1:PORT).
Why each of these, and what was read about textual-serve and Web Preview:
docs/decisions/serve.md.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

HOST = "127.0.0.1"
DEFAULT_PORT = 8080          # Web Preview's first choice, "Preview on port 8080"
ARGS_VAR = "RLTUI_SERVE_ARGS"
SHUTDOWN_WAIT = 10.0         # seconds the apps get to quit when the server stops
WEB_HOST_VAR = "WEB_HOST"


class ServeError(Exception):
    """Bad input to `--serve` (a port, a URL): one line, the CLI's exit code 2."""


@dataclass(frozen=True)
class WizardArgs:
    """What the served wizard needs from the command line: the env file and the mode."""

    env: str
    sandbox: bool = False

    def to_json(self) -> str:
        return json.dumps({"env": self.env, "sandbox": self.sandbox})

    @classmethod
    def from_json(cls, text: str) -> WizardArgs:
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("env"), str):
            raise ValueError(f"{ARGS_VAR}: expected {{\"env\": path, \"sandbox\": bool}}")
        return cls(env=data["env"], sandbox=bool(data.get("sandbox", False)))

    def argv(self) -> list[str]:
        """The wizard's own command line (rltui.cli), never seen by a shell."""
        return ["--env", self.env, *(["--sandbox"] if self.sandbox else [])]


def check_port(port: int) -> int:
    if not 1 <= port <= 65535:
        raise ServeError(f"--port: {port} is not a TCP port (1-65535)")
    return port


def public_url(port: int, given: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The address the browser uses: `given` (--public-url) when set, else Web Preview's
    `https://PORT-$WEB_HOST` where Cloud Shell sets WEB_HOST, else http://127.0.0.1:PORT.
    No trailing slash: textual-serve appends its paths ("/ws", "/static/")."""
    environ = os.environ if environ is None else environ
    if given is not None:
        parts = urlsplit(given.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ServeError(f"--public-url: {given!r} is not an http(s) URL with a host,"
                             " e.g. https://8080-cs-1234-default.cs-us-east1-abcd.cloudshell.dev")
        if parts.query or parts.fragment:
            raise ServeError(f"--public-url: {given!r}: no query or fragment (the page's paths follow it)")
        return given.strip().rstrip("/")
    web_host = environ.get(WEB_HOST_VAR, "").strip().strip("/")
    if web_host:
        return f"https://{port}-{web_host}"
    return f"http://{HOST}:{port}"


def app_command(python: str = sys.executable) -> str:
    """The fixed shell command textual-serve runs for each browser: no user input in it."""
    return shlex.join([python, "-m", "rltui.serve"])


def _server_class() -> type[Any]:
    """textual-serve's Server, ending its browsers' apps when it stops.

    On SIGINT or SIGTERM textual-serve raises GracefulExit and aiohttp shuts down: on_shutdown,
    then up to 60 s (run_app's shutdown_timeout) for the open websockets' handlers, which
    wait on their apps. Here on_shutdown cancels each handler, which (textual-serve's
    handle_websocket) closes the websocket and sends its app the "quit" meta packet, and waits
    for them: ctrl+c with a browser open ends in the app's quit time, not in aiohttp's shutdown
    timeout (docs/decisions/serve.md).
    """
    import asyncio

    from aiohttp import web
    from textual_serve.server import Server

    class WizardServer(Server):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.sessions: set[asyncio.Task[Any]] = set()   # one per open websocket

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            task = asyncio.current_task()
            assert task is not None
            self.sessions.add(task)
            try:
                return await super().handle_websocket(request)
            finally:
                self.sessions.discard(task)

        async def on_startup(self, app: web.Application) -> None:
            # In place of textual-serve's banner, which names the command and the URL only.
            preview = f" (Web Preview: Preview on port {self.port})" if self.public_url.startswith("https://") else ""
            print(f"rltui: serving the wizard on http://{self.host}:{self.port}; open {self.public_url}/"
                  f"{preview}; ctrl+c stops it", flush=True)

        async def on_shutdown(self, app: web.Application) -> None:
            tasks = list(self.sessions)
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=SHUTDOWN_WAIT)

    return WizardServer


def serve(args: WizardArgs, port: int = DEFAULT_PORT, url: str | None = None) -> int:
    """Serve the wizard on 127.0.0.1:port until SIGINT or SIGTERM; 0 then. A taken port is bad
    input (ServeError). textual-serve (and aiohttp, jinja2) load only here."""
    check_port(port)
    address = public_url(port, url)
    os.environ[ARGS_VAR] = WizardArgs(os.path.abspath(args.env), args.sandbox).to_json()
    in_use = ServeError(f"--port: {port} is in use on {HOST}: pick another with --port")
    if not _port_free(port):
        raise in_use
    server = _server_class()(app_command(), host=HOST, port=port, title="rltui", public_url=address)
    try:
        server.serve()
    except OSError as exc:   # taken between the check and the bind
        if exc.errno == errno.EADDRINUSE:
            raise in_use from None
        raise
    return 0


def _port_free(port: int) -> bool:
    """Whether HOST:port can be bound, as aiohttp binds it (SO_REUSEADDR, on Unix)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def app_main() -> int:
    """The app process textual-serve starts: the wizard with the server's settings."""
    from .cli import main

    text = os.environ.get(ARGS_VAR)
    if text is None:
        print(f"rltui.serve: {ARGS_VAR} is not set: run `rltui --serve`", file=sys.stderr)
        return 2
    try:
        args = WizardArgs.from_json(text)
    except ValueError as exc:
        print(f"rltui.serve: {exc}", file=sys.stderr)
        return 2
    return main(args.argv())


if __name__ == "__main__":
    sys.exit(app_main())
