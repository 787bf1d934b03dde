"""Ray's REST Job API over aiohttp, without importing ray (ray.job_submission is a heavy
import: docs/decisions/import-cost.md).

The protocol is ray 2.60.0's own client, `ray/dashboard/modules/job/sdk.py` (JobSubmissionClient)
over `ray/dashboard/modules/dashboard_sdk.py` (SubmissionClient), answered by
`ray/dashboard/modules/job/job_head.py` (JobHead):
- POST /api/jobs/ {entrypoint, submission_id, runtime_env, metadata} -> {submission_id, job_id}
  (`submit_job`, None fields left out as `strip_keys_with_value_none` does); GET /api/jobs/{id}
  -> JobDetails (`get_job_info`); GET /api/jobs/ -> [JobDetails] (`list_jobs`); POST
  /api/jobs/{id}/stop -> {stopped} (`stop_job`); GET /api/jobs/{id}/logs -> {logs}
  (`get_job_logs`); WebSocket /api/jobs/{id}/logs/tail, one TEXT message per batch
  (`tail_job_logs`: CLOSED with close code 1006 is a drop, any other close the end).
  An unknown id is 404 on each; anything but 200 is a failure (`_raise_error`).
- A local working_dir becomes a package first (`_upload_working_dir_if_needed` ->
  `_upload_package_if_needed`): GET /api/packages/gcs/<name>.zip answers 200 (there) or 404
  (`_package_exists`); if absent, PUT the zip's bytes there, 200 (`_upload_package`); the
  runtime env then names `gcs://<name>.zip`.
- Token auth (`ray/_private/authentication/http_token_authentication.py`,
  `get_auth_headers_if_auth_enabled`): with RAY_AUTH_MODE=token, `Authorization: Bearer <token>`
  from RAY_AUTH_TOKEN, else the file RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token (Ray's
  "Token Authentication" design doc, "Token Sources and Precedence"); 401/403 are the
  middleware's refusals. TLS: an https:// address is verified with the system's CAs, as the
  SDK's default `verify=True` does.
Each call opens its own session, as the SDK's requests calls do: no session outlives a call.

The server is the cluster's Ray, 2.46.0 on nvcr.io/nvidia/nemo-rl:v0.4.0 (tests/ray/test_ray246.py
runs these calls against one). Its `ray/dashboard/modules/job/job_head.py` serves the same routes
with the same answers (JobDetails with the fields read here; a tail ends with close code 1000),
without 2.60's token middleware (an Authorization header is ignored). Its dashboard answers 500 to
a request without a User-Agent header (`ray/dashboard/optional_utils.py` `is_browser_request`
reads `req.headers["User-Agent"]`; 2.60 reads it with .get): aiohttp always sends one, so never
`skip_auto_headers` it. The package is what 2.60's client makes; 2.46.0's `packaging.py` has no
.rayignore and no default excludes, but what is uploaded is the client's choice: any head unpacks it.

The package itself, reproduced from ray 2.60.0, `ray/_private/runtime_env/packaging.py`:
- the package's name is content-addressed, `gcs://_ray_pkg_<hex>.zip` (`get_uri_for_directory`):
  every path under the dir, the dir itself included, gives sha1(relative path [+ file bytes]);
  the digests are XORed into `b"0" * 8` (`_hash_directory`, `_xor_bytes`: zip() keeps the
  shorter operand, so the hash is 8 bytes, 16 hex digits);
- the zip holds every file and every empty directory, relative to the dir, stored uncompressed
  (`_zip_files`: `ZipFile(path, "w", strict_timestamps=False)`, `zip_handler.write`);
- the walk (`_dir_travel`) skips a path, and all below it, when any exclude matches it: the
  runtime env's `excludes` plus Ray's defaults (`ray_constants.get_runtime_env_default_excludes`,
  `.git,.venv,venv,__pycache__`, overridden by RAY_OVERRIDE_RUNTIME_ENV_DEFAULT_EXCLUDES; added
  by `working_dir.upload_working_dir_if_needed`), and, per directory, its `.gitignore` (unless
  RAY_RUNTIME_ENV_IGNORE_GITIGNORE=1, `dashboard_sdk.SubmissionClient._upload_working_dir_if_needed`)
  and `.rayignore` (`get_excludes_from_ignore_files`), each relative to its own directory.
Patterns are git wildmatch as Ray's vendored pathspec reads them
(`ray/_private/thirdparty/pathspec/patterns/gitwildmatch.py`, `GitWildMatchPattern.pattern_to_regex`,
`_translate_segment_glob`; `util.match_file`: the last matching pattern decides).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import zipfile
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

PKG_PREFIX = "_ray_pkg_"
DEFAULT_EXCLUDES = ".git,.venv,venv,__pycache__"  # ray_constants.RAY_RUNTIME_ENV_DEFAULT_EXCLUDES
_BUF = 4096 * 1024

Exclude = Callable[[Path], bool]


def _segment(glob: str) -> str:
    """`GitWildMatchPattern._translate_segment_glob`."""
    regex, i, end, escape = "", 0, len(glob), False
    while i < end:
        char = glob[i]
        i += 1
        if escape:
            escape = False
            regex += re.escape(char)
        elif char == "\\":
            escape = True
        elif char == "*":
            regex += "[^/]*"
        elif char == "?":
            regex += "[^/]"
        elif char == "[":
            j = i
            if j < end and glob[j] == "!":
                j += 1
            if j < end and glob[j] == "]":
                j += 1
            while j < end and glob[j] != "]":
                j += 1
            if j < end:
                j += 1
                expr = "["
                if glob[i] == "!":
                    expr += "^"
                    i += 1
                elif glob[i] == "^":
                    expr += "\\^"
                    i += 1
                expr += glob[i:j].replace("\\", "\\\\")
                regex += expr
                i = j
            else:
                regex += "\\["
        else:
            regex += re.escape(char)
    return regex


def wildmatch(pattern: str) -> tuple[re.Pattern[str], bool] | None:
    """(regex, include) of one ignore-file line; None for a comment, a blank or '/'
    (`GitWildMatchPattern.pattern_to_regex`)."""
    pattern = pattern.strip()
    if not pattern or pattern.startswith("#") or pattern == "/":
        return None
    include = not pattern.startswith("!")
    if not include:
        pattern = pattern[1:]
    if pattern.startswith("\\"):
        pattern = pattern[1:]
    segs = pattern.split("/")
    if not segs[0]:
        del segs[0]
    elif (len(segs) == 1 or (len(segs) == 2 and not segs[1])) and segs[0] != "**":
        segs.insert(0, "**")
    if not segs[-1] and len(segs) > 1:
        segs[-1] = "**"
    out, need_slash, end = ["^"], False, len(segs) - 1
    for i, seg in enumerate(segs):
        if seg == "**":
            if i == 0 and i == end:
                out.append(".+")
            elif i == 0:
                out.append("(?:.+/)?")
                need_slash = False
            elif i == end:
                out.append("/.*")
            else:
                out.append("(?:/.+)?")
                need_slash = True
        elif seg == "*":
            if need_slash:
                out.append("/")
            out.append("[^/]+")
            need_slash = True
        else:
            if need_slash:
                out.append("/")
            out.append(_segment(seg))
            if i == end and include:
                out.append("(?:/.*)?")
            need_slash = True
    out.append("$")
    return re.compile("".join(out)), include


def path_spec(lines: Iterable[str], root: Path) -> Exclude:
    """True for a path under `root` the lines exclude (Ray's `_get_excludes`/`_get_ignore_file`:
    the path relative to `root`, '.' for root itself; `util.normalize_file`, `util.match_file`)."""
    patterns = [p for p in (wildmatch(line) for line in lines) if p is not None]
    root = root.absolute()

    def match(path: Path) -> bool:
        name = path.absolute().relative_to(root).as_posix()
        name = name[2:] if name.startswith("./") else name
        matched = False
        for regex, include in patterns:
            if regex.match(name) is not None:
                matched = include
        return matched

    return match


def _ignore_files(folder: Path) -> list[Exclude]:
    """`get_excludes_from_ignore_files`: .gitignore (unless told not to), then .rayignore."""
    names = [".rayignore"]
    if os.environ.get("RAY_RUNTIME_ENV_IGNORE_GITIGNORE", "0") != "1":
        names.insert(0, ".gitignore")
    found = []
    for name in names:
        file = folder / name
        if file.is_file():
            found.append(path_spec(file.read_text().splitlines(), folder))
    return found


def _walk(path: Path, excludes: list[Exclude], handler: Callable[[Path], None]) -> None:
    """`_dir_travel`: each directory's ignore files apply to it and everything below it."""
    own = _ignore_files(path) if path.is_dir() else []
    excludes.extend(own)
    if not any(exclude(path) for exclude in excludes):
        handler(path)
        if path.is_dir():
            for sub in path.iterdir():
                _walk(sub, excludes, handler)
    for _ in own:
        excludes.pop()


