"""google.cloud.lustre.v1.Lustre (instance RPCs, ExportData) and google.longrunning.Operations over the World.

The request shapes are the ones LustreClient sends: parent/name resource paths, instance_id and
instance on create; create/delete answer with a google.longrunning Operation that the client
polls through Operations/GetOperation.
"""

from __future__ import annotations

import grpc
from google.cloud import lustre_v1
from google.longrunning import operations_pb2
from google.protobuf import empty_pb2

from rltui_sandbox.grpc_util import add_service, page, parse_name
from rltui_sandbox.world import World

PARENT = "projects/{project}/locations/{location}"
INSTANCE = PARENT + "/instances/{instance}"


def add_lustre_services(server: grpc.aio.Server, world: World) -> None:
    def create_instance(req: lustre_v1.CreateInstanceRequest) -> operations_pb2.Operation:
        where = parse_name(PARENT, req.parent, "parent")
        return world.create_lustre_instance(where["project"], where["location"], req.instance_id, req.instance,
                                            request_id=req.request_id)

    def get_instance(req: lustre_v1.GetInstanceRequest) -> lustre_v1.Instance:
        n = parse_name(INSTANCE, req.name)
        return world.get_lustre_instance(n["project"], n["location"], n["instance"])

    def list_instances(req: lustre_v1.ListInstancesRequest) -> lustre_v1.ListInstancesResponse:
        where = parse_name(PARENT, req.parent, "parent")
        items, token = page(world.list_lustre_instances(where["project"], where["location"]),
                            req.page_size, req.page_token)
        return lustre_v1.ListInstancesResponse(instances=items, next_page_token=token)

    def delete_instance(req: lustre_v1.DeleteInstanceRequest) -> operations_pb2.Operation:
        n = parse_name(INSTANCE, req.name)
        return world.delete_lustre_instance(n["project"], n["location"], n["instance"], request_id=req.request_id)

    def export_data(req: lustre_v1.ExportDataRequest) -> operations_pb2.Operation:
        # Copies the folder into a Cloud Storage bucket (world_storage.py export_lustre_data).
        n = parse_name(INSTANCE, req.name)
        return world.export_lustre_data(n["project"], n["location"], n["instance"], req.lustre_path.path,
                                        req.gcs_path.uri, request_id=req.request_id)

    add_service(server, "google.cloud.lustre.v1.Lustre", {
        "CreateInstance": (create_instance, lustre_v1.CreateInstanceRequest, operations_pb2.Operation),
        "GetInstance": (get_instance, lustre_v1.GetInstanceRequest, lustre_v1.Instance),
        "ListInstances": (list_instances, lustre_v1.ListInstancesRequest, lustre_v1.ListInstancesResponse),
        "DeleteInstance": (delete_instance, lustre_v1.DeleteInstanceRequest, operations_pb2.Operation),
        "ExportData": (export_data, lustre_v1.ExportDataRequest, operations_pb2.Operation),
    }, world.faults)
    _add_operations(server, world)


def _add_operations(server: grpc.aio.Server, world: World) -> None:
    def get_operation(req: operations_pb2.GetOperationRequest) -> operations_pb2.Operation:
        return world.get_operation(req.name)

    def list_operations(req: operations_pb2.ListOperationsRequest) -> operations_pb2.ListOperationsResponse:
        parse_name(PARENT, req.name)  # the client sends the collection's parent as `name`
        items, token = page(world.list_operations(req.name), req.page_size, req.page_token)
        return operations_pb2.ListOperationsResponse(operations=items, next_page_token=token)

    def delete_operation(req: operations_pb2.DeleteOperationRequest) -> empty_pb2.Empty:
        world.delete_operation(req.name)
        return empty_pb2.Empty()

    def cancel_operation(req: operations_pb2.CancelOperationRequest) -> empty_pb2.Empty:
        world.cancel_operation(req.name)
        return empty_pb2.Empty()

    add_service(server, "google.longrunning.Operations", {
        "GetOperation": (get_operation, operations_pb2.GetOperationRequest, operations_pb2.Operation),
        "ListOperations": (list_operations, operations_pb2.ListOperationsRequest,
                           operations_pb2.ListOperationsResponse),
        "DeleteOperation": (delete_operation, operations_pb2.DeleteOperationRequest, empty_pb2.Empty),
        "CancelOperation": (cancel_operation, operations_pb2.CancelOperationRequest, empty_pb2.Empty),
    }, world.faults)
