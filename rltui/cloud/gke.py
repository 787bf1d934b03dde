"""GKE over google-cloud-container (async, gRPC): the cluster, its addons, its operations."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .endpoints import CALL_TIMEOUT_S, Endpoints
from .errors import CloudError, retry


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

        return await retry(call, what=f"GKE cluster {self.cluster}")

    async def list(self) -> list[Any]:
        async def call() -> list[Any]:
            resp = await self.client.list_clusters(
                parent=f"projects/{self.project}/locations/-", timeout=CALL_TIMEOUT_S)
            return list(resp.clusters)

        return await retry(call, what="list GKE clusters")

    @staticmethod
    def addons_enabled(cluster: Any) -> dict[str, bool]:
        addons = cluster.addons_config
        return {"RayOperator": bool(addons.ray_operator_config.enabled),
                "LustreCsiDriver": bool(addons.lustre_csi_driver_config.enabled)}

    async def enable_addons(self, *, expected_s: float) -> None:
        """RayOperator and LustreCsiDriver in ONE UpdateCluster (one operation, one wait).

        A cluster busy with another operation refuses it: that is retried until it is free.
        """
        from google.cloud import container_v1

        update = container_v1.ClusterUpdate(desired_addons_config=container_v1.AddonsConfig(
            ray_operator_config=container_v1.RayOperatorConfig(enabled=True),
            lustre_csi_driver_config=container_v1.LustreCsiDriverConfig(enabled=True)))

        async def call() -> Any:
            return await self.client.update_cluster(name=self.name, update=update,
                                                    timeout=CALL_TIMEOUT_S)

        # Busy-cluster refusals can last a whole xpk phase: allow a long, patient retry.
        op = await retry(call, what=f"enable addons on {self.cluster}", attempts=40,
                         base_s=max(0.2, expected_s / 20), cap_s=30.0)
        await self.wait_operation(op.name, expected_s=expected_s)

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

    async def node_pools(self) -> list[Any]:
        async def call() -> list[Any]:
            resp = await self.client.list_node_pools(parent=self.name, timeout=CALL_TIMEOUT_S)
            return list(resp.node_pools)

        return await retry(call, what=f"node pools of {self.cluster}")
