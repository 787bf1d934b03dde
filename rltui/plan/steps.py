"""The codelab's steps, each by its name: probe the cloud, apply, destroy.

Graph (arrows: "needs"):

    enable_apis -> xpk_cluster -> addons ------------------------------+
                |              -> credentials -> secret ---------------+-> raycluster -> dashboard
                |                             -> pv_pvc ---------------+
                +-> network_ready -> ip_range -> peering -> lustre_instance -> pv_pvc

The Lustre chain waits only for xpk's network, not for xpk to finish. Down runs the graph
backwards; xpk's delete (which removes the networks) waits for the peering, the range and
Lustre, which would otherwise keep the network in use.
"""

from __future__ import annotations

from shlex import join
from typing import Any

from .. import manifests
from ..script import APIS
from .context import Context
from .step import PermanentError, Probe, Step, StepOutput, TransientError


def _gke_lock(ctx: Context) -> str:
    return f"gke:{ctx.cfg.project_id}/{ctx.cfg.cluster_name}"


class ContextStep(Step):
    """A step bound to one Context: expected durations come from the reference profile."""

    expected_key = ""
    destroy_key: str | None = None

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.cfg = ctx.cfg
        if self.expected_key:
            self.expected_s = ctx.expected(self.expected_key)
        if self.destroy_key:
            self.destroy_expected_s = ctx.expected(self.destroy_key)

    async def kube_if_cluster(self, ctx: Context) -> Any:
        """The Kubernetes adapter, or None when the GKE cluster (and so its objects) is gone."""
        cluster = await ctx.gke.get()
        if cluster is None or cluster.status.name not in ("RUNNING", "RECONCILING"):
            return None
        return await ctx.kube()


class EnableApisStep(ContextStep):
    name, title = "enable_apis", "Enable APIs"
    expected_key = "enable_apis"
    destroyable = False  # other things in the project may use them

    def command(self) -> str:
        return join(["gcloud", "services", "enable", *APIS, f"--project={self.cfg.project_id}"])

    async def probe(self, ctx: Context) -> Probe:
        missing = set(APIS) - await ctx.network.enabled_apis()
        return Probe(exists=not missing, detail=", ".join(sorted(missing)))

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        await ctx.network.enable_apis(APIS, out.line)


class XpkClusterStep(ContextStep):
    name, title = "xpk_cluster", "xpk cluster create"
    needs = ("enable_apis",)
    expected_key, destroy_key = "xpk_done", "xpk_delete"
    destroy_needs = ("addons", "credentials", "peering", "ip_range", "lustre_instance")

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.locks = (_gke_lock(ctx),)

    def _argv(self, verb: str) -> list[str]:
        c = self.cfg
        common = [f"--project={c.project_id}", f"--zone={c.zone}", f"--cluster={c.cluster_name}"]
        if verb == "delete":
            return ["xpk", "cluster", "delete", *common, "--force"]
        return ["xpk", "cluster", "create", f"--num-nodes={c.num_nodes}",
                f"--device-type={c.device_type}", "--default-pool-cpu-machine-type=e2-standard-4",
                "--spot", "--enable-lustre-csi-driver", *common]

    def command(self) -> str:
        return f"cd {self.ctx.xpk_dir} && {join(self._argv('create'))}"

    async def probe(self, ctx: Context) -> Probe:
        cluster = await ctx.gke.get()
        if cluster is None:
            network = await ctx.network.network(self.cfg.network)
            # Networks left by an xpk that died half way are xpk's too (down must find them).
            return Probe(exists=network is not None, ready=False,
                         detail="networks only" if network else "")
        gpu_pools = [p for p in cluster.node_pools
                     if any(a.accelerator_type == self.cfg.device.accelerator
                            for a in p.config.accelerators)]
        ready = (cluster.status.name == "RUNNING" and bool(gpu_pools)
                 and sum(p.initial_node_count for p in gpu_pools) >= self.cfg.num_nodes
                 and all(p.status.name == "RUNNING" for p in gpu_pools))
        return Probe(exists=True, ready=ready, detail=cluster.status.name)

    async def _xpk(self, verb: str, out: StepOutput, expected_s: float) -> None:
        from ..cloud.tools import run_tool

        self.ctx.xpk_dir.mkdir(parents=True, exist_ok=True)
        res = await run_tool(self._argv(verb), self.ctx.endpoints, cwd=self.ctx.xpk_dir,
                             on_line=out.line, timeout_s=max(3 * expected_s, 300.0))
        if not res.ok:
            # xpk re-runs skip what exists, so a failed run is worth another try.
            raise TransientError(f"xpk cluster {verb} exited with {res.returncode}: {res.error_line()}")

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        await self._xpk("create", out, self.expected_s)

    async def destroy(self, ctx: Context, out: StepOutput) -> None:
        if not (ctx.xpk_dir / "xpkclusters" / self.cfg.cluster_name).exists():
            raise PermanentError(f"cluster {self.cfg.cluster_name} was not created by rltui from"
                                 f" {ctx.xpk_dir}: left alone (delete it with xpk from the"
                                 " folder it was created in)")
        await self._xpk("delete", out, self.destroy_expected_s or self.expected_s)


