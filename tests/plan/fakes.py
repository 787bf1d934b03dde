"""In-memory stand-ins for the adapters the codelab's steps call, for fast tests of the engine.

One FakeCloud holds a project in dicts (APIs, networks, subnets, firewall rules, global and
regional addresses, Cloud Routers with their NATs, the Service Networking peering, Lustre
instances, the GKE cluster with its labels, addons and node pools (their upgrade settings),
GKE operations, Kubernetes objects by kind and name). A change to the GKE cluster while the
fake xpk runs is written down in `violations` (AddonsStep's docstring says why). The fake adapters are views of it
with the method names and return shapes of rltui/cloud (network.py, gke.py, lustre.py,
kube.py): google container_v1 / lustre_v1 messages where the real adapters return them, small
dataclasses with compute's attribute names where they return compute_v1 objects (importing
compute_v1 alone takes over a second), plain dicts for Kubernetes and the peering.

It refuses what Google and Kubernetes refuse where a step's order matters (the peering while
Lustre holds it, the address while the peering uses it, a network while either uses it, xpk's
delete of such a network, a RayCluster before the RayOperator addon, a changed PV source,
creates on a disabled API) and writes down in `violations` what a real project would have
refused or held back in a way the fake does not act out (xpk before the APIs, a PVC deleted
while pods use it).

`xpk` is a real subprocess: a small Python script on PATH (through Endpoints.tool_dirs) that
writes xpk's blueprint in the folder it runs in, as xpk 1.16.0 does, and appends what it did to a
log that FakeCloud reads on its next call, where the cluster and networks then appear (or go).
"""

from __future__ import annotations

import asyncio
import base64
import copy
import itertools
import json
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from google.cloud import container_v1, lustre_v1

from rltui import manifests, manifests_supervisor
from rltui.plan import guard as plan_guard
from rltui.cloud.endpoints import Endpoints
from rltui.cloud.errors import CloudError
from rltui.cloud.gke import GkeAdapter
from rltui.cloud.kube import _redact, kind_of, raycluster_health
from rltui.config import RLConfig
from rltui.plan.context import Context
from rltui_sandbox.xpk_names import prefix_path, unique_name, zone_to_region

REPO = Path(__file__).resolve().parents[2]
# The codelab's four APIs (its first command), stated here independently of rltui.script.
CODELAB_APIS = ("container.googleapis.com", "lustre.googleapis.com", "compute.googleapis.com",
                "servicenetworking.googleapis.com")
LUSTRE_DRIVER = "lustre.csi.storage.gke.io"
CSI_NODE_IDS = "csi.volume.kubernetes.io/nodeid"
GKE_VERSION = "1.33.5-gke.1201000"
LUSTRE_MOUNT_POINT = "10.90.0.2@tcp:/lustre"
XPK_MACHINES = {"b200-8": ("a4-highgpu-8g", "nvidia-b200", 8)}  # xpk 1.16.0's a4 blueprint
PEERING_NAME = "servicenetworking-googleapis-com"


# --- compute's objects: the attributes the steps read (compute_v1 Network, Address, ...) ---

@dataclass(frozen=True)
class Network:
    name: str
    self_link: str = ""
    creation_timestamp: str = ""   # compute's RFC 3339; "" as the sandbox leaves it


@dataclass(frozen=True)
class Subnetwork:
    name: str
    network: str          # a URL ending in the network's name, as compute gives it
    region: str = ""
    creation_timestamp: str = ""


@dataclass(frozen=True)
class Allowed:
    I_p_protocol: str          # compute_v1.Allowed's name for IPProtocol
    ports: tuple[str, ...] = ()


@dataclass(frozen=True)
class Firewall:
    name: str
    network: str
    description: str = ""
    direction: str = "INGRESS"
    source_ranges: tuple[str, ...] = ()
    allowed: tuple[Allowed, ...] = ()
    creation_timestamp: str = ""


@dataclass(frozen=True)
class Address:
    name: str
    network: str
    prefix_length: int
    purpose: str = "VPC_PEERING"
    address_type: str = "INTERNAL"
    address: str = "10.90.0.0"
    labels: dict = field(default_factory=lambda: {"managed-by": "rltui"})
    label_fingerprint: str = "fp-a"
    description: str = ""


@dataclass(frozen=True)
class RouterNat:
    name: str
    nat_ips: tuple[str, ...] = ()


@dataclass(frozen=True)
class Router:
    name: str
    network: str
    region: str
    nats: tuple[RouterNat, ...] = ()
    creation_timestamp: str = ""   # compute_v1.Router's; "" as for a router not read yet


@dataclass(frozen=True)
class RegionalAddress:
    name: str
    region: str
    address: str = "34.1.2.3"
    status: str = "IN_USE"
    labels: dict = field(default_factory=dict)
    creation_timestamp: str = ""


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _proto_copy(msg: Any) -> Any:
    return type(msg).deserialize(type(msg).serialize(msg))


# --- the fake xpk: a real executable, so the step's subprocess path runs for real -----------

XPK_SCRIPT = '''\
#!{python} -IS
"""A fake xpk 1.16.0 (cluster create / delete). It writes the blueprint where xpk writes it,
prints xpk-like lines and logs what it did for FakeCloud; the cloud side is FakeCloud's."""
import json, os, sys, time
sys.path.insert(0, {repo!r})
from rltui_sandbox.xpk_names import prefix_path, unique_name, zone_to_region

ctl = os.environ["FAKE_XPK_DIR"]
def emit(**event):
    event["t"] = time.time()
    with open(os.path.join(ctl, "events.jsonl"), "a") as f:
        f.write(json.dumps(event) + "\\n")

args = sys.argv[1:]
opts = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
plan_file = os.path.join(ctl, "plan.json")
plan = json.load(open(plan_file)) if os.path.exists(plan_file) else []
how = plan.pop(0) if plan else {{}}
with open(plan_file, "w") as f:
    json.dump(plan, f)
emit(phase="start", argv=args, cwd=os.getcwd(), env_hf=os.environ.get("HF_TOKEN", ""))
verb = " ".join(args[:2])
region = zone_to_region(opts["zone"])
prefix = prefix_path(opts["project"], region)
blueprint = os.path.join("xpkclusters", "blueprints", prefix,
                         unique_name(opts["project"], region, opts["cluster"]) + ".yaml")
print("[XPK] Starting xpk v1.16.0", flush=True)
if verb == "cluster create":
    os.makedirs(os.path.dirname(blueprint), exist_ok=True)
    with open(blueprint, "w") as f:
        f.write("blueprint_name: " + opts["cluster"] + "\\n")
    print("[XPK] Creating the cluster using Cluster Toolkit", flush=True)
    emit(phase="networks")
    time.sleep(how.get("pause_s", 0))
    if how.get("fail_op"):
        emit(phase="failed_op", message=how["fail_op"])
    elif not how.get("exit"):
        emit(phase="cluster", opts=opts)
        # Terraform goes on after the control plane: default-pool, node pool, kubectl-apply.
        time.sleep(how.get("pause_after_s", 0))
elif verb == "cluster delete":
    # gcluster destroy: the cluster, then the networks; a network still used by a peering or
    # an address is refused (and xpk fails). xpk never removes its blueprint.
    with open(os.path.join(ctl, "held.json")) as f:
        held = json.load(f)
    emit(phase="deleted", held=held, leave=bool(how.get("leave")))
    if held:
        print(f"ERROR: The network resource '{{held[0]}}' is already being used", file=sys.stderr)
        how.setdefault("exit", 1)
if how.get("stderr"):
    print(how["stderr"], file=sys.stderr, flush=True)
code = int(how.get("exit", 0))
print("[XPK] Exiting XPK cleanly" if code == 0 else f"[XPK] XPK failed, error code {{code}}",
      flush=True)
emit(phase="exit", code=code)
sys.exit(code)
'''


