"""Managed Lustre over google-cloud-lustre (async, gRPC).

The instance is created WITHOUT the deprecated `gke_support_enabled` (google-cloud-lustre 0.4.3:
"no longer required for GKE"); the GKE side then enables the CSI driver without the legacy
port 6988 (cloud/gke.py): the pair must agree or the mount fails (sandbox/SOURCES.md#lustre-csi-port).

A create can fail late (quota, capacity, stockout): the error lives in its long-running
operation, and the instance may never appear or go away. So the wait reads the operation, by
name when this run started it, else the newest create operation targeting the instance.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .endpoints import CALL_TIMEOUT_S, Endpoints
from .errors import CloudError, api_disabled, retry

MANAGED_BY = {"managed-by": "rltui"}
# lustre_v1.Instance.State: on the way to ACTIVE (or passing through while usable), or not.
WAIT_STATES = frozenset({"STATE_UNSPECIFIED", "CREATING", "UPDATING", "REPAIRING", "UPGRADING"})
# google.rpc codes of a failed create that another try may get past.
_TRANSIENT_RPC = {4: "DEADLINE_EXCEEDED", 10: "ABORTED", 13: "INTERNAL", 14: "UNAVAILABLE"}


@dataclass(frozen=True)
class ExportState:
    """Where an ExportData operation is (lustre_v1 TransferCounters, the operation's error)."""
    done: bool
    error: str
    error_code: int
    found_files: int
    found_bytes: int
    copied_files: int
    copied_bytes: int
    failed_files: int


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
            except gexc.PermissionDenied as exc:
                if api_disabled(exc):  # the API is off: no instance can exist
                    return None
                raise

        return await retry(call, what=f"Lustre instance {instance_id}")

    async def list(self) -> list[Any]:
        from google.api_core import exceptions as gexc

        async def call() -> list[Any]:
            try:
                pager = await self.client.list_instances(
                    parent=f"projects/{self.project}/locations/-", timeout=CALL_TIMEOUT_S)
                return [i async for i in pager]
            except gexc.PermissionDenied as exc:
                if api_disabled(exc):
                    return []
                raise

        return await retry(call, what="list Lustre instances")

    async def create(self, instance_id: str, *, capacity_gib: int, throughput: int, network: str,
                     filesystem: str = "lustre", labels: dict[str, str] | None = None) -> str | None:
        """Start the create (the codelab's `--async`); returns its operation's name (None when
        the instance already existed). `wait_active` waits for it."""
        from google.api_core import exceptions as gexc
        from google.cloud import lustre_v1

        instance = lustre_v1.Instance(
            capacity_gib=capacity_gib, per_unit_storage_throughput=throughput,
            filesystem=filesystem,
            network=f"projects/{self.project}/global/networks/{network}",
            labels={**MANAGED_BY, **(labels or {})})
        # One id per create: its retries are deduplicated by the server, while a later create
        # (after a delete: ids are remembered for an hour) is a new request.
        request_id = str(uuid.uuid4())

        async def call() -> str | None:
            try:
                op = await self.client.create_instance(request=lustre_v1.CreateInstanceRequest(
                    parent=f"projects/{self.project}/locations/{self.location}",
                    instance_id=instance_id, instance=instance, request_id=request_id),
                    timeout=CALL_TIMEOUT_S)
                return str(op.operation.name)
            except gexc.AlreadyExists:
                return None  # a retry after a lost answer, or created by an earlier run

        return await retry(call, what=f"create Lustre instance {instance_id}")

    async def create_operation(self, instance_id: str, op_name: str | None = None) -> Any | None:
        """The create's google.longrunning Operation: by name, else the newest one whose
        metadata targets this instance (a rerun after a crash still finds a late failure)."""
        from google.api_core import exceptions as gexc
        from google.cloud import lustre_v1

        async def call() -> Any | None:
            if op_name:
                try:
                    return await self.client.get_operation(request={"name": op_name},
                                                           timeout=CALL_TIMEOUT_S)
                except gexc.NotFound:
                    return None
            resp = await self.client.list_operations(
                request={"name": f"projects/{self.project}/locations/{self.location}"},
                timeout=CALL_TIMEOUT_S)
            target, best = self.name(instance_id), None
            for op in resp.operations:
                meta = lustre_v1.OperationMetadata.deserialize(op.metadata.value)
                if meta.target == target and meta.verb == "create":
                    if best is None or meta.create_time > best[0]:
                        best = (meta.create_time, op)
            return best[1] if best else None

        return await retry(call, what=f"create operation of {instance_id}")

    @staticmethod
    def operation_error(op: Any) -> CloudError | None:
        """A finished operation's error as one line (None while running or when it succeeded)."""
        if op is None or not op.done or not op.HasField("error"):
            return None
        code = op.error.code
        name = _TRANSIENT_RPC.get(code)
        return CloudError(f"Lustre create failed: {op.error.message}", transient=name is not None,
                          code=name or f"rpc{code}")

    async def wait_active(self, instance_id: str, *, expected_s: float,
                          on_state: Callable[[str], None] | None = None,
                          timeout_s: float | None = None, op_name: str | None = None) -> Any:
        """Poll until ACTIVE; polls faster for short expected durations (sandbox speeds).
        A create whose operation ended in error raises that error."""
        start = time.monotonic()
        timeout_s = timeout_s or max(3 * expected_s, 60.0)
        interval = max(0.2, min(15.0, expected_s / 40))
        last = ""
        while True:
            inst = await self.get(instance_id)
            if inst is None or inst.state.name not in ("ACTIVE", *WAIT_STATES):
                failed = self.operation_error(await self.create_operation(instance_id, op_name))
                if failed is not None:
                    raise failed
            if inst is None:
                raise CloudError(f"Lustre instance {instance_id} does not exist (no failed create"
                                 " operation explains it): create it again", transient=True,
                                 code="NotFound")
            state = inst.state.name
            if state != last and on_state:
                on_state(state)
            last = state
            if state == "ACTIVE":
                return inst
            if state not in WAIT_STATES:
                raise CloudError(f"Lustre instance {instance_id} is {state}, not ACTIVE",
                                 transient=False, code=state)
            if time.monotonic() - start > timeout_s:
                raise CloudError(f"Lustre instance {instance_id} not ACTIVE after"
                                 f" {timeout_s:.0f} s (still {state})", transient=True,
                                 code="Timeout")
            await asyncio.sleep(interval)

    async def export_data(self, instance_id: str, lustre_path: str, gcs_uri: str) -> str:
        """Start ExportData (google-cloud-lustre 0.4.3 `export_data`: ExportDataRequest's
        lustre_path.path, a folder starting with "/", and gcs_path.uri, gs://BUCKET/PATH/ ending
        with "/"): the files under the folder land under the URI's path. Returns the operation's
        name; `export_state` reads its progress. One request id for its retries."""
        from google.cloud import lustre_v1

        request_id = str(uuid.uuid4())

        async def call() -> str:
            op = await self.client.export_data(request=lustre_v1.ExportDataRequest(
                name=self.name(instance_id), lustre_path=lustre_v1.LustrePath(path=lustre_path),
                gcs_path=lustre_v1.GcsPath(uri=gcs_uri), request_id=request_id), timeout=CALL_TIMEOUT_S)
            return str(op.operation.name)

        return await retry(call, what=f"export from Lustre instance {instance_id}")

    async def export_state(self, op_name: str) -> ExportState:
        """An export operation's counters (ExportDataMetadata.operation_metadata.counters) and,
        once done, its error (google.rpc code and message) if it ended in one."""
        from google.cloud import lustre_v1

        async def call() -> Any:
            return await self.client.get_operation(request={"name": op_name}, timeout=CALL_TIMEOUT_S)

        op = await retry(call, what="export operation")
        meta = lustre_v1.ExportDataMetadata.deserialize(op.metadata.value)
        c = meta.operation_metadata.counters
        error = op.error.message if op.done and op.HasField("error") else ""
        return ExportState(done=bool(op.done), error=error, error_code=int(op.error.code) if error else 0,
                           found_files=int(c.found_objects_count), found_bytes=int(c.bytes_found_count),
                           copied_files=int(c.objects_copied_count), copied_bytes=int(c.bytes_copied_count),
                           failed_files=int(c.objects_failed_count))

    async def delete(self, instance_id: str, *, expected_s: float,
                     on_state: Callable[[str], None] | None = None) -> None:
        """Delete and wait until it is gone; `on_state` hears each state seen meanwhile."""
        from google.api_core import exceptions as gexc

        async def call() -> None:
            try:
                await self.client.delete_instance(name=self.name(instance_id),
                                                  timeout=CALL_TIMEOUT_S)
            except gexc.NotFound:
                return
            except gexc.FailedPrecondition:
                inst = await self.get(instance_id)
                if inst is None or inst.state.name == "DELETING":
                    return  # already on its way (read from its state, not the refusal's text)
                raise

        await retry(call, what=f"delete Lustre instance {instance_id}")
        interval = max(0.2, min(15.0, expected_s / 40))
        deadline = time.monotonic() + max(3 * expected_s, 60.0)
        while (inst := await self.get(instance_id)) is not None:
            if on_state is not None:
                on_state(inst.state.name)
            if time.monotonic() > deadline:
                raise CloudError(f"Lustre instance {instance_id} still exists after delete",
                                 transient=True, code="Timeout")
            await asyncio.sleep(interval)
