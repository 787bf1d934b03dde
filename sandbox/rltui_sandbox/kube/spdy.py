"""SPDY/3.1 as kubectl's client-go speaks it (moby/spdystream v0.5.0, the version
k8s.io/apimachinery v0.32 pins): the frames, the zlib header compression, and the server's
side of a connection, over any byte transport (a raw upgraded HTTP connection, or the binary
messages of a WebSocket tunnel).

Frames (spdystream spdy/types.go, read.go, write.go): a control frame is
`1 | version(15) | type(16) | flags(8) | length(24) | payload`, a data frame
`0 | stream id(31) | flags(8) | length(24) | data`. Header blocks (SYN_STREAM, SYN_REPLY,
HEADERS) are `count(32)` then `len(32) name len(32) value` pairs, names lower case, values
joined by NUL, and compressed with ONE zlib stream per direction for the whole connection,
primed with the SPDY/3 dictionary (spdy/dictionary.go) and sync-flushed after each block; a
block whose compressed bytes do not end with the frame is an error ("compressed payload size
was incorrect"). Stream ids the peer opens must grow (Connection.validateStreamId), else
RST_STREAM PROTOCOL_ERROR. PINGs of the peer's parity are echoed (handlePingFrame).
WINDOW_UPDATE and SETTINGS are read and ignored: spdystream has no flow control (its frame
handler drops them as "unhandled frame type"), so this side never waits for a window either.
An unknown control frame type, or a malformed frame, ends the connection, as spdystream's
read loop does. The version field is not checked (parseControlFrame does not check it).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import zlib
from dataclasses import dataclass, field
from typing import Awaitable, Callable

# Control frame types (spdy/types.go).
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN, FLAG_UNIDIRECTIONAL = 0x01, 0x02
# RST_STREAM status codes (spdy/types.go RstStreamStatus).
PROTOCOL_ERROR, INVALID_STREAM, REFUSED_STREAM, CANCEL = 1, 2, 3, 5
MAX_DATA_LENGTH = (1 << 24) - 1
VERSION = 3

_DICT_WORDS = (
    *("options head post put delete trace accept accept-charset accept-encoding accept-language "
      "accept-ranges age allow authorization cache-control connection content-base content-encoding "
      "content-language content-length content-location content-md5 content-range content-type date "
      "etag expect expires from host if-match if-modified-since if-none-match if-range "
      "if-unmodified-since last-modified location max-forwards pragma proxy-authenticate "
      "proxy-authorization range referer retry-after server te trailer transfer-encoding upgrade "
      "user-agent vary via warning www-authenticate method get status").split(),
    "200 OK", *"version HTTP/1.1 url public set-cookie keep-alive origin".split())
_DICT_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 "
    "Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service "
    "UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, "
    "Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,"
    "application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdch"
    "charset=utf-8charset=iso-8859-1,utf-,*,enq=0.")


def _dictionary() -> bytes:
    """The SPDY/3 header dictionary (draft-mbelshe-httpbis-spdy-00 2.6.10.1; spdystream
    spdy/dictionary.go): 65 length-prefixed words, then a run of status codes and tokens."""
    return b"".join(struct.pack(">I", len(w)) + w.encode() for w in _DICT_WORDS) + _DICT_TAIL.encode()


DICTIONARY = _dictionary()


class SpdyError(Exception):
    """A frame the peer should not have sent: the connection ends."""


@dataclass
class Frame:
    type: int            # a control frame type, or 0 for DATA
    flags: int
    stream_id: int = 0   # DATA, SYN_STREAM, SYN_REPLY, RST_STREAM, HEADERS, WINDOW_UPDATE
    headers: dict[str, list[str]] = field(default_factory=dict)
    data: bytes = b""    # DATA
    status: int = 0      # RST_STREAM, GOAWAY
    value: int = 0       # PING id, GOAWAY last good stream id, WINDOW_UPDATE delta

    def header(self, name: str) -> str:
        """The first value of a header, "" when absent (http.Header.Get)."""
        return (self.headers.get(name.lower()) or [""])[0]


def _header_block(headers: dict[str, list[str]]) -> bytes:
    out = [struct.pack(">I", len(headers))]
    for name, values in headers.items():
        key, value = name.lower().encode(), "\x00".join(values).encode()
        out += [struct.pack(">I", len(key)), key, struct.pack(">I", len(value)), value]
    return b"".join(out)


def _parse_header_block(raw: bytes) -> dict[str, list[str]]:
    try:
        (count,), pos = struct.unpack_from(">I", raw), 4
        headers: dict[str, list[str]] = {}
        for _ in range(count):
            (size,) = struct.unpack_from(">I", raw, pos)
            name = raw[pos + 4:pos + 4 + size].decode("utf-8", "replace")
            pos += 4 + size
            if pos > len(raw):
                raise SpdyError("header block truncated")
            (size,) = struct.unpack_from(">I", raw, pos)
            value = raw[pos + 4:pos + 4 + size].decode("utf-8", "replace")
            if pos + 4 + size > len(raw):
                raise SpdyError("header block truncated")
            pos += 4 + size
            if name != name.lower():
                raise SpdyError("header was not lowercased")
            if name in headers:
                raise SpdyError("multiple headers with same name")
            headers[name] = value.split("\x00")
    except struct.error:
        raise SpdyError("header block truncated") from None
    if pos != len(raw):
        raise SpdyError("compressed payload size was incorrect")
    return headers


class Framer:
    """Encodes frames to bytes and decodes bytes to frames, each direction with its own zlib
    stream. `feed` takes any slice of the byte stream and returns the frames it completes."""

    def __init__(self) -> None:
        self._compress = zlib.compressobj(9, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY, DICTIONARY)
        self._decompress = zlib.decompressobj(15, DICTIONARY)
        self._buffer = bytearray()

    # -- writing --------------------------------------------------------------------------------

    def _compressed(self, headers: dict[str, list[str]]) -> bytes:
        block = _header_block(headers)
        return self._compress.compress(block) + self._compress.flush(zlib.Z_SYNC_FLUSH)

    @staticmethod
    def _control(kind: int, flags: int, payload: bytes) -> bytes:
        return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload

    def syn_reply(self, stream_id: int, headers: dict[str, list[str]] | None = None, fin: bool = False) -> bytes:
        return self._control(SYN_REPLY, FLAG_FIN if fin else 0,
                             struct.pack(">I", stream_id) + self._compressed(headers or {}))

    def syn_stream(self, stream_id: int, headers: dict[str, list[str]], fin: bool = False) -> bytes:
        """What a client sends to open a stream (tests play kubectl with it)."""
        return self._control(SYN_STREAM, FLAG_FIN if fin else 0,
                             struct.pack(">IIBB", stream_id, 0, 0, 0) + self._compressed(headers))

    @staticmethod
    def data(stream_id: int, data: bytes = b"", fin: bool = False) -> bytes:
        out = []
        for start in range(0, max(len(data), 1), MAX_DATA_LENGTH):
            chunk = data[start:start + MAX_DATA_LENGTH]
            last = start + MAX_DATA_LENGTH >= len(data)
            out.append(struct.pack(">II", stream_id & 0x7FFFFFFF,
                                   ((FLAG_FIN if fin and last else 0) << 24) | len(chunk)) + chunk)
        return b"".join(out)

    def rst_stream(self, stream_id: int, status: int) -> bytes:
        return self._control(RST_STREAM, 0, struct.pack(">II", stream_id, status))

    def ping(self, ping_id: int) -> bytes:
        return self._control(PING, 0, struct.pack(">I", ping_id))

    def goaway(self, last_good: int, status: int = 0) -> bytes:
        return self._control(GOAWAY, 0, struct.pack(">II", last_good, status))

    # -- reading --------------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> list[Frame]:
        self._buffer += chunk
        frames = []
        while len(self._buffer) >= 8:
            first, second = struct.unpack_from(">II", self._buffer)
            length = second & 0xFFFFFF
            if len(self._buffer) < 8 + length:
                break
            payload = bytes(self._buffer[8:8 + length])
            del self._buffer[:8 + length]
            frames.append(self._frame(first, second >> 24, payload))
        return frames

    def _headers(self, compressed: bytes) -> dict[str, list[str]]:
        try:
            raw = self._decompress.decompress(compressed)
        except zlib.error as exc:
            raise SpdyError(f"header block: {exc}") from None
        return _parse_header_block(raw)

    def _frame(self, first: int, flags: int, payload: bytes) -> Frame:
        if not first & 0x80000000:
            stream_id = first & 0x7FFFFFFF
            if stream_id == 0:
                raise SpdyError("stream id zero is disallowed")
            return Frame(0, flags, stream_id, data=payload)
        kind = first & 0xFFFF
        try:
            if kind == SYN_STREAM:
                stream_id, _assoc, _prio, _slot = struct.unpack_from(">IIBB", payload)
                frame = Frame(kind, flags, stream_id & 0x7FFFFFFF, headers=self._headers(payload[10:]))
            elif kind in (SYN_REPLY, HEADERS):
                (stream_id,) = struct.unpack_from(">I", payload)
                frame = Frame(kind, flags, stream_id & 0x7FFFFFFF, headers=self._headers(payload[4:]))
            elif kind == RST_STREAM:
                stream_id, status = struct.unpack_from(">II", payload)
                if status == 0:
                    raise SpdyError("invalid control frame")
                frame = Frame(kind, flags, stream_id & 0x7FFFFFFF, status=status)
            elif kind == SETTINGS:
                frame = Frame(kind, flags)
            elif kind == PING:
                (ping_id,) = struct.unpack_from(">I", payload)
                if ping_id == 0 or flags:
                    raise SpdyError("invalid control frame")
                frame = Frame(kind, flags, value=ping_id)
            elif kind == GOAWAY:
                if flags or len(payload) != 8:
                    raise SpdyError("invalid control frame")
                last, status = struct.unpack_from(">II", payload)
                frame = Frame(kind, flags, status=status, value=last & 0x7FFFFFFF)
            elif kind == WINDOW_UPDATE:
                if flags or len(payload) != 8:
                    raise SpdyError("invalid control frame")
                stream_id, delta = struct.unpack_from(">II", payload)
                frame = Frame(kind, flags, stream_id & 0x7FFFFFFF, value=delta & 0x7FFFFFFF)
            else:
                raise SpdyError(f"unknown frame type {kind}")
        except struct.error:
            raise SpdyError(f"control frame {kind} too short") from None
        if kind in (SYN_STREAM, SYN_REPLY, RST_STREAM, HEADERS) and frame.stream_id == 0:
            raise SpdyError("stream id zero is disallowed")
        return frame


class Stream:
    """One stream the peer opened: its headers, what it sent (read() returns b"" after its
    FIN or a reset), and this side's replies."""

    def __init__(self, session: ServerSession, stream_id: int, headers: dict[str, list[str]], fin: bool) -> None:
        self.session, self.id, self.headers = session, stream_id, headers
        self._incoming: asyncio.Queue[bytes] = asyncio.Queue()
        self.remote_closed = False
        self.local_closed = False   # FIN sent or reset: nothing more goes out
        self.was_reset = False
        if fin:
            self._remote_fin()

    def header(self, name: str) -> str:
        return (self.headers.get(name.lower()) or [""])[0]

    def _remote_fin(self) -> None:
        if not self.remote_closed:
            self.remote_closed = True
            self._incoming.put_nowait(b"")

    async def read(self) -> bytes:
        """The next bytes the peer sent; b"" once it finished (or reset) the stream."""
        chunk = await self._incoming.get()
        if not chunk:
            self._incoming.put_nowait(b"")   # every later read sees the end too
        return chunk

    async def reply(self) -> None:
        await self.session._send(lambda f: f.syn_reply(self.id))

    async def write(self, data: bytes) -> None:
        if data and not self.local_closed:
            await self.session._send(lambda f: f.data(self.id, data))

    async def close(self) -> None:
        """FIN: this side sends nothing more (spdystream Stream.Close: an empty DATA frame)."""
        if not self.local_closed:
            self.local_closed = True
            await self.session._send(lambda f: f.data(self.id, b"", fin=True))

    async def reset(self, status: int = CANCEL) -> None:
        """RST_STREAM (spdystream Stream.Reset: CANCEL), unless this side already finished."""
        self._remote_fin()
        self.session.streams.pop(self.id, None)
        if not self.local_closed:
            self.local_closed = True
            await self.session._send(lambda f: f.rst_stream(self.id, status))


