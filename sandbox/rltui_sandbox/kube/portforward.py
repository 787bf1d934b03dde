"""pods/NAME/portforward: which protocol a request speaks, and the WebSocket one
`kubernetes.stream.portforward` (rltui's own client) uses.

As the API server routes it (k8s.io/apiserver v0.32 pkg/util/proxy/streamtunnel.go; the pod's
REST connect accepts GET and POST): a WebSocket offering `SPDY/3.1+...k8s.io` subprotocols is
kubectl's tunnel, and any other upgrade is the kubelet's: another WebSocket is
v4.channel.k8s.io (below), `Upgrade: SPDY/3.1` is plain SPDY (portforward_spdy.py); a request
that is no upgrade at all is refused "Upgrade request required" (upgradeRequired proxy).

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

from rltui_sandbox.kube import errors, portforward_spdy
from rltui_sandbox.kube.errors import KubeError
from rltui_sandbox.kube.store import KubeStore

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
        # Only this WebSocket protocol names its ports in the URL; SPDY names them per stream.
        raise errors.bad_request("at least one port must be specified in ?ports=")
    return ports


async def _open(store: KubeStore, pod: dict, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | str:
    """A connection to the pod's port, or the error text the kubelet would send. The pod is read
    again for each connection, as containerd looks its sandbox up for each (sandbox_portforward.go
    portForward: a pod replaced under a long `kubectl port-forward` fails its next connection
    with "failed to find sandbox %q in store: not found")."""
    meta = pod["metadata"]
    now = store.list_sync("pods", meta["namespace"], field_selector=f"metadata.name={meta['name']}")
    if not now or now[0]["metadata"].get("uid") != meta.get("uid"):
        return (f"error forwarding port {port} to pod {meta['uid']}, uid : failed to find sandbox "
                f'"{meta["uid"]}" in store: not found')
    pod = now[0]
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


def _upgrade(request: web.Request) -> str:
    """"websocket", "spdy" (any other upgrade goes to the kubelet's SPDY handler), or ""."""
    if "upgrade" not in request.headers.get("Connection", "").lower():
        return ""
    return "websocket" if request.headers.get("Upgrade", "").lower() == "websocket" else "spdy"


async def handle_portforward(request: web.Request, store: KubeStore, namespace: str, name: str) -> web.StreamResponse:
    if request.method not in ("GET", "POST"):
        raise KubeError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
    pod = await store.get("pods", name, namespace)
    upgrade = _upgrade(request)
    if not upgrade:
        raise KubeError(400, "BadRequest", "Upgrade request required")
    label = f"{namespace}/{name}"

    async def opener(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | str:
        return await _open(store, pod, port)

    if upgrade == "spdy":
        return await portforward_spdy.serve_upgrade(request, opener, label)
    if portforward_spdy.tunnel_protocols(request):
        return await portforward_spdy.serve_tunnel(request, opener, label)
    ports = _ports(request)
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
