"""The Lustre chain: xpk's network, the IP range, the Service Networking peering, the Managed
Lustre instance, and the firewall rule that lets the nodes reach it. It waits only for xpk's
network, not for xpk to finish."""

from __future__ import annotations

from shlex import join
from typing import Any

from ..cloud.errors import CloudError
from ..names import BlueprintNames, blueprint_names
from . import xpkstate
from .context import Context
from .ownership import (
    MANAGED_BY,
    RULE_MARK,
    address_marked,
    hand_delete,
    lustre_rule_name,
    marked,
    not_rltuis,
    peering_marked,
    rule_marked,
)
from .step import Kept, PermanentError, Probe, StepOutput, TransientError
from .steps_base import XPK_WAIT_ATTEMPTS, ContextStep


class NetworkReadyStep(ContextStep):
    """Waits for the VPC network xpk makes first, so the Lustre chain starts early; the wait
    ends as soon as no xpk is at work to make it (ContextStep.wait_for_xpk). On xpk's own
    `<c>-net-0` it waits for the blueprint's subnetwork `<c>-sub-0` too: the IP range's /24 is
    allocated from what the network leaves free when it is inserted (IpRangeStep gives no
    address), and the blueprint's subnet has fixed ranges (192.168.0.0/18, secondary
    10.4.0.0/14 and 10.0.32.0/20: xpk src/xpk/core/blueprint/blueprint_generator.py
    generate_a4_blueprint, lines 681-699 at the mirrored commit 367c8382) that Terraform adds
    a moment after the network: a range taken before them could collide.

    Down: what is left of xpk's blueprint after the cluster's row (XpkClusterStep), deleted
    by the blueprint's names (plan/leftovers.py): everything, when xpk's state folder is lost
    and the cluster was rltui's (it went through the GKE API), or what a failed `xpk cluster
    delete` left. Only for a blueprint that is rltui's (XpkClusterStep.blueprint_owned: its
    cluster is, or was recorded as rltui's). Once nothing of it is left and the cluster is
    gone, rltui's record of the cluster is forgotten (plan/xpkstate.py `forget_owned`).
    """

    name, title = "network_ready", "Network ready"
    needs = ("enable_apis",)
    expected_key = "xpk_networks"
    max_attempts = XPK_WAIT_ATTEMPTS
    # After the cluster's row; a Lustre instance that could not go keeps its network.
    destroy_needs = ("xpk_cluster", "lustre_instance")
    # They hold the network too; a refusal there does not stop the rest from going.
    destroy_after = ("peering", "ip_range", "lustre_firewall")

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        from .steps_cluster import XpkClusterStep

        # Nothing left after xpk's delete; without xpk's state, the blueprint's part of xpk's
        # delete (the profile's xpk_delete less its GKE part).
        k8s = ctx.expected("k8s_apply")
        self.destroy_expected_s = k8s if XpkClusterStep(ctx).has_xpk_state(ctx) else max(
            ctx.expected("xpk_delete") - ctx.expected("gke_cluster_delete"), k8s)

    def _names(self) -> BlueprintNames:
        return blueprint_names(self.cfg.cluster_name, self.cfg.region)

    def down_title(self) -> str:
        n = self._names().networks
        c = self.cfg.cluster_name
        return (f"VPC networks {n[0]}, " + ", ".join(x[len(c):] for x in n[1:])
                + ", their routers and NAT IPs (what is left)")

    def down_command(self) -> str:
        return ""   # `xpk cluster delete` (the cluster's row) removes them

    async def down_probe(self, ctx: Context) -> Probe:
        from . import leftovers
        from .steps_cluster import XpkClusterStep

        left = await leftovers.find(ctx)
        if left:
            return Probe(exists=True, detail=", ".join(left.names()))
        if await ctx.gke.get() is None:
            xpkstate.forget_owned(ctx.xpk_dir)   # the teardown is complete
        gone = "none left: xpk cluster delete removed them" \
            if XpkClusterStep(ctx).has_xpk_state(ctx) and ctx.owned_networks \
            else "nothing to delete"
        return Probe(exists=False, detail=gone)

    async def destroy(self, ctx: Context, out: StepOutput) -> str:
        from . import leftovers
        from .steps_cluster import XpkClusterStep

        gke = XpkClusterStep(ctx)
        c = self.cfg
        hand = join(["xpk", "cluster", "delete", f"--project={c.project_id}", f"--zone={c.zone}",
                     f"--cluster={c.cluster_name}"])
        cluster = await ctx.gke.get()
        if cluster is not None:
            if gke.owns(ctx, cluster):
                raise TransientError(f"cluster {c.cluster_name} is still there: its blueprint"
                                     " goes with it")
            raise Kept(not_rltuis(f"they belong to cluster {c.cluster_name}, which is not"
                                  " rltui's; delete them with xpk from the folder it ran in",
                                  hand))
        left = await leftovers.find(ctx)
        if not gke.blueprint_owned(ctx, None, left):
            raise Kept(not_rltuis(f"left from a cluster rltui has no record of"
                                  f" ({xpkstate.owned_path(ctx.xpk_dir)}), no cluster of"
                                  " rltui's was deleted with them, and rltui's last xpk run did"
                                  " not make them; if xpk made them, delete them with xpk from"
                                  " the folder it ran in", hand))
        out.note("deleting what is left of xpk's blueprint by its names: "
                 + ", ".join(left.names()))
        await leftovers.delete(ctx, left, out.line)
        xpkstate.forget_owned(ctx.xpk_dir)       # the teardown is complete
        return "deleted by rltui, by the blueprint's names"

    def command(self) -> str:
        return join(["gcloud", "compute", "networks", "describe", self.cfg.network,
                     f"--project={self.cfg.project_id}"])

    def _subnet(self) -> str | None:
        """The blueprint's subnetwork of the plan's network when that network is xpk's net-0
        (`<c>-sub-0`); None for a network of the user's."""
        names = self._names()
        return names.subnets[0] if self.cfg.network == names.networks[0] else None

    def _what(self) -> str:
        sub = self._subnet()
        return (f"subnetwork {sub} of network " if sub else "network ") + self.cfg.network

    async def _made(self, ctx: Context) -> Any:
        """The network once it (and the blueprint's subnetwork on it) exists, else None."""
        network = await ctx.network.network(self.cfg.network)
        sub = self._subnet()
        if network is None or sub is None:
            return network
        return network if await ctx.network.subnetwork(self.cfg.region, sub) is not None \
            else None

    async def probe(self, ctx: Context) -> Probe:
        if await ctx.network.network(self.cfg.network) is None:
            return Probe(exists=False)
        if await self._made(ctx) is None:
            return Probe(exists=True, ready=False, detail=f"subnetwork {self._subnet()} not"
                                                          " made yet")
        return Probe(exists=True)

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        interval = max(0.2, min(10.0, self.expected_s / 20))
        await self.wait_for_xpk(ctx, out, self._what(), lambda: self._made(ctx),
                                interval_s=interval)


