"""The Ray dashboard (`<cluster>-head-svc:8265`) on a local port, through the Kubernetes API.

Every accepted local connection resolves the service to a Running and Ready pod (so after the
head pod is replaced the next connection follows it) and opens its own pod port-forward
WebSocket (`v4.channel.k8s.io`: channel 0 data, 1 errors; each opened by a frame holding the
port). A dropped WebSocket ends only that local connection: the next one reconnects. The
local listener is 127.0.0.1 on a port the OS picks; nothing on the machine is ever killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from .errors import CloudError, classify
from .kube import KubeAdapter, Obj

log = logging.getLogger(__name__)

PROTOCOL = "v4.channel.k8s.io"
DATA, ERROR = 0, 1
OPEN_TIMEOUT_S = 30.0


def _ready(pod: Obj) -> bool:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    if meta.get("deletionTimestamp") or status.get("phase") != "Running":
        return False
    conds: dict[str, str] = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    if "Ready" in conds:
        return conds["Ready"] == "True"
    statuses = status.get("containerStatuses") or []
    return bool(statuses) and all(cs.get("ready") for cs in statuses)


def _container_port(pod: Obj, target: Any) -> int | None:
    if isinstance(target, int) or str(target).isdigit():
        return int(target)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == target:
                return int(port["containerPort"])
    return None


class DashboardForward:
    def __init__(self, kube: KubeAdapter, service: str, port: int = 8265) -> None:
        self.kube, self.service, self.port = kube, service, port
        self.url = ""
        self.last_error = ""          # why the latest connection could not be forwarded
        self.pod = ""                 # the pod the latest connection went to
        self._server: asyncio.AbstractServer | None = None
        self._session: Any = None
        self._conns: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        """Listen on 127.0.0.1 (a free port); return `http://127.0.0.1:PORT`."""
        import aiohttp

        if self._server is not None:
            return self.url
        ssl_context = self.kube.api.rest_client.ssl_context
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ssl_context))
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        log.info("forwarding %s to service %s:%d", self.url, self.service, self.port)
        return self.url

    async def resolve(self, fresh: bool = False) -> tuple[str, int]:
        """(pod, container port) behind service:port, as `kubectl port-forward svc/...` picks;
        the pods from a watch, or with `fresh` from a LIST."""
        svc = await self.kube.get("services", self.service)
        if svc is None:
            raise CloudError(f"service {self.service} not found: is the RayCluster applied?",
                             transient=True, code="NotFound")
        spec = svc.get("spec") or {}
        svc_port = next((p for p in spec.get("ports") or [] if p.get("port") == self.port), None)
        selector = spec.get("selector") or {}
        if svc_port is None or not selector:
            raise CloudError(f"service {self.service} has no port {self.port}", transient=False,
                             code="NoPort")
        labels = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        # From a watch of the selector's pods (no LIST per connection), current within the
        # watch's delay: a replaced head is followed as soon as its successor is Ready.
        listed = await (self.kube.list("pods", labels) if fresh else self.kube.cached_list("pods", labels))
        pods = sorted((p for p in listed if _ready(p)),
                      key=lambda p: (p.get("metadata") or {}).get("name", ""))
        if not pods:
            raise CloudError(f"no Running and Ready pod behind service {self.service} yet",
                             transient=True, code="NotReady")
        target = _container_port(pods[0], svc_port.get("targetPort", self.port))
        if target is None:
            raise CloudError(f"pod {pods[0]['metadata']['name']} has no port named"
                             f" {svc_port.get('targetPort')}", transient=False, code="NoPort")
        return pods[0]["metadata"]["name"], target

    async def _open(self, pod: str, port: int) -> Any:
        cfg = self.kube.configuration
        headers = {auth["key"]: auth["value"] for auth in (await cfg.auth_settings()).values()
                   if auth.get("in") == "header" and auth.get("value")}
        url = (f"{cfg.host}/api/v1/namespaces/{self.kube.namespace}/pods/{pod}/portforward"
               f"?ports={port}")
        return await asyncio.wait_for(
            self._session.ws_connect(url, protocols=(PROTOCOL,), headers=headers), OPEN_TIMEOUT_S)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import aiohttp

        task = asyncio.current_task()
        if task is not None:
            self._conns.add(task)
        try:
            pod, port = await asyncio.wait_for(self.resolve(), OPEN_TIMEOUT_S)
            try:
                ws = await self._open(pod, port)
            except aiohttp.WSServerHandshakeError as exc:
                if exc.status != 404:
                    raise
                # The pod is gone and the watch has not said so yet: ask the API itself.
                pod, port = await asyncio.wait_for(self.resolve(fresh=True), OPEN_TIMEOUT_S)
                ws = await self._open(pod, port)
            self.pod = pod
            try:
                await self._pump(reader, writer, ws, pod)
            finally:
                await ws.close()
        except asyncio.CancelledError:
            return  # close() ends this connection; the task is ours, nobody awaits its result
        except Exception as exc:  # noqa: BLE001 - the local client just sees a closed connection
            # Expected while the head starts (wait_ready polls): info, not a warning.
            self.last_error = classify(exc, f"port-forward to {self.service}").message
            log.info("%s", self.last_error)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            if task is not None:
                self._conns.discard(task)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    ws: Any, pod: str) -> None:
        import aiohttp

        async def upstream() -> None:  # local client -> pod
            while data := await reader.read(65536):
                await ws.send_bytes(bytes([DATA]) + data)

        async def downstream() -> None:  # pod -> local client
            opened: set[int] = set()
            async for msg in ws:
                if msg.type != aiohttp.WSMsgType.BINARY or not msg.data:
                    continue
                channel, payload = msg.data[0], msg.data[1:]
                if channel not in opened:
                    opened.add(channel)  # the first frame of a channel only names the port
                    continue
                if channel == DATA:
                    writer.write(payload)
                    await writer.drain()
                elif channel == ERROR and payload:
                    self.last_error = f"port-forward to {pod}: {payload.decode(errors='replace')}"
                    log.warning("%s", self.last_error)
                    return

        tasks = [asyncio.create_task(upstream()), asyncio.create_task(downstream())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Return once the dashboard answers GET /api/version through the forward."""
        import aiohttp

        deadline = time.monotonic() + timeout_s
        problem = ""
        async with aiohttp.ClientSession() as session:
            while True:
                try:
                    async with session.get(f"{self.url}/api/version",
                                           timeout=aiohttp.ClientTimeout(total=10)) as resp:
                        if resp.status == 200:
                            return
                        problem = f"HTTP {resp.status}"
                except (TimeoutError, aiohttp.ClientError) as exc:
                    problem = self.last_error or str(exc) or type(exc).__name__
                if time.monotonic() > deadline:
                    raise CloudError(f"Ray dashboard at {self.service}:{self.port} not reachable"
                                     f" after {timeout_s:.0f} s ({problem})", transient=True,
                                     code="Timeout")
                await asyncio.sleep(0.2)

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._conns):
            task.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)
        if server is not None:
            await server.wait_closed()
        if self._session is not None:
            await self._session.close()
            self._session = None