def install_fake_xpk(bin_dir: Path, ctl_dir: Path) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    ctl_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "xpk"
    path.write_text(XPK_SCRIPT.format(python=sys.executable, repo=str(REPO / "sandbox")))
    path.chmod(0o755)


# --- the project --------------------------------------------------------------------------

@dataclass
class XpkRun:
    argv: list[str]
    cwd: str
    env_hf: str
    code: int | None = None


@dataclass
class FakeCloud:
    cfg: RLConfig
    xpk_ctl: Path
    op_s: float = 0.005            # how long each create/delete takes (loop seconds)
    lustre_s: float = 0.03         # CREATING -> ACTIVE
    raycluster_s: float = 0.02     # applied -> head and workers ready
    slow: dict[str, float] = field(default_factory=dict)   # span name -> its duration
    apis: set[str] = field(default_factory=set)
    networks: dict[str, Network] = field(default_factory=dict)
    subnets: dict[str, Subnetwork] = field(default_factory=dict)
    firewall_rules: dict[str, Firewall] = field(default_factory=dict)
    addresses: dict[str, Address] = field(default_factory=dict)
    routers: dict[str, Router] = field(default_factory=dict)
    regional_addresses: dict[str, RegionalAddress] = field(default_factory=dict)
    upgrades: list[tuple[str, int, int]] = field(default_factory=list)   # pool, surge, unavail.
    recreated: list[tuple[str, int, int]] = field(default_factory=list)  # ..., as recreated
    peerings: dict[str, dict] = field(default_factory=dict)        # network -> connection
    instances: dict[str, lustre_v1.Instance] = field(default_factory=dict)
    cluster: container_v1.Cluster | None = None
    operations: list[container_v1.Operation] = field(default_factory=list)
    objects: dict[tuple[str, str], dict] = field(default_factory=dict)   # (plural, name) -> obj
    xpk_runs: list[XpkRun] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)                  # "lustre.create", ...
    spans: dict[str, tuple[float, float]] = field(default_factory=dict)  # wall clock
    violations: list[str] = field(default_factory=list)
    failures: dict[str, list[BaseException]] = field(default_factory=dict)
    lustre_late_failure: str | None = None   # the next create's operation fails with this
    _timers: dict[str, float] = field(default_factory=dict)
    _op_error: dict[str, str] = field(default_factory=dict)
    _xpk_offset: int = 0
    _cluster_ids: int = 0
    _rv: Any = field(default_factory=lambda: itertools.count(1))

    # ---- plumbing ----
    def fail(self, call: str, *errors: BaseException) -> None:
        """The next calls of `call` ("network.create_address") raise these, one each."""
        self.failures.setdefault(call, []).extend(errors)

    async def enter(self, call: str) -> None:
        self.sync_xpk()
        self.publish()
        self.calls.append(call)
        pending = self.failures.get(call)
        if pending:
            raise pending.pop(0)

    def count(self, call: str) -> int:
        return self.calls.count(call)

    async def work(self, span: str) -> None:
        """An operation taking `op_s` (or `slow[span]`); the caller changes the state after it."""
        start = time.time()
        await asyncio.sleep(self.slow.get(span, self.op_s))
        self.spans[span] = (start, time.time())

    def require_api(self, api: str) -> None:
        if api not in self.apis:
            raise CloudError(f"the {api} API is not enabled: run `gcloud services enable {api}`",
                             transient=False, code="ApiDisabled")

    @property
    def now(self) -> float:
        return asyncio.get_running_loop().time()

    # ---- what xpk did (read from its log) ----
    def sync_xpk(self) -> None:
        log = self.xpk_ctl / "events.jsonl"
        if not log.exists():
            return
        data = log.read_bytes()
        end = data.rfind(b"\n") + 1
        for raw in data[self._xpk_offset:end].splitlines():
            self._xpk_event(json.loads(raw))
        self._xpk_offset = end

    def _xpk_event(self, ev: dict) -> None:
        phase = ev["phase"]
        if phase == "start":
            self.xpk_runs.append(XpkRun(ev["argv"], ev["cwd"], ev["env_hf"]))
            self._timers["xpk"] = ev["t"]
        elif phase == "networks":
            if not {"compute.googleapis.com", "container.googleapis.com"} <= self.apis:
                self.violations.append("xpk ran before the APIs were enabled")
            self.seed_networks()
        elif phase == "cluster":
            opts = ev["opts"]
            self.seed_cluster(num_nodes=int(opts["num-nodes"]), device_type=opts["device-type"],
                              started=ev["t"])
        elif phase == "failed_op":
            self._operation("CREATE_NODE_POOL", "nodePools/gpu", ev["t"], error=ev["message"])
        elif phase == "deleted":
            self.spans["xpk delete"] = (self._timers.get("xpk", ev["t"]), ev["t"])
            self._delete_cluster_objects()
            self._operation("DELETE_CLUSTER", "", ev["t"])
            for name in self.blueprint_networks():
                if ev.get("leave"):   # Terraform failed after the cluster: the rest stays
                    break
                if name not in ev["held"] and name not in self.held_networks():
                    self._drop_network(name)
        elif phase == "exit":
            self.xpk_runs[-1].code = ev["code"]
            self.spans["xpk"] = (self._timers.get("xpk", ev["t"]), ev["t"])   # the last run

    def held_networks(self) -> list[str]:
        """Networks a peering, an address or a firewall rule the blueprint does not know still
        uses (compute refuses to delete them, and so xpk's Terraform fails)."""
        from rltui.names import blueprint_names

        own = set(blueprint_names(self.cfg.cluster_name, self.cfg.region).firewalls)
        used = {a.network.rsplit("/", 1)[-1] for a in self.addresses.values()} | set(self.peerings)
        used |= {f.network.rsplit("/", 1)[-1] for f in self.firewall_rules.values()
                 if f.name not in own}
        return sorted(n for n in self.networks if n in used)

    def xpk_running(self) -> bool:
        """An xpk run has started and not exited (from its log, as of the last call)."""
        return bool(self.xpk_runs) and self.xpk_runs[-1].code is None

    def touch_cluster(self, what: str) -> None:
        """A change to the GKE cluster: one while xpk's Terraform works on it is a violation
        (AddonsStep's docstring says why)."""
        if self.xpk_running():
            self.violations.append(f"{what} while xpk runs")

    def publish(self) -> None:
        """What the fake xpk reads when it deletes: the networks still held."""
        (self.xpk_ctl / "held.json").write_text(json.dumps(self.held_networks()))

    def blueprint_networks(self) -> list[str]:
        c = self.cfg.cluster_name
        return [f"{c}-net-0", f"{c}-net-1", f"{c}-rdma-net"]

    def _drop_network(self, name: str) -> None:
        self.networks.pop(name, None)
        self.peerings.pop(name, None)
        for d in (self.subnets, self.firewall_rules, self.routers):
            for key in [k for k, v in d.items() if v.network.endswith("/" + name)]:
                del d[key]
        for key in [k for k in self.regional_addresses if k.startswith(f"{name}-nat-ips-")]:
            del self.regional_addresses[key]

    def _operation(self, kind: str, target: str, t: float, error: str = "") -> None:
        c = self.cfg
        link = (f"https://container.googleapis.com/v1/projects/{c.project_id}/locations/"
                f"{c.region}/clusters/{c.cluster_name}" + (f"/{target}" if target else ""))
        self.operations.append(container_v1.Operation(
            name=f"operation-{len(self.operations) + 1}",
            operation_type=container_v1.Operation.Type[kind],
            status=container_v1.Operation.Status.DONE, target_link=link,
            start_time=_rfc3339(t), end_time=_rfc3339(t),
            error={"message": error} if error else None))

    # ---- seeding: the project as a step's apply leaves it (for the steps that come after) ----
    def seed_apis(self) -> None:
        self.apis |= set(CODELAB_APIS)

    def seed_networks(self) -> None:
        """The blueprint's networks and what xpk's Terraform puts in them, each with its
        creation time (compute's creationTimestamp; the networks' left "", as the sandbox
        leaves it); what is there already stays as it is."""
        c, p = self.cfg.cluster_name, self.cfg.project_id
        base = f"https://www.googleapis.com/compute/v1/projects/{p}"
        now = _rfc3339(time.time())
        for i, net in enumerate(self.blueprint_networks()):
            url = f"{base}/global/networks/{net}"
            self.networks.setdefault(net, Network(net, url))
            if net.endswith("rdma-net"):
                for j in range(8):
                    self.subnets.setdefault(f"{c}-rdma-sub-{j}", Subnetwork(
                        f"{c}-rdma-sub-{j}", url, self.cfg.region, now))
            else:
                r = self.cfg.region
                self.subnets.setdefault(f"{c}-sub-{i}", Subnetwork(f"{c}-sub-{i}", url, r, now))
                for rule in (f"{c}-internal-{i}", f"{net}-fw-allow-internal-traffic",
                             f"{net}-fw-allow-iap-ingress"):
                    self.firewall_rules.setdefault(rule, Firewall(rule, url,
                                                                  creation_timestamp=now))
                ips = tuple(f"{net}-nat-ips-{r}-{j}" for j in range(2))
                for ip in ips:
                    self.regional_addresses.setdefault(ip, RegionalAddress(ip, r, labels={
                        "gke_product_type": "xpk", "ghpc_module": "vpc", "ghpc_role": "network"},
                        creation_timestamp=now))
                self.routers.setdefault(f"{net}-router", Router(
                    f"{net}-router", url, r, (RouterNat(f"cloud-nat-{r}", tuple(
                        f"{base}/regions/{r}/addresses/{ip}" for ip in ips)),),
                    creation_timestamp=now))

    def seed_cluster(self, *, num_nodes: int | None = None, device_type: str | None = None,
                     labelled: bool = False, started: float | None = None,
                     version: str = GKE_VERSION) -> None:
        """What `xpk cluster create` leaves: networks, a RUNNING cluster with a system pool and
        a GPU pool of `num_nodes` Ready nodes, the Toolkit's labels (not rltui's)."""
        c = self.cfg
        num_nodes = c.num_nodes if num_nodes is None else num_nodes
        machine, accel, per_node = XPK_MACHINES[device_type or c.device_type]
        started = time.time() if started is None else started
        self.seed_networks()
        gpu_pool = f"{machine}-{c.cluster_name}-a4-pool"
        labels = {"gke_product_type": "xpk", "ghpc_module": "gke-cluster",
                  "ghpc_deployment": unique_name(c.project_id, c.region, c.cluster_name)}
        if labelled:
            labels["managed-by"] = "rltui"
        # A re-apply keeps the cluster (its unique id, its creation time) and the labels others
        # set: resource_labels are non-authoritative in terraform-provider-google v7.
        old = self.cluster
        if old is not None:
            labels = {**dict(old.resource_labels), **labels}
        self._cluster_ids += 1
        cluster_id = old.id if old is not None else f"{self._cluster_ids:032x}"
        created = old.create_time if old is not None else _rfc3339(started)
        self.cluster = container_v1.Cluster(
            name=c.cluster_name, location=c.region, status=container_v1.Cluster.Status.RUNNING,
            id=cluster_id, create_time=created,
            endpoint="10.0.0.2", current_master_version=version, resource_labels=labels,
            label_fingerprint="fp-1",
            network=f"{c.cluster_name}-net-0",
            node_pools=[
                container_v1.NodePool(name="system", initial_node_count=1, version=version,
                                      status=container_v1.NodePool.Status.RUNNING,
                                      config=container_v1.NodeConfig(machine_type="e2-standard-4")),
                container_v1.NodePool(
                    name=gpu_pool, initial_node_count=num_nodes, version=version,
                    status=container_v1.NodePool.Status.RUNNING,
                    upgrade_settings=container_v1.NodePool.UpgradeSettings(
                        max_surge=0, max_unavailable=1),
                    config=container_v1.NodeConfig(
                        machine_type=machine, spot=True,
                        accelerators=[container_v1.AcceleratorConfig(
                            accelerator_type=accel, accelerator_count=per_node)]))])
        self._operation("CREATE_CLUSTER", "", started)
        self._operation("CREATE_NODE_POOL", f"nodePools/{gpu_pool}", started)
        # A re-apply leaves the nodes that are there as they are (and adds what is missing).
        if ("nodes", "gke-system-0") not in self.objects:
            self._put_node("gke-system-0", "system", None)
        for i in range(num_nodes):
            if ("nodes", f"gke-{gpu_pool}-{i}") not in self.objects:
                self._put_node(f"gke-{gpu_pool}-{i}", gpu_pool, accel)

    def seed_xpk_state(self, xpk_dir: Path) -> None:
        """xpk's blueprint in the folder it ran in (the path xpk 1.16.0 derives)."""
        c = self.cfg
        region = zone_to_region(c.zone)
        path = (xpk_dir / "xpkclusters" / "blueprints" / prefix_path(c.project_id, region)
                / (unique_name(c.project_id, region, c.cluster_name) + ".yaml"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"blueprint_name: {c.cluster_name}\n")

    def _put_node(self, name: str, pool: str, accel: str | None,
                  drivers: dict | None = None) -> None:
        labels = {"cloud.google.com/gke-nodepool": pool}
        if accel:
            labels["cloud.google.com/gke-accelerator"] = accel
        self.objects[("nodes", name)] = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "resourceVersion": str(next(self._rv)),
                         "creationTimestamp": _rfc3339(time.time()),
                         "annotations": {CSI_NODE_IDS: json.dumps(
                             drivers or {"pd.csi.storage.gke.io": name})}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}

    def seed_addons(self, *, legacy_port: bool = False) -> None:
        """Both addons on and the GPU nodes recreated, so that they run the Lustre driver."""
        assert self.cluster is not None
        cfg = self.cluster.addons_config
        cfg.ray_operator_config.enabled = True
        cfg.lustre_csi_driver_config.enabled = True
        cfg.lustre_csi_driver_config.enable_legacy_lustre_port = legacy_port
        for pool in self.cluster.node_pools:
            self._recreate_nodes(pool.name)

    def seed_address(self, *, labels: dict | None = None, description: str = "") -> None:
        """The range as IpRangeStep leaves it: labelled managed-by=rltui unless `labels`."""
        c = self.cfg
        self.addresses[c.address_name] = Address(
            c.address_name, f"projects/{c.project_id}/global/networks/{c.network}", 24,
            labels=dict({"managed-by": "rltui"} if labels is None else labels),
            description=description)

    def seed_lustre_rule(self, *, description: str | None = None,
                         ports: tuple[str, ...] = ("988",)) -> None:
        """The Lustre firewall rule as LustreFirewallStep leaves it (rltui's mark first)."""
        from rltui.plan.ownership import RULE_MARK, lustre_rule_name

        c = self.cfg
        name = lustre_rule_name(c.network)
        address = self.addresses[c.address_name]
        self.firewall_rules[name] = Firewall(
            name, f"https://www.googleapis.com/compute/v1/projects/{c.project_id}/global/"
            f"networks/{c.network}", f"{RULE_MARK}: Managed Lustre" if description is None
            else description, "INGRESS", (f"{address.address}/{address.prefix_length}",),
            (Allowed("tcp", ports),))

    def seed_peering(self) -> None:
        self.peerings[self.cfg.network] = self._connection(self.cfg.network,
                                                           [self.cfg.address_name])

    def _connection(self, network: str, ranges: list[str]) -> dict:
        return {"network": f"projects/123456789012/global/networks/{network}",
                "peering": PEERING_NAME, "service": "services/servicenetworking.googleapis.com",
                "reservedPeeringRanges": list(ranges)}

    def seed_lustre(self, *, gke_support_enabled: bool = False) -> None:
        c = self.cfg
        self.instances[c.lustre_instance_id] = lustre_v1.Instance(
            name=self._lustre_name(c.lustre_instance_id), state=lustre_v1.Instance.State.ACTIVE,
            capacity_gib=c.lustre_capacity, per_unit_storage_throughput=c.lustre_throughput,
            filesystem="lustre", network=f"projects/{c.project_id}/global/networks/{c.network}",
            mount_point=LUSTRE_MOUNT_POINT, labels={"managed-by": "rltui"},
            gke_support_enabled=gke_support_enabled)

    def _lustre_name(self, instance_id: str) -> str:
        return f"projects/{self.cfg.project_id}/locations/{self.cfg.zone}/instances/{instance_id}"

    def seed_kube(self, obj: dict) -> None:
        self._store(obj)

    # ---- Kubernetes: the store, the addons' and KubeRay's effects ----
    def _store(self, obj: dict) -> dict:
        kind = kind_of(obj["kind"])
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(next(self._rv))
        if kind.plural == "secrets" and "stringData" in obj:
            data = obj.setdefault("data", {})
            for k, v in obj.pop("stringData").items():
                data[k] = base64.b64encode(v.encode()).decode()
        if kind.plural == "persistentvolumeclaims":
            obj["status"] = {"phase": "Bound" if ("persistentvolumes", obj["spec"]["volumeName"])
                             in self.objects else "Pending"}
        self.objects[(kind.plural, meta["name"])] = obj
        if kind.plural == "rayclusters":
            self._timers[f"raycluster/{meta['name']}"] = self.now + self.raycluster_s
            obj["status"] = {"desiredWorkerReplicas": self._workers(obj), "readyWorkerReplicas": 0,
                             "conditions": [{"type": "HeadPodReady", "status": "False",
                                             "reason": "ContainersNotReady"}]}
        return obj

    @staticmethod
    def _workers(rc: dict) -> int:
        return sum(int(g.get("replicas") or 0) for g in rc["spec"].get("workerGroupSpecs") or [])

    def _recreate_nodes(self, pool: str) -> None:
        """New nodes run every driver the cluster has enabled now."""
        assert self.cluster is not None
        csi = self.cluster.addons_config.lustre_csi_driver_config.enabled
        for (plural, name), node in list(self.objects.items()):
            if plural != "nodes":
                continue
            labels = node["metadata"].get("labels") or {}
            if labels.get("cloud.google.com/gke-nodepool") == pool:
                drivers = {"pd.csi.storage.gke.io": name, **({LUSTRE_DRIVER: name} if csi else {})}
                self._put_node(name, pool, labels.get("cloud.google.com/gke-accelerator"), drivers)

    def reconcile(self) -> None:
        """KubeRay: a RayCluster's head and workers start once their claim is Bound."""
        for (plural, name), rc in list(self.objects.items()):
            if plural != "rayclusters" or self.now < self._timers.get(f"raycluster/{name}", 0):
                continue
            pvc = self.objects.get(("persistentvolumeclaims", self.cfg.pvc_name))
            if pvc is None or ("persistentvolumes", self.cfg.pv_name) not in self.objects:
                continue  # pods stay Pending: unbound claim
            if rc["status"]["readyWorkerReplicas"] == self._workers(rc):
                continue
            rc["status"] = {"state": "ready", "desiredWorkerReplicas": self._workers(rc),
                            "readyWorkerReplicas": self._workers(rc),
                            "conditions": [{"type": "HeadPodReady", "status": "True"}]}
            rc["metadata"]["resourceVersion"] = str(next(self._rv))
            selector = {"ray.io/cluster": name, "ray.io/node-type": "head"}
            volumes = [{"name": "lustre-storage",
                        "persistentVolumeClaim": {"claimName": self.cfg.pvc_name}}]
            gpu_nodes = sorted(n for (p, n), o in self.objects.items() if p == "nodes"
                               and "cloud.google.com/gke-accelerator" in o["metadata"]["labels"])
            for i in range(self._workers(rc) + 1):
                pod = f"{name}-head" if i == 0 else f"{name}-worker-{i}"
                labels = selector if i == 0 else {"ray.io/cluster": name,
                                                  "ray.io/node-type": "worker"}
                node = gpu_nodes[max(0, i - 1) % len(gpu_nodes)] if gpu_nodes else ""
                self.objects[("pods", pod)] = {
                    "kind": "Pod", "metadata": {"name": pod, "namespace": "default",
                                                "labels": dict(labels)},
                    "spec": {"volumes": volumes, "nodeName": node,
                             "containers": [{"name": "ray", "ports": [
                                 {"containerPort": 8265, "name": "dashboard"}]}]},
                    "status": {"phase": "Running",
                               "conditions": [{"type": "Ready", "status": "True"}]}}
            self.objects[("services", f"{name}-head-svc")] = {
                "kind": "Service", "metadata": {"name": f"{name}-head-svc", "namespace": "default"},
                "spec": {"selector": selector,
                         "ports": [{"port": 8265, "targetPort": "dashboard", "name": "dashboard"}]}}

    def _delete_cluster_objects(self) -> None:
        self.cluster = None
        self.objects.clear()

    def kube_objects(self, plural: str) -> list[str]:
        return sorted(n for p, n in self.objects if p == plural)


