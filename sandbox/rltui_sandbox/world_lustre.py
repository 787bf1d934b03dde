"""The sandbox World's Managed Lustre: instances (a create is checked against rules.py's copy of
Google's capacity table and needs the network's private services access), the late failures of a
create (the lustre.googleapis.com/capacity quota; the "lustre:create-late" fault, after
GoogleCloudPlatform/cluster-toolkit#5290), the instance states, delete, and the
google.longrunning operations (get/list/delete/cancel/wait; the LroStore is shared with Service
Usage's enable operations). An ACTIVE instance has a local folder standing in for its filesystem.

LustreMixin is mixed into World (world.py) and uses its plumbing (_tick, _commit, _schedule,
_arm, _emit, _wait, _project, _lro, _due, _request_ids, record, faults, lustre_quota_gib).
"""

from __future__ import annotations

import ipaddress
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import grpc
from google.cloud import lustre_v1
from google.longrunning import operations_pb2
from google.protobuf import empty_pb2

from rltui_sandbox.grpc_util import (
    AlreadyExists, CloudError, FailedPrecondition, InvalidArgument, NotFound, ResourceExhausted, utcnow,
)
from rltui_sandbox.rules import LUSTRE_FILESYSTEM, LUSTRE_INSTANCE_ID, LUSTRE_TIERS
from rltui_sandbox.world_model import _NETWORK_PATH, _copy, project_number
from rltui_sandbox.world_network import SERVICE_NETWORKING


LustreState = lustre_v1.Instance.State


# The allowed capacities per tier: the sandbox's own copy of Google's table (rules.py).
LUSTRE_CAPACITY_TIERS = LUSTRE_TIERS




