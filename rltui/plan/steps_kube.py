"""What lives in the cluster: the Secret, the Lustre PV/PVC, the RayCluster, the dashboard.

The Secret and the PV/PVC are applied while xpk may still run (they need the credentials, not
xpk's exit): they are Kubernetes objects, not GKE operations, and the blueprint's
kubectl-apply modules apply only their own manifests, each a Helm release of its own (Cluster
Toolkit v1.94.0 modules/management/kubectl-apply/main.tf, module "kubectl_apply_manifests",
lines 171-189). Down deletes only objects that carry rltui's label
(app.kubernetes.io/managed-by=rltui: manifests.MANAGED_BY); others are kept.
"""

from __future__ import annotations

from typing import Any

from .. import manifests
from .context import Context
from .ownership import hand_delete, k8s_marked, not_rltuis
from .step import Kept, PermanentError, Probe, StepOutput, StepState, TransientError
from .steps_base import ContextStep


async def _only_rltuis(kube: Any, cfg: Any, *objects: tuple[str, str, str]) -> None:
    """Kept (nothing deleted) when any of (plural, kind, name) is there without rltui's label."""
    for plural, kind, name in objects:
        obj = await kube.get(plural, name)
        if obj is not None and not k8s_marked(obj):
            raise Kept(not_rltuis(f"{kind} {name} has no app.kubernetes.io/managed-by=rltui"
                                  " label", hand_delete(kind, name, cfg)))


async def apply_job_secret(kube: Any, cfg: Any) -> None:
    """Apply the job Secret from the config (env.sh as read now), dropping the keys of tokens
    env.sh no longer sets. Only the keys are read back, never a value."""
    current = await kube.get("secrets", manifests.secret_name(cfg))
    await kube.apply(manifests.job_secret(cfg, present=((current or {}).get("data") or {})))


class SecretStep(ContextStep):
    name, title = "secret", "Secret (HF_TOKEN, WANDB_API_KEY)"
    needs = ("credentials",)
    expected_key = "k8s_apply"

    def command(self) -> str:
        return (f"kubectl create secret generic {manifests.secret_name(self.cfg)}"
                f" --from-file={manifests.HF_TOKEN_KEY}=<(printf %s \"$HF_TOKEN\")"
                f" --from-file={manifests.NETRC_KEY}=<(printf 'machine {manifests.WANDB_HOST}\\n"
                "  login user\\n  password %s\\n' \"$WANDB_API_KEY\")"
                " --dry-run=client -o yaml | kubectl apply -f -")

    def down_title(self) -> str:
        return f"Secret {manifests.secret_name(self.cfg)}"

    async def probe(self, ctx: Context) -> Probe:
        kube = await self.kube_if_cluster(ctx)
        if kube is None:
            return Probe(exists=False)
        current = await kube.get("secrets", manifests.secret_name(self.cfg))
        if current is None:
            return Probe(exists=False)
        # Values are never read back: re-applying (a no-op when unchanged) keeps the Secret
        # env.sh's without rltui ever comparing or showing a token. The pods mount it as files,
        # which the kubelet updates at its next sync; `submit` applies it again and its job
        # waits for them (manifests.run_script).
        keys = sorted(current.get("data") or {})
        return Probe(exists=True, ready=True, reapply=True, detail=f"keys {', '.join(keys)}")

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        await apply_job_secret(await ctx.kube(), self.cfg)

    def down_command(self) -> str:
        return f"kubectl delete secret {manifests.secret_name(self.cfg)} --ignore-not-found"

    async def destroy(self, ctx: Context, out: StepOutput) -> None:
        kube = await ctx.kube()
        name = manifests.secret_name(self.cfg)
        await _only_rltuis(kube, self.cfg, ("secrets", "Secret", name))
        await kube.delete("secrets", name)