# --- the adapters ------------------------------------------------------------------------

Line = Callable[[str], None]


class FakeNetwork:
    """rltui.cloud.network.NetworkAdapter's methods the steps call."""

    def __init__(self, cloud: FakeCloud) -> None:
        self.cloud = cloud

    async def enabled_apis(self) -> set[str]:
        await self.cloud.enter("network.enabled_apis")
        return set(self.cloud.apis)

    async def enable_apis(self, apis: Any, on_line: Line | None = None,
                          timeout_s: float = 600.0) -> None:
        await self.cloud.enter("network.enable_apis")
        ids = list(apis)
        if on_line:
            on_line(f"enabling {', '.join(ids)} (operation operations/acf.p2-1)")
        await self.cloud.work("enable apis")
        self.cloud.apis |= set(ids)

    async def network(self, name: str) -> Network | None:
        await self.cloud.enter("network.network")
        if "compute.googleapis.com" not in self.cloud.apis:
            return None
        return self.cloud.networks.get(name)

    async def networks(self) -> list[Network]:
        await self.cloud.enter("network.networks")
        return list(self.cloud.networks.values())

    async def subnetworks(self, region: str, network: str | None = None) -> list[Subnetwork]:
        await self.cloud.enter("network.subnetworks")
        return [s for s in self.cloud.subnets.values() if s.region == region
                and (network is None or s.network.rsplit("/", 1)[-1] == network)]

    async def subnetwork(self, region: str, name: str) -> Subnetwork | None:
        await self.cloud.enter("network.subnetwork")
        found = self.cloud.subnets.get(name)
        return found if found is not None and found.region == region else None

    async def firewalls(self, network: str | None = None) -> list[Firewall]:
        await self.cloud.enter("network.firewalls")
        return [f for f in self.cloud.firewall_rules.values()
                if network is None or f.network.rsplit("/", 1)[-1] == network]

    async def delete_firewall(self, name: str) -> None:
        await self.cloud.enter("network.delete_firewall")
        self.cloud.firewall_rules.pop(name, None)
        self.cloud.publish()

    async def firewall(self, name: str) -> Firewall | None:
        await self.cloud.enter("network.firewall")
        return self.cloud.firewall_rules.get(name)

    async def create_firewall(self, name: str, *, network: str, source_ranges: list[str],
                              tcp_ports: list[str], description: str,
                              on_line: Line | None = None) -> None:
        await self.cloud.enter("network.create_firewall")
        c = self.cloud
        c.require_api("compute.googleapis.com")
        if network not in c.networks:
            raise CloudError(f"create firewall rule {name}: network {network} was not found",
                             transient=False, code="NOT_FOUND")
        if on_line:
            on_line(f"allowing tcp:{','.join(tcp_ports)} on {network}")
        await c.work("create firewall")
        c.firewall_rules.setdefault(name, Firewall(
            name, c.networks[network].self_link, description, "INGRESS", tuple(source_ranges),
            (Allowed("tcp", tuple(tcp_ports)),)))
        c.publish()

    async def routers(self, region: str) -> list[Router]:
        await self.cloud.enter("network.routers")
        return [r for r in self.cloud.routers.values() if r.region == region]

    async def delete_router(self, region: str, name: str) -> None:
        await self.cloud.enter("network.delete_router")
        self.cloud.routers.pop(name, None)

    async def regional_addresses(self, region: str) -> list[RegionalAddress]:
        await self.cloud.enter("network.regional_addresses")
        return [a for a in self.cloud.regional_addresses.values() if a.region == region]

    async def delete_regional_address(self, region: str, name: str) -> None:
        await self.cloud.enter("network.delete_regional_address")
        c = self.cloud
        if any(name in ip for r in c.routers.values() for nat in r.nats for ip in nat.nat_ips):
            raise CloudError(f"delete address {name}: The address resource is already being"
                             " used by a router", transient=False,
                             code="RESOURCE_IN_USE_BY_ANOTHER_RESOURCE")
        c.regional_addresses.pop(name, None)

    async def delete_subnetwork(self, region: str, name: str) -> None:
        await self.cloud.enter("network.delete_subnetwork")
        self.cloud.subnets.pop(name, None)

    async def delete_network(self, name: str) -> None:
        await self.cloud.enter("network.delete_network")
        c = self.cloud
        users = ([s.name for s in c.subnets.values() if s.network.endswith("/" + name)]
                 + [f.name for f in c.firewall_rules.values() if f.network.endswith("/" + name)]
                 + [r.name for r in c.routers.values() if r.network.endswith("/" + name)]
                 + [a.name for a in c.addresses.values() if a.network.endswith("/" + name)]
                 + ([PEERING_NAME] if name in c.peerings else []))
        if users:
            raise CloudError(f"delete network {name}: The network resource is already being used"
                             f" by {users[0]}", transient=False,
                             code="RESOURCE_IN_USE_BY_ANOTHER_RESOURCE")
        await c.work(f"delete network {name}")
        c.networks.pop(name, None)

    async def address(self, name: str) -> Address | None:
        await self.cloud.enter("network.address")
        return self.cloud.addresses.get(name)

    async def addresses(self) -> list[Address]:
        await self.cloud.enter("network.addresses")
        return list(self.cloud.addresses.values())

    async def create_address(self, name: str, network: str, prefix_length: int = 24,
                             on_line: Line | None = None,
                             labels: dict[str, str] | None = None,
                             description: str = "") -> None:
        await self.cloud.enter("network.create_address")
        c = self.cloud
        c.require_api("compute.googleapis.com")
        if network not in c.networks:
            raise CloudError(f"create address {name}: The resource 'projects/{c.cfg.project_id}"
                             f"/global/networks/{network}' was not found", transient=False,
                             code="NOT_FOUND")
        if on_line:
            on_line(f"reserving {name} (/{prefix_length}) on {network}")
        await c.work("create address")
        c.addresses.setdefault(name, Address(
            name, f"projects/{c.cfg.project_id}/global/networks/{network}", prefix_length,
            labels=dict(labels or {}), description=description))
        c.publish()

    async def delete_address(self, name: str, on_line: Line | None = None) -> None:
        await self.cloud.enter("network.delete_address")
        c = self.cloud
        if any(name in p["reservedPeeringRanges"] for p in c.peerings.values()):
            raise CloudError(f"delete address {name}: The address resource is already being"
                             " used by servicenetworking-googleapis-com", transient=False,
                             code="RESOURCE_IN_USE_BY_ANOTHER_RESOURCE")
        if on_line:
            on_line(f"releasing {name}")
        await c.work("delete address")
        c.addresses.pop(name, None)
        c.publish()

    async def peering(self, network: str) -> dict | None:
        await self.cloud.enter("network.peering")
        found = self.cloud.peerings.get(network)
        return copy.deepcopy(found) if found is not None else None

    async def connect_peering(self, network: str, ranges: list[str],
                              on_line: Line | None = None) -> None:
        await self.cloud.enter("network.connect_peering")
        c = self.cloud
        c.require_api("servicenetworking.googleapis.com")
        missing = [r for r in ranges if r not in c.addresses]
        if network not in c.networks or missing:
            raise CloudError(f"connect peering: network {network} or range(s) {missing} not"
                             " found", transient=False, code="rpc3")
        if on_line:
            on_line(f"peering {network} with servicenetworking.googleapis.com (operations/pssn.1)")
        await c.work("connect peering")
        c.peerings[network] = c._connection(network, ranges)
        c.publish()

    async def delete_peering(self, network: str, on_line: Line | None = None) -> None:
        await self.cloud.enter("network.delete_peering")
        c = self.cloud
        if network not in c.peerings:
            return
        if any(i.network.endswith("/" + network) for i in c.instances.values()):
            raise CloudError("delete peering: Producer services (e.g. CloudSQL, Cloud Memstore,"
                             " etc.) are still using this connection.", transient=True,
                             code="PeeringInUse")
        if on_line:
            on_line(f"deleting the peering of {network} (operations/pssn.2)")
        await c.work("delete peering")
        c.peerings.pop(network, None)
        c.publish()

    async def remove_peering(self, network: str, name: str = PEERING_NAME) -> None:
        await self.cloud.enter("network.remove_peering")
        self.cloud.peerings.pop(network, None)
        self.cloud.publish()