class AddonsStep(ContextStep):
    name, title = "addons", "Addons (RayOperator + Lustre CSI)"
    needs = ("xpk_cluster",)
    expected_key = "addon_update"
    destroyable = False  # they go with the cluster

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.locks = (_gke_lock(ctx),)

    def command(self) -> str:
        c = self.cfg
        # xpk ignores --enable-lustre-csi-driver for b200-8; one update enables both.
        return join(["gcloud", "container", "clusters", "update", c.cluster_name,
                     f"--region={c.region}", f"--project={c.project_id}",
                     "--update-addons=RayOperator=ENABLED,LustreCsiDriver=ENABLED"])

    async def probe(self, ctx: Context) -> Probe:
        cluster = await ctx.gke.get()
        if cluster is None:
            return Probe(exists=False)
        enabled = ctx.gke.addons_enabled(cluster)
        off = [k for k, v in enabled.items() if not v]
        return Probe(exists=not off, detail="off: " + ", ".join(off) if off else "")

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        out.note("enabling RayOperator and LustreCsiDriver in one cluster update")
        await ctx.gke.enable_addons(expected_s=self.expected_s)


class NetworkReadyStep(ContextStep):
    """Waits for the VPC network xpk makes first, so the Lustre chain starts early."""

    name, title = "network_ready", "Network ready"
    needs = ("enable_apis",)
    expected_key = "xpk_networks"
    destroyable = False  # xpk's delete removes it

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

    def command(self) -> str:
        c = self.cfg
        return join(["gcloud", "compute", "addresses", "create", c.address_name, "--global",
                     "--purpose=VPC_PEERING", "--prefix-length=24", f"--network={c.network}",
                     f"--project={c.project_id}"])

    async def probe(self, ctx: Context) -> Probe:
        return Probe(exists=await ctx.network.address(self.cfg.address_name) is not None)

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        await ctx.network.create_address(self.cfg.address_name, self.cfg.network, 24, out.line)

    async def destroy(self, ctx: Context, out: StepOutput) -> None:
        await ctx.network.delete_address(self.cfg.address_name, out.line)


class PeeringStep(ContextStep):
    name, title = "peering", "VPC peering"
    needs = ("ip_range",)
    expected_key, destroy_key = "peering_connect", "peering_delete"

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

    async def destroy(self, ctx: Context, out: StepOutput) -> None:
        await ctx.network.delete_peering(self.cfg.network, out.line)