class IpRangeStep(ContextStep):
    name, title = "ip_range", "IP range"
    needs = ("network_ready",)
    expected_key, destroy_key = "address_create", "address_delete"

    def down_title(self) -> str:
        return f"IP range {self.cfg.address_name}"

    def command(self) -> str:
        c = self.cfg
        return join(["gcloud", "compute", "addresses", "create", c.address_name, "--global",
                     "--purpose=VPC_PEERING", "--prefix-length=24", f"--network={c.network}",
                     f"--project={c.project_id}"])

    async def probe(self, ctx: Context) -> Probe:
        address = await ctx.network.address(self.cfg.address_name)
        if address is None:
            return Probe(exists=False)
        if not address_marked(address):
            return Probe(exists=True, ready=False, detail="not rltui's (no managed-by=rltui"
                                                          " label or description)")
        return Probe(exists=True)

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        """The range, marked rltui's in its insert (ownership.py `address_marked`: the label
        and the description, so the mark exists from the moment the range does); one that is
        there without the mark is not taken over."""
        c = self.cfg
        address = await ctx.network.address(c.address_name)
        if address is not None and not address_marked(address):
            raise PermanentError(
                f"IP range {c.address_name} exists and is not rltui's (no managed-by=rltui label"
                f" or description): rltui will not take it over; if nothing uses it, delete"
                f" it ({hand_delete('IP range', c.address_name, c)}) and run up again")
        await ctx.network.create_address(
            c.address_name, c.network, 24, out.line, labels=dict(MANAGED_BY),
            description=f"{RULE_MARK}: peering range of {c.network} for Managed Lustre"
                        f" (GKE cluster {c.cluster_name})")

    def down_command(self) -> str:
        return join(["gcloud", "compute", "addresses", "delete", self.cfg.address_name, "--global",
                     f"--project={self.cfg.project_id}", "--quiet"])

    async def destroy(self, ctx: Context, out: StepOutput) -> None:
        c = self.cfg
        address = await ctx.network.address(c.address_name)
        if address is None:
            return
        if not address_marked(address):
            raise Kept(not_rltuis("no managed-by=rltui label or description",
                                  hand_delete("IP range", c.address_name, c)))
        peering = await ctx.network.peering(c.network)
        if peering is not None and c.address_name in (peering.get("reservedPeeringRanges") or []):
            raise Kept(f"kept: the peering on {c.network}, which stays, reserves it")
        await ctx.network.delete_address(c.address_name, out.line)