class FakeGke:
    """rltui.cloud.gke.GkeAdapter's methods the steps call; the pure readers are its own."""

    addons_enabled = staticmethod(GkeAdapter.addons_enabled)
    legacy_port = staticmethod(GkeAdapter.legacy_port)
    operation_failure = staticmethod(GkeAdapter.operation_failure)

    def __init__(self, cloud: FakeCloud) -> None:
        self.cloud = cloud

    def _cluster(self) -> container_v1.Cluster:
        self.cloud.require_api("container.googleapis.com")
        if self.cloud.cluster is None:
            raise CloudError(f"Not found: cluster {self.cloud.cfg.cluster_name}",
                             transient=False, code="NotFound")
        return self.cloud.cluster

    async def get(self) -> container_v1.Cluster | None:
        await self.cloud.enter("gke.get")
        cluster = self.cloud.cluster
        return None if cluster is None else _proto_copy(cluster)

    async def list(self) -> list[container_v1.Cluster]:
        await self.cloud.enter("gke.list")
        return [] if self.cloud.cluster is None else [_proto_copy(self.cloud.cluster)]

    async def enable_addons(self, *, expected_s: float, legacy_port: bool = False) -> None:
        await self.cloud.enter("gke.enable_addons")
        self.cloud.touch_cluster("UpdateCluster (addons)")
        cluster = self._cluster()
        await self.cloud.work("enable addons")
        cfg = cluster.addons_config
        cfg.ray_operator_config.enabled = True
        cfg.lustre_csi_driver_config.enabled = True
        cfg.lustre_csi_driver_config.enable_legacy_lustre_port = legacy_port
        self.cloud._operation("UPDATE_CLUSTER", "", time.time())

    async def set_labels(self, labels: dict[str, str], *, expected_s: float) -> None:
        await self.cloud.enter("gke.set_labels")
        self.cloud.touch_cluster("SetLabels")
        cluster = self._cluster()
        await self.cloud.work("set labels")
        cluster.resource_labels.update(labels)
        self.cloud._operation("SET_LABELS", "", time.time())

    def _pool(self, pool: str) -> container_v1.NodePool:
        found = [p for p in self._cluster().node_pools if p.name == pool]
        if not found:
            raise CloudError(f"Not found: node pool {pool}", transient=False, code="NotFound")
        return found[0]

    async def recreate_node_pool(self, pool: str, *, expected_s: float) -> None:
        """Upgrade to its own version: its nodes come back with the drivers enabled now;
        `recreated` records the upgrade settings it ran with."""
        await self.cloud.enter("gke.recreate_node_pool")
        self.cloud.touch_cluster("UpdateNodePool (recreate)")
        us = self._pool(pool).upgrade_settings
        self.cloud.recreated.append((pool, int(us.max_surge), int(us.max_unavailable)))
        await self.cloud.work(f"recreate {pool}")
        self.cloud._recreate_nodes(pool)
        self.cloud._operation("UPGRADE_NODES", f"nodePools/{pool}", time.time())

    async def set_upgrade_settings(self, pool: str, *, max_surge: int, max_unavailable: int,
                                   expected_s: float) -> None:
        await self.cloud.enter("gke.set_upgrade_settings")
        self.cloud.touch_cluster("UpdateNodePool (upgrade settings)")
        np = self._pool(pool)
        np.upgrade_settings.max_surge = max_surge
        np.upgrade_settings.max_unavailable = max_unavailable
        self.cloud.upgrades.append((pool, max_surge, max_unavailable))
        self.cloud._operation("UPDATE_CLUSTER", f"nodePools/{pool}", time.time())

    async def operations(self) -> list[container_v1.Operation]:
        await self.cloud.enter("gke.operations")
        return sorted((_proto_copy(op) for op in self.cloud.operations),
                      key=lambda op: op.start_time)

    async def delete(self, *, expected_s: float) -> None:
        await self.cloud.enter("gke.delete")
        self.cloud.touch_cluster("DeleteCluster")
        if self.cloud.cluster is None:
            return
        await self.cloud.work("gke delete")
        self.cloud._delete_cluster_objects()
        self.cloud._operation("DELETE_CLUSTER", "", time.time())


