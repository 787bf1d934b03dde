"""pods/NAME/portforward as kubectl speaks it: protocol portforward.k8s.io over SPDY/3.1 (spdy.py),
either tunnelled through a WebSocket or on a plainly upgraded HTTP connection.

The client (client-go v0.32 tools/portforward/portforward.go handleConnection): per local
connection, a requestID and two streams carrying headers `streamType` (error|data), `port` and
`requestID`; it half-closes the error stream at once and reads it to the end: anything there
is "an error occurred forwarding L -> R: ...", after which kubectl drops the whole connection.

This server is the kubelet's portforward server (k8s.io/kubelet v0.32 pkg/cri/streaming/
portforward/httpstream.go): a stream without a valid `port` (1-65535) or `streamType` is
refused with RST_STREAM (apimachinery spdy connection.newSpdyStream); others get a SYN_REPLY
with no headers; streams pair up by requestID (without one, by stream id as for old clients);
a pair not complete within 30 s (StreamCreationTimeout, cri/streaming/server.go) gets
"(conn=..., request=N) timed out waiting for streams" on its error stream; a second stream of a
type gets "error processing stream for request N: data|error stream already assigned". A
complete pair is forwarded like containerd's (internal/cri/server/sandbox_portforward.go
copyPortForward): copy both ways until one side ends, give the other up to 1 s, close; then
the kubelet's FIN on both streams. A port that cannot be reached gets
the error text on the error stream and both streams reset. Not imitated: the kubelet's 4-hour
idle timeout (StreamIdleTimeout) and the stream-level flow control neither side uses.

Transports (k8s.io/apiserver v0.32 pkg/util/proxy/streamtunnel.go; apimachinery v0.32
util/httpstream httpstream.go Handshake, spdy/upgrade.go UpgradeResponse):
- WebSocket with subprotocols `SPDY/3.1+<p>.k8s.io` (kubectl >= 1.31 tries this first,
  KUBECTL_PORT_FORWARD_WEBSOCKETS): the protocol negotiated with the kubelet comes back
  prefixed; none in common is the kubelet's 403, which fails the WebSocket handshake, so kubectl
  falls back to plain SPDY (tools/portforward/fallback_dialer.go, httpstream.IsUpgradeFailure).
  SPDY bytes then ride in binary messages, split anywhere (tunneling_connection.go).
- `Connection: Upgrade`, `Upgrade: SPDY/3.1`, `X-Stream-Protocol-Version: portforward.k8s.io`:
  101 with those headers, then raw SPDY. Without X-Stream-Protocol-Version the kubelet's
  Handshake returns without writing, so the answer is an empty 200; no protocol in common is
  403 with X-Accepted-Stream-Protocol-Versions; missing upgrade headers are 400.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable

from aiohttp import WSMsgType, web

from rltui_sandbox.kube.spdy import ServerSession, SpdyError, Stream

log = logging.getLogger("rltui_sandbox.kube")

PROTOCOL = "portforward.k8s.io"          # portforward.ProtocolV1Name
TUNNEL_PREFIX = "SPDY/3.1+"             # apimachinery util/portforward WebsocketsSPDYTunnelingPrefix
STREAM_CREATION_TIMEOUT_S = 30.0        # remotecommand DefaultStreamCreationTimeout
CLOSE_GRACE_S = 1.0                     # containerd PortForward: the other direction's last second
READ_PAUSE_BYTES = 1 << 20              # a raw connection stops reading past this much unforwarded

Opener = Callable[[int], Awaitable["tuple[asyncio.StreamReader, asyncio.StreamWriter] | str"]]


def tunnel_protocols(request: web.Request) -> list[str]:
    """The SPDY protocols a WebSocket request asks to tunnel (streamtunnel.go
    spdyProtocolsFromWebsocketProtocols: prefixed SPDY/3.1+ and ending .k8s.io)."""
    offered = [p.strip() for value in request.headers.getall("Sec-WebSocket-Protocol", [])
               for p in value.split(",")]
    return [p[len(TUNNEL_PREFIX):] for p in offered if p.startswith(TUNNEL_PREFIX) and p.endswith(".k8s.io")]


def _not_negotiated(client: list[str]) -> web.Response:
    """httpstream.Handshake's refusal (http.Error: text/plain, a trailing newline)."""
    text = (f"unable to upgrade: unable to negotiate protocol: client supports [{' '.join(client)}], "
            f"server accepts [{PROTOCOL}]\n")
    return web.Response(status=403, text=text, content_type="text/plain",
                        headers={"X-Accepted-Stream-Protocol-Versions": PROTOCOL,
                                 "X-Content-Type-Options": "nosniff"})


