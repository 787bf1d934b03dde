"""pods/NAME/portforward over WebSocket, framed as `kubernetes.stream.portforward` speaks it.

Protocol `v4.channel.k8s.io`: for the i-th requested port, channel 2*i carries data and
2*i+1 errors; the server opens both with a frame holding the port as 2 little-endian bytes,
then every binary frame is one channel byte followed by payload. Data is proxied to the TCP
address a controller registered with `KubeStore.set_port_target`. As with the kubelet, the
WebSocket closes once every forwarded connection has ended.
"""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import WSMsgType, web

from rltui.sandbox.kube import errors
from rltui.sandbox.kube.errors import KubeError
from rltui.sandbox.kube.store import KubeStore

PROTOCOLS = ("v4.channel.k8s.io",)


def _ports(request: web.Request) -> list[int]:
    ports: list[int] = []
    for value in request.query.getall("ports", []):
        for part in value.split(","):
            try:
                port = int(part)
            except ValueError:
                raise errors.bad_request(f"invalid port {part!r}") from None
            if not 0 < port < 65536:
                raise errors.bad_request(f"port {port} must be between 1 and 65535")
            ports.append(port)
    if not ports:
        # kubectl port-forward names its ports inside SPDY streams, which this server does not speak.
        raise errors.bad_request("at least one port must be specified in ?ports= (the rltui sandbox "
                                 "forwards over WebSocket v4.channel.k8s.io only, not kubectl's SPDY)")
    return ports


async def _open(store: KubeStore, pod: dict, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | str:
    """A connection to the pod's port, or the error text the kubelet would send."""
    meta = pod["metadata"]
    phase = (pod.get("status") or {}).get("phase", "Pending")
    if phase != "Running":
        return f"error forwarding port {port} to pod {meta['name']}: pod is not running (phase {phase})"
    target = store.port_target(meta["namespace"], meta["name"], port)
    refused = (f"error forwarding port {port} to pod {meta['uid']}, uid : failed to connect to "
               f"localhost:{port} inside namespace: connection refused")
    if target is None:
        return refused
    try:
        return await asyncio.open_connection(*target)
    except OSError as exc:
        return f"{refused} ({exc.strerror or exc})"


async def _pump(reader: asyncio.StreamReader, ws: web.WebSocketResponse, channel: int) -> None:
    with contextlib.suppress(ConnectionError, RuntimeError):
        while data := await reader.read(65536):
            await ws.send_bytes(bytes([channel]) + data)


async def handle_portforward(request: web.Request, store: KubeStore, namespace: str, name: str) -> web.StreamResponse:
    ports = _ports(request)
    pod = await store.get("pods", name, namespace)
    ws = web.WebSocketResponse(protocols=PROTOCOLS)
    if not ws.can_prepare(request).ok:
        raise KubeError(400, "BadRequest", "Upgrade request required")
    await ws.prepare(request)
    writers: dict[int, asyncio.StreamWriter] = {}
    pumps: list[asyncio.Task] = []
    for index, port in enumerate(ports):
        prefix = port.to_bytes(2, "little")
        await ws.send_bytes(bytes([2 * index]) + prefix)
        await ws.send_bytes(bytes([2 * index + 1]) + prefix)
        opened = await _open(store, pod, port)
        if isinstance(opened, str):
            await ws.send_bytes(bytes([2 * index + 1]) + opened.encode())
            continue
        reader, writers[index] = opened
        pumps.append(asyncio.create_task(_pump(reader, ws, 2 * index)))
    if not pumps:
        await ws.close()
        return ws

    async def close_when_done() -> None:
        await asyncio.gather(*pumps, return_exceptions=True)
        await ws.close()
    closer = asyncio.create_task(close_when_done())
    try:
        async for msg in ws:
            if msg.type != WSMsgType.BINARY or not msg.data:
                continue
            channel, payload = msg.data[0], msg.data[1:]
            writer = writers.get(channel // 2) if channel % 2 == 0 else None
            if writer is not None and payload:
                writer.write(payload)
                with contextlib.suppress(ConnectionError):
                    await writer.drain()
    finally:
        for writer in writers.values():
            writer.close()
        for task in pumps:
            task.cancel()
        # The closer then finishes the WebSocket close handshake (a no-op if the client closed).
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(closer, 5)
    return ws