class ServerSession:
    """The server side of a SPDY connection. `send(bytes)` writes to the transport; the
    transport's bytes go to `feed`; `on_stream(stream)` is called for every stream the peer
    opens (it replies, or resets to refuse). `closed` is set when the connection ends."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]], on_stream: Callable[[Stream], None]) -> None:
        self._raw_send, self._on_stream = send, on_stream
        self.framer = Framer()
        self.streams: dict[int, Stream] = {}
        self._received = 1              # the lowest id the peer may open next (validateStreamId)
        self._lock = asyncio.Lock()     # frames go out whole, in the order their headers were compressed
        self.closed = asyncio.Event()

    async def _send(self, encode: Callable[[Framer], bytes]) -> None:
        if self.closed.is_set():
            return
        async with self._lock:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self._raw_send(encode(self.framer))

    async def feed(self, chunk: bytes) -> None:
        """Handle the peer's bytes; raises SpdyError for a frame that ends the connection."""
        for frame in self.framer.feed(chunk):
            await self._handle(frame)

    async def _handle(self, frame: Frame) -> None:
        if frame.type == SYN_STREAM:
            if frame.stream_id < self._received:
                await self._send(lambda f: f.rst_stream(frame.stream_id, PROTOCOL_ERROR))
                return
            self._received = frame.stream_id + 2
            stream = Stream(self, frame.stream_id, frame.headers, bool(frame.flags & FLAG_FIN))
            self.streams[frame.stream_id] = stream
            self._on_stream(stream)
        elif frame.type == 0:
            known = self.streams.get(frame.stream_id)
            if known is None or known.remote_closed:
                return   # spdystream: "Data frame gone away"
            if frame.data:
                known._incoming.put_nowait(frame.data)
            if frame.flags & FLAG_FIN:
                known._remote_fin()
        elif frame.type == RST_STREAM:
            gone = self.streams.pop(frame.stream_id, None)
            if gone is not None:
                gone.was_reset = gone.local_closed = True
                gone._remote_fin()
        elif frame.type == PING and frame.value % 2 == 1:
            await self._send(lambda f: f.ping(frame.value))   # the client's (odd) pings come back
        elif frame.type == GOAWAY:
            self.close_streams()
            self.closed.set()

    def close_streams(self) -> None:
        """The connection is gone: every stream reads its end."""
        for stream in list(self.streams.values()):
            stream.local_closed = True
            stream._remote_fin()
        self.streams.clear()

    async def goaway(self) -> None:
        """Close as spdystream's Connection.Close does: GOAWAY naming the last stream accepted."""
        await self._send(lambda f: f.goaway(max(self._received - 2, 0)))
        self.close_streams()
        self.closed.set()