class FakeIam:
    """rltui.cloud.iam.IamAdapter's methods (the budget guard's account and the two policies):
    accounts by email, policies as IAM's JSON with an etag that changes on every write; a
    write with a stale etag is refused as IAM does (409 ABORTED), and the read-modify-write
    helpers read again."""

    def __init__(self, cloud: FakeCloud) -> None:
        self.cloud = cloud
        self.accounts: dict[str, dict[str, Any]] = {}
        self.policies: dict[str, dict[str, Any]] = {"project": {"version": 1, "etag": "BwE0", "bindings": []}}

    def email(self, account_id: str) -> str:
        return f"{account_id}@{self.cloud.cfg.project_id}.iam.gserviceaccount.com"

    def seed_account(self, account_id: str, description: str) -> None:
        """An account as `rltui submit --down-after` leaves it: made, with its project role."""
        email = self.email(account_id)
        self.accounts[email] = {"email": email, "displayName": "rltui budget guard", "description": description}
        self.policies[email] = {"version": 1, "etag": "BwE0", "bindings": []}
        self.policies["project"]["bindings"].append({"role": plan_guard.GUARD_ROLE,
                                                     "members": [f"serviceAccount:{email}"]})

    async def account(self, email: str) -> dict[str, Any] | None:
        await self.cloud.enter("iam.get")
        found = self.accounts.get(email)
        return None if found is None else dict(found)

    async def create_account(self, account_id: str, *, display_name: str, description: str) -> dict[str, Any]:
        await self.cloud.enter("iam.create")
        email = self.email(account_id)
        self.accounts.setdefault(email, {"email": email, "displayName": display_name, "description": description})
        self.policies.setdefault(email, {"version": 1, "etag": "BwE0", "bindings": []})
        return dict(self.accounts[email])

    async def delete_account(self, email: str) -> bool:
        await self.cloud.enter("iam.delete")
        self.policies.pop(email, None)
        return self.accounts.pop(email, None) is not None

    async def _change(self, key: str, change: Callable[[dict[str, Any]], bool]) -> bool:
        policy = copy.deepcopy(self.policies[key])
        if not change(policy):
            return False
        if policy.get("etag") != self.policies[key].get("etag"):
            raise CloudError("409 ABORTED", transient=True, code="Aborted")
        policy["etag"] = f"BwE{int(str(policy['etag'])[3:] or 0) + 1}"
        self.policies[key] = policy
        return True

    async def project_policy(self) -> dict[str, Any]:
        return copy.deepcopy(self.policies["project"])

    async def change_project_policy(self, change: Callable[[dict[str, Any]], bool]) -> bool:
        await self.cloud.enter("iam.project_policy")
        return await self._change("project", change)

    async def change_account_policy(self, email: str, change: Callable[[dict[str, Any]], bool]) -> bool:
        await self.cloud.enter("iam.account_policy")
        return await self._change(email, change)


