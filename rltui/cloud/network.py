"""APIs, the VPC networks xpk makes, the peering range and the Service Networking peering.

Official clients where they exist (sandbox/SOURCES.md#official-clients): google-cloud-service-usage
(async gRPC) for the APIs; google-cloud-compute (REST only and sync: every call runs in a
thread) for networks, subnetworks, global and regional addresses, firewall rules and Cloud
Routers (their NATs are part of the router: compute.v1 Router.nats). Absence is the
client's NotFound or an empty list, never an error's wording. Service Networking has no
client package (and gcloud 528 cannot be pointed at another host for it): its REST API is
spoken directly (cloud/servicenetworking.py), and "no peering" is an empty connection list.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from .endpoints import CALL_TIMEOUT_S, Endpoints
from .errors import CloudError, api_disabled, classify, retry
from .imports import compute_types

if TYPE_CHECKING:
    from .servicenetworking import ServiceNetworking

T = TypeVar("T")

SERVICE_NETWORKING = "servicenetworking.googleapis.com"
# The consumer side of the peering as compute names it (networks.removePeering's `name`).
PEERING_NAME = "servicenetworking-googleapis-com"
Line = Callable[[str], None]


class NetworkAdapter:
    def __init__(self, endpoints: Endpoints, project: str) -> None:
        self.endpoints, self.project = endpoints, project
        self._clients: dict[str, Any] = {}
        self._service_networking: ServiceNetworking | None = None

    # --- plumbing: lazily built clients; sync compute calls in a thread ---

    def _compute(self, kind: str) -> Any:
        if kind not in self._clients:
            self._clients[kind] = self.endpoints.compute(kind)
        return self._clients[kind]

    async def _call(self, what: str, fn: Callable[[], T]) -> T:
        return await retry(lambda: asyncio.to_thread(fn), what=what)

    async def _get(self, what: str, fn: Callable[[], T], empty: T) -> T:
        """A compute get or list: `empty` when the client says NotFound, or that compute is
        off (reason SERVICE_DISABLED: nothing of it can exist)."""
        from google.api_core import exceptions as gexc

        def call() -> T:
            try:
                return fn()
            except gexc.NotFound:
                return empty
            except gexc.Forbidden as exc:
                if api_disabled(exc):
                    return empty
                raise

        return await self._call(what, call)

    async def _wait(self, what: str, start: Callable[[], Any], *, timeout_s: float = 600.0,
                    missing_ok: bool = False, region: str | None = None) -> None:
        """Start a compute insert/delete (the start alone retried, errors.retry: each attempt
        a single call), then wait for its operation with this adapter's own
        Global/RegionOperations client, outside that retry and under a deadline of its own,
        `timeout_s`: a wait of minutes is not cut by a per-attempt timeout, and the start is
        never sent again because the wait took long (a second insert gets 409, which would
        pass for done even if the first operation then failed).
        (ExtendedOperation.result() would poll through a client the library builds without our
        client_options: google-cloud-compute 1.57 transports/base.py
        `_global_operations_client`.)"""
        from google.api_core import exceptions as gexc

        def begin() -> Any:
            try:
                return start()
            except gexc.NotFound:
                if missing_ok:
                    return _Done()
                raise

        op = await self._call(what, begin)
        if isinstance(op, _Done):
            return
        await self._poll(what, op.name, timeout_s=timeout_s, region=region)

    async def _poll(self, what: str, name: str, *, timeout_s: float,
                    region: str | None = None) -> None:
        """globalOperations.wait / regionOperations.wait until the operation is DONE ("waits
        for the specified Operation resource to return as DONE or for the request to approach
        the 2 minute deadline": compute.v1 globalOperations.wait), each call bounded by its
        own HTTP timeout and by what is left of `timeout_s`; a transient failure of one call
        (errors.classify) is asked again until then. Its error, if any, is raised."""
        compute = compute_types()

        where: dict[str, str] = {"project": self.project, "operation": name}
        ops = self._compute("GlobalOperations")
        if region:
            where["region"], ops = region, self._compute("RegionOperations")
        deadline = time.monotonic() + timeout_s
        pause = 1.0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CloudError(f"{what}: not done after {timeout_s:.0f} s", transient=True,
                                 code="Timeout")
            try:
                cur = await asyncio.to_thread(ops.wait, **where,
                                              timeout=max(1.0, min(CALL_TIMEOUT_S + 120, left)))
            except Exception as exc:  # noqa: BLE001 - classified: transient ones are asked again
                err = classify(exc, what)
                if not err.transient:
                    raise err from exc
                await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                pause = min(2 * pause, 20.0)
                continue
            if cur.status == compute.Operation.Status.DONE:
                break
        errors = list(cur.error.errors) if cur.error else []
        if errors:
            first = errors[0]
            raise CloudError(f"{what}: {first.message}", code=first.code,
                             transient=first.code in ("RESOURCE_NOT_READY", "INTERNAL_ERROR"))

    # --- APIs (Service Usage) ---

    def _usage(self) -> Any:
        if "usage" not in self._clients:
            self._clients["usage"] = self.endpoints.service_usage()
        return self._clients["usage"]

    async def enabled_apis(self) -> set[str]:
        async def call() -> set[str]:
            pager = await self._usage().list_services(
                request={"parent": f"projects/{self.project}", "filter": "state:ENABLED",
                         "page_size": 200}, timeout=CALL_TIMEOUT_S)
            return {s.config.name or s.name.rsplit("/", 1)[-1] async for s in pager}

        return await retry(call, what="list enabled APIs")

    async def enable_apis(self, apis: Iterable[str], on_line: Line | None = None,
                          timeout_s: float = 600.0) -> None:
        ids = list(apis)

        async def call() -> Any:
            return await self._usage().batch_enable_services(
                request={"parent": f"projects/{self.project}", "service_ids": ids},
                timeout=CALL_TIMEOUT_S)

        op = await retry(call, what="enable APIs")
        if on_line:
            on_line(f"enabling {', '.join(ids)} (operation {op.operation.name})")
        try:
            # The client library's own polling (google-api-core AsyncRetry: 1 s, doubling, at most
            # 60 s), on the cloud's clock: a sandbox at speed 15 answers in 1/15 of the time.
            scale, deadline = self.endpoints.time_scale, time.monotonic() + timeout_s
            pause = 1.0 * scale
            while not await op.done() and time.monotonic() < deadline:
                await asyncio.sleep(pause)
                pause = min(60.0 * scale, pause * 2)
            await op.result(timeout=max(0.0, deadline - time.monotonic()))
        except Exception as exc:  # noqa: BLE001 - the operation's own error, one line
            raise classify(exc, "enable APIs") from exc

    # --- networks and what xpk puts in them (Compute) ---

    async def network(self, name: str) -> Any | None:
        return await self._get(f"network {name}", lambda: self._compute("Networks").get(
            project=self.project, network=name, timeout=CALL_TIMEOUT_S), None)

    async def networks(self) -> list[Any]:
        return await self._get("list networks", lambda: list(self._compute("Networks").list(
            project=self.project, timeout=CALL_TIMEOUT_S)), [])

    async def delete_network(self, name: str) -> None:
        await self._wait(f"delete network {name}", lambda: self._compute("Networks").delete(
            project=self.project, network=name, timeout=CALL_TIMEOUT_S), missing_ok=True)

    async def remove_peering(self, network: str, name: str = PEERING_NAME) -> None:
        """Compute's side of a peering: the known fallback when Service Networking refuses
        (hashicorp/terraform-provider-google 19908)."""
        compute = compute_types()

        body = compute.NetworksRemovePeeringRequest(name=name)
        await self._wait(f"remove peering {name} from {network}",
                         lambda: self._compute("Networks").remove_peering(
                             project=self.project, network=network,
                             networks_remove_peering_request_resource=body,
                             timeout=CALL_TIMEOUT_S), missing_ok=True)

    async def subnetwork(self, region: str, name: str) -> Any | None:
        """compute subnetworks.get; None when NotFound (or compute is off)."""
        return await self._get(f"subnetwork {name}", lambda: self._compute("Subnetworks").get(
            project=self.project, region=region, subnetwork=name, timeout=CALL_TIMEOUT_S), None)

    async def subnetworks(self, region: str, network: str | None = None) -> list[Any]:
        items: list[Any] = await self._get(f"list subnetworks in {region}", lambda: list(
            self._compute("Subnetworks").list(project=self.project, region=region,
                                              timeout=CALL_TIMEOUT_S)), [])
        return [s for s in items if network is None or s.network.rsplit("/", 1)[-1] == network]

    async def delete_subnetwork(self, region: str, name: str) -> None:
        await self._wait(f"delete subnetwork {name}", lambda: self._compute("Subnetworks").delete(
            project=self.project, region=region, subnetwork=name, timeout=CALL_TIMEOUT_S),
            missing_ok=True, region=region)

    async def firewalls(self, network: str | None = None) -> list[Any]:
        items: list[Any] = await self._get("list firewall rules", lambda: list(
            self._compute("Firewalls").list(project=self.project, timeout=CALL_TIMEOUT_S)), [])
        return [f for f in items if network is None or f.network.rsplit("/", 1)[-1] == network]

    async def delete_firewall(self, name: str) -> None:
        await self._wait(f"delete firewall rule {name}", lambda: self._compute("Firewalls").delete(
            project=self.project, firewall=name, timeout=CALL_TIMEOUT_S), missing_ok=True)

    async def firewall(self, name: str) -> Any | None:
        return await self._get(f"firewall rule {name}", lambda: self._compute("Firewalls").get(
            project=self.project, firewall=name, timeout=CALL_TIMEOUT_S), None)

    async def create_firewall(self, name: str, *, network: str, source_ranges: list[str],
                              tcp_ports: list[str], description: str,
                              on_line: Line | None = None) -> None:
        """An INGRESS rule allowing `tcp_ports` from `source_ranges` to every instance of
        `network` (no target tags: firewalls.insert's default targets the whole network). One
        already there under that name (a retry after a lost answer) is left as it is: the
        caller reads it back."""
        from google.api_core import exceptions as gexc
        compute = compute_types()

        body = compute.Firewall(
            name=name, network=f"projects/{self.project}/global/networks/{network}",
            direction="INGRESS", priority=1000, source_ranges=list(source_ranges),
            allowed=[compute.Allowed(I_p_protocol="tcp", ports=list(tcp_ports))],
            description=description)

        def start() -> Any:
            try:
                return self._compute("Firewalls").insert(
                    project=self.project, firewall_resource=body, timeout=CALL_TIMEOUT_S)
            except gexc.Conflict:
                return _Done()

        if on_line:
            on_line(f"allowing tcp:{','.join(tcp_ports)} from {', '.join(source_ranges)}"
                    f" on {network} (firewall rule {name})")
        await self._wait(f"create firewall rule {name}", start)

    # --- Cloud Routers (with their NATs) and regional addresses (NAT IPs) ---

    async def routers(self, region: str) -> list[Any]:
        return await self._get(f"list routers in {region}", lambda: list(
            self._compute("Routers").list(project=self.project, region=region,
                                          timeout=CALL_TIMEOUT_S)), [])

    async def delete_router(self, region: str, name: str) -> None:
        """The router and its NATs (a NAT is a field of its router: compute.v1 Router.nats)."""
        await self._wait(f"delete router {name}", lambda: self._compute("Routers").delete(
            project=self.project, region=region, router=name, timeout=CALL_TIMEOUT_S),
            missing_ok=True, region=region)

    async def regional_addresses(self, region: str) -> list[Any]:
        return await self._get(f"list addresses in {region}", lambda: list(
            self._compute("Addresses").list(project=self.project, region=region,
                                            timeout=CALL_TIMEOUT_S)), [])

    async def delete_regional_address(self, region: str, name: str) -> None:
        await self._wait(f"delete address {name}", lambda: self._compute("Addresses").delete(
            project=self.project, region=region, address=name, timeout=CALL_TIMEOUT_S),
            missing_ok=True, region=region)

    # --- the range Service Networking peers with (Compute global addresses) ---

    async def address(self, name: str) -> Any | None:
        return await self._get(f"address {name}", lambda: self._compute("GlobalAddresses").get(
            project=self.project, address=name, timeout=CALL_TIMEOUT_S), None)

    async def addresses(self) -> list[Any]:
        return await self._get("list addresses", lambda: list(
            self._compute("GlobalAddresses").list(project=self.project, timeout=CALL_TIMEOUT_S)), [])

    async def create_address(self, name: str, network: str, prefix_length: int = 24,
                             on_line: Line | None = None,
                             labels: dict[str, str] | None = None,
                             description: str = "") -> None:
        """Reserve the range, with `labels` and `description` in the insert's body (the
        description, compute.v1 Address.description, is kept at creation: a mark that exists
        from the moment the range does); labels the insert did not keep are then set with
        globalAddresses.setLabels, as terraform-provider-google v7.40.0 does for a global
        address ("Labels cannot be set in a create":
        google/services/compute/resource_compute_global_address.go, lines 343-347 and
        406-446; the compute.v1 Address.labels field says the same)."""
        from google.api_core import exceptions as gexc
        compute = compute_types()

        body = compute.Address(
            name=name, purpose="VPC_PEERING", address_type="INTERNAL",
            prefix_length=prefix_length, labels=dict(labels or {}), description=description,
            network=f"projects/{self.project}/global/networks/{network}")

        def start() -> Any:
            try:
                return self._compute("GlobalAddresses").insert(
                    project=self.project, address_resource=body, timeout=CALL_TIMEOUT_S)
            except gexc.Conflict:  # a retry after a lost answer, or an earlier run's
                return _Done()

        if on_line:
            on_line(f"reserving {name} (/{prefix_length}) on {network}")
        await self._wait(f"create address {name}", start)
        if labels:
            made = await self.address(name)
            if made is not None and not labels.items() <= dict(made.labels).items():
                await self.set_address_labels(name, {**dict(made.labels), **labels},
                                              made.label_fingerprint)

    async def set_address_labels(self, name: str, labels: dict[str, str],
                                 fingerprint: str) -> None:
        """globalAddresses.setLabels: the whole label set, with the fingerprint last read."""
        compute = compute_types()

        body = compute.GlobalSetLabelsRequest(labels=labels, label_fingerprint=fingerprint)
        await self._wait(f"label address {name}", lambda: self._compute("GlobalAddresses")
                         .set_labels(project=self.project, resource=name,
                                     global_set_labels_request_resource=body,
                                     timeout=CALL_TIMEOUT_S))

    async def delete_address(self, name: str, on_line: Line | None = None) -> None:
        if on_line:
            on_line(f"releasing {name}")
        await self._wait(f"delete address {name}", lambda: self._compute("GlobalAddresses").delete(
            project=self.project, address=name, timeout=CALL_TIMEOUT_S), missing_ok=True)

    # --- the peering (Service Networking's REST API: no client package, no gcloud override) ---

    def _peerings(self) -> ServiceNetworking:
        if self._service_networking is None:
            from .servicenetworking import ServiceNetworking

            self._service_networking = ServiceNetworking(self.endpoints, self.project)
        return self._service_networking

    async def peering(self, network: str) -> dict[str, Any] | None:
        """The Service Networking connection of `network`, or None (an empty list)."""
        return await self._peerings().connection(network)

    async def connect_peering(self, network: str, ranges: list[str],
                              on_line: Line | None = None) -> None:
        """`connect`, or `update --force` when a connection is there (the codelab's `||`)."""
        await self._peerings().connect(network, ranges, on_line=on_line)

    async def delete_peering(self, network: str, on_line: Line | None = None) -> None:
        """Refused while the producer (Lustre) still holds it: CloudError code PeeringInUse,
        transient; whether it is gone is read back from the list."""
        await self._peerings().delete(network, on_line=on_line)


class _Done:
    """An operation that needs no wait (the resource was already there)."""

    def result(self, timeout: float | None = None) -> None:
        return None
