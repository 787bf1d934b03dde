"""google.api.serviceusage.v1.ServiceUsage over the World: which APIs a project has on.

What the requests and answers look like is taken from google-cloud-service-usage 1.18's own
types (google/cloud/service_usage_v1/types/serviceusage.py docstrings):

- ListServices(parent `projects/123`, page_size <= 200, default 50, filter `state:ENABLED` or
  `state:DISABLED`): without a filter "all services available to the project" - here the
  default-enabled set, the codelab's four and every API the project turned on.
- GetService(name `projects/123/services/x`), BatchGetServices(parent, names: at most 30).
- EnableService(name) and BatchEnableServices(parent, service_ids: at most 20; "If more than 20
  services are specified, the request will fail, and no state changes will occur") return a
  google.longrunning Operation (metadata OperationMetadata, response EnableServiceResponse /
  BatchEnableServicesResponse) polled through google.longrunning.Operations/GetOperation, which
  grpc_lustre registers on the same server; it is done after the profile's `enable_apis` time.
- Names come back by project NUMBER (`projects/123/services/compute.googleapis.com`) whichever
  way the request named the project, as the docstrings' examples show.

The error wording for a malformed name is the sandbox's own (not verified).
"""

from __future__ import annotations

import grpc
from google.cloud import service_usage_v1 as su
from google.longrunning import operations_pb2

from rltui_sandbox import services as apis
from rltui_sandbox.grpc_util import InvalidArgument, add_service, page, parse_name
from rltui_sandbox.world import World

SERVICE = "google.api.serviceusage.v1.ServiceUsage"
PARENT = "projects/{project}"
NAME = PARENT + "/services/{service}"
MAX_PAGE = 200
DEFAULT_PAGE = 50


def add_service_usage_service(server: grpc.aio.Server, world: World) -> None:
    def catalog(project: str) -> list[str]:
        return sorted(set(world.list_services(project)) | set(apis.CODELAB_APIS) | set(apis.TITLES))

    def list_services(req: su.ListServicesRequest) -> su.ListServicesResponse:
        project = parse_name(PARENT, req.parent, "parent")["project"]
        if req.page_size < 0 or req.page_size > MAX_PAGE:
            raise InvalidArgument(f"page_size {req.page_size} is invalid: requested page size cannot exceed 200")
        wanted = {"": None, "state:ENABLED": su.State.ENABLED, "state:DISABLED": su.State.DISABLED}
        if req.filter not in wanted:
            raise InvalidArgument(f"filter {req.filter!r} is invalid: the allowed filters are state:ENABLED and "
                                  "state:DISABLED")
        items = [world.get_service(project, api) for api in catalog(project)]
        if wanted[req.filter] is not None:
            items = [s for s in items if s.state == wanted[req.filter]]
        items, token = page(items, req.page_size or DEFAULT_PAGE, req.page_token)
        return su.ListServicesResponse(services=items, next_page_token=token)

    def get_service(req: su.GetServiceRequest) -> su.Service:
        n = parse_name(NAME, req.name)
        return world.get_service(n["project"], n["service"])

    def batch_get_services(req: su.BatchGetServicesRequest) -> su.BatchGetServicesResponse:
        project = parse_name(PARENT, req.parent, "parent")["project"]
        if len(req.names) > 30:
            raise InvalidArgument(f"names lists {len(req.names)} services: a request can get at most 30")
        out = []
        for name in req.names:
            n = parse_name(NAME, name, "names")
            if world.resolve_project(n["project"]) != world.resolve_project(project):
                raise InvalidArgument(f"names: {name!r} is not under parent {req.parent!r}")
            out.append(world.get_service(project, n["service"]))
        return su.BatchGetServicesResponse(services=out)

    def enable_service(req: su.EnableServiceRequest) -> operations_pb2.Operation:
        n = parse_name(NAME, req.name)
        return world.start_enable_services(n["project"], [n["service"]], batch=False)

    def batch_enable_services(req: su.BatchEnableServicesRequest) -> operations_pb2.Operation:
        project = parse_name(PARENT, req.parent, "parent")["project"]
        return world.start_enable_services(project, list(req.service_ids), batch=True)

    add_service(server, SERVICE, {
        "ListServices": (list_services, su.ListServicesRequest, su.ListServicesResponse),
        "GetService": (get_service, su.GetServiceRequest, su.Service),
        "BatchGetServices": (batch_get_services, su.BatchGetServicesRequest, su.BatchGetServicesResponse),
        "EnableService": (enable_service, su.EnableServiceRequest, operations_pb2.Operation),
        "BatchEnableServices": (batch_enable_services, su.BatchEnableServicesRequest, operations_pb2.Operation),
    }, world.faults)