class FakeLustre:
    """rltui.cloud.lustre.LustreAdapter's methods the steps call: CREATING -> ACTIVE after
    `lustre_s`, DELETING -> gone after `op_s`; a late create failure lives in its operation."""

    def __init__(self, cloud: FakeCloud) -> None:
        self.cloud = cloud

    def _advance(self, instance_id: str) -> lustre_v1.Instance | None:
        c = self.cloud
        inst = c.instances.get(instance_id)
        due = c._timers.get(f"lustre/{instance_id}")
        if inst is None or due is None or c.now < due:
            return inst
        del c._timers[f"lustre/{instance_id}"]
        if inst.state == lustre_v1.Instance.State.DELETING:
            del c.instances[instance_id]
            return None
        if instance_id in c._op_error:   # the create failed late: the instance goes away
            del c.instances[instance_id]
            return None
        inst.state = lustre_v1.Instance.State.ACTIVE
        inst.mount_point = LUSTRE_MOUNT_POINT
        return inst

    async def list(self) -> list[lustre_v1.Instance]:
        await self.cloud.enter("lustre.list")
        return [_proto_copy(i) for i in self.cloud.instances.values()]

    async def get(self, instance_id: str) -> lustre_v1.Instance | None:
        await self.cloud.enter("lustre.get")
        if "lustre.googleapis.com" not in self.cloud.apis:
            return None
        inst = self._advance(instance_id)
        return None if inst is None else _proto_copy(inst)

    async def create(self, instance_id: str, *, capacity_gib: int, throughput: int, network: str,
                     filesystem: str = "lustre", labels: dict[str, str] | None = None
                     ) -> str | None:
        await self.cloud.enter("lustre.create")
        c = self.cloud
        c.require_api("lustre.googleapis.com")
        if instance_id in c.instances:
            return None
        if network not in c.peerings:
            raise CloudError(f"create Lustre instance {instance_id}: network {network} has no"
                             " private services access connection", transient=False,
                             code="FailedPrecondition")
        c.instances[instance_id] = lustre_v1.Instance(
            name=c._lustre_name(instance_id), state=lustre_v1.Instance.State.CREATING,
            capacity_gib=capacity_gib, per_unit_storage_throughput=throughput,
            filesystem=filesystem,
            network=f"projects/{c.cfg.project_id}/global/networks/{network}",
            labels={"managed-by": "rltui", **(labels or {})})
        c._timers[f"lustre/{instance_id}"] = c.now + c.lustre_s
        if c.lustre_late_failure:
            c._op_error[instance_id], c.lustre_late_failure = c.lustre_late_failure, None
        return f"projects/{c.cfg.project_id}/locations/{c.cfg.zone}/operations/op-{instance_id}"

    async def wait_active(self, instance_id: str, *, expected_s: float,
                          on_state: Callable[[str], None] | None = None,
                          timeout_s: float | None = None, op_name: str | None = None
                          ) -> lustre_v1.Instance:
        await self.cloud.enter("lustre.wait_active")
        last = ""
        deadline = self.cloud.now + 2.0
        while True:
            inst = await self.get(instance_id)
            if inst is None:
                failed = self.cloud._op_error.get(instance_id)
                if failed:
                    raise CloudError(f"Lustre create failed: {failed}", transient=False,
                                     code="rpc8")
                raise CloudError(f"Lustre instance {instance_id} does not exist", transient=True,
                                 code="NotFound")
            if inst.state.name != last and on_state:
                on_state(inst.state.name)
            last = inst.state.name
            if last == "ACTIVE":
                return inst
            if self.cloud.now > deadline:
                raise CloudError(f"Lustre instance {instance_id} not ACTIVE", transient=True,
                                 code="Timeout")
            await asyncio.sleep(0.002)

    async def delete(self, instance_id: str, *, expected_s: float,
                     on_state: Callable[[str], None] | None = None) -> None:
        await self.cloud.enter("lustre.delete")
        c = self.cloud
        if instance_id not in c.instances:
            return
        start = time.time()
        c.instances[instance_id].state = lustre_v1.Instance.State.DELETING
        c._timers[f"lustre/{instance_id}"] = c.now + c.op_s
        while (inst := await self.get(instance_id)) is not None:
            if on_state is not None:
                on_state(inst.state.name)
            await asyncio.sleep(0.002)
        c.spans["delete lustre"] = (start, time.time())