def _go_header(request: web.Request) -> str:
    """The request headers as Go's %#v prints an http.Header (canonical keys, sorted)."""
    merged: dict[str, list[str]] = {}
    for key, value in request.headers.items():
        merged.setdefault("-".join(w.capitalize() for w in key.split("-")), []).append(value)
    return "http.Header{" + ", ".join(
        f'"{k}":[]string{{{", ".join(chr(34) + v + chr(34) for v in vs)}}}' for k, vs in sorted(merged.items())) + "}"


@dataclass
class _Pair:
    request_id: str
    data: Stream | None = None
    error: Stream | None = None
    complete: asyncio.Event | None = None


class PortForwarder:
    """The kubelet's httpStreamHandler on one SPDY connection."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]], opener: Opener, label: str) -> None:
        self.session = ServerSession(send, self._on_stream)
        self.opener, self.label = opener, label
        self.pairs: dict[str, _Pair] = {}
        self.tasks: set[asyncio.Task] = set()
        self.targets: set[asyncio.StreamWriter] = set()

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def feed(self, chunk: bytes) -> None:
        await self.session.feed(chunk)

    def _on_stream(self, stream: Stream) -> None:
        problem = self._check(stream)
        if problem is not None:
            log.warning("portforward %s: Stream rejected: %s", self.label, problem)
            self._spawn(stream.reset())
            return
        self._spawn(self._accept(stream))

    @staticmethod
    def _check(stream: Stream) -> str | None:
        """httpStreamReceived: the port and streamType headers."""
        port = stream.header("port")
        if not port:
            return '"port" header is required'
        if not port.isdigit() or int(port) > 65535:
            return f'unable to parse "{port}" as a port: strconv.ParseUint: parsing "{port}": invalid syntax'
        if int(port) < 1:
            return f'port "{port}" must be > 0'
        kind = stream.header("streamType")
        if not kind:
            return '"streamType" header is required'
        if kind not in ("error", "data"):
            return f'invalid stream type "{kind}"'
        return None

    async def _accept(self, stream: Stream) -> None:
        await stream.reply()
        kind = stream.header("streamType")
        request_id = stream.header("requestID") or str(stream.id if kind == "error" else stream.id - 2)
        pair = self.pairs.get(request_id)
        if pair is None:
            pair = self.pairs[request_id] = _Pair(request_id, complete=asyncio.Event())
            self._spawn(self._monitor(pair))
        if getattr(pair, kind) is not None:
            message = f"error processing stream for request {request_id}: {kind} stream already assigned"
            if pair.error is not None:
                await pair.error.write(message.encode())
            return
        setattr(pair, kind, stream)
        if pair.data is not None and pair.error is not None:
            assert pair.complete is not None
            pair.complete.set()
            self._spawn(self._forward(pair))

    async def _monitor(self, pair: _Pair) -> None:
        assert pair.complete is not None
        try:
            await asyncio.wait_for(pair.complete.wait(), STREAM_CREATION_TIMEOUT_S)
        except asyncio.TimeoutError:
            if pair.error is not None:
                await pair.error.write(f"(conn={self.label}, request={pair.request_id}) timed out waiting "
                                       "for streams".encode())
        finally:
            self.pairs.pop(pair.request_id, None)

    async def _forward(self, pair: _Pair) -> None:
        data, error = pair.data, pair.error
        assert data is not None and error is not None
        try:
            opened = await self.opener(int(data.header("port")))
            if isinstance(opened, str):
                await error.write(opened.encode())
                await data.reset()
                await error.reset()
                return
            reader, writer = opened
            self.targets.add(writer)
            try:
                await self._copy_both(data, reader, writer)
            finally:
                self.targets.discard(writer)
                writer.close()
        finally:
            await data.close()
            await error.close()

    @staticmethod
    async def _copy_both(stream: Stream, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def to_pod() -> None:
            while chunk := await stream.read():
                writer.write(chunk)
                await writer.drain()

        async def from_pod() -> None:
            while chunk := await reader.read(65536):
                await stream.write(chunk)

        tasks = [asyncio.ensure_future(to_pod()), asyncio.ensure_future(from_pod())]
        try:
            with contextlib.suppress(ConnectionError):
                _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                if pending:
                    await asyncio.wait(pending, timeout=CLOSE_GRACE_S)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def close(self) -> None:
        """The connection is gone: stop every forward and close its pod-side connection."""
        self.session.close_streams()
        self.session.closed.set()
        for writer in list(self.targets):
            writer.close()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def serve_tunnel(request: web.Request, opener: Opener, label: str) -> web.StreamResponse:
    """SPDY tunnelled through a WebSocket (streamtunnel.go TunnelingHandler)."""
    client = tunnel_protocols(request)
    if PROTOCOL not in client:
        return _not_negotiated(client)
    ws = web.WebSocketResponse(protocols=(TUNNEL_PREFIX + PROTOCOL,), max_msg_size=0)
    await ws.prepare(request)
    forwarder = PortForwarder(ws.send_bytes, opener, label)
    try:
        async for msg in ws:
            if msg.type != WSMsgType.BINARY:
                break   # TunnelingConnection.Read: "invalid message type received" ends the connection
            await forwarder.feed(msg.data)
    except SpdyError as exc:
        log.info("portforward %s: %s", label, exc)
    finally:
        await forwarder.close()
        with contextlib.suppress(ConnectionError, RuntimeError):
            await ws.close()
    return ws


class _RawParser:
    """Takes the place of aiohttp's payload parser on an upgraded connection (as its
    WebSocketReader does): every byte after the 101 goes to `queue`, b"" at the end."""

    def __init__(self, queue: asyncio.Queue[bytes], transport: asyncio.Transport) -> None:
        self.queue, self.transport, self.queued = queue, transport, 0

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if data:
            self.queue.put_nowait(bytes(data))
            self.queued += len(data)
            if self.queued > READ_PAUSE_BYTES:
                with contextlib.suppress(AttributeError, RuntimeError):
                    self.transport.pause_reading()
        return False, b""

    def feed_eof(self) -> None:
        self.queue.put_nowait(b"")

    def taken(self, size: int) -> None:
        self.queued -= size
        if self.queued <= READ_PAUSE_BYTES // 2:
            with contextlib.suppress(AttributeError, RuntimeError):
                self.transport.resume_reading()


async def serve_upgrade(request: web.Request, opener: Opener, label: str) -> web.StreamResponse:
    """SPDY on the connection itself, after `101 Switching Protocols` (UpgradeResponse)."""
    client = [p.strip() for value in request.headers.getall("X-Stream-Protocol-Version", [])
              for p in value.split(",") if p.strip()]
    if not client:
        return web.Response(status=200)   # Handshake returns an error without writing anything
    if PROTOCOL not in client:
        return _not_negotiated(client)
    if "upgrade" not in request.headers.get("Connection", "").lower() or \
            "spdy/3.1" not in request.headers.get("Upgrade", "").lower():
        return web.Response(status=400, content_type="text/plain", headers={"X-Content-Type-Options": "nosniff"},
                            text=f"unable to upgrade: missing upgrade headers in request: {_go_header(request)}\n")
    transport = request.transport
    protocol = request.protocol
    if transport is None:
        raise ConnectionResetError("the connection closed before the upgrade")
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    parser = _RawParser(queue, transport)
    protocol.set_parser(parser)   # type: ignore[arg-type]  # before the 101: nothing may reach the HTTP parser
    protocol.keep_alive(False)
    response = web.StreamResponse(status=101, headers={
        "X-Stream-Protocol-Version": PROTOCOL, "Connection": "Upgrade", "Upgrade": "SPDY/3.1"})
    await response.prepare(request)

    async def send(data: bytes) -> None:
        if transport.is_closing():
            raise ConnectionResetError("closed")
        transport.write(data)
        await protocol._drain_helper()   # aiohttp's own WebSocket writer waits the same way

    forwarder = PortForwarder(send, opener, label)
    try:
        while chunk := await queue.get():
            parser.taken(len(chunk))
            await forwarder.feed(chunk)
    except SpdyError as exc:
        log.info("portforward %s: %s", label, exc)
    finally:
        await forwarder.close()
        protocol.force_close()
        transport.close()
    return response
