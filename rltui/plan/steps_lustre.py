"""The Lustre chain: xpk's network, the IP range, the Service Networking peering, the Managed
Lustre instance. It waits only for xpk's network, not for xpk to finish."""

from __future__ import annotations

from shlex import join

from ..cloud.errors import CloudError
from . import xpkstate
from .context import Context
from .step import PermanentError, Probe, StepOutput, StepState, TransientError
from .steps_base import ContextStep

class NetworkReadyStep(ContextStep):
    """Waits for the VPC network xpk makes first, so the Lustre chain starts early.

    Down: xpk's three networks are the one thing that must wait for the peering and the IP
    range (they hold `<c>-net-0`), so this row runs `xpk cluster delete` from xpk's folder
    once the GKE cluster is gone (XpkClusterStep deletes it through the API meanwhile) and the
    peering and the range have settled. xpk 1.16.0 takes its Cluster Toolkit path on the
    blueprint alone and runs `gcluster destroy` on the a4 blueprint, whose modules include the
    three VPCs and their firewall rules (commands/cluster.py cluster_delete,
    commands/cluster_gcluster.py cluster_delete; core/blueprint/blueprint_generator.py
    generate_a4_blueprint); with the cluster already gone, Terraform drops it from its state and
    destroys the rest (rltui/sandbox/world_xpk.py xpk_cluster_delete has the sources and what
    is not verified). Whatever of the blueprint's names xpk leaves (or all of them, when xpk's
    state is lost and the cluster was rltui's by its label), rltui deletes itself.
    """

    name, title = "network_ready", "Network ready"
    needs = ("enable_apis",)
    expected_key = "xpk_networks"
    # The cluster and a Lustre instance on the network must be gone: xpk's Terraform would
    # fail on a network still in use, and a Lustre that could not go keeps its network.
    destroy_needs = ("xpk_cluster", "lustre_instance")
    # They hold the network too; a refusal there does not stop xpk removing what it can.
    destroy_after = ("peering", "ip_range")

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        # Down deletes only xpk's networks of this cluster; any other network is kept.
        self.destroyable = bool(self._xpk_networks())
        # xpk's delete, less its GKE part (the profile's two estimates).
        self.destroy_expected_s = max(ctx.expected("xpk_delete")
                                      - ctx.expected("gke_cluster_delete"), ctx.expected("k8s_apply"))

    def _xpk_networks(self) -> tuple[str, ...]:
        """xpk's networks for this cluster, when the plan's network is one of them."""
        names = xpkstate.blueprint_names(self.cfg.cluster_name).networks
        return names if self.cfg.network in names else ()

    def down_title(self) -> str:
        names = self._xpk_networks()
        if not names:
            return f"VPC network {self.cfg.network}"
        c = self.cfg.cluster_name
        return (f"VPC networks {names[0]}, " + ", ".join(n[len(c):] for n in names[1:])
                + " (xpk cluster delete)")

    async def kept(self, ctx: Context, settled: dict[str, StepState]) -> tuple[StepState, str]:
        return StepState.SKIPPED, "kept: not one of the networks xpk made for this cluster"

    def down_command(self) -> str:
        from .steps_cluster import XpkClusterStep

        return XpkClusterStep(self.ctx).xpk_delete_command()

    async def down_probe(self, ctx: Context) -> Probe:
        names = set(self._xpk_networks())
        left = sorted(n.name for n in await ctx.network.networks() if n.name in names)
        return Probe(exists=bool(left), detail=", ".join(left))

    async def destroy(self, ctx: Context, out: StepOutput) -> str:
        from .steps_cluster import XpkClusterStep

        gke = XpkClusterStep(ctx)
        if await ctx.gke.get() is not None:
            raise TransientError(f"cluster {self.cfg.cluster_name} is still there: its"
                                 " networks wait for it")
        if gke.has_xpk_state(ctx):
            out.note(f"deleting with xpk from its state folder {ctx.xpk_dir}")
            res = await gke.run_xpk_delete(ctx, out, self.destroy_expected_s or 60.0)
            if not (await self.down_probe(ctx)).exists:
                return "deleted by xpk cluster delete"
            if not res.ok:
                out.note(f"xpk cluster delete exited with {res.returncode}"
                          f" (xpk: {res.error_line()})")
            await gke.delete_blueprint_leftovers(ctx, out)
            return "deleted: what xpk cluster delete left, by its blueprint's names"
        if not ctx.owned_networks:
            raise PermanentError(f"networks {', '.join(self._xpk_networks())} are left from a"
                                 f" cluster {ctx.xpk_dir} holds no xpk state for, and no"
                                 " managed-by=rltui cluster was deleted with them: not rltui's,"
                                 " left alone (delete them with xpk from the folder it ran in)")
        out.note("xpk's state folder is missing: deleting xpk's firewall rules, subnets and"
                 " networks by its blueprint's names")
        await gke.delete_blueprint_leftovers(ctx, out)
        return "deleted by rltui (xpk's state was lost)"

    def command(self) -> str:
        return join(["gcloud", "compute", "networks", "describe", self.cfg.network,
                     f"--project={self.cfg.project_id}"])

    async def probe(self, ctx: Context) -> Probe:
        return Probe(exists=await ctx.network.network(self.cfg.network) is not None)

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        import asyncio

        out.note(f"waiting for xpk to create {self.cfg.network}")
        interval = max(0.2, min(10.0, self.expected_s / 20))
        deadline = asyncio.get_running_loop().time() + max(ctx.expected("xpk_done") * 2, 60.0)
        while await ctx.network.network(self.cfg.network) is None:
            if asyncio.get_running_loop().time() > deadline:
                raise TransientError(f"network {self.cfg.network} has not appeared yet")
            await asyncio.sleep(interval)


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
        return Probe(exists=await ctx.network.address(self.cfg.address_name) is not None)

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        await ctx.network.create_address(self.cfg.address_name, self.cfg.network, 24, out.line)

    def down_command(self) -> str:
        return join(["gcloud", "compute", "addresses", "delete", self.cfg.address_name, "--global",
                     f"--project={self.cfg.project_id}", "--quiet"])

    async def destroy(self, ctx: Context, out: StepOutput) -> None:
        await ctx.network.delete_address(self.cfg.address_name, out.line)


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
        """Service Networking refuses while the producer (Lustre) still holds the connection,
        sometimes minutes after the instance is gone (FACTS; terraform-provider-google 19908):
        retry for a while, then remove compute's side of it (networks.removePeering), the
        known fallback, which frees the network for xpk's delete."""
        import asyncio

        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(3 * ctx.expected("lustre_delete"), 30.0)
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
        out.note("Service Networking still refuses: removing the peering from the network")
        await ctx.network.remove_peering(self.cfg.network)


class LustreInstanceStep(ContextStep):
    name, title = "lustre_instance", "Lustre instance"
    needs = ("peering",)
    expected_key, destroy_key = "lustre_create", "lustre_delete"

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
        if inst.labels.get("managed-by") != "rltui":
            raise PermanentError(f"Lustre instance {self.cfg.lustre_instance_id} was not created"
                                 " by rltui (no managed-by=rltui label): left alone")
        # The state the API reports while its delete operation runs (Instance.State DELETING,
        # "The instance is being deleted": google-cloud-lustre 0.4.3 lustre_v1/types/instance.py).
        await ctx.lustre.delete(self.cfg.lustre_instance_id,
                                expected_s=self.destroy_expected_s or self.expected_s,
                                on_state=lambda state: out.note(f"state {state}"))
