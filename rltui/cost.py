"""What the plan costs per hour, and what what exists has cost since it was made: an estimate.

Pure (no google, grpc or textual): the prices come in as `Prices` (rltui/cloud/billing.py reads
them from the Cloud Billing Catalog, `google.cloud.billing_v1.CloudCatalogClient`), the
resources as plan/inventory.py's `Resource`s (kind, present, `created`).

Which catalog SKUs price what (each `Want` below; matched by the SKU's service display name,
its description without the " running in <geography>" tail, and the plan's region in its
`service_regions`, as the public price crawlers do):

- The A4 Spot capacity: the catalog prices an a4-highgpu-8g as eight "(1 gpu slice)" SKUs that
  cover the GPU and the machine's share of vCPUs, memory and local SSD together; there are no
  separate A4 core or RAM SKUs. The Spot one is "Spot Preemptible A4 Nvidia B200 (1 gpu slice)
  running in Americas", resource group "GPU", and its usage_type is "OnDemand", not
  "Preemptible" (so the description, not the usage type, says Spot). Sources:
  dstackai/gpuhunt src/gpuhunt/providers/gcp.py (add_compute_gpu_slice_sku, get_instance_price:
  gpu_count x slice price); sparecores/sc-crawler tests (a4-highgpu-8g spot = 8 x 4.9542 USD,
  "This live SKU is categorized as OnDemand despite its description"); a public catalog review
  listing SKU 816D-DB2C-4A30 "Spot Preemptible A4 B200 slice", usage type OnDemand.
  CAPACITY (rltui/capacity.py) picks the slice: on demand, "A4 Nvidia B200 (1 gpu slice)"
  (SKU 3000-4751-0A45, the same sources); from a reservation, no SKU: reserved machines are
  billed at on-demand rates whether VMs use them or not (Compute Engine docs, "Reservations of
  Compute Engine zonal resources", billing), so the nodes add nothing while the reservation
  exists and their line says the cost is already committed.
- The CPU pool: xpk 1.16.0 on the Cluster Toolkit path makes a "system" pool of
  --default-pool-cpu-num-nodes (default 6) nodes of --default-pool-cpu-machine-type, which the
  codelab sets to e2-standard-4 (AI-Hypercomputer/xpk blueprint_generator.py, as
  sandbox/rltui_sandbox/world_xpk.py cites). e2-standard-4 is 4 vCPUs and 16 GB (Compute Engine's
  machine-types docs), priced by "E2 Instance Core running in Americas" (SKU CF4E-A0C7-E3BF, per
  vCPU-hour) and "E2 Instance Ram running in Americas" (per GiB-hour), Compute Engine
  (services/6F81-5844-456A).
- The GKE cluster fee: "Regional Kubernetes Clusters" (SKU B561-BFBD-1264, service_regions
  ["global"], 0.10 USD per cluster-hour) of Kubernetes Engine (services/CCD8-9BF1-090E); xpk's
  Toolkit cluster is regional. Source: infracost's google container_cluster resource (the
  description it filters on) and a public catalog fixture with those ids.
- Managed Lustre per GiB-hour at the plan's throughput tier (a SKU per GiB-month is converted:
  rltui/cloud/billing.py "Units"): NOT VERIFIED. No public catalog
  response for Managed Lustre was found; the service name and descriptions in `LUSTRE_SKU` are
  this project's guess and the sandbox's prices for them are invented.
- Cloud NAT and its addresses: Cluster Toolkit's vpc module (v1.94.0 modules/network/vpc, used
  for net-0 and net-1 by xpk's a4 blueprint) makes one Cloud Router per network and region with
  one NAT `cloud-nat-<region>` and `ips_per_nat` (default 2) static EXTERNAL regional addresses:
  2 NATs and 4 NAT IPs. Cloud NAT pricing (cloud.google.com/nat/pricing, Public NAT): the gateway
  is "$0.0014 * the number of VM instances that are using the gateway", capped at 32 VMs
  ($0.044/h), plus "$0.005" per hour for each external IP address used by a NAT gateway (data
  processed, $0.045/GiB, is left out with the rest of the traffic). In the catalog these are
  "Networking Cloud Nat Gateway Uptime" (SKU 32E2-4EFC-EF9F, per VM-hour) and "Networking Cloud
  NAT IP Usage" (8515-9425-D2CE, per IP-hour), both global, of the service "Networking"
  (services/E505-1604-58F8): the descriptions and ids as public catalog listings quote them from
  cloud.google.com/skus/sku-groups/nat-gateway; not read from a catalog response here. Which VMs
  get a NAT assignment: xpk 1.16.0 creates the cluster with private nodes off
  (`enable_private_nodes=bool(args.private)`, src/xpk/commands/cluster_gcluster.py; rltui passes
  no --private), so its nodes have external IPs and may use no NAT at all; the estimate counts
  every node that exists as using each NAT (an upper bound: at most 32 x $0.0014 a gateway).
  A NAT IP left RESERVED once its NAT is gone is billed as an unused static address, another SKU
  not looked up here: it is priced at the NAT IP rate all the same (not verified).

When GPU lines count: only for GPU nodes that exist, each from its own creation. The "GKE
cluster" Resource carries them in `gpu_nodes` (plan/inventory.py): one entry per node of the
plan's machine type, its creation time (RFC 3339) or "" when only GKE's node pool count is known.
`pool_gpu_nodes` reads that count from the GKE cluster the inventory already has: container.v1
NodePool has no create time, so a pool's nodes are `initial_node_count` per zone of its
`locations` (NodePool docs: "the initial node count for the pool"; xpk's A4 pool is a static
count) while its status is RUNNING, RUNNING_WITH_ERROR, RECONCILING or STOPPING (google-cloud-
container 2.67 NodePool.Status); PROVISIONING is left out (its VMs are being made: when each
starts is not known). The Kubernetes Nodes carrying `cloud.google.com/gke-accelerator`, when the
inventory reads them, give each node's `metadata.creationTimestamp` instead. A node without a time
is priced per hour and left out of `since_created`, which says so (`Estimate.notes`).

What it leaves out (say so where it is shown: "estimate"): boot disks, network egress and NAT data
processing, the nodes' own external IPs, the IP range (free while unused by a VM), Spot price
changes within the day the prices are cached, and the CPU pool's own start (its lines count from
the cluster's creation).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from .capacity import ON_DEMAND, RESERVATION, SPOT
from .config import DEVICE_TYPES, RLConfig

CACHE_TTL = timedelta(days=1)

COMPUTE = "Compute Engine"
GKE = "Kubernetes Engine"
LUSTRE = "Managed Lustre"  # not verified: the catalog's display name for Managed Lustre
NETWORKING = "Networking"
GLOBAL = "global"
# The inventory kinds (plan/inventory.py Resource.kind) that carry a price: the cluster (its fee,
# its GPU nodes and the system pool), the Lustre instance, the blueprint's NATs and NAT IPs.
CLUSTER, LUSTRE_INSTANCE, NAT, NAT_IP = "GKE cluster", "Lustre instance", "Cloud NAT", "NAT IP"
PRICED_KINDS = (CLUSTER, LUSTRE_INSTANCE, NAT, NAT_IP)

# xpk 1.16.0's system pool (see the module docstring): its default node count and the codelab's
# machine type, which rltui passes (plan/steps_cluster.py).
SYSTEM_POOL_NODES = 6
SYSTEM_POOL_MACHINE = "e2-standard-4"
# machine type -> (vCPUs, GiB of memory): the Compute Engine machine-types docs say "GB"; the
# E2 RAM SKU's unit is GiBy.h (sc-crawler's tests), taken here as GiB.
CPU_MACHINES = {"e2-standard-4": (4, 16)}
# GPU machine type -> the prefix of its slice SKU (one per GPU), Spot and on demand. Only A4 is known.
SPOT_SLICES = {"a4-highgpu-8g": "Spot Preemptible A4 Nvidia B200 (1 gpu slice)"}
ON_DEMAND_SLICES = {"a4-highgpu-8g": "A4 Nvidia B200 (1 gpu slice)"}
# The blueprint's Cloud NATs (one per vpc module: net-0, net-1) and its IPs per NAT (the vpc
# module's ips_per_nat default), and Cloud NAT's per-VM cap (see the module docstring).
BLUEPRINT_NATS = 2
NAT_IPS_PER_NAT = 2
NAT_VM_CAP = 32
# NodePool.Status names whose nodes exist (see the module docstring).
POOL_UP = frozenset({"RUNNING", "RUNNING_WITH_ERROR", "RECONCILING", "STOPPING"})


def lustre_sku(tier: int) -> str:
    """The description of Managed Lustre's capacity SKU for a tier (not verified: see above)."""
    return f"Managed Lustre {tier} MBps per TiB Capacity"