class PvPvcStep(ContextStep):
    name, title = "pv_pvc", "PV / PVC"
    needs = ("credentials", "lustre_instance")
    expected_key = "k8s_apply"

    def command(self) -> str:
        return f"kubectl apply -f {manifests.VOLUME_FILE}"

    def down_title(self) -> str:
        return f"PVC {self.cfg.pvc_name}, PV {self.cfg.pv_name}"

    async def _mount(self, ctx: Context) -> tuple[str, str]:
        """(IP, filesystem name) from the instance's mount point `<ip>@tcp:/<filesystem>`."""
        inst = await ctx.lustre.get(self.cfg.lustre_instance_id)
        if inst is None or not inst.mount_point:
            raise TransientError("the Lustre instance has no mount point yet")
        return manifests.lustre_ip(inst.mount_point), manifests.lustre_filesystem(inst.mount_point)

    async def probe(self, ctx: Context) -> Probe:
        kube = await self.kube_if_cluster(ctx)
        if kube is None:
            return Probe(exists=False)
        pv = await kube.get("persistentvolumes", self.cfg.pv_name)
        pvc = await kube.get("persistentvolumeclaims", self.cfg.pvc_name)
        if pv is None or pvc is None:
            return Probe(exists=pv is not None or pvc is not None, ready=False)
        attrs = pv.get("spec", {}).get("csi", {}).get("volumeAttributes", {})
        have = (attrs.get("ip"), attrs.get("filesystem"))
        return Probe(exists=True, ready=have == await self._mount(ctx), detail=f"ip {have[0]}")

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        kube = await ctx.kube()
        ip, filesystem = await self._mount(ctx)
        out.note(f"Lustre IP {ip}, filesystem {filesystem}")
        pv = await kube.get("persistentvolumes", self.cfg.pv_name)
        attrs = (pv or {}).get("spec", {}).get("csi", {}).get("volumeAttributes", {})
        old = f"{attrs.get('ip')}@tcp:/{attrs.get('filesystem')}"
        if pv is not None and old != f"{ip}@tcp:/{filesystem}":
            # A PV's source is immutable (a patch gets 422): delete the claim and the volume,
            # then create both again. Only while no pod uses the claim.
            users = await self._claim_users(kube)
            if users:
                raise PermanentError(
                    f"PV {self.cfg.pv_name} points at {old}, the Lustre instance is now at {ip}@tcp:/{filesystem},"
                    f" and pods still use it ({', '.join(users[:3])}): delete the RayCluster"
                    f" (kubectl delete raycluster {self.cfg.cluster_name}), then run up again")
            out.note(f"PV {self.cfg.pv_name} points at {old}: recreating the PV and PVC")
            await kube.delete("persistentvolumeclaims", self.cfg.pvc_name, wait=True,
                              timeout_s=max(60.0, 3 * self.expected_s))
            await kube.delete("persistentvolumes", self.cfg.pv_name, wait=True,
                              timeout_s=max(60.0, 3 * self.expected_s))
        await kube.apply(manifests.persistent_volume(self.cfg, ip, filesystem))
        await kube.apply(manifests.persistent_volume_claim(self.cfg))

    async def _claim_users(self, kube: Any) -> list[str]:
        users = []
        for pod in await kube.list("pods"):
            for vol in (pod.get("spec") or {}).get("volumes") or []:
                if (vol.get("persistentVolumeClaim") or {}).get("claimName") == self.cfg.pvc_name:
                    users.append(pod["metadata"]["name"])
        return users

    async def down_probe(self, ctx: Context) -> Probe:
        """Kubernetes alone: either object there is to delete. (The up probe also compares the
        PV with the Lustre instance's mount point, which down may already have deleted.)"""
        import asyncio

        kube = await self.kube_if_cluster(ctx)
        if kube is None:
            return Probe(exists=False)
        pv, pvc = await asyncio.gather(kube.get("persistentvolumes", self.cfg.pv_name),
                                       kube.get("persistentvolumeclaims", self.cfg.pvc_name))
        return Probe(exists=pv is not None or pvc is not None)

    def down_command(self) -> str:
        return (f"kubectl delete pvc {self.cfg.pvc_name} --ignore-not-found && "
                f"kubectl delete pv {self.cfg.pv_name} --ignore-not-found")

    async def destroy(self, ctx: Context, out: StepOutput) -> None:
        kube = await ctx.kube()
        await _only_rltuis(kube, self.cfg,
                           ("persistentvolumeclaims", "PersistentVolumeClaim", self.cfg.pvc_name),
                           ("persistentvolumes", "PersistentVolume", self.cfg.pv_name))
        await kube.delete("persistentvolumeclaims", self.cfg.pvc_name)
        await kube.delete("persistentvolumes", self.cfg.pv_name)