class PeeringStep(ContextStep):
    name, title = "peering", "VPC peering"
    needs = ("ip_range",)
    expected_key, destroy_key = "peering_connect", "peering_delete"

    def down_title(self) -> str:
        return f"VPC peering servicenetworking on {self.cfg.network}"

    def command(self) -> str:
        c = self.cfg
        return join(["gcloud", "services", "vpc-peerings", "connect",
                     "--service=servicenetworking.googleapis.com", f"--ranges={c.address_name}",
                     f"--network={c.network}", f"--project={c.project_id}"])

    async def probe(self, ctx: Context) -> Probe:
        peering = await ctx.network.peering(self.cfg.network)
        if peering is None:
            return Probe(exists=False)
        ranges = peering.get("reservedPeeringRanges", [])
        return Probe(exists=True, ready=self.cfg.address_name in ranges,
                     detail=", ".join(ranges))

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        await ctx.network.connect_peering(self.cfg.network, [self.cfg.address_name], out.line)

    def down_command(self) -> str:
        # Refused for a while after Lustre goes (destroy's docstring): try again, as destroy does.
        delete = join(["gcloud", "services", "vpc-peerings", "delete",
                       "--service=servicenetworking.googleapis.com", f"--network={self.cfg.network}",
                       f"--project={self.cfg.project_id}", "--quiet"])
        return f"for try in 1 2 3 4 5 6 7 8 9 10; do {delete} && break; sleep 30; done"

    async def destroy(self, ctx: Context, out: StepOutput) -> None:
        """Only a connection that is rltui's (ownership.py: it reserves rltui's marked range
        and nothing else) and that no Lustre instance of someone else's uses.

        Service Networking refuses while a producer still holds the connection, sometimes
        minutes after the instance is gone (terraform-provider-google 19908, magic-modules 18476): retry for
        a while. Then compute's side of it can be removed (networks.removePeering), the known
        fallback, which frees the network for xpk's delete, but also cuts off every other
        producer on the network (another Lustre instance, Cloud SQL, Filestore). So only
        (`_fallback_refused`): no Lustre instance of any id is on the network (from the
        project's list: an instance's `network`), and the network is the blueprint's
        `<c>-net-0` of a cluster that is rltui's and goes next (XpkClusterStep deletes it after
        this row; gone, NetworkReadyStep deletes what is left of its blueprint). Otherwise the
        peering is kept, with the command that deletes it by hand."""
        import asyncio

        c = self.cfg
        peering = await ctx.network.peering(c.network)
        if peering is None:
            return
        if not peering_marked(peering, c.address_name, await ctx.network.address(c.address_name)):
            ranges = ", ".join(peering.get("reservedPeeringRanges") or []) or "none"
            raise Kept(not_rltuis(f"it reserves {ranges}, not rltui's marked range alone",
                                  hand_delete("VPC peering", "", c)))
        inst = await ctx.lustre.get(c.lustre_instance_id)
        if inst is not None and not marked(inst.labels):
            raise Kept(f"kept: Lustre instance {c.lustre_instance_id}, which is not rltui's,"
                       " uses it")
        loop = asyncio.get_running_loop()
        # Three Lustre deletes' time, at least 30 s on the cloud's clock.
        deadline = loop.time() + max(3 * ctx.expected("lustre_delete"),
                                     30.0 * ctx.endpoints.time_scale)
        pause = max(0.2, min(30.0, ctx.expected("peering_delete") / 4))
        while True:
            try:
                await ctx.network.delete_peering(self.cfg.network, out.line)
                return
            except CloudError as exc:
                if exc.code != "PeeringInUse":
                    raise
                if loop.time() > deadline:
                    break
                out.note("Service Networking still sees the Lustre instance: waiting")
                await asyncio.sleep(pause)
        if await ctx.lustre.get(self.cfg.lustre_instance_id) is not None:
            raise TransientError("the Lustre instance still exists; the peering waits for it")
        refused = await self._fallback_refused(ctx)
        if refused:
            raise Kept(f"kept: Service Networking still refuses to delete it and {refused}; to"
                       f" delete it by hand: {hand_delete('VPC peering', '', c)}")
        out.note("Service Networking still refuses: removing the peering from the network")
        await ctx.network.remove_peering(self.cfg.network)

    async def _fallback_refused(self, ctx: Context) -> str:
        """Why networks.removePeering must not be used here ("" when it may): see destroy."""
        from . import leftovers
        from .steps_cluster import XpkClusterStep

        c = self.cfg
        on_it = sorted(i.name.rsplit("/", 1)[-1] for i in await ctx.lustre.list()
                       if str(i.network).rsplit("/", 1)[-1] == c.network)
        if on_it:
            return (f"Lustre instance {', '.join(on_it)} is on {c.network}: removing the"
                    " peering from the network would cut it off")
        if c.network != blueprint_names(c.cluster_name).networks[0]:
            return (f"{c.network} is not xpk's network of cluster {c.cluster_name}: removing the"
                    " peering from it could cut off other services on it")
        cluster = await ctx.gke.get()
        left = await leftovers.find(ctx) if cluster is None else None
        if not XpkClusterStep(ctx).blueprint_owned(ctx, cluster, left):
            return (f"{c.network} belongs to cluster {c.cluster_name}, which is not rltui's:"
                    " removing the peering from it could cut off other services on it")
        return ""