class LustreInstanceStep(ContextStep):
    name, title = "lustre_instance", "Lustre instance"
    needs = ("peering",)
    expected_key, destroy_key = "lustre_create", "lustre_delete"

    def command(self) -> str:
        c = self.cfg
        return join(["gcloud", "lustre", "instances", "create", c.lustre_instance_id,
                     f"--project={c.project_id}", f"--location={c.zone}",
                     f"--capacity-gib={c.lustre_capacity}",
                     f"--per-unit-storage-throughput={c.lustre_throughput}", "--filesystem=lustre",
                     f"--network=projects/{c.project_id}/global/networks/{c.network}",
                     "--gke-support-enabled", "--labels=managed-by=rltui", "--async"])

    async def probe(self, ctx: Context) -> Probe:
        inst = await ctx.lustre.get(self.cfg.lustre_instance_id)
        if inst is None:
            return Probe(exists=False)
        return Probe(exists=True, ready=inst.state.name == "ACTIVE", detail=inst.state.name)

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        c = self.cfg
        if await ctx.lustre.get(c.lustre_instance_id) is None:
            await ctx.lustre.create(c.lustre_instance_id, capacity_gib=c.lustre_capacity,
                                    throughput=c.lustre_throughput, network=c.network)
        def on_state(state: str) -> None:
            out.note(f"state {state}")

        await ctx.lustre.wait_active(c.lustre_instance_id, expected_s=self.expected_s,
                                     on_state=on_state)

    async def destroy(self, ctx: Context, out: StepOutput) -> None:
        inst = await ctx.lustre.get(self.cfg.lustre_instance_id)
        if inst is None:
            return
        if inst.labels.get("managed-by") != "rltui":
            raise PermanentError(f"Lustre instance {self.cfg.lustre_instance_id} was not created"
                                 " by rltui (no managed-by=rltui label): left alone")
        await ctx.lustre.delete(self.cfg.lustre_instance_id,
                                expected_s=self.destroy_expected_s or self.expected_s)


class CredentialsStep(ContextStep):
    name, title = "credentials", "Cluster credentials"
    needs = ("xpk_cluster",)
    expected_key = "k8s_apply"
    destroyable = False

    def command(self) -> str:
        c = self.cfg
        return join(["gcloud", "container", "clusters", "get-credentials", c.cluster_name,
                     f"--region={c.region}", f"--project={c.project_id}"])

    async def probe(self, ctx: Context) -> Probe:
        return Probe(exists=False)  # nothing in the cloud: connect every run

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        kube = await ctx.kube()
        nodes = await kube.list("nodes")
        out.note(f"{len(nodes)} nodes")


class SecretStep(ContextStep):
    name, title = "secret", "Secret (HF_TOKEN, WANDB_API_KEY)"
    needs = ("credentials",)
    expected_key = "k8s_apply"

    def command(self) -> str:
        return (f"kubectl create secret generic {manifests.secret_name(self.cfg)}"
                " --from-env-file=<(printf 'HF_TOKEN=%s\\n' \"$HF_TOKEN\")")

    async def probe(self, ctx: Context) -> Probe:
        kube = await self.kube_if_cluster(ctx)
        if kube is None:
            return Probe(exists=False)
        current = await kube.get("secrets", manifests.secret_name(self.cfg))
        if current is None:
            return Probe(exists=False)
        # Values are never read back: re-applying (a no-op when unchanged) keeps a changed
        # token current without rltui ever comparing or showing it.
        keys = sorted((current.get("data") or {}))
        return Probe(exists=True, ready=False, detail=f"keys {', '.join(keys)}")

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        kube = await ctx.kube()
        await kube.apply(manifests.job_secret(self.cfg))

    async def destroy(self, ctx: Context, out: StepOutput) -> None:
        kube = await ctx.kube()
        await kube.delete("secrets", manifests.secret_name(self.cfg))


