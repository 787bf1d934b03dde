"""GKE over google-cloud-container (async, gRPC): the cluster, its addons, labels, node pools
and operations.

GKE runs one operation per cluster at a time, and starts its own (auto-upgrade, repair) right
after a create: a refusal with ErrorInfo reason CLUSTER_ALREADY_HAS_OPERATION is retried,
patiently, whatever its wording (cloud/errors.py). Enabling the Lustre CSI driver on a running
cluster reaches existing nodes only when they are recreated, which xpk does by "upgrading"
each node pool to its own version (xpk 1.16.0 core/nodepool.py
recreate_nodes_in_existing_node_pools): `recreate_node_pool` does the same through the API,
as many nodes at once as the pool's upgrade settings allow (`set_upgrade_settings`).
"""

from __future__ import annotations

import asyncio
import builtins
import time
from typing import Any

from .endpoints import CALL_TIMEOUT_S, Endpoints
from .errors import CloudError, api_disabled, retry


class GkeAdapter:
    def __init__(self, endpoints: Endpoints, project: str, region: str, cluster: str) -> None:
        self.endpoints, self.project, self.region, self.cluster = endpoints, project, region, cluster
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self.endpoints.container()
        return self._client

    @property
    def name(self) -> str:
        return f"projects/{self.project}/locations/{self.region}/clusters/{self.cluster}"

    async def get(self) -> Any | None:
        from google.api_core import exceptions as gexc

        async def call() -> Any:
            try:
                return await self.client.get_cluster(name=self.name, timeout=CALL_TIMEOUT_S)
            except gexc.NotFound:
                return None
            except gexc.PermissionDenied as exc:
                if api_disabled(exc):  # the API is off: no cluster can exist
                    return None
                raise

        return await retry(call, what=f"GKE cluster {self.cluster}")

    async def list(self) -> list[Any]:
        from google.api_core import exceptions as gexc

        async def call() -> list[Any]:
            try:
                resp = await self.client.list_clusters(
                    parent=f"projects/{self.project}/locations/-", timeout=CALL_TIMEOUT_S)
            except gexc.PermissionDenied as exc:
                if api_disabled(exc):
                    return []
                raise
            return list(resp.clusters)

        return await retry(call, what="list GKE clusters")

    @staticmethod
    def addons_enabled(cluster: Any) -> dict[str, bool]:
        addons = cluster.addons_config
        return {"RayOperator": bool(addons.ray_operator_config.enabled),
                "LustreCsiDriver": bool(addons.lustre_csi_driver_config.enabled)}

    @staticmethod
    def legacy_port(cluster: Any) -> bool:
        return bool(cluster.addons_config.lustre_csi_driver_config.enable_legacy_lustre_port)

    async def _operation(self, start: Any, what: str, *, expected_s: float) -> Any:
        """Start a cluster operation (retried while the cluster is busy) and wait for it."""
        # Busy-cluster refusals can last a whole xpk phase or a GKE auto-upgrade: be patient.
        op = await retry(start, what=what, attempts=40, base_s=max(0.2, expected_s / 20),
                         cap_s=30.0)
        return await self.wait_operation(op.name, expected_s=expected_s)

    async def enable_addons(self, *, expected_s: float, legacy_port: bool = False) -> None:
        """RayOperator and LustreCsiDriver in ONE UpdateCluster (one operation, one wait), the
        CSI driver's legacy port (6988) set as asked: it must match the Lustre instance."""
        from google.cloud import container_v1

        update = container_v1.ClusterUpdate(desired_addons_config=container_v1.AddonsConfig(
            ray_operator_config=container_v1.RayOperatorConfig(enabled=True),
            lustre_csi_driver_config=container_v1.LustreCsiDriverConfig(
                enabled=True, enable_legacy_lustre_port=legacy_port)))

        async def call() -> Any:
            return await self.client.update_cluster(name=self.name, update=update,
                                                    timeout=CALL_TIMEOUT_S)

        await self._operation(call, f"enable addons on {self.cluster}", expected_s=expected_s)

    async def set_labels(self, labels: dict[str, str], *, expected_s: float) -> None:
        """Merge `labels` into the cluster's resource labels (SetLabels is itself a cluster
        operation; its fingerprint is read fresh on every attempt)."""
        async def call() -> Any:
            cluster = await self.client.get_cluster(name=self.name, timeout=CALL_TIMEOUT_S)
            merged = {**dict(cluster.resource_labels), **labels}
            return await self.client.set_labels(request={
                "name": self.name, "resource_labels": merged,
                "label_fingerprint": cluster.label_fingerprint}, timeout=CALL_TIMEOUT_S)

        await self._operation(call, f"label {self.cluster}", expected_s=expected_s)

    async def recreate_node_pool(self, pool: str, *, expected_s: float) -> None:
        """Recreate a pool's nodes by updating it to its own version (what
        `gcloud container clusters upgrade --node-pool=POOL` does)."""
        async def call() -> Any:
            np = await self.client.get_node_pool(name=f"{self.name}/nodePools/{pool}",
                                                 timeout=CALL_TIMEOUT_S)
            return await self.client.update_node_pool(request={
                "name": f"{self.name}/nodePools/{pool}", "node_version": np.version,
                "image_type": np.config.image_type or "COS_CONTAINERD"}, timeout=CALL_TIMEOUT_S)

        await self._operation(call, f"recreate nodes of {pool}", expected_s=expected_s)

    async def set_upgrade_settings(self, pool: str, *, max_surge: int, max_unavailable: int,
                                   expected_s: float) -> None:
        """A pool's surge upgrade settings, alone in an UpdateNodePool (how many nodes an
        upgrade takes at once: "(maxUnavailable + maxSurge) determines the level of
        parallelism", google-cloud-container 2.67.0 NodePool.UpgradeSettings). The request
        carries only `upgrade_settings` with the SURGE strategy, as terraform-provider-google
        v7.40.0 sends it (google/services/container/resource_container_node_pool.go, lines
        1912-1990)."""
        from google.cloud import container_v1

        settings = container_v1.NodePool.UpgradeSettings(
            strategy=container_v1.NodePoolUpdateStrategy.SURGE, max_surge=max_surge,
            max_unavailable=max_unavailable)

        async def call() -> Any:
            return await self.client.update_node_pool(request={
                "name": f"{self.name}/nodePools/{pool}", "upgrade_settings": settings},
                timeout=CALL_TIMEOUT_S)

        await self._operation(call, f"set the upgrade settings of {pool}"
                              f" (surge {max_surge}, unavailable {max_unavailable})",
                              expected_s=expected_s)

    async def operations(self) -> builtins.list[Any]:
        """This cluster's operations (GKE's own included), oldest first."""
        async def call() -> builtins.list[Any]:
            resp = await self.client.list_operations(
                parent=f"projects/{self.project}/locations/{self.region}", timeout=CALL_TIMEOUT_S)
            return [op for op in resp.operations
                    if op.target_link.endswith(f"/clusters/{self.cluster}")
                    or f"/clusters/{self.cluster}/" in op.target_link]

        ops = await retry(call, what=f"operations of {self.cluster}")
        return sorted(ops, key=lambda op: op.start_time)

    async def wait_operation(self, op_name: str, *, expected_s: float) -> Any:
        short = op_name.rsplit("/", 1)[-1]
        name = f"projects/{self.project}/locations/{self.region}/operations/{short}"
        interval = max(0.2, min(10.0, expected_s / 40))
        deadline = time.monotonic() + max(3 * expected_s, 60.0)
        while True:
            op = await retry(lambda: self.client.get_operation(name=name, timeout=CALL_TIMEOUT_S),
                             what=f"GKE operation {short}")
            if op.status.name == "DONE":
                if op.error and op.error.message:
                    raise CloudError(f"GKE operation {short} failed: {op.error.message}",
                                     transient=False, code="OperationFailed")
                return op
            if time.monotonic() > deadline:
                raise CloudError(f"GKE operation {short} not done after {3 * expected_s:.0f} s",
                                 transient=True, code="Timeout")
            await asyncio.sleep(interval)

    @staticmethod
    def operation_failure(op: Any) -> str | None:
        """What a finished, failed operation says (Operation.error, a google.rpc.Status)."""
        if op.status.name != "DONE":
            return None
        message = op.error.message if op.error else ""
        return message or None

    async def delete(self, *, expected_s: float) -> None:
        """DeleteCluster (no xpk): patient with a busy cluster, done when it is gone."""
        from google.api_core import exceptions as gexc

        async def call() -> Any:
            try:
                return await self.client.delete_cluster(name=self.name, timeout=CALL_TIMEOUT_S)
            except gexc.NotFound:
                return None

        op = await retry(call, what=f"delete GKE cluster {self.cluster}", attempts=40,
                         base_s=max(0.2, expected_s / 20), cap_s=30.0)
        if op is not None:
            await self.wait_operation(op.name, expected_s=expected_s)

    async def node_pools(self) -> builtins.list[Any]:
        async def call() -> builtins.list[Any]:
            resp = await self.client.list_node_pools(parent=self.name, timeout=CALL_TIMEOUT_S)
            return list(resp.node_pools)

        return await retry(call, what=f"node pools of {self.cluster}")