class RayClusterStep(ContextStep):
    name, title = "raycluster", "RayCluster ready"
    # Its pods mount Lustre: the driver on their nodes (addons), the volume, the firewall
    # rule that lets Lustre's traffic reach them.
    needs = ("addons", "pv_pvc", "secret", "lustre_firewall")
    expected_key, destroy_key = "image_pull", "raycluster_delete"

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.expected_s = ctx.expected("image_pull") + ctx.expected("pod_start")

    def down_title(self) -> str:
        return f"RayCluster {self.cfg.cluster_name}"

    def command(self) -> str:
        # The head pod's Ready condition: what KubeRay's HeadPodReady condition copies, there on
        # every KubeRay (the condition only from 1.3; rltui reads either: cloud/rayhealth.py).
        return (f"kubectl apply -f {manifests.RAYCLUSTER_FILE} && kubectl wait pod"
                f" -l ray.io/cluster={self.cfg.cluster_name},ray.io/node-type=head"
                " --for=condition=Ready --timeout=60m")

    async def probe(self, ctx: Context) -> Probe:
        kube = await self.kube_if_cluster(ctx)
        if kube is None:
            return Probe(exists=False)
        rc = await kube.get("rayclusters", self.cfg.cluster_name)
        if rc is None:
            return Probe(exists=False)
        from ..cloud.rayhealth import has_head_condition, pod_selector, raycluster_health

        # Without KubeRay's HeadPodReady condition (before 1.3) the pods say whether it is ready.
        pods = None if has_head_condition(rc) else await kube.list(
            "pods", label_selector=pod_selector(self.cfg.cluster_name))
        health = raycluster_health(rc, pods)
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

    def down_command(self) -> str:
        return f"kubectl delete raycluster {self.cfg.cluster_name} --ignore-not-found --wait=true"

    async def destroy(self, ctx: Context, out: StepOutput) -> None:
        kube = await ctx.kube()
        await _only_rltuis(kube, self.cfg, ("rayclusters", "RayCluster", self.cfg.cluster_name))
        await kube.delete("rayclusters", self.cfg.cluster_name, wait=True,
                          timeout_s=max(3 * (self.destroy_expected_s or 60.0), 60.0))


class DashboardStep(ContextStep):
    name, title = "dashboard", "Ray dashboard reachable"
    connects = True
    needs = ("raycluster",)
    expected_key = "k8s_apply"
    destroyable = False

    def command(self) -> str:
        return f"kubectl port-forward service/{self.cfg.head_service} 8265:8265"

    def down_title(self) -> str:
        return "Ray dashboard port-forward"

    async def kept(self, ctx: Context, settled: dict[str, StepState]) -> tuple[StepState, str]:
        return StepState.SKIPPED, "nothing in the cloud: a local port-forward"

    async def probe(self, ctx: Context) -> Probe:
        return Probe(exists=False)  # a local port-forward: opened by every run

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        # Its local URL lives only as long as this process's port-forward: a headless `up`
        # that printed it left a dead link. The wizard's Monitor shows it while it answers.
        await ctx.dashboard()
        out.note(f"the dashboard answers; to open it by hand: {self.command()}")
