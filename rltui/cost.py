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
- The CPU pool: xpk 1.16.0 on the Cluster Toolkit path makes a "system" pool of
  --default-pool-cpu-num-nodes (default 6) nodes of --default-pool-cpu-machine-type, which the
  codelab sets to e2-standard-4 (AI-Hypercomputer/xpk blueprint_generator.py, as
  rltui/sandbox/world_xpk.py cites). e2-standard-4 is 4 vCPUs and 16 GB (Compute Engine's
  machine-types docs), priced by "E2 Instance Core running in Americas" (SKU CF4E-A0C7-E3BF, per
  vCPU-hour) and "E2 Instance Ram running in Americas" (per GiB-hour), Compute Engine
  (services/6F81-5844-456A).
- The GKE cluster fee: "Regional Kubernetes Clusters" (SKU B561-BFBD-1264, service_regions
  ["global"], 0.10 USD per cluster-hour) of Kubernetes Engine (services/CCD8-9BF1-090E); xpk's
  Toolkit cluster is regional. Source: infracost's google container_cluster resource (the
  description it filters on) and a public catalog fixture with those ids.
- Managed Lustre per GiB-hour at the plan's throughput tier: NOT VERIFIED. No public catalog
  response for Managed Lustre was found; the service name and descriptions in `LUSTRE_SKU` are
  this project's guess and the sandbox's prices for them are invented.

What it leaves out (say so where it is shown: "estimate"): boot disks, network egress, the IP
range (free while unused by a VM), Spot price changes within the day the prices are cached, and
the time a node pool takes to come up (the cluster's lines count from the cluster's creation).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from .config import DEVICE_TYPES, RLConfig

CACHE_TTL = timedelta(days=1)

COMPUTE = "Compute Engine"
GKE = "Kubernetes Engine"
LUSTRE = "Managed Lustre"  # not verified: the catalog's display name for Managed Lustre
GLOBAL = "global"
# The inventory kinds (plan/inventory.py Resource.kind) that carry a price: the cluster (its fee
# and both node pools) and the Lustre instance.
CLUSTER, LUSTRE_INSTANCE = "GKE cluster", "Lustre instance"
PRICED_KINDS = (CLUSTER, LUSTRE_INSTANCE)

# xpk 1.16.0's system pool (see the module docstring): its default node count and the codelab's
# machine type, which rltui passes (plan/steps_cluster.py).
SYSTEM_POOL_NODES = 6
SYSTEM_POOL_MACHINE = "e2-standard-4"
# machine type -> (vCPUs, GiB of memory): the Compute Engine machine-types docs say "GB"; the
# E2 RAM SKU's unit is GiBy.h (sc-crawler's tests), taken here as GiB.
CPU_MACHINES = {"e2-standard-4": (4, 16)}
# GPU machine type -> the prefix of its Spot slice SKU (one per GPU). Only A4 is known.
SPOT_SLICES = {"a4-highgpu-8g": "Spot Preemptible A4 Nvidia B200 (1 gpu slice)"}


def lustre_sku(tier: int) -> str:
    """The description of Managed Lustre's capacity SKU for a tier (not verified: see above)."""
    return f"Managed Lustre {tier} MBps per TiB Capacity"


@dataclass(frozen=True)
class Want:
    """One price to find: the SKU of `service` whose description starts with `description`
    and that is offered in `region` (or "global")."""

    key: str
    service: str
    description: str
    region: str


def wanted(cfg: RLConfig) -> list[Want]:
    """The SKUs the plan's estimate needs, in its region."""
    out = [Want("gke", GKE, "Regional Kubernetes Clusters", GLOBAL),
           Want("cpu-core", COMPUTE, "E2 Instance Core", cfg.region),
           Want("cpu-ram", COMPUTE, "E2 Instance Ram", cfg.region),
           Want("lustre", LUSTRE, lustre_sku(cfg.lustre_throughput), cfg.region)]
    machine = DEVICE_TYPES[cfg.device_type].machine_type
    if machine in SPOT_SLICES:
        out.append(Want(slice_key(machine), COMPUTE, SPOT_SLICES[machine], cfg.region))
    return out


def slice_key(machine: str) -> str:
    """The rate key of a GPU machine's Spot slice: its price cannot stand for another's."""
    return f"gpu-slice:{machine}"


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
    missing: tuple[str, ...] = field(default=())  # keys the catalog had no SKU for

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["rates"], d["missing"] = dict(self.rates), list(self.missing)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Prices:
        return cls(rates={str(k): float(v) for k, v in dict(d["rates"]).items()},
                   currency=str(d.get("currency") or "USD"), as_of=str(d.get("as_of") or ""),
                   source=str(d.get("source") or ""), missing=tuple(d.get("missing") or ()))


