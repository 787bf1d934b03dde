"""The sandbox's loopback HTTP proxy, so the real gcloud reaches APIs it cannot be pointed at.

Why: gcloud 528 has no `api_endpoint_overrides/servicenetworking` property -
googlecloudsdk/api_lib/util/apis_internal.py `_GetEffectiveApiEndpoint` catches
NoSuchPropertyError and falls back to https://servicenetworking.googleapis.com/ - so
`gcloud services vpc-peerings connect|list` ignores CLOUDSDK_API_ENDPOINT_OVERRIDES_SERVICENETWORKING.
gcloud does honour CLOUDSDK_PROXY_TYPE=http, CLOUDSDK_PROXY_ADDRESS/_PORT and
CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE (manage.gcloud_env sets them). Measured with a raw listener on
the proxy port, gcloud 528 then sends:
- for an API overridden to http://127.0.0.1:PORT/: absolute-form requests through the proxy
  (`GET http://127.0.0.1:PORT/v1/...?alt=json HTTP/1.1`, `Host: 127.0.0.1:PORT`); NO_PROXY and
  no_proxy are not honoured, so these must be forwarded too;
- for any other API: `CONNECT <api>.googleapis.com:443 HTTP/1.1`.

What it does (one request per client connection; nothing ever leaves the machine):
1. absolute-form `http://127.0.0.1:<port>/...` with <port> one of the sandbox's own HTTP ports:
   forwarded there in origin form with `Connection: close` (a chunked body is de-chunked and sent
   with Content-Length), the response streamed back with `Connection: close`; other targets 403;
2. `CONNECT <api>.googleapis.com:443` for an API in the host table (host_table: every loopback
   http URL of status `rest`; the paths line up, compute's included): `200 Connection
   established`, TLS terminated here with the sandbox CA's googleapis certificate
   (kube/tls.googleapis_context), bytes piped both ways to 127.0.0.1:<port>; other targets 403;
3. anything malformed: 400. Each refusal or failure is one warning line in the daemon log.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Iterable
from urllib.parse import urlsplit

__all__ = ["SandboxProxy", "host_table", "start_proxy"]

log = logging.getLogger("rltui_sandbox.proxy")

HEAD_TIMEOUT_S = 30.0
MAX_HEADERS = 100
MAX_BODY = 64 << 20
CHUNK = 64 << 10
# Hop-by-hop headers (RFC 9110 7.6.1) and the ones this proxy rewrites.
_HOP = {"connection", "proxy-connection", "keep-alive", "proxy-authorization", "proxy-authenticate",
        "te", "trailer", "transfer-encoding", "upgrade", "expect", "content-length"}
REFUSED = b"the rltui sandbox proxy reaches only the sandbox's own APIs\n"


class BadRequest(Exception):
    """Malformed input: answered 400."""


def host_table(rest_urls: dict[str, str]) -> dict[str, int]:
    """`<api>.googleapis.com` -> loopback port, for every API whose sandbox URL is plain http on
    127.0.0.1. Paths stay as they are: the sandbox serves each API at Google's own path (compute
    at /compute/v1/, the others at the root)."""
    hosts = {}
    for api, url in rest_urls.items():
        parts = urlsplit(str(url))
        if parts.scheme == "http" and parts.hostname == "127.0.0.1" and parts.port:
            hosts[f"{api}.googleapis.com"] = parts.port
    return hosts


async def _head(reader: asyncio.StreamReader) -> tuple[str, str, list[tuple[str, str]]]:
    """(method, target, headers) of one request head."""
    try:
        line = (await reader.readuntil(b"\n")).decode("latin-1").strip()
        headers: list[tuple[str, str]] = []
        while True:
            raw = (await reader.readuntil(b"\n")).decode("latin-1").rstrip("\r\n")
            if not raw:
                break
            name, sep, value = raw.partition(":")
            if not sep or not name.strip() or name != name.strip() or len(headers) >= MAX_HEADERS:
                raise BadRequest(f"bad header line {raw[:80]!r}")
            headers.append((name, value.strip()))
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
        raise BadRequest("incomplete or oversized request head") from None
    parts = line.split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[2].startswith("HTTP/1."):
        raise BadRequest(f"bad request line {line[:80]!r}")
    return parts[0].upper(), parts[1], headers


def _get(headers: list[tuple[str, str]], name: str) -> str | None:
    return next((v for k, v in headers if k.lower() == name), None)


async def _body(reader: asyncio.StreamReader, headers: list[tuple[str, str]]) -> bytes:
    try:
        if "chunked" in (_get(headers, "transfer-encoding") or "").lower():
            out = bytearray()
            while True:
                size = int((await reader.readuntil(b"\n")).split(b";")[0].strip(), 16)
                if size == 0:
                    while (await reader.readuntil(b"\n")).strip():  # trailers: dropped
                        pass
                    return bytes(out)
                if size < 0 or len(out) + size > MAX_BODY:
                    raise BadRequest("chunked body too large")
                out += await reader.readexactly(size)
                await reader.readexactly(2)
        length = int(_get(headers, "content-length") or 0)
        if not 0 <= length <= MAX_BODY:
            raise BadRequest("bad Content-Length")
        return await reader.readexactly(length)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        raise BadRequest(f"incomplete body ({type(exc).__name__})") from None
    except ValueError:
        raise BadRequest("bad Content-Length or chunk size") from None


async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while data := await src.read(CHUNK):
            dst.write(data)
            await dst.drain()
    finally:  # a half-close where the transport has one (TLS has not): the other side ends
        if dst.can_write_eof() and not dst.is_closing():
            dst.write_eof()
        else:
            dst.close()


class SandboxProxy:
    def __init__(self, allowed_ports: Iterable[int], hosts: dict[str, int], tls: ssl.SSLContext):
        self.allowed_ports, self.hosts, self.tls = set(allowed_ports), dict(hosts), tls
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server:
            self._server.close()
        for task in list(self._tasks):  # open tunnels: Server.close leaves them (3.11)
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server:
            await self._server.wait_closed()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task:
            self._tasks.add(task)
        upstream: asyncio.StreamWriter | None = None
        try:
            method, target, headers = await asyncio.wait_for(_head(reader), HEAD_TIMEOUT_S)
            if method == "CONNECT":
                upstream = await self._connect(reader, writer, target)
            else:
                upstream = await self._forward(reader, writer, method, target, headers)
        except BadRequest as exc:
            log.warning("400 %s", exc)
            await _answer(writer, 400, "Bad Request", f"bad request: {exc}\n".encode())
        except asyncio.TimeoutError:
            log.warning("no complete request within %.0f s", HEAD_TIMEOUT_S)
        except (OSError, ssl.SSLError, EOFError) as exc:  # the client or an upstream went away
            log.warning("connection ended: %s", type(exc).__name__ + (f" {exc}" if str(exc) else ""))
        except asyncio.CancelledError:
            pass
        finally:
            for w in (upstream, writer):
                if w is not None:
                    w.close()
            if task:
                self._tasks.discard(task)

    async def _connect(self, reader, writer, target: str) -> asyncio.StreamWriter | None:
        host, _, port = target.rpartition(":")
        host = host.lower()
        if port != "443" or host not in self.hosts:
            log.warning("403 CONNECT %s", target[:120])
            await _answer(writer, 403, "Forbidden", REFUSED)
            return None
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.hosts[host])
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await writer.start_tls(self.tls)
        await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
        return up_writer

    async def _forward(self, reader, writer, method: str, target: str,
                       headers: list[tuple[str, str]]) -> asyncio.StreamWriter | None:
        try:
            url = urlsplit(target)
            port = url.port
        except ValueError:
            raise BadRequest(f"bad target {target[:80]!r}") from None
        if url.scheme != "http" or url.hostname != "127.0.0.1" or port not in self.allowed_ports:
            if not url.scheme:
                raise BadRequest(f"not an absolute-form target {target[:80]!r}")
            log.warning("403 %s %s", method, target[:120])
            await _answer(writer, 403, "Forbidden", REFUSED)
            return None
        if (_get(headers, "expect") or "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = await asyncio.wait_for(_body(reader, headers), HEAD_TIMEOUT_S)
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        lines = [f"{method} {path} HTTP/1.1"]
        lines += [f"{k}: {v}" for k, v in headers if k.lower() not in _HOP]
        if body or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body)}")
        lines.append("Connection: close")
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError as exc:
            log.warning("502 %s %s: %s", method, target[:120], exc)
            await _answer(writer, 502, "Bad Gateway", b"the sandbox API on that port did not answer\n")
            return None
        up_writer.write("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + body)
        await up_writer.drain()
        # The response head, with this proxy's Connection: close; then the body until the
        # upstream closes (it was asked to), whatever its framing.
        head = await up_reader.readuntil(b"\r\n\r\n")
        status, *rest = head.decode("latin-1").split("\r\n")
        kept = [h for h in rest if h and h.partition(":")[0].strip().lower()
                not in ("connection", "keep-alive", "proxy-connection")]
        writer.write("\r\n".join([status, *kept, "Connection: close"]).encode("latin-1") + b"\r\n\r\n")
        while data := await up_reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        return up_writer


async def _answer(writer: asyncio.StreamWriter, code: int, reason: str, body: bytes) -> None:
    try:
        writer.write(f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        await writer.drain()
    except OSError:
        pass


async def start_proxy(allowed_ports: Iterable[int], hosts: dict[str, int],
                      tls: ssl.SSLContext) -> SandboxProxy:
    """A started proxy on a free loopback port (`.port`); `await proxy.close()` stops it."""
    proxy = SandboxProxy(allowed_ports, hosts, tls)
    await proxy.start()
    return proxy
