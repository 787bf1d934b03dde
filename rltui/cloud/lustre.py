"""Managed Lustre over google-cloud-lustre (async, gRPC)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, Callable

from .endpoints import CALL_TIMEOUT_S, Endpoints
from .errors import CloudError, retry

MANAGED_BY = {"managed-by": "rltui"}


class LustreAdapter:
    def __init__(self, endpoints: Endpoints, project: str, location: str) -> None:
        self.endpoints, self.project, self.location = endpoints, project, location
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self.endpoints.lustre()
        return self._client

    def name(self, instance_id: str) -> str:
        return f"projects/{self.project}/locations/{self.location}/instances/{instance_id}"

    async def get(self, instance_id: str) -> Any | None:
        from google.api_core import exceptions as gexc

        async def call() -> Any:
            try:
                return await self.client.get_instance(name=self.name(instance_id),
                                                      timeout=CALL_TIMEOUT_S)
            except gexc.NotFound:
                return None

        return await retry(call, what=f"Lustre instance {instance_id}")

    async def list(self) -> list[Any]:
        async def call() -> list[Any]:
            pager = await self.client.list_instances(
                parent=f"projects/{self.project}/locations/-", timeout=CALL_TIMEOUT_S)
            return [i async for i in pager]

        return await retry(call, what="list Lustre instances")

    async def create(self, instance_id: str, *, capacity_gib: int, throughput: int, network: str,
                     filesystem: str = "lustre", labels: dict[str, str] | None = None) -> None:
        """Start the create (the codelab's `--async`); `wait_active` waits for it."""
        from google.api_core import exceptions as gexc
        from google.cloud import lustre_v1

        instance = lustre_v1.Instance(
            capacity_gib=capacity_gib, per_unit_storage_throughput=throughput,
            filesystem=filesystem, gke_support_enabled=True,
            network=f"projects/{self.project}/global/networks/{network}",
            labels={**MANAGED_BY, **(labels or {})})
        # One id per create: its retries are deduplicated by the server, while a later create
        # (after a delete: ids are remembered for an hour) is a new request.
        request_id = str(uuid.uuid4())

        async def call() -> None:
            try:
                await self.client.create_instance(request=lustre_v1.CreateInstanceRequest(
                    parent=f"projects/{self.project}/locations/{self.location}",
                    instance_id=instance_id, instance=instance, request_id=request_id),
                    timeout=CALL_TIMEOUT_S)
            except gexc.AlreadyExists:
                return  # a retry after a lost answer, or created by an earlier run

        await retry(call, what=f"create Lustre instance {instance_id}")

    async def wait_active(self, instance_id: str, *, expected_s: float,
                          on_state: Callable[[str], None] | None = None,
                          timeout_s: float | None = None) -> Any:
        """Poll until ACTIVE; polls faster for short expected durations (sandbox speeds)."""
        start = time.monotonic()
        timeout_s = timeout_s or max(3 * expected_s, 60.0)
        interval = max(0.2, min(15.0, expected_s / 40))
        last = ""
        while True:
            inst = await self.get(instance_id)
            if inst is None:
                raise CloudError(f"Lustre instance {instance_id} disappeared while being created",
                                 transient=False, code="NotFound")
            state = inst.state.name
            if state != last and on_state:
                on_state(state)
            last = state
            if state == "ACTIVE":
                return inst
            if state not in ("CREATING", "UPDATING", "REPAIRING"):
                raise CloudError(f"Lustre instance {instance_id} is {state}, not ACTIVE",
                                 transient=False, code=state)
            if time.monotonic() - start > timeout_s:
                raise CloudError(f"Lustre instance {instance_id} not ACTIVE after"
                                 f" {timeout_s:.0f} s (still {state})", transient=True,
                                 code="Timeout")
            await asyncio.sleep(interval)

    async def delete(self, instance_id: str, *, expected_s: float) -> None:
        """Delete and wait until it is gone."""
        from google.api_core import exceptions as gexc

        async def call() -> None:
            try:
                await self.client.delete_instance(name=self.name(instance_id),
                                                  timeout=CALL_TIMEOUT_S)
            except gexc.NotFound:
                return
            except gexc.FailedPrecondition as exc:
                if "DELETING" in str(exc) or "being deleted" in str(exc):
                    return  # already on its way
                raise

        await retry(call, what=f"delete Lustre instance {instance_id}")
        interval = max(0.2, min(15.0, expected_s / 40))
        deadline = time.monotonic() + max(3 * expected_s, 60.0)
        while await self.get(instance_id) is not None:
            if time.monotonic() > deadline:
                raise CloudError(f"Lustre instance {instance_id} still exists after delete",
                                 transient=True, code="Timeout")
            await asyncio.sleep(interval)