@dataclass(frozen=True)
class Line:
    """One priced part of the plan: `kind` is the inventory Resource kind it lives on."""

    kind: str
    label: str
    per_hour: float | None  # None: the catalog had no price for it


def plan_lines(cfg: RLConfig, prices: Prices) -> list[Line]:
    """What each part of the plan costs per hour while it exists."""
    r = prices.rates
    machine = DEVICE_TYPES[cfg.device_type].machine_type
    gpus = cfg.num_nodes * cfg.gpus_per_node
    slice_price = r.get(slice_key(machine))
    cores, gib = CPU_MACHINES[SYSTEM_POOL_MACHINE]
    cpu = (SYSTEM_POOL_NODES * (cores * r["cpu-core"] + gib * r["cpu-ram"])
           if "cpu-core" in r and "cpu-ram" in r else None)
    lustre = r.get("lustre")
    return [
        Line(CLUSTER, "GKE cluster fee", r.get("gke")),
        Line(CLUSTER, f"{cfg.num_nodes} x {machine} Spot ({gpus} GPUs)",
             None if slice_price is None else gpus * slice_price),
        Line(CLUSTER, f"{SYSTEM_POOL_NODES} x {SYSTEM_POOL_MACHINE} (xpk's system pool)", cpu),
        Line(LUSTRE_INSTANCE, f"Lustre {cfg.lustre_capacity} GiB at {cfg.lustre_throughput} MB/s/TiB",
             None if lustre is None else cfg.lustre_capacity * lustre),
    ]


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


@dataclass(frozen=True)
class Estimate:
    per_hour: float            # of what exists now (0 when nothing priced exists)
    since_created: float       # what that has cost since each part was created
    currency: str
    as_of: str                 # when the prices were read
    plan_per_hour: float       # of the whole plan while it runs (before `up`)
    unpriced: tuple[str, ...] = ()  # labels the catalog had no price for

    def as_json(self) -> dict[str, Any]:
        return {"per_hour": round(self.per_hour, 4), "since_created": round(self.since_created, 4),
                "currency": self.currency, "as_of": self.as_of, "estimate": True}


def _parse_time(text: str) -> datetime | None:
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def estimate(cfg: RLConfig, prices: Prices, resources: Iterable[ResourceLike],
             now: datetime | None = None) -> Estimate:
    """The plan's resources that exist (not leaks: the plan's config does not price them),
    priced by `plan_lines`; since_created from each resource's creation time (none: 0)."""
    now = now or datetime.now(UTC)
    lines = plan_lines(cfg, prices)
    by_kind = {r.kind: r for r in resources if r.present and not r.leak}
    per_hour = since = 0.0
    for line in lines:
        res = by_kind.get(line.kind)
        if res is None or line.per_hour is None:
            continue
        per_hour += line.per_hour
        created = _parse_time(res.created)
        if created is not None:
            since += line.per_hour * max(0.0, (now - created).total_seconds()) / 3600.0
    return Estimate(per_hour=per_hour, since_created=since, currency=prices.currency,
                    as_of=prices.as_of,
                    plan_per_hour=sum(x.per_hour for x in lines if x.per_hour is not None),
                    unpriced=tuple(x.label for x in lines if x.per_hour is None))


def fmt_money(amount: float, currency: str = "USD") -> str:
    """"$41.20", "$1,234", "$0.13"; another currency by its code ("41.20 EUR")."""
    text = f"{amount:,.0f}" if amount >= 1000 else f"{amount:,.2f}"
    return f"${text}" if currency == "USD" else f"{text} {currency}"


def per_hour_text(amount: float, currency: str = "USD") -> str:
    return f"{fmt_money(amount, currency)}/h"


# --- the day-long cache (a JSON file: prices are public, no secret in it) -----------------------

def cache_file(cache_dir: Path, cfg: RLConfig, catalog: str) -> Path:
    """One file per catalog ("google", "sandbox"), region, machine and tier (what `wanted`
    depends on)."""
    machine = DEVICE_TYPES[cfg.device_type].machine_type
    return cache_dir / f"prices-{catalog}-{cfg.region}-{machine}-{cfg.lustre_throughput}.json"


def load_cached(path: Path, now: datetime | None = None, ttl: timedelta = CACHE_TTL,
                source: str | None = None) -> Prices | None:
    """The cached prices when younger than `ttl` (and read from `source`, when given)."""
    try:
        prices = Prices.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    read = _parse_time(prices.as_of)
    if read is None or (now or datetime.now(UTC)) - read > ttl:
        return None
    if source is not None and prices.source != source:
        return None
    return prices


def save_cached(path: Path, prices: Prices) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(prices.as_json(), indent=1), encoding="utf-8")
    os.replace(tmp, path)

