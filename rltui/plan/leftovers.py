"""xpk's a4 blueprint as the cloud holds it, by the blueprint's names (plan/xpkstate.py
blueprint_names): found for status and down, and deleted by rltui when xpk cannot (its state
folder is lost) or did not (a failed `xpk cluster delete`) - only for a cluster that is
rltui's, which the callers decide.

Deleted in the order each refuses while the next one holds it: Cloud Routers first (a NAT is a
field of its router, compute.v1 Router.nats, and goes with it; a router keeps its network in
use), then the NAT IPs (a NAT holds its regional addresses), the firewall rules and the
subnetworks (each keeps its network in use: GCE's resourceInUseByAnotherResource), the
networks last.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from ..names import BlueprintNames, blueprint_names
from . import xpkstate
from .context import Context


@dataclass
class Leftovers:
    routers: list[Any] = field(default_factory=list)
    nat_ips: list[Any] = field(default_factory=list)
    firewalls: list[Any] = field(default_factory=list)
    subnets: list[Any] = field(default_factory=list)
    networks: list[Any] = field(default_factory=list)

    def names(self) -> list[str]:
        return [x.name for x in (*self.routers, *self.nat_ips, *self.firewalls, *self.subnets,
                                 *self.networks)]

    def __bool__(self) -> bool:
        return bool(self.names())


def select(names: BlueprintNames, routers: list[Any], addresses: list[Any],
           firewalls: list[Any], subnets: list[Any], networks: list[Any]) -> Leftovers:
    """The blueprint's own among the project's lists (by name only)."""
    def pick(items: list[Any], wanted: tuple[str, ...]) -> list[Any]:
        return sorted((x for x in items if x.name in wanted), key=lambda x: wanted.index(x.name))

    return Leftovers(pick(routers, names.routers), pick(addresses, names.nat_ips),
                     pick(firewalls, names.firewalls), pick(subnets, names.subnets),
                     pick(networks, names.networks))


async def find(ctx: Context, cluster: str | None = None) -> Leftovers:
    region = ctx.cfg.region
    names = blueprint_names(cluster or ctx.cfg.cluster_name, region)
    lists = await asyncio.gather(ctx.network.routers(region),
                                 ctx.network.regional_addresses(region),
                                 ctx.network.firewalls(), ctx.network.subnetworks(region),
                                 ctx.network.networks())
    return select(names, *lists)


async def delete(ctx: Context, left: Leftovers, line: Callable[[str], None]) -> None:
    """Each kind at once, the kinds in order; a kind's failure (after the rest of that kind
    was tried) stops the kinds after it, which it would keep in use."""
    region = ctx.cfg.region
    net = ctx.network
    await _all(line, [(f"router {r.name} (and its NAT)", net.delete_router(region, r.name))
                      for r in left.routers])
    await _all(line, [(f"NAT IP {a.name}", net.delete_regional_address(region, a.name))
                      for a in left.nat_ips])
    await _all(line, [(f"firewall rule {f.name}", net.delete_firewall(f.name))
                      for f in left.firewalls])
    await _all(line, [(f"subnetwork {s.name}", net.delete_subnetwork(region, s.name))
                      for s in left.subnets])
    await _all(line, [(f"network {n.name}", net.delete_network(n.name)) for n in left.networks])


async def _all(line: Callable[[str], None],
               calls: list[tuple[str, Coroutine[Any, Any, None]]]) -> None:
    for what, _ in calls:
        line(f"deleting {what}")
    results = await asyncio.gather(*(call for _, call in calls), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result


def made_by_own_create(xpk_dir: Any, left: Leftovers) -> bool:
    """What is left was made by the last xpk create rltui started in `xpk_dir`: each part
    that carries a creation time (compute's creationTimestamp: routers, addresses, firewall
    rules, subnetworks, networks) was created after that run began (xpkstate
    `made_by_own_create`), and at least one does. A blueprint of the same names that was
    there before (someone else's xpk) is older."""
    stamps = [str(getattr(x, "creation_timestamp", "") or "")
              for x in (*left.routers, *left.nat_ips, *left.firewalls, *left.subnets,
                        *left.networks)]
    stamps = [t for t in stamps if t]
    started = xpkstate.own_create_started(xpk_dir)
    return started is not None and bool(stamps) and \
        all(xpkstate.epoch(t) >= started for t in stamps)