class LustreInstanceStep(ContextStep):
    name, title = "lustre_instance", "Lustre instance"
    needs = ("peering",)
    expected_key, destroy_key = "lustre_create", "lustre_delete"
    # Down: the PV/PVC settle first, whatever their outcome: a refused Kubernetes call must
    # not keep the instance billed (the objects vanish with the cluster).
    destroy_needs = ()
    destroy_after = ("pv_pvc",)

    def down_title(self) -> str:
        return f"Lustre instance {self.cfg.lustre_instance_id}"

    def command(self) -> str:
        c = self.cfg
        return join(["gcloud", "lustre", "instances", "create", c.lustre_instance_id,
                     f"--project={c.project_id}", f"--location={c.zone}",
                     f"--capacity-gib={c.lustre_capacity}",
                     f"--per-unit-storage-throughput={c.lustre_throughput}", "--filesystem=lustre",
                     f"--network=projects/{c.project_id}/global/networks/{c.network}",
                     "--labels=managed-by=rltui", "--async"])

    async def probe(self, ctx: Context) -> Probe:
        inst = await ctx.lustre.get(self.cfg.lustre_instance_id)
        if inst is None:
            return Probe(exists=False)
        return Probe(exists=True, ready=inst.state.name == "ACTIVE", detail=inst.state.name)

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        c = self.cfg
        op_name = None
        if await ctx.lustre.get(c.lustre_instance_id) is None:
            op_name = await ctx.lustre.create(c.lustre_instance_id, capacity_gib=c.lustre_capacity,
                                              throughput=c.lustre_throughput, network=c.network)
            if op_name:
                out.line(f"create operation {op_name}")

        def on_state(state: str) -> None:
            out.note(f"state {state}")

        try:
            await ctx.lustre.wait_active(c.lustre_instance_id, expected_s=self.expected_s,
                                         on_state=on_state, op_name=op_name)
        except CloudError as exc:
            if exc.transient:
                raise
            # A create that failed late: its operation's error, kept for the user.
            raise PermanentError(exc.message) from None

    def down_command(self) -> str:
        c = self.cfg
        return join(["gcloud", "lustre", "instances", "delete", c.lustre_instance_id,
                     f"--location={c.zone}", f"--project={c.project_id}", "--quiet"])

    async def destroy(self, ctx: Context, out: StepOutput) -> None:
        inst = await ctx.lustre.get(self.cfg.lustre_instance_id)
        if inst is None:
            return
        if not marked(inst.labels):
            raise Kept(not_rltuis("no managed-by=rltui label", hand_delete(
                "Lustre instance", self.cfg.lustre_instance_id, self.cfg)))
        # The state the API reports while its delete operation runs (Instance.State DELETING,
        # "The instance is being deleted": google-cloud-lustre 0.4.3 lustre_v1/types/instance.py).
        await ctx.lustre.delete(self.cfg.lustre_instance_id,
                                expected_s=self.destroy_expected_s or self.expected_s,
                                on_state=lambda state: out.note(f"state {state}"))


