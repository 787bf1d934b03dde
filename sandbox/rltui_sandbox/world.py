"""The sandbox's emulated Google Cloud projects: networks, private services access, GKE clusters
and Managed Lustre instances, with operations that take the latency profile's time.

One World lives on the sandbox daemon's asyncio loop (single-threaded: no locks) and is shared
by the gRPC services, the Compute REST routes (rest_compute) and the fake gcloud/xpk control API. Every change is written to
`state_dir/world.json` (atomic replace); timed changes are stored as deadlines, so an operation
in flight when the daemon died completes after a restart. Construct it on the running loop.

Any project ID is accepted, as Google's emulators do. A new project is as Google makes it: only
the default-enabled APIs are on (rltui_sandbox.services.DEFAULT_ENABLED: monitoring yes; compute,
container, lustre, servicenetworking no) and it has no network until compute.googleapis.com is
enabled, which creates the auto-mode `default` network with its four pre-populated firewall rules
("Unless you choose to disable it, each new project starts with a default network ... an auto
mode VPC network with pre-populated IPv4 firewall rules", docs.cloud.google.com/vpc/docs/vpc,
"Default network"; vmware-archive/gcp-pcf-quickstart PR 22: "The compute resources don't show up
in a project until the compute API has been turned on"; the rules' shape from a real
`firewall-rules list` in gist l4rz/29a04343905bf6329a4e9d619ca70d31 and
cloud.google.com/vpc/docs/firewalls#more_rules_default_vpc). The surfaces (gRPC gate, Compute REST, control routes) refuse a disabled API through
`require_service`; the World's own methods do not check, so World-level tests need no enabling.

Test harnesses opt in with `World(..., enabled_services=CODELAB_APIS)`: each new project then
starts with those on and, when compute is among them, the `default` network that ALSO already has
private services access (an allocated range and a peering) - a harness shortcut, not Google's.

Where each service lives (World mixes them together; one object, one state, one loop):
  world_model      the per-project state, deadlines, events, world.json's project JSON, shared helpers
  world_network    VPC networks, subnets, firewall rules, compute operations, global addresses,
                   Service Networking peerings, the `default` network
  world_routers    Cloud Routers and their NATs, regional (NAT IP) addresses
  world_services   Service Usage (enable, list) and the API gate (require_service, gate_grpc)
  world_gke        GKE clusters, their operations, the busy rule, addons, labels, GKE's own upgrade
  world_gke_pools  GKE node pools, the GPU quota's late failure, node recreation
  world_xpk        xpk's cluster create/delete phases and its blueprint's names, pools and labels
  world_lustre     Managed Lustre instances, their late failures and states, google.longrunning ops
  world_iam        IAM service accounts, allow policies (the project's too), Workload Identity, the
                   metadata server's access tokens
This module keeps World's construction, persistence, deadlines, waiting, events and projects, and
re-exports the names importers use (`from rltui_sandbox.world import World, Network, ...`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from rltui_sandbox import services as apis
from rltui_sandbox.faults import Faults
from rltui_sandbox.grpc_util import LroStore
from rltui_sandbox.profile import Clock
from rltui_sandbox.record import Record
from rltui_sandbox.rest_compute_reservations import Reserved
from rltui_sandbox.world_gke import GkeClusterMixin
from rltui_sandbox.world_gke_pools import GkeNodePoolMixin
from rltui_sandbox.world_iam import IamMixin
from rltui_sandbox.world_lustre import LustreMixin
from rltui_sandbox.world_model import WorldEvent, _Due, _Project, _project_from_json, _project_to_json
from rltui_sandbox.world_network import NetworkMixin, _add_default_network
from rltui_sandbox.world_routers import RouterMixin
from rltui_sandbox.world_services import ServiceUsageMixin
from rltui_sandbox.world_storage import StorageMixin
from rltui_sandbox.world_xpk import XpkMixin

# Re-exported: the names importers take from here (`from rltui_sandbox.world import ...`).
from rltui_sandbox.grpc_util import (  # noqa: F401
    AlreadyExists, CloudError, FailedPrecondition, InvalidArgument, NotFound, ResourceExhausted,
)
from rltui_sandbox.world_gke import (  # noqa: F401
    BUSY_REASON, GKE_API, GKE_DOMAIN, GKE_VERSION, OpStatus, OpType, Status, label_fingerprint,
)
from rltui_sandbox.world_gke_pools import gpu_quota_metric  # noqa: F401
from rltui_sandbox.world_lustre import LUSTRE_CAPACITY_TIERS, LustreState  # noqa: F401
from rltui_sandbox.world_model import (  # noqa: F401
    Address, Firewall, Network, Peering, RegionalAddress, Router, Subnet, project_number, region_of,
)
from rltui_sandbox.world_routers import DOCUMENTATION_RANGES  # noqa: F401
from rltui_sandbox.world_network import AUTO_SUBNETS, SERVICE_NETWORKING, InUse  # noqa: F401
from rltui_sandbox.world_xpk import (  # noqa: F401
    XPK_DEVICE_TYPES, XPK_MILESTONES, XpkDevice, xpk_pool_name, xpk_unique_name,
)
from rltui_sandbox.xpk_names import hash_string  # noqa: F401


__all__ = [
    "AlreadyExists", "CloudError", "FailedPrecondition", "InvalidArgument", "NotFound",
    "Address", "Firewall", "LUSTRE_CAPACITY_TIERS", "Network", "Peering", "RegionalAddress", "Router", "Subnet",
    "World", "WorldEvent", "XPK_DEVICE_TYPES", "region_of",
]

log = logging.getLogger(__name__)


class World(NetworkMixin, RouterMixin, ServiceUsageMixin, GkeClusterMixin, GkeNodePoolMixin, XpkMixin, LustreMixin,
            IamMixin, StorageMixin):
    """The emulated projects; see the module docstring."""

    def __init__(self, state_dir: Path, clock: Clock, faults: Faults | None = None, *,
                 enabled_services: Iterable[str] = (), record: Record | None = None) -> None:
        """enabled_services: APIs every NEW project starts with beyond Google's default set (a test
        harness opt-in; see the module docstring). record: where operations are recorded
        (`self.record`); None makes a private one (no file)."""
        self.state_dir = Path(state_dir)
        # Lustre capacity quota in GiB per zone and network (None: unlimited); an int for every
        # zone or {zone: GiB}. Settable from tests and by the daemon's --lustre-quota-gib.
        self.lustre_quota_gib: int | dict[str, int] | None = None
        # Regional quota limits by Compute Engine metric (e.g. "NVIDIA_B200_GPUS",
        # "PREEMPTIBLE_NVIDIA_B200_GPUS"), applied in every region; absent = unlimited.
        self.quotas: dict[str, float] = {}
        # What the caller lacks (Resource Manager testIamPermissions; the daemon's --deny) and which
        # zones offer a machine type (compute machineTypes.get; absent: every zone).
        self.denied_permissions: set[str] = set()
        self.machine_type_zones: dict[str, set[str]] = {}
        # Compute Engine zonal reservations by (project, zone): rest_compute_reservations.
        self.reservations: dict[tuple[str, str], dict[str, Reserved]] = {}
        # GPU capacity kinds ("spot", "on-demand") the zones are out of (the daemon's --capacity):
        # a GPU pool asking for one fails as a stockout (world_capacity).
        self.unavailable_capacity: set[str] = set()
        # Where every GKE cluster's Kubernetes API answers and the CA it presents (base64 PEM):
        # set by the daemon once its HTTPS site is bound; see GkeClusterMixin.cluster_api.
        self.kube_endpoint = "127.0.0.1"
        self.kube_ca_b64 = ""
        # GKE starts its own UPGRADE_MASTER right after xpk's create (see gke_auto_upgrade).
        self.gke_auto_upgrade = True
        self._op_records: dict[str, int] = {}  # GKE operation name -> its Record id
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.clock = clock
        self.faults = faults
        self.enabled_services = frozenset(enabled_services)
        self.record = record if record is not None else Record(None, clock.speed)
        self._projects: dict[str, _Project] = {}
        self._lro = LroStore()
        self._due: list[_Due] = []
        self._seq = 0
        self._request_ids: dict[str, str] = {}
        self._subscribers: list[Callable[[WorldEvent], Any]] = []
        self._tasks: set[asyncio.Future[Any]] = set()  # subscribers' coroutines, kept alive
        self._timer: asyncio.TimerHandle | None = None
        self._changed: asyncio.Future[None] | None = None
        self._closed = False
        self._load()
        self._tick()

    # ---- plumbing: persistence, deadlines, waiting, events -------------------------------------

    @property
    def path(self) -> Path:
        return self.state_dir / "world.json"

    def close(self) -> None:
        """Stop the timers (state stays on disk; a new World resumes from it)."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def subscribe(self, callback: Callable[[WorldEvent], Any]) -> Callable[[], None]:
        """Call `callback(event)` on the loop at each change (a coroutine result runs as a task).
        Returns a function that unsubscribes."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def _emit(self, kind: str, project: str, location: str, name: str, **data: Any) -> None:
        event = WorldEvent(kind, project, location, name, data)
        # Subscribers (the node and pod controllers) are the cloud's own work, whoever's call
        # caused the event: their operations record no caller's agent (record.py).
        with Record.acting_as(""):
            self._notify(event)

    def _notify(self, event: WorldEvent) -> None:
        for callback in list(self._subscribers):
            try:
                result = callback(event)
                if asyncio.iscoroutine(result):
                    task = asyncio.ensure_future(result)
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
            except Exception:  # a broken subscriber must not break the cloud
                log.exception("world subscriber failed on %s", event.kind)

    def _schedule(self, action: str, args: dict[str, Any], *, key: str | None = None,
                  seconds: float | None = None) -> int:
        delay = seconds if seconds is not None else self.clock.seconds(key)  # type: ignore[arg-type]
        self._seq += 1
        self._due.append(_Due(time.time() + max(0.0, delay), self._seq, action, args))
        self._due.sort(key=lambda d: (d.at, d.seq))
        # Due on time whoever asks: a change must not wait for the next caller's read to happen.
        self._arm()
        return self._seq

    def _tick(self) -> None:
        """Apply every change whose deadline has passed, then arm a timer for the next."""
        if self._closed:
            return
        now, fired = time.time(), False
        with Record.acting_as(""):  # a deadline is the cloud's own work, whichever call ran the clock
            while self._due and self._due[0].at <= now:
                due = self._due.pop(0)
                fired = True
                try:
                    getattr(self, "_on_" + due.action)(**due.args)
                except Exception:
                    log.exception("world: applying %s failed", due.action)
        if fired:
            self._commit()
        self._arm()

    def _arm(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop yet: reads still apply due changes through _tick
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._closed and self._due:
            self._timer = loop.call_later(max(0.0, self._due[0].at - time.time()) + 0.001, self._tick)

    def _commit(self) -> None:
        self._save()
        fut, self._changed = self._changed, None
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def _wait(self, predicate: Callable[[], bool], timeout: float | None = None) -> None:
        async with asyncio.timeout(timeout):
            while True:
                self._tick()
                if predicate():
                    return
                if self._changed is None:
                    self._changed = asyncio.get_running_loop().create_future()
                await asyncio.shield(self._changed)

    async def _wait_due(self, seq: int) -> None:
        await self._wait(lambda: all(d.seq != seq for d in self._due))

    def _save(self) -> None:
        data = {
            "version": 1,
            "projects": {pid: _project_to_json(p) for pid, p in self._projects.items()},
            "lro": self._lro.dump(),
            "due": [dataclasses.asdict(d) for d in self._due],
            "seq": self._seq,
            "request_ids": self._request_ids,
        }
        tmp = self.path.with_name("world.json.tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, self.path)

    def _load(self) -> None:
        if not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            self._projects = {pid: _project_from_json(pid, p) for pid, p in data["projects"].items()}
            self._lro.load(data.get("lro", {}))
            self._due = sorted((_Due(**d) for d in data.get("due", [])), key=lambda d: (d.at, d.seq))
            self._seq = int(data.get("seq", 0))
            self._request_ids = dict(data.get("request_ids", {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{self.path}: cannot load the sandbox world: {exc}") from exc

    def _project(self, project: str) -> _Project:
        if not project or "/" in project:
            raise InvalidArgument(f"project {project!r} is invalid")
        if project not in self._projects:
            self._projects[project] = _new_project(project, self.enabled_services)
        return self._projects[project]

    def projects(self) -> list[str]:
        return sorted(self._projects)


def _new_project(project: str, enabled: Iterable[str] = ()) -> _Project:
    """A fresh project: Google's default APIs (+ a harness's `enabled`); with compute among them,
    the `default` network, which then also has private services access (harness shortcut)."""
    p = _Project(project)
    p.services = set(apis.DEFAULT_ENABLED) | set(enabled)
    if apis.COMPUTE in p.services:
        _add_default_network(p, private_services_access=True)
    return p
