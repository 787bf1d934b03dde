"""The fake `xpk` executable's client of the sandbox's control API (rltui_sandbox.control).

Standard library only, so each run starts fast. There is no fake gcloud: the fake xpk runs the
real gcloud and kubectl (tools/xpk_gcloud.py), pointed at the sandbox by `rltui sandbox env`.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import urllib.parse
from typing import Any, Callable

CONTROL_ENV = "RLTUI_SANDBOX_CONTROL"  # the control URL when run as `python -m ...`


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


# Who the sandbox's tools are, in the record's `agent` (xpk 1.16.0 drives gcluster v1.94.0).
AGENT = "xpk/1.16.0 gcluster/v1.94.0 (rltui sandbox)"


def call(url: str, op: str, args: dict[str, Any],
         on_say: Callable[[str, str], None] | None = None) -> Any:
    """Run control operation `op`; progress lines go to on_say(text, end) as they arrive."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80)
    try:
        conn.request("POST", f"{parts.path.rstrip('/')}/_sandbox/op/{op}", json.dumps(args).encode(),
                     {"Content-Type": "application/json", "User-Agent": AGENT})
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