class FakeKube:
    """rltui.cloud.kube.KubeAdapter's methods the steps call (plain dicts, Secrets redacted).
    Unreachable unless the cluster is RUNNING or RECONCILING (GKE's upgrades keep the regional
    control plane answering)."""

    namespace = "default"

    def __init__(self, cloud: FakeCloud) -> None:
        self.cloud = cloud
        self.closed = False

    async def _enter(self, call: str) -> None:
        await self.cloud.enter(call)
        cluster = self.cloud.cluster
        if cluster is None or cluster.status.name not in ("RUNNING", "RECONCILING"):
            raise CloudError(f"{call}: connection problem: Cannot connect to host 10.0.0.2:443",
                             transient=True, code="ClientConnectorError")
        self.cloud.reconcile()

    async def apply(self, obj: dict) -> dict:
        await self._enter("kube.apply")
        c = self.cloud
        kind = kind_of(obj["kind"])
        name = obj["metadata"]["name"]
        if kind.plural == "rayclusters" and c.cluster is not None \
                and not c.cluster.addons_config.ray_operator_config.enabled:
            raise CloudError("apply RayCluster: Kubernetes API 404: the server could not find the"
                             " requested resource", transient=False, code="404")
        old = c.objects.get((kind.plural, name))
        if kind.plural == "persistentvolumes" and old is not None \
                and old["spec"].get("csi") != obj["spec"].get("csi"):
            raise CloudError(f"apply PersistentVolume {name}: Kubernetes API 422: spec."
                             "persistentvolumesource is immutable after creation",
                             transient=False, code="422")
        await c.work(f"apply {kind.plural}/{name}")
        return _redact(kind, copy.deepcopy(c._store(obj)))

    async def get(self, kind: str, name: str, namespace: str | None = None) -> dict | None:
        await self._enter("kube.get")
        k = kind_of(kind)
        found = self.cloud.objects.get((k.plural, name))
        return None if found is None else _redact(k, copy.deepcopy(found))

    async def list(self, kind: str, label_selector: str | None = None, *,
                   field_selector: str | None = None) -> list[dict]:
        await self._enter("kube.list")
        k = kind_of(kind)
        # Equality terms (`a=b,c=d`) or one set-based term (`a in (x,y)`), as the API server reads them.
        selector = label_selector or ""
        within: tuple[str, set[str]] | None = None
        if " in (" in selector:
            key, _, values = selector.partition(" in (")
            within, selector = (key.strip(), set(values.rstrip(")").split(","))), ""
        want = dict(p.split("=", 1) for p in selector.split(",") if p)
        out = []
        for (plural, _), obj in sorted(self.cloud.objects.items()):
            labels = obj.get("metadata", {}).get("labels") or {}
            if within is not None and labels.get(within[0]) not in within[1]:
                continue
            if plural == k.plural and all(labels.get(a) == b for a, b in want.items()):
                out.append(_redact(k, copy.deepcopy(obj)))
        return out

    async def pods_everywhere(self, field_selector: str | None = None) -> list[dict]:
        """KubeAdapter.pods_everywhere: the field selector `spec.nodeName=NODE` as the API
        server applies it."""
        await self._enter("kube.list_raw")
        fields = dict(p.split("=", 1) for p in (field_selector or "").split(",") if p)
        items = []
        for (plural, _), obj in sorted(self.cloud.objects.items()):
            spec = obj.get("spec") or {}
            if plural == "pods" and all(spec.get(f.split(".", 1)[1]) == v for f, v in fields.items()):
                items.append(copy.deepcopy(obj))
        return items

    async def delete(self, kind: str, name: str, *, wait: bool = True, timeout_s: float = 300.0,
                     namespace: str | None = None) -> None:
        await self._enter("kube.delete")
        c = self.cloud
        k = kind_of(kind)
        if (k.plural, name) not in c.objects:
            return
        if k.plural == "persistentvolumeclaims":
            users = [n for (p, n), pod in c.objects.items() if p == "pods" and any(
                (v.get("persistentVolumeClaim") or {}).get("claimName") == name
                for v in pod["spec"].get("volumes") or [])]
            if users:  # kubernetes.io/pvc-protection holds it while a pod uses it
                c.violations.append(f"PVC {name} deleted while pods {users} used it")
                raise CloudError(f"PersistentVolumeClaim {name} still exists {timeout_s:.0f} s"
                                 " after delete (a finalizer may be holding it)",
                                 transient=True, code="Timeout")
        await c.work(f"delete {k.plural}/{name}")
        del c.objects[(k.plural, name)]
        if k.plural == "rayclusters":   # KubeRay's owner references: its pods and services go
            for key in [key for key, o in c.objects.items() if key[0] in ("pods", "services")
                        and key[1].startswith(f"{name}-")]:
                del c.objects[key]

    async def wait_raycluster_ready(self, name: str, on_update: Callable[[Any], Any] | None = None,
                                    timeout_s: float = 1800.0) -> dict:
        await self._enter("kube.wait_raycluster_ready")
        last = None
        deadline = self.cloud.now + min(timeout_s, 1.0)
        while True:
            self.cloud.reconcile()
            rc = self.cloud.objects.get(("rayclusters", name))
            if rc is None:
                raise CloudError(f"RayCluster {name} not found: apply ray-cluster.yaml first",
                                 transient=False, code="NotFound")
            health = raycluster_health(rc)
            if health != last and on_update is not None:
                on_update(health)
            last = health
            if health.ready:
                return copy.deepcopy(rc)
            if self.cloud.now > deadline:
                raise CloudError(f"RayCluster {name} not ready ({health.message})",
                                 transient=True, code="Timeout")
            await asyncio.sleep(0.002)

    async def close(self) -> None:
        self.closed = True