@dataclass(frozen=True)
class Want:
    """One price to find: the SKU of `service` whose description starts with `description`
    and that is offered in `region` (or "global"). Its rate is wanted per hour of one thing
    (`quantity` "") or per GiB-hour (`quantity` "GiBy"); `hourly_use` is how many of those the
    plan uses at once, which decides whether it passes a SKU's free allowance
    (rltui/cloud/billing.py, "Tiers")."""

    key: str
    service: str
    description: str
    region: str
    quantity: str = ""
    hourly_use: float = 1.0


def wanted(cfg: RLConfig) -> list[Want]:
    """The SKUs the plan's estimate needs, in its region."""
    cores, gib = CPU_MACHINES[SYSTEM_POOL_MACHINE]
    vms = min(NAT_VM_CAP, cfg.num_nodes + SYSTEM_POOL_NODES)
    out = [Want("gke", GKE, "Regional Kubernetes Clusters", GLOBAL),
           Want("cpu-core", COMPUTE, "E2 Instance Core", cfg.region,
                hourly_use=SYSTEM_POOL_NODES * cores),
           Want("cpu-ram", COMPUTE, "E2 Instance Ram", cfg.region, "GiBy", SYSTEM_POOL_NODES * gib),
           Want("lustre", LUSTRE, lustre_sku(cfg.lustre_throughput), cfg.region, "GiBy",
                float(cfg.lustre_capacity)),
           Want("nat-gateway", NETWORKING, "Networking Cloud Nat Gateway Uptime", GLOBAL,
                hourly_use=BLUEPRINT_NATS * vms),
           Want("nat-ip", NETWORKING, "Networking Cloud NAT IP Usage", GLOBAL,
                hourly_use=BLUEPRINT_NATS * NAT_IPS_PER_NAT)]
    machine = DEVICE_TYPES[cfg.device_type].machine_type
    mode = cfg.capacity_type.mode
    slices = {SPOT: SPOT_SLICES, ON_DEMAND: ON_DEMAND_SLICES}.get(mode, {})
    if machine in slices:
        out.append(Want(slice_key(machine, mode), COMPUTE, slices[machine], cfg.region,
                        hourly_use=cfg.num_nodes * cfg.gpus_per_node))
    return out


