"""A tiny kube-proxy for the pods the sandbox runs as local processes (procpods.py).

THE SANDBOX'S ONE DIFFERENCE FROM A CLUSTER: ADDRESSES. A real pod reaches a Service by its DNS
name (`http://<svc>.<ns>.svc.cluster.local:<port>`, resolved by kube-dns to the Service's
cluster IP, which kube-proxy's rules send to a ready endpoint). A local process has neither
cluster DNS nor cluster IPs, so the kubelet rewrites an env value naming a Service of the
cluster into `127.0.0.1:<a stable local port>` of a ServiceForwarder, which, PER CONNECTION,
looks up the Service's current endpoint - the first Running pod its selector picks
(KubeStore.resolve_service, as `kubectl port-forward service/...` picks) and where that pod's
port really listens (KubeStore.port_target: for the Ray head service, the local Ray head's
dashboard port, which CHANGES when the head pod is recreated) - and pipes the bytes there. So a
client keeps one address across head restarts, as a real pod keeps one Service name.

Recognised values (after kube-dns's search path `<ns>.svc.cluster.local svc.cluster.local
cluster.local`): `[scheme://]<svc>.<ns>.svc[.cluster.local]:<port>[/path]` always (the name can
only mean a Service); `<svc>:<port>` and `<svc>.<ns>:<port>` only when that Service exists when
the container starts (they could be other hosts). A connection when the Service or its endpoint
is missing is closed at once (a real client sees connection refused, or a DNS failure for a
Service that does not exist).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from typing import Any

from rltui_sandbox.kube.errors import KubeError

log = logging.getLogger("rltui_sandbox.kuberay")

_ADDRESS = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.-]*://)?(?P<host>[a-z0-9]([-a-z0-9]*[a-z0-9])?"
                      r"(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*):(?P<port>[0-9]{1,5})(?P<rest>/.*)?$")


def service_of(value: str, namespace: str) -> tuple[str, str, int, bool] | None:
    """(namespace, service, port, fully qualified) named by an env value, or None."""
    m = _ADDRESS.match(value)
    if m is None:
        return None
    parts = m["host"].split(".")
    if len(parts) == 1:
        return namespace, parts[0], int(m["port"]), False
    if len(parts) == 2:
        return parts[1], parts[0], int(m["port"]), False
    if parts[2:] in (["svc"], ["svc", "cluster", "local"]):
        return parts[1], parts[0], int(m["port"]), True
    return None


class ServiceForwarder:
    """127.0.0.1:<port> -> the current endpoint of `service:port` in `namespace`."""

    def __init__(self, store: Any, namespace: str, service: str, port: int) -> None:
        self.store, self.namespace, self.service, self.port = store, namespace, service, port
        self.server: asyncio.base_events.Server | None = None
        self.local_port = 0
        self._conns: set[asyncio.Task] = set()

    async def start(self) -> "ServiceForwarder":
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.local_port = self.server.sockets[0].getsockname()[1]
        return self

    async def endpoint(self) -> tuple[str, int] | None:
        try:
            pod, target = await self.store.resolve_service(self.namespace, self.service, self.port)
        except KubeError:
            return None
        return self.store.port_target(self.namespace, pod, target)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._conns.add(task)
        try:
            target = await self.endpoint()
            if target is None:
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*target)
            except OSError:
                return
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                up_writer.close()
        finally:
            writer.close()
            if task is not None:
                self._conns.discard(task)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for task in list(self._conns):
            task.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()


class ServiceAddresses:
    """The controller's forwarders, one per (namespace, service, port), kept while it runs."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._forwarders: dict[tuple[str, str, int], ServiceForwarder] = {}

    async def rewrite(self, value: str, namespace: str) -> str:
        """`value` with a Service address replaced by its forwarder's (see the module doc)."""
        found = service_of(value, namespace)
        if found is None:
            return value
        ns, svc, port, qualified = found
        if not qualified and not self.store.list_sync("services", ns, field_selector=f"metadata.name={svc}"):
            return value
        key = (ns, svc, port)
        if key not in self._forwarders:
            self._forwarders[key] = await ServiceForwarder(self.store, ns, svc, port).start()
        m = _ADDRESS.match(value)
        assert m is not None
        return f"{m['scheme'] or ''}127.0.0.1:{self._forwarders[key].local_port}{m['rest'] or ''}"

    async def close(self) -> None:
        forwarders, self._forwarders = list(self._forwarders.values()), {}
        for fwd in forwarders:
            await fwd.close()