class LustreMixin:
    """Managed Lustre instances and the google.longrunning operations (mixed into World)."""

    # ---- Managed Lustre --------------------------------------------------------------------------

    def _instance(self, project: str, location: str, instance_id: str) -> lustre_v1.Instance:
        name = f"projects/{project}/locations/{location}/instances/{instance_id}"
        inst = self._project(project).instances.get(name)
        if inst is None:
            raise NotFound(f"Resource '{name}' was not found")
        return inst

    def get_lustre_instance(self, project: str, location: str, instance_id: str) -> lustre_v1.Instance:
        self._tick()
        return _copy(self._instance(project, location, instance_id))

    def list_lustre_instances(self, project: str, location: str = "-") -> list[lustre_v1.Instance]:
        self._tick()
        prefix = f"projects/{project}/locations/{location}/instances/"
        return [_copy(i) for n, i in sorted(self._project(project).instances.items())
                if location == "-" or n.startswith(prefix)]

    def lustre_dir(self, project: str, location: str, instance_id: str) -> Path:
        """The local folder standing in for the instance's filesystem (exists while ACTIVE)."""
        return self.state_dir / "lustre" / project / location / instance_id

    def _validate_lustre(self, instance_id: str, inst: lustre_v1.Instance) -> tuple[str, str]:
        if not LUSTRE_INSTANCE_ID.match(instance_id or ""):
            raise InvalidArgument(
                f"instance_id {instance_id!r} is invalid: use 1-63 lowercase letters, digits or hyphens, "
                "starting with a letter and ending with a letter or digit"
            )
        if not LUSTRE_FILESYSTEM.match(inst.filesystem or ""):
            raise InvalidArgument(f"instance.filesystem {inst.filesystem!r} is invalid: use 1-8 letters or digits")
        rule = LUSTRE_CAPACITY_TIERS.get(inst.per_unit_storage_throughput)
        if rule is None:
            raise InvalidArgument(
                f"instance.per_unit_storage_throughput {inst.per_unit_storage_throughput} is invalid: use one of "
                f"{', '.join(str(t) for t in sorted(LUSTRE_CAPACITY_TIERS))} (MB/s per TiB)"
            )
        problem = rule.check(inst.capacity_gib)
        if problem:
            raise InvalidArgument(
                f"instance.capacity_gib {inst.capacity_gib} is not allowed for per_unit_storage_throughput "
                f"{inst.per_unit_storage_throughput}: {problem}"
            )
        match = _NETWORK_PATH.match(inst.network or "")
        if match is None:
            raise InvalidArgument(
                f"instance.network {inst.network!r} is invalid: use projects/PROJECT/global/networks/NETWORK"
            )
        net_project, network = match["project"], match["network"]
        if network not in self._project(net_project).networks:
            raise InvalidArgument(f"instance.network {inst.network!r} does not exist")
        peering = self._project(net_project).peerings.get(f"{network}|{SERVICE_NETWORKING}")
        if peering is None or peering.status != "ACTIVE":
            raise FailedPrecondition(
                f"network {inst.network} has no private services access: allocate a range "
                f"(gcloud compute addresses create --global --purpose=VPC_PEERING --network={network}) and "
                f"connect it (gcloud services vpc-peerings connect --service={SERVICE_NETWORKING} "
                f"--network={network})"
            )
        return net_project, network

    def create_lustre_instance(self, project: str, location: str, instance_id: str, instance: lustre_v1.Instance,
                               *, request_id: str = "") -> operations_pb2.Operation:
        """Start a create: CREATING now, ACTIVE with mount_point after lustre_create. A repeated
        request_id returns the first operation (the API's idempotent retry).

        Some creates fail late instead: the operation ends in error after a quarter of the
        create time and the instance goes away (lustre_v1.Instance.State has no failed state, so
        a failed create leaves nothing behind; GetInstance answers NOT_FOUND):
        - over `lustre_quota_gib` (capacity per zone and network, the documented quota metric
          lustre.googleapis.com/capacity): RESOURCE_EXHAUSTED with Service Infrastructure's
          quota wording and ErrorInfo reason RESOURCE_QUOTA_EXCEEDED (google/api/error_reason.proto);
          whether the real API refuses at request time or in the operation is NOT verified;
        - the fault channel "lustre:create-late" (under --faults, or Faults.force): INTERNAL
          "an internal error has occurred", the error a create ended with when a zone had no
          capacity (GoogleCloudPlatform/cluster-toolkit#5290: "Error waiting for Creating
          Instance: Error code 13, message: an internal error has occurred", fixed by another zone).
        """
        self._tick()
        if request_id and request_id in self._request_ids:
            return self._lro.get(self._request_ids[request_id])
        if not location or location == "-":
            raise InvalidArgument(f"location {location!r} is invalid: name one zone, e.g. us-east1-b")
        self._validate_lustre(instance_id, instance)
        p = self._project(project)
        name = f"projects/{project}/locations/{location}/instances/{instance_id}"
        if name in p.instances:
            raise AlreadyExists(f"Resource '{name}' already exists")
        failure = self._lustre_create_failure(project, location, instance)
        inst = _copy(instance)
        inst.name, inst.state, inst.mount_point, inst.uid = name, LustreState.CREATING, "", str(uuid.uuid4())
        inst.create_time = inst.update_time = utcnow()
        p.instances[name] = inst
        op = self._start_lro(project, location, name, "create", request_id)
        record_id = self.record.start("lustre.create", name)
        args = {"project": project, "name": name, "operation": op.name, "record_id": record_id}
        if failure is None:
            self._schedule("lustre_ready", args, key="lustre_create")
        else:
            self._schedule("lustre_failed", {**args, **failure},
                           seconds=self.clock.seconds("lustre_create") / 4)
        self._commit()
        return op

    def _lustre_quota(self, location: str) -> int | None:
        q = self.lustre_quota_gib
        return q.get(location) if isinstance(q, dict) else q

    def _lustre_create_failure(self, project: str, location: str,
                               instance: lustre_v1.Instance) -> dict[str, Any] | None:
        """How this create will end in error (JSON, kept in the deadline), or None."""
        limit = self._lustre_quota(location)
        if limit is not None:
            used = sum(int(i.capacity_gib) for n, i in self._project(project).instances.items()
                       if n.split("/")[3] == location and i.network == instance.network)
            if used + int(instance.capacity_gib) > limit:
                return {"code": "RESOURCE_EXHAUSTED", "quota": {"limit": limit, "used": used,
                                                               "network": instance.network}}
        if self.faults is not None and self.faults.hit("lustre:create-late"):
            return {"code": "INTERNAL"}
        return None

    def _on_lustre_failed(self, project: str, name: str, operation: str, code: str,
                          record_id: int | None = None, quota: dict[str, Any] | None = None) -> None:
        inst = self._project(project).instances.get(name)
        if inst is None or inst.state != LustreState.CREATING:
            return
        del self._project(project).instances[name]
        if code == "RESOURCE_EXHAUSTED":
            number = project_number(project)
            metric = "lustre.googleapis.com/capacity"
            error: CloudError = ResourceExhausted(
                f"Quota exceeded for quota metric 'Lustre storage capacity (GiB) per zone and network' "
                f"and limit 'Lustre storage capacity (GiB) per zone and network per project' of service "
                f"'lustre.googleapis.com' for consumer 'project_number:{number}'.",
                reason="RESOURCE_QUOTA_EXCEEDED",
                metadata={"consumer": f"projects/{number}", "service": "lustre.googleapis.com",
                          "quota_metric": metric, "quota_limit": "CapacityPerZonePerNetwork"})
            self._finish_lro(operation, error=error)
        else:
            self._finish_lro(operation, error=CloudError("an internal error has occurred"),
                             code=grpc.StatusCode.INTERNAL)
        if record_id is not None:
            self.record.end(record_id, code)

    def set_lustre_state(self, project: str, location: str, instance_id: str, state: str, *,
                         seconds: float | None = None, reason: str = "") -> None:
        """Put an ACTIVE instance in another lustre_v1.Instance.State (e.g. "REPAIRING",
        "UPDATING", "SUSPENDED" with `reason` in state_reason), back to ACTIVE after `seconds`
        (None: it stays). The states are the docstring's; when Google enters them is not modelled."""
        self._tick()
        inst = self._instance(project, location, instance_id)
        inst.state, inst.state_reason, inst.update_time = LustreState[state], reason, utcnow()
        if seconds is not None:
            self._schedule("lustre_state", {"project": project, "name": inst.name, "state": "ACTIVE"},
                           seconds=seconds)
            self._arm()
        self._commit()

    def _on_lustre_state(self, project: str, name: str, state: str) -> None:
        inst = self._project(project).instances.get(name)
        if inst is not None and inst.state not in (LustreState.CREATING, LustreState.DELETING):
            inst.state, inst.state_reason, inst.update_time = LustreState[state], "", utcnow()

    def _start_lro(self, project: str, location: str, target: str, verb: str,
                   request_id: str) -> operations_pb2.Operation:
        op_id = f"operation-{int(time.time() * 1000)}-{uuid.uuid4().hex[:12]}"
        op_name = f"projects/{project}/locations/{location}/operations/{op_id}"
        meta = lustre_v1.OperationMetadata(create_time=utcnow(), target=target, verb=verb, api_version="v1")
        if request_id:
            self._request_ids[request_id] = op_name
        return self._lro.start(op_name, meta)

    def _finish_lro(self, op_name: str, *, response: Any = None, error: CloudError | None = None,
                    code: grpc.StatusCode | None = None, cancelled: bool = False) -> None:
        meta = self._lro.metadata(op_name, lustre_v1.OperationMetadata)
        meta.end_time = utcnow()
        meta.requested_cancellation = cancelled
        self._lro.finish(op_name, metadata=meta, response=response, error=error, error_code=code)

    def _on_lustre_ready(self, project: str, name: str, operation: str, record_id: int | None = None) -> None:
        inst = self._project(project).instances.get(name)
        if inst is None or inst.state != LustreState.CREATING:
            return
        net_project, network = _NETWORK_PATH.match(inst.network).group("project", "network")  # type: ignore[union-attr]
        q = self._project(net_project)
        peering = q.peerings.get(f"{network}|{SERVICE_NETWORKING}")
        if peering is None or not peering.ranges or peering.ranges[0] not in q.addresses:
            del self._project(project).instances[name]
            self._finish_lro(operation, error=FailedPrecondition(
                f"private services access of network {inst.network} was removed while the instance was created"))
            if record_id is not None:
                self.record.end(record_id, "FAILED_PRECONDITION")
            return
        first = peering.ranges[0]
        host = q.lustre_hosts.get(first, 0)
        q.lustre_hosts[first] = host + 1
        ip = ipaddress.IPv4Address(q.addresses[first].address) + 2 + host
        inst.state, inst.mount_point, inst.update_time = LustreState.ACTIVE, f"{ip}@tcp:/{inst.filesystem}", utcnow()
        location, instance_id = name.split("/")[3], name.split("/")[5]
        folder = self.lustre_dir(project, location, instance_id)
        folder.mkdir(parents=True, exist_ok=True)
        self._finish_lro(operation, response=inst)
        if record_id is not None:
            self.record.end(record_id)
        self._emit("lustre_active", project, location, instance_id, mount_point=inst.mount_point,
                   capacity_gib=inst.capacity_gib, dir=str(folder))

    def delete_lustre_instance(self, project: str, location: str, instance_id: str, *,
                               request_id: str = "") -> operations_pb2.Operation:
        """Start a delete: DELETING now, gone (with its folder) after lustre_delete."""
        self._tick()
        if request_id and request_id in self._request_ids:
            return self._lro.get(self._request_ids[request_id])
        inst = self._instance(project, location, instance_id)
        if inst.state in (LustreState.CREATING, LustreState.DELETING):
            raise FailedPrecondition(f"Instance {inst.name} is {inst.state.name}; wait for its operation to finish")
        inst.state, inst.update_time = LustreState.DELETING, utcnow()
        op = self._start_lro(project, location, inst.name, "delete", request_id)
        record_id = self.record.start("lustre.delete", inst.name)
        self._schedule("lustre_gone", {"project": project, "name": inst.name, "operation": op.name,
                                       "record_id": record_id}, key="lustre_delete")
        self._commit()
        return op

    def _on_lustre_gone(self, project: str, name: str, operation: str, record_id: int | None = None) -> None:
        if record_id is not None:
            self.record.end(record_id)
        inst = self._project(project).instances.pop(name, None)
        if inst is not None:
            match = _NETWORK_PATH.match(inst.network or "")
            if match is not None and not self._lustre_on(match["project"], match["network"]):
                self._project(match["project"]).producer_released[match["network"]] = time.time()
        location, instance_id = name.split("/")[3], name.split("/")[5]
        shutil.rmtree(self.lustre_dir(project, location, instance_id), ignore_errors=True)
        self._finish_lro(operation, response=empty_pb2.Empty())
        self._emit("lustre_deleted", project, location, instance_id)

    # ---- google.longrunning operations (Lustre) ----------------------------------------------------

    def get_operation(self, name: str) -> operations_pb2.Operation:
        self._tick()
        return self._lro.get(name)

    def list_operations(self, collection: str) -> list[operations_pb2.Operation]:
        """Operations under 'projects/P/locations/L'."""
        self._tick()
        return self._lro.list(collection)

    def delete_operation(self, name: str) -> None:
        self._tick()
        self._lro.delete(name)
        self._commit()

    def cancel_operation(self, name: str) -> None:
        """Cancel a running create (the instance is rolled back); deletes cannot be cancelled."""
        self._tick()
        op = self._lro.get(name)
        if op.done:
            return
        due = next((d for d in self._due if d.args.get("operation") == name), None)
        if due is None or due.action not in ("lustre_ready", "lustre_failed"):
            raise FailedPrecondition(f"Operation '{name}' cannot be cancelled")
        self._due.remove(due)
        if due.args.get("record_id") is not None:
            self.record.end(due.args["record_id"], "CANCELLED")
        self._project(due.args["project"]).instances.pop(due.args["name"], None)
        self._finish_lro(name, error=CloudError("Operation was cancelled"), code=grpc.StatusCode.CANCELLED,
                         cancelled=True)
        self._commit()
        self._arm()

    async def wait_operation(self, name: str, timeout: float | None = None) -> operations_pb2.Operation:
        self._lro.get(name)
        await self._wait(lambda: not self._lro.running(name), timeout)
        return self._lro.get(name)