def excludes_for(runtime_env_excludes: Iterable[str] = ()) -> list[str]:
    """Ray's default excludes, then the runtime env's (`upload_working_dir_if_needed`)."""
    default = os.environ.get("RAY_OVERRIDE_RUNTIME_ENV_DEFAULT_EXCLUDES", DEFAULT_EXCLUDES)
    return [x.strip() for x in default.split(",") if x.strip()] + list(runtime_env_excludes)


def _xor(left: bytes, right: bytes) -> bytes:
    if left and right:
        return bytes(a ^ b for a, b in zip(left, right, strict=False))
    return left or right


def _digest(path: Path, root: Path) -> bytes:
    """`_hash_file_content_or_directory_name`."""
    sha1 = hashlib.sha1()  # noqa: S324 - Ray's package naming, not security
    sha1.update(str(path.relative_to(root)).encode())
    if not path.is_dir():
        try:
            with path.open("rb") as f:
                while data := f.read(_BUF):
                    sha1.update(data)
        except OSError:
            pass  # Ray skips the contents of a file it cannot open
    return sha1.digest()


def package_uri(directory: Path, excludes: list[str]) -> str:
    """`get_uri_for_directory`: gcs://_ray_pkg_<hash>.zip."""
    root = directory.absolute()
    value = b"0" * 8

    def handler(path: Path) -> None:
        nonlocal value
        value = _xor(value, _digest(path, root))

    _walk(root, [path_spec(excludes, root)], handler)
    return f"gcs://{PKG_PREFIX}{value.hex()}.zip"