def slice_key(machine: str, mode: str = SPOT) -> str:
    """The rate key of a GPU machine's slice in a capacity mode: its price cannot stand for
    another machine's or another mode's."""
    return f"gpu-slice:{machine}" if mode == SPOT else f"gpu-slice:{mode}:{machine}"


def _node_price(cfg: RLConfig, prices: Prices) -> float | None:
    """One GPU node-hour: its slices at the mode's rate; 0 from a reservation (already paid for)."""
    cap = cfg.capacity_type
    if cap.mode == RESERVATION:
        return 0.0
    slice_price = prices.rates.get(slice_key(DEVICE_TYPES[cfg.device_type].machine_type, cap.mode))
    return None if slice_price is None else cfg.gpus_per_node * slice_price


class SkuLike(Protocol):
    """A billing_v1 Sku, as far as `matches` reads it."""

    @property
    def description(self) -> str: ...

    @property
    def service_regions(self) -> Any: ...


def matches(want: Want, sku: SkuLike) -> bool:
    """Whether a catalog SKU is the one `want` names (its description up to " running in")."""
    desc = sku.description
    head = desc.split(" running in ", 1)[0]
    return head == want.description and want.region in list(sku.service_regions)


def money(units: int, nanos: int) -> float:
    """google.type.Money: whole units plus nanos (10^-9) of the currency."""
    return units + nanos / 1e9


@dataclass(frozen=True)
class Prices:
    """Unit prices per hour by `Want.key`, in one currency, as read at `as_of` (UTC ISO)."""

    rates: Mapping[str, float]
    currency: str = "USD"
    as_of: str = ""
    source: str = ""  # "Cloud Billing Catalog" or the sandbox's label
    missing: tuple[str, ...] = field(default=())  # keys the catalog had no SKU (or no usable rate) for

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["rates"], d["missing"] = dict(self.rates), list(self.missing)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Prices:
        return cls(rates={str(k): float(v) for k, v in dict(d["rates"]).items()},
                   currency=str(d.get("currency") or "USD"), as_of=str(d.get("as_of") or ""),
                   source=str(d.get("source") or ""), missing=tuple(d.get("missing") or ()))

    def covers(self, wants: Iterable[Want]) -> bool:
        """Whether every wanted key was asked for: priced, or named missing."""
        return all(w.key in self.rates or w.key in self.missing for w in wants)


# How a line's resources are counted in what exists (see `estimate`).
PER_RESOURCE = "resource"   # each present resource of the line's kind, from its `created`
PER_GPU_NODE = "gpu node"   # each entry of the present cluster's `gpu_nodes`, from its own time
PER_NAT = "nat"             # each present Cloud NAT, per VM that may use it (the nodes that exist)