class FakeForward:
    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True


@dataclass
class FakeContext(Context):
    """rltui's Context with the fake adapters in `_adapters` (Context._get returns them), and
    the dashboard's port-forward replaced by what it resolves: the head service, a Ready pod."""

    cloud: FakeCloud | None = None

    async def kube(self, cluster: Any = None, creds: Any = None) -> Any:
        """Connected on first use from the GKE cluster, as Context.kube and KubeAdapter.connect
        do (no cluster: the same refusal)."""
        if "kube" not in self._adapters:
            if await self.gke.get() is None:
                raise CloudError("no GKE cluster to connect to: is it created?", transient=False,
                                 code="NotFound")
            self._adapters["kube"] = FakeKube(self.cloud)
        return self._adapters["kube"]

    async def dashboard(self) -> str:
        if self.dashboard_url is None:
            kube = await self.kube()
            svc = await kube.get("services", self.cfg.head_service)
            if svc is None:
                raise CloudError(f"service {self.cfg.head_service} not found: is the RayCluster"
                                 " applied?", transient=True, code="NotFound")
            selector = ",".join(f"{k}={v}" for k, v in sorted(svc["spec"]["selector"].items()))
            if not await kube.list("pods", selector):
                raise CloudError(f"no Running and Ready pod behind service"
                                 f" {self.cfg.head_service} yet", transient=True, code="NotReady")
            self.dashboard_url = "http://127.0.0.1:48265"
            self._adapters["forward"] = FakeForward()
        return self.dashboard_url


def fake_context(cfg: RLConfig, tmp_path: Path, *, time_scale: float = 1e-4) -> FakeContext:
    """A FakeContext over an empty FakeCloud; `xpk` on PATH is the fake one."""
    bin_dir, ctl = tmp_path / "bin", tmp_path / "xpk-ctl"
    install_fake_xpk(bin_dir, ctl)
    endpoints = Endpoints(label="FAKE", tool_dirs=(bin_dir,),
                          tool_env={"FAKE_XPK_DIR": str(ctl)}, time_scale=time_scale)
    cloud = FakeCloud(cfg, ctl)
    adapters = {"network": FakeNetwork(cloud), "gke": FakeGke(cloud), "lustre": FakeLustre(cloud),
                "iam": FakeIam(cloud)}
    return FakeContext(cfg, endpoints, root=tmp_path / "state", _adapters=adapters, cloud=cloud)


def _seed_xpk(ctx: FakeContext) -> None:
    ctx.cloud.seed_cluster(labelled=True)
    ctx.cloud.seed_xpk_state(ctx.xpk_dir)


def _seed_pv_pvc(ctx: FakeContext) -> None:
    ip = manifests.lustre_ip(LUSTRE_MOUNT_POINT)
    ctx.cloud.seed_kube(manifests.persistent_volume(ctx.cfg, ip))
    ctx.cloud.seed_kube(manifests.persistent_volume_claim(ctx.cfg))


def _seed_raycluster(ctx: FakeContext) -> None:
    ctx.cloud.seed_kube(manifests.ray_cluster(ctx.cfg))
    ctx.cloud._timers[f"raycluster/{ctx.cfg.cluster_name}"] = 0.0   # started long ago
    ctx.cloud.reconcile()


# What each step's apply leaves in the project, made directly (the steps' own code not run).
SEEDS: dict[str, Callable[[FakeContext], None]] = {
    "enable_apis": lambda ctx: ctx.cloud.seed_apis(),
    "xpk_cluster": _seed_xpk,
    "network_ready": lambda ctx: ctx.cloud.seed_networks(),
    "ip_range": lambda ctx: ctx.cloud.seed_address(),
    "peering": lambda ctx: ctx.cloud.seed_peering(),
    "lustre_instance": lambda ctx: ctx.cloud.seed_lustre(),
    "lustre_firewall": lambda ctx: ctx.cloud.seed_lustre_rule(),
    "addons": lambda ctx: (ctx.cloud.cluster is None and _seed_xpk(ctx), ctx.cloud.seed_addons()),
    # Local, but connected only once xpk's control plane answers (it needs no xpk exit).
    "credentials": lambda ctx: ctx.cloud.cluster is None and _seed_xpk(ctx),
    "secret": lambda ctx: ctx.cloud.seed_kube(manifests.job_secret(ctx.cfg)),
    "pv_pvc": _seed_pv_pvc,
    "raycluster": _seed_raycluster,
    "dashboard": lambda ctx: None,        # local: a port-forward
    # Made by `rltui submit --down-after/--max-cost` (plan/guard.py), not by up.
    "guard_account": lambda ctx: ctx._adapters["iam"].seed_account(
        manifests_supervisor.guard_account_id(ctx.cfg), plan_guard.description(ctx.cfg)),
}


def seed(ctx: FakeContext, names: Any) -> None:
    """Make the project hold what these steps leave, in the given order."""
    for name in names:
        SEEDS[name](ctx)


def plan_xpk(ctx: FakeContext, *runs: dict) -> None:
    """How the next fake xpk runs behave, one dict each: {"exit": 1, "stderr": "...",
    "pause_s": 0.3 (after the networks), "pause_after_s": 0.3 (after the cluster, as Terraform
    goes on with its pools), "fail_op": "GKE's error", "leave": True (a delete that takes the
    cluster and leaves the rest of the blueprint)}; later runs succeed."""
    path = Path(ctx.endpoints.tool_env["FAKE_XPK_DIR"]) / "plan.json"
    path.write_text(json.dumps(list(runs)))


__all__ = [
    "CODELAB_APIS",
    "SEEDS",
    "FakeCloud",
    "FakeContext",
    "FakeGke",
    "FakeIam",
    "FakeKube",
    "FakeLustre",
    "FakeNetwork",
    "fake_context",
    "plan_xpk",
    "seed",
]


def b200_config(project: str, region: str = "us-east1", **more: str) -> Any:
    """The codelab's env.sh for a B200 cluster of two nodes in `project` (the plan tests' own)."""
    from rltui.config import parse_config

    return parse_config({
        "PROJECT_ID": project, "ZONE": f"{region}-b", "REGION": region, "CLUSTER_NAME": "ray-a4-gpu-spot",
        "LUSTRE_INSTANCE_ID": "rl-demo-gpu-lustre", "LUSTRE_CAPACITY": "9000",
        "HF_TOKEN": "hf_FAKEtokenDoNotShow0123456789", "NUM_NODES": "2", "GPUS_PER_NODE": "8",
        "DEVICE_TYPE": "b200-8", **more})


def quick_retry(seed: int, attempts: int = 4) -> Any:
    """A RetryPolicy whose waits are milliseconds, seeded."""
    import random

    from rltui.plan import RetryPolicy

    return RetryPolicy(attempts=attempts, base_s=0.002, cap_s=0.01, rng=random.Random(seed))


def inventory_context(config: Any, tmp_path: Any, monkeypatch: Any) -> Any:
    """A fake context for rltui/plan/inventory.py: no ADC token is fetched (the fake
    Kubernetes needs none)."""
    from rltui.plan import inventory

    async def no_token(ctx: Any) -> None:
        return None

    monkeypatch.setattr(inventory, "_fresh_credentials", no_token)
    return fake_context(config, tmp_path)