class PvPvcStep(ContextStep):
    name, title = "pv_pvc", "PV / PVC"
    needs = ("credentials", "lustre_instance")
    expected_key = "k8s_apply"

    def command(self) -> str:
        return f"kubectl apply -f {manifests.VOLUME_FILE}"

    async def _ip(self, ctx: Context) -> str:
        inst = await ctx.lustre.get(self.cfg.lustre_instance_id)
        if inst is None or not inst.mount_point:
            raise TransientError("the Lustre instance has no mount point yet")
        return manifests.lustre_ip(inst.mount_point)

    async def probe(self, ctx: Context) -> Probe:
        kube = await self.kube_if_cluster(ctx)
        if kube is None:
            return Probe(exists=False)
        pv = await kube.get("persistentvolumes", self.cfg.pv_name)
        pvc = await kube.get("persistentvolumeclaims", self.cfg.pvc_name)
        if pv is None or pvc is None:
            return Probe(exists=pv is not None or pvc is not None, ready=False)
        ip = pv.get("spec", {}).get("csi", {}).get("volumeAttributes", {}).get("ip")
        return Probe(exists=True, ready=ip == await self._ip(ctx), detail=f"ip {ip}")

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        kube = await ctx.kube()
        ip = await self._ip(ctx)
        out.note(f"Lustre IP {ip}")
        await kube.apply(manifests.persistent_volume(self.cfg, ip))
        await kube.apply(manifests.persistent_volume_claim(self.cfg))

    async def destroy(self, ctx: Context, out: StepOutput) -> None:
        kube = await ctx.kube()
        await kube.delete("persistentvolumeclaims", self.cfg.pvc_name)
        await kube.delete("persistentvolumes", self.cfg.pv_name)


class RayClusterStep(ContextStep):
    name, title = "raycluster", "RayCluster ready"
    needs = ("addons", "pv_pvc", "secret")
    expected_key, destroy_key = "image_pull", "raycluster_delete"

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.expected_s = ctx.expected("image_pull") + ctx.expected("pod_start")

    def command(self) -> str:
        return (f"kubectl apply -f {manifests.RAYCLUSTER_FILE} && kubectl wait"
                f" raycluster/{self.cfg.cluster_name} --for=condition=HeadPodReady")

    async def probe(self, ctx: Context) -> Probe:
        kube = await self.kube_if_cluster(ctx)
        if kube is None:
            return Probe(exists=False)
        rc = await kube.get("rayclusters", self.cfg.cluster_name)
        if rc is None:
            return Probe(exists=False)
        from ..cloud.kube import raycluster_health

        health = raycluster_health(rc)
        return Probe(exists=True, ready=health.ready, detail=health.message)

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        kube = await ctx.kube()
        await kube.apply(manifests.ray_cluster(self.cfg))

        def on_update(health: Any) -> None:
            desired = health.desired_workers or self.cfg.num_nodes
            out.progress(health.ready_workers / desired if desired else None)
            out.note(f"{health.ready_workers}/{desired} workers ready,"
                     f" head {'ready' if health.head_ready else 'starting'}")

        await kube.wait_raycluster_ready(self.cfg.cluster_name, on_update,
                                         timeout_s=max(3 * self.expected_s, 120.0))

    async def destroy(self, ctx: Context, out: StepOutput) -> None:
        kube = await ctx.kube()
        await kube.delete("rayclusters", self.cfg.cluster_name, wait=True,
                          timeout_s=max(3 * (self.destroy_expected_s or 60.0), 60.0))


class DashboardStep(ContextStep):
    name, title = "dashboard", "Ray dashboard reachable"
    needs = ("raycluster",)
    expected_key = "k8s_apply"
    destroyable = False

    def command(self) -> str:
        return f"kubectl port-forward service/{self.cfg.head_service} 8265:8265"

    async def probe(self, ctx: Context) -> Probe:
        return Probe(exists=False)  # a local port-forward: opened by every run

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        url = await ctx.dashboard()
        out.note(f"Ray dashboard at {url}")


STEP_TYPES: tuple[type[ContextStep], ...] = (
    EnableApisStep, XpkClusterStep, NetworkReadyStep, IpRangeStep, PeeringStep,
    LustreInstanceStep, AddonsStep, CredentialsStep, SecretStep, PvPvcStep, RayClusterStep,
    DashboardStep,
)


def build_plan(ctx: Context) -> list[Step]:
    return [t(ctx) for t in STEP_TYPES]