LUSTRE_PORT, LEGACY_LUSTRE_PORT = "988", "6988"


class LustreFirewallStep(ContextStep):
    """An ingress rule on the plan's network that lets Managed Lustre's traffic in from the
    peering's range: the GKE Lustre CSI guide creates one ("LUSTRE_FIREWALL_RULE: the name of
    the firewall rule to allow TCP traffic from the IP address range",
    docs.cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/lustre-csi-driver-new-volume),
    and so does Cluster Toolkit v1.94.0's examples/gke-managed-lustre.yaml (module
    lustre_firewall_rule, lines 66-79: ingress tcp 988 from the private service access range,
    named `<network>-allow-lustre-traffic`). tcp 6988 too when the CSI driver uses the legacy
    port (steps_addons.legacy_port_wanted), which depends on the nodes' version: known once
    xpk made them, hence xpk_cluster among its needs (the RayCluster, the only user of Lustre,
    needs both this and the addons anyway).

    compute.v1 Firewall has no labels: its description starts with rltui's mark
    (ownership.RULE_MARK), and down deletes only a rule that carries it. Down deletes it
    before xpk's delete: a rule Terraform does not know keeps the network in use, and GCE
    refuses to delete a network a firewall rule uses (resourceInUseByAnotherResource).
    """

    name, title = "lustre_firewall", "Lustre firewall rule"
    needs = ("ip_range", "xpk_cluster")
    # Down: the RayCluster, the only user of Lustre, settles first, whatever its outcome: a
    # rule left behind would keep the network (and so xpk's delete) from going.
    destroy_needs = ()
    destroy_after = ("raycluster",)
    # A firewall insert has no entry of its own in the profile: metadata, like an apply.
    expected_key = "k8s_apply"

    @property
    def rule(self) -> str:
        return lustre_rule_name(self.cfg.network)

    def down_title(self) -> str:
        return f"Firewall rule {self.rule}"

    def command(self) -> str:
        c = self.cfg
        return join(["gcloud", "compute", "firewall-rules", "create", self.rule,
                     f"--network={c.network}", "--direction=INGRESS",
                     f"--allow=tcp:{LUSTRE_PORT}", "--source-ranges=RANGE_CIDR",
                     f"--description={RULE_MARK}: Managed Lustre from {c.address_name}",
                     f"--project={c.project_id}"])

    def down_command(self) -> str:
        return join(["gcloud", "compute", "firewall-rules", "delete", self.rule,
                     f"--project={self.cfg.project_id}", "--quiet"])

    async def _wanted(self, ctx: Context) -> tuple[str, list[str]]:
        """The range's CIDR and the ports the nodes' driver uses."""
        from .steps_addons import legacy_port_wanted

        address = await ctx.network.address(self.cfg.address_name)
        if address is None or not address.address:
            raise TransientError(f"IP range {self.cfg.address_name} has no address yet")
        legacy = await legacy_port_wanted(ctx, await ctx.gke.get())
        return (f"{address.address}/{address.prefix_length}",
                [LUSTRE_PORT, LEGACY_LUSTRE_PORT] if legacy else [LUSTRE_PORT])

    @staticmethod
    def _allows(rule: Any, cidr: str, ports: list[str]) -> bool:
        if rule.direction not in ("", "INGRESS") or cidr not in list(rule.source_ranges):
            return False
        tcp = [list(a.ports) for a in rule.allowed if a.I_p_protocol in ("tcp", "all")]
        return all(any(not given or port in given for given in tcp) for port in ports)

    async def probe(self, ctx: Context) -> Probe:
        rule = await ctx.network.firewall(self.rule)
        if rule is None:
            return Probe(exists=False)
        try:
            cidr, ports = await self._wanted(ctx)
        except TransientError as exc:
            return Probe(exists=True, ready=False, detail=str(exc))
        ok = self._allows(rule, cidr, ports)
        detail = f"tcp:{','.join(ports)} from {cidr}" if ok else f"does not allow tcp:" \
            f"{','.join(ports)} from {cidr}"
        return Probe(exists=True, ready=ok,
                     detail=detail + ("" if rule_marked(rule) else " (not rltui's)"))

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        c = self.cfg
        cidr, ports = await self._wanted(ctx)
        rule = await ctx.network.firewall(self.rule)
        if rule is not None:
            if self._allows(rule, cidr, ports):
                return
            if not rule_marked(rule):
                raise PermanentError(f"firewall rule {self.rule} is not rltui's and does not"
                                     f" allow tcp:{','.join(ports)} from {cidr}: change it, or"
                                     f" delete it ({hand_delete('Firewall rule', self.rule, c)})"
                                     " and run up again")
            out.note(f"firewall rule {self.rule} allows less than tcp:{','.join(ports)} from"
                     f" {cidr}: making it again")
            await ctx.network.delete_firewall(self.rule)
        await ctx.network.create_firewall(
            self.rule, network=c.network, source_ranges=[cidr], tcp_ports=ports,
            description=f"{RULE_MARK}: Managed Lustre (tcp:{','.join(ports)}) from the peering"
                        f" range {c.address_name}, for GKE cluster {c.cluster_name}",
            on_line=out.line)

    async def down_probe(self, ctx: Context) -> Probe:
        return Probe(exists=await ctx.network.firewall(self.rule) is not None)

    async def destroy(self, ctx: Context, out: StepOutput) -> None:
        rule = await ctx.network.firewall(self.rule)
        if rule is None:
            return
        if not rule_marked(rule):
            raise Kept(not_rltuis(f"its description does not start with {RULE_MARK}",
                                  hand_delete("Firewall rule", self.rule, self.cfg)))
        out.line(f"deleting firewall rule {self.rule}")
        await ctx.network.delete_firewall(self.rule)