@dataclass(frozen=True)
class Line:
    """One priced part of the plan: `kind` is the inventory Resource kind it lives on;
    `per_hour` is the whole plan's figure, `unit` the price of one of what `meter` counts."""

    kind: str
    label: str
    per_hour: float | None  # None: the catalog had no price for it
    unit: float | None = None
    meter: str = PER_RESOURCE


def plan_lines(cfg: RLConfig, prices: Prices) -> list[Line]:
    """What each part of the plan costs per hour while it exists."""
    r = prices.rates
    machine = DEVICE_TYPES[cfg.device_type].machine_type
    gpus = cfg.num_nodes * cfg.gpus_per_node
    node = _node_price(cfg, prices)
    cap = cfg.capacity_type
    how = f"from reservation {cap.reservation}, already committed" if cap.mode == RESERVATION else cap.words()
    cores, gib = CPU_MACHINES[SYSTEM_POOL_MACHINE]
    cpu = (SYSTEM_POOL_NODES * (cores * r["cpu-core"] + gib * r["cpu-ram"])
           if "cpu-core" in r and "cpu-ram" in r else None)
    lustre = r.get("lustre")
    nat_vm, nat_ip = r.get("nat-gateway"), r.get("nat-ip")
    vms = min(NAT_VM_CAP, cfg.num_nodes + SYSTEM_POOL_NODES)
    ips = BLUEPRINT_NATS * NAT_IPS_PER_NAT

    def times(n: float, price: float | None) -> float | None:
        return None if price is None else n * price

    return [
        Line(CLUSTER, "GKE cluster fee", r.get("gke"), r.get("gke")),
        Line(CLUSTER, f"{cfg.num_nodes} x {machine} {how} ({gpus} GPUs)", times(cfg.num_nodes, node),
             node, PER_GPU_NODE),
        Line(CLUSTER, f"{SYSTEM_POOL_NODES} x {SYSTEM_POOL_MACHINE} (xpk's system pool)", cpu, cpu),
        Line(LUSTRE_INSTANCE, f"Lustre {cfg.lustre_capacity} GiB at {cfg.lustre_throughput} MB/s/TiB",
             times(cfg.lustre_capacity, lustre), times(cfg.lustre_capacity, lustre)),
        Line(NAT, f"{BLUEPRINT_NATS} Cloud NAT gateways (at most {vms} VMs each)",
             times(BLUEPRINT_NATS * vms, nat_vm), nat_vm, PER_NAT),
        Line(NAT_IP, f"{ips} NAT IPs (static, used by Cloud NAT)", times(ips, nat_ip), nat_ip),
    ]


def gpu_node_hour(cfg: RLConfig, prices: Prices) -> float | None:
    """One GPU node-hour of the plan's machine, as `plan_lines` prices it (its slices at the
    capacity mode's rate, one per GPU; 0 from a reservation); None when the catalog had no
    price. The budget guard's rate (plan/guard.py)."""
    return _node_price(cfg, prices)


def pool_gpu_nodes(cluster: Any, machine: str) -> tuple[str, ...]:
    """The GPU nodes a container.v1 Cluster's node pools say exist, one "" (no creation time)
    each: pools of `machine` whose status is up (see the module docstring). For the inventory's
    "GKE cluster" Resource (`gpu_nodes`); None: no cluster, no node."""
    if cluster is None:
        return ()
    count = 0
    for pool in getattr(cluster, "node_pools", None) or ():
        status = getattr(getattr(pool, "status", None), "name", "")
        if pool.config.machine_type == machine and status in POOL_UP:
            count += int(pool.initial_node_count) * max(1, len(pool.locations))
    return ("",) * count


