"""The sandbox World's Service Usage: which APIs a project has on, EnableService /
BatchEnableServices as google.longrunning operations (named `operations/acf.p2-<number>-<uuid>`,
as gcloud prints them; at most 20 in a batch), and `require_service`, the one gate every surface
(gRPC, Compute REST, control routes) calls: PERMISSION_DENIED with ErrorInfo SERVICE_DISABLED
(built in sandbox/rltui_sandbox/services.py). Enabling compute.googleapis.com the first time makes the
`default` network (world_network).

ServiceUsageMixin is mixed into World (world.py) and uses its plumbing and the LroStore it shares
with Lustre (world_lustre has the google.longrunning reads and waits).
"""

from __future__ import annotations

import uuid
from typing import Any, Iterable

from google.longrunning import operations_pb2

from rltui_sandbox import services as apis
from rltui_sandbox.grpc_util import InvalidArgument
from rltui_sandbox.world_model import project_number
from rltui_sandbox.world_network import _add_default_network


class ServiceUsageMixin:
    """Service Usage and the API gate (mixed into World)."""

    # ---- service usage ---------------------------------------------------------------------------

    def resolve_project(self, ref: str) -> str:
        """A project ID for `ref`, which may be the ID or a known project's number (the APIs
        accept both in resource names)."""
        if ref.isdigit():
            for pid in self._projects:
                if str(project_number(pid)) == ref:
                    return pid
        return ref

    def service_enabled(self, project: str, api: str) -> bool:
        self._tick()
        return api in self._project(self.resolve_project(project)).services

    def require_service(self, project: str, api: str) -> None:
        """Refuse (PERMISSION_DENIED, ErrorInfo SERVICE_DISABLED) unless `api` is enabled in
        `project`: the one gate every surface (gRPC, Compute REST, control routes) calls."""
        pid = self.resolve_project(project)
        if not self.service_enabled(pid, api):
            raise apis.service_disabled(api, pid, project_number(pid))

    def gate_grpc(self, service: str, request: Any) -> None:
        """grpc_util.guard's gate: the API behind gRPC `service`, in the request's project."""
        api = apis.GRPC_SERVICE_APIS.get(service)
        project = apis.project_of_request(request) if api else None
        if api and project and project != "-":
            self.require_service(project, api)

    def start_enable_services(self, project: str, services: Iterable[str], *,
                              batch: bool = True) -> operations_pb2.Operation:
        """serviceusage EnableService/BatchEnableServices: a google.longrunning operation named
        `operations/acf.p2-<number>-<uuid>` (the name gcloud prints), done after enable_apis with an
        EnableServiceResponse (batch=False) or BatchEnableServicesResponse; at once when all of
        them are on already. Enabling compute.googleapis.com the first time makes `default`."""
        from google.cloud import service_usage_v1

        self._tick()
        pid = self.resolve_project(project)
        wanted = list(dict.fromkeys(services))
        if not wanted:
            raise InvalidArgument("service_ids must name at least one service")
        if len(wanted) > 20:  # BatchEnableServicesRequest.service_ids: "at most 20"
            raise InvalidArgument(f"service_ids names {len(wanted)} services: a batch enables at most 20")
        for name in wanted:
            if not apis.valid_api_name(name):
                raise InvalidArgument(f"service {name!r} is not a Google API name like compute.googleapis.com")
        number = project_number(pid)
        op_name = f"operations/acf.p2-{number}-{uuid.uuid4()}"
        meta = service_usage_v1.OperationMetadata(resource_names=[f"services/{s}" for s in wanted])
        self._lro.start(op_name, meta)
        rec = self.record.start("serviceusage.batchEnable" if batch else "serviceusage.enable",
                                f"projects/{number}", services=wanted)
        new = [s for s in wanted if s not in self._project(pid).services]
        args = {"project": pid, "services": new, "operation": op_name, "batch": batch, "wanted": wanted, "rec": rec}
        if new:
            self._schedule("services_enabled", args, key="enable_apis")
        else:
            self._on_services_enabled(**args)
        self._commit()
        self._arm()
        return self._lro.get(op_name)

    async def enable_services(self, project: str, services: Iterable[str]) -> list[str]:
        """`gcloud services enable` (one enable_apis wait for the batch); returns all enabled."""
        op = self.start_enable_services(project, services)
        await self.wait_operation(op.name)
        return self.list_services(project)

    def _on_services_enabled(self, project: str, services: list[str], operation: str | None = None,
                             batch: bool = True, wanted: list[str] | None = None, rec: int | None = None) -> None:
        p = self._project(project)
        p.services.update(services)
        if apis.COMPUTE in services and not p.default_network_made:
            _add_default_network(p, private_services_access=False)
        if operation is not None and self._lro.running(operation):
            from google.cloud import service_usage_v1

            done = [self.get_service(project, s) for s in (wanted or services)]
            response: Any = (service_usage_v1.BatchEnableServicesResponse(services=done) if batch
                             else service_usage_v1.EnableServiceResponse(service=done[0]))
            self._lro.finish(operation, metadata=self._lro.metadata(operation, service_usage_v1.OperationMetadata),
                             response=response)
        if rec is not None:
            self.record.end(rec)

    def list_services(self, project: str) -> list[str]:
        """The enabled APIs (Google's default set included), sorted."""
        self._tick()
        return sorted(self._project(self.resolve_project(project)).services)

    def get_service(self, project: str, api: str) -> Any:
        """serviceusage.v1 Service: name/parent by project NUMBER, as the API answers."""
        from google.cloud import service_usage_v1

        pid = self.resolve_project(project)
        parent = f"projects/{project_number(pid)}"
        state = service_usage_v1.State.ENABLED if api in self._project(pid).services else service_usage_v1.State.DISABLED
        return service_usage_v1.Service(name=f"{parent}/services/{api}", parent=parent, state=state,
                                        config=service_usage_v1.ServiceConfig(name=api, title=apis.title(api)))