def package_zip(directory: Path, excludes: list[str]) -> bytes:
    """`create_package` / `_zip_files` (include_parent_dir=False), in memory."""
    root = directory.absolute()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", strict_timestamps=False) as archive:
        def handler(path: Path) -> None:
            if (path.is_dir() and next(path.iterdir(), None) is None) or path.is_file():
                archive.write(path, path.relative_to(root))

        _walk(root, [path_spec(excludes, root)], handler)
    return buffer.getvalue()


# ---- the HTTP client ----


class RayApiError(Exception):
    """The job API answered, with a status other than 200: `status` decides, `text` informs."""

    def __init__(self, status: int, text: str, what: str = "") -> None:
        super().__init__(f"{what}: HTTP {status}: {text.strip().splitlines()[-1][:300] if text.strip() else ''}")
        self.status = status
        self.text = text


class TailDropped(Exception):
    """The tail WebSocket ended abnormally (close code 1006, or an error frame)."""


def auth_headers(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What Ray's SDK adds when token auth is on (see the module docstring)."""
    env = os.environ if env is None else env
    if env.get("RAY_AUTH_MODE", "").lower() != "token":
        return {}
    token = env.get("RAY_AUTH_TOKEN", "").strip()
    if not token:
        path = env.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
        try:
            token = Path(path).read_text().strip()
        except OSError:
            return {}  # Ray warns and sends none; the dashboard then answers 401
    return {"Authorization": f"Bearer {token}"}


class RayRest:
    def __init__(self, address: str, *, headers: Mapping[str, str] | None = None) -> None:
        self.address = address.rstrip("/")
        self.headers = {**auth_headers(), **(headers or {})}

    async def call(self, method: str, path: str, *, json_data: Any = None, data: bytes | None = None,
                   ok: tuple[int, ...] = (200,), timeout_s: float = 30.0) -> tuple[int, Any]:
        """(status, decoded JSON or None); RayApiError unless the status is in `ok`. Connection
        failures are aiohttp's ClientError/OSError or TimeoutError, left as they are."""
        import aiohttp

        async with aiohttp.ClientSession(headers=self.headers) as session, session.request(
                method, self.address + path, json=json_data, data=data,
                timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            body = await resp.read()
            if resp.status not in ok:
                raise RayApiError(resp.status, body.decode(errors="replace"), f"{method} {path}")
            if resp.status == 200 and resp.content_type == "application/json":
                return resp.status, json.loads(body)
            return resp.status, None

    async def tail(self, job_id: str) -> AsyncIterator[str]:
        """The tail WebSocket's text messages, until it closes normally. A 404 at the handshake
        is aiohttp's WSServerHandshakeError (status 404); an abnormal end is TailDropped."""
        import aiohttp

        # No overall deadline on a tail that may last for days; only on opening it.
        timeout = aiohttp.ClientTimeout(total=None, connect=30.0)
        async with aiohttp.ClientSession(headers=self.headers, timeout=timeout) as session, \
                session.ws_connect(f"{self.address}/api/jobs/{job_id}/logs/tail") as ws:
            while True:
                msg = await ws.receive()
                if msg.type == aiohttp.WSMsgType.TEXT:
                    yield msg.data
                elif msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING,
                                  aiohttp.WSMsgType.CLOSED):
                    if ws.close_code == aiohttp.WSCloseCode.ABNORMAL_CLOSURE:
                        raise TailDropped(f"log tail of {job_id} closed abnormally (1006)")
                    return
                elif msg.type == aiohttp.WSMsgType.ERROR:
                    raise TailDropped(f"log tail of {job_id}: {ws.exception()!r}")

    async def upload_working_dir(self, runtime_env: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
        """The runtime env with a local working_dir replaced by its uploaded package's URI
        (`_upload_package_if_needed`); a URI is passed through (`upload_working_dir_if_needed`)."""
        import asyncio

        env = dict(runtime_env)
        working_dir = env.get("working_dir")
        if working_dir is None or "://" in str(working_dir):
            return env
        folder = Path(working_dir)
        excludes = excludes_for(env.get("excludes") or [])
        uri = await asyncio.to_thread(package_uri, folder, excludes)
        name = uri.split("://", 1)[1]
        status, _ = await self.call("GET", f"/api/packages/gcs/{name}", ok=(200, 404))
        if status == 404:
            blob = await asyncio.to_thread(package_zip, folder, excludes)
            await self.call("PUT", f"/api/packages/gcs/{name}", data=blob, timeout_s=timeout_s)
        env["working_dir"] = uri
        return env