class ResourceLike(Protocol):
    """plan/inventory.py's Resource, as far as the estimate reads it."""

    @property
    def kind(self) -> str: ...

    @property
    def created(self) -> str: ...

    @property
    def present(self) -> bool: ...

    @property
    def leak(self) -> bool: ...

    @property
    def gpu_nodes(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Estimate:
    per_hour: float            # of what exists now (0 when nothing priced exists)
    since_created: float       # what that has cost since each part was created
    currency: str
    as_of: str                 # when the prices were read
    plan_per_hour: float       # of the whole plan while it runs (before `up`)
    unpriced: tuple[str, ...] = ()       # lines that exist and that the catalog had no price for
    plan_unpriced: tuple[str, ...] = ()  # the plan's lines without a price (left out of plan_per_hour)
    notes: tuple[str, ...] = ()          # what since_created leaves out, and why

    def as_json(self) -> dict[str, Any]:
        return {"per_hour": round(self.per_hour, 4), "since_created": round(self.since_created, 4),
                "currency": self.currency, "as_of": self.as_of, "estimate": True,
                "unpriced": list(self.unpriced), "notes": list(self.notes)}


def _parse_time(text: str) -> datetime | None:
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _hours(created: str, now: datetime) -> float | None:
    t = _parse_time(created)
    return None if t is None else max(0.0, (now - t).total_seconds()) / 3600.0


def estimate(cfg: RLConfig, prices: Prices, resources: Iterable[ResourceLike],
             now: datetime | None = None) -> Estimate:
    """The plan's resources that exist (not leaks: the plan's config does not price them),
    priced by `plan_lines`: each line's `meter` counts them (resources of its kind, the
    cluster's GPU nodes, or the NATs per node that may use them), each from its own creation
    time; one without a time adds to per_hour, not to since_created, and is named in `notes`.
    A line whose resources exist and whose price is missing is named in `unpriced`."""
    now = now or datetime.now(UTC)
    lines = plan_lines(cfg, prices)
    present = [r for r in resources if r.present and not r.leak]
    cluster = next((r for r in present if r.kind == CLUSTER), None)
    gpu_nodes = tuple(getattr(cluster, "gpu_nodes", ()) or ()) if cluster is not None else ()
    nodes = len(gpu_nodes) + (SYSTEM_POOL_NODES if cluster is not None else 0)
    per_hour = since = 0.0
    unpriced: list[str] = []
    untimed: dict[str, int] = {}
    for line in lines:
        # (hourly price, creation time) of each counted thing
        if line.meter == PER_GPU_NODE:
            items = [(1.0, t) for t in gpu_nodes]
        elif line.meter == PER_NAT:
            items = [(float(min(NAT_VM_CAP, nodes)), r.created) for r in present if r.kind == line.kind]
        else:
            items = [(1.0, r.created) for r in present if r.kind == line.kind]
        if not items:
            continue
        if line.unit is None:
            unpriced.append(line.label)
            continue
        for units, created in items:
            rate = units * line.unit
            per_hour += rate
            hours = _hours(created, now)
            if hours is None:
                if rate > 0:
                    untimed[line.label] = untimed.get(line.label, 0) + 1
            else:
                since += rate * hours
    notes = tuple(f"since created leaves out {n} of {label}: creation time not known"
                  for label, n in untimed.items())
    return Estimate(per_hour=per_hour, since_created=since, currency=prices.currency,
                    as_of=prices.as_of,
                    plan_per_hour=sum(x.per_hour for x in lines if x.per_hour is not None),
                    unpriced=tuple(unpriced),
                    plan_unpriced=tuple(x.label for x in lines if x.per_hour is None),
                    notes=notes)


def fmt_money(amount: float, currency: str = "USD") -> str:
    """"$41.20", "$1,234", "$0.13"; another currency by its code ("41.20 EUR")."""
    text = f"{amount:,.0f}" if amount >= 1000 else f"{amount:,.2f}"
    return f"${text}" if currency == "USD" else f"{text} {currency}"


def per_hour_text(amount: float, currency: str = "USD") -> str:
    return f"{fmt_money(amount, currency)}/h"


def unpriced_text(labels: Iterable[str]) -> str:
    """"no price for: A; B" (the lines left out of a figure), "" when none is."""
    names = list(labels)
    return f"no price for: {'; '.join(names)}" if names else ""


# --- the day-long cache (a JSON file: prices are public, no secret in it) -----------------------

def cache_file(cache_dir: Path, cfg: RLConfig, catalog: str) -> Path:
    """One file per catalog ("google", "sandbox"), region, machine and tier (what `wanted`
    depends on)."""
    machine = DEVICE_TYPES[cfg.device_type].machine_type
    return cache_dir / f"prices-{catalog}-{cfg.region}-{machine}-{cfg.lustre_throughput}.json"


def load_cached(path: Path, now: datetime | None = None, ttl: timedelta = CACHE_TTL,
                source: str | None = None, wants: Iterable[Want] | None = None) -> Prices | None:
    """The cached prices when younger than `ttl` (and read from `source`, when given). They
    hold what the catalog had and which keys it had not (`missing`): a partial answer is kept
    for the same day, not asked again on every read. With `wants`, a cache that did not ask for
    one of them (written before that key existed) is not used."""
    try:
        prices = Prices.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    read = _parse_time(prices.as_of)
    if read is None or (now or datetime.now(UTC)) - read > ttl:
        return None
    if source is not None and prices.source != source:
        return None
    if wants is not None and not prices.covers(wants):
        return None
    return prices


def save_cached(path: Path, prices: Prices) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(prices.as_json(), indent=1), encoding="utf-8")
    os.replace(tmp, path)
