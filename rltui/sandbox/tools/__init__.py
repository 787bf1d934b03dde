"""Fake `gcloud` and `xpk` executables over the sandbox's control API (rltui.sandbox.control).

Standard library only, so each run starts fast: the tools parse argv, ask the sandbox daemon
over HTTP and print what the real tools print. This module is their shared client.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import urllib.parse
from pathlib import Path
from typing import Any, Callable

CONTROL_ENV = "RLTUI_SANDBOX_CONTROL"  # the control URL when run as `python -m ...`
PROJECT_ENV = "RLTUI_SANDBOX_PROJECT"  # the sandbox's default project
ACCOUNT = "sandbox-user@example.com"


class ControlError(Exception):
    """The sandbox refused (code is a google.rpc code name, e.g. NOT_FOUND)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def control_url(explicit: str | None) -> str:
    url = explicit or os.environ.get(CONTROL_ENV, "")
    if not url:
        raise ControlError("UNAVAILABLE", f"no sandbox control URL: set {CONTROL_ENV} or use the installed wrapper")
    return url


def call(url: str, op: str, args: dict[str, Any],
         on_say: Callable[[str, str], None] | None = None) -> Any:
    """Run control operation `op`; progress lines go to on_say(text, end) as they arrive."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80)
    try:
        conn.request("POST", f"{parts.path.rstrip('/')}/_sandbox/op/{op}", json.dumps(args).encode(),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        while True:
            raw = resp.readline()
            if not raw:
                break
            msg = json.loads(raw)
            if "say" in msg:
                if on_say is not None:
                    on_say(msg["say"], msg.get("end", "\n"))
            elif "error" in msg:
                raise ControlError(msg["error"]["code"], msg["error"]["message"])
            elif "result" in msg:
                return msg["result"]
    except (OSError, http.client.HTTPException) as exc:
        raise ControlError("UNAVAILABLE", f"the rltui sandbox at {url} does not answer ({exc}); "
                           "start it with `rltui sandbox start`") from None
    finally:
        conn.close()
    raise ControlError("UNAVAILABLE", f"the rltui sandbox at {url} hung up before answering")


def printer(stream: Any) -> Callable[[str, str], None]:
    def say(text: str, end: str = "\n") -> None:
        stream.write(text + end)
        stream.flush()
    return say


# ---- gcloud properties (what `gcloud config set` writes) -------------------------------------------


def read_properties(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def write_properties(path: Path, props: dict[str, str]) -> None:
    tmp = Path(path).with_name(Path(path).name + ".tmp")
    tmp.write_text(json.dumps(props, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def canonical_property(name: str) -> str:
    """'project' -> 'core/project', as gcloud names its properties."""
    return name if "/" in name else f"core/{name}"


def property_value(name: str, path: Path | None) -> str | None:
    """A property as gcloud resolves it: CLOUDSDK_* env, then the config, then the sandbox's default."""
    name = canonical_property(name)
    env = "CLOUDSDK_" + name.replace("/", "_").upper()
    if os.environ.get(env):
        return os.environ[env]
    value = read_properties(path).get(name)
    if value:
        return value
    if name == "core/project":
        return os.environ.get(PROJECT_ENV) or None
    if name == "core/account":
        return ACCOUNT
    return None


def run(main: Callable[[], int]) -> None:
    """Entry for `python -m`: exit with main's code; a closed pipe (| head) is not an error."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Python's recipe: point stdout at devnull so the flush at exit cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)
