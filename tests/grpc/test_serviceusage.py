"""google.api.serviceusage.v1.ServiceUsage through the official client (sync and async over
insecure channels), and the SERVICE_DISABLED gate it controls on the other gRPC services."""

from __future__ import annotations

import grpc
import pytest
from google.api_core import exceptions
from google.cloud import service_usage_v1
from google.cloud.service_usage_v1.services.service_usage.transports import (
    ServiceUsageGrpcAsyncIOTransport, ServiceUsageGrpcTransport,
)

from rltui_sandbox.services import CODELAB_APIS, DEFAULT_ENABLED
from rltui_sandbox.world import project_number

P = "fresh-project-1"
State = service_usage_v1.State


@pytest.fixture
def fresh(make_grpc_box):
    return make_grpc_box(enabled_services=())


def usage(box) -> service_usage_v1.ServiceUsageClient:
    return service_usage_v1.ServiceUsageClient(transport=ServiceUsageGrpcTransport(
        channel=grpc.insecure_channel(box.address)))


def enabled(client, parent: str = f"projects/{P}") -> list[str]:
    return [s.config.name for s in client.list_services(request={"parent": parent, "filter": "state:ENABLED"})]


def test_a_fresh_project_has_only_googles_default_set(fresh) -> None:
    client = usage(fresh)
    on = enabled(client)
    assert set(on) == DEFAULT_ENABLED and "monitoring.googleapis.com" in on
    off = [s.config.name for s in client.list_services(request={"parent": f"projects/{P}", "filter": "state:DISABLED"})]
    assert set(CODELAB_APIS) <= set(off)
    svc = client.get_service(request={"name": f"projects/{P}/services/lustre.googleapis.com"})
    number = project_number(P)
    assert svc.state == State.DISABLED and svc.name == f"projects/{number}/services/lustre.googleapis.com"
    assert svc.parent == f"projects/{number}"


def test_a_disabled_api_is_refused_with_service_disabled(fresh, clients) -> None:
    number = project_number(P)
    with pytest.raises(exceptions.PermissionDenied) as info:
        clients.lustre(fresh).list_instances(parent=f"projects/{P}/locations/us-east1-b")
    exc = info.value
    assert exc.reason == "SERVICE_DISABLED" and exc.domain == "googleapis.com"
    assert exc.metadata["service"] == "lustre.googleapis.com" and exc.metadata["consumer"] == f"projects/{number}"
    assert exc.message.startswith(f"Google Cloud Managed Lustre API has not been used in project {number} before "
                                  "or it is disabled. Enable it by visiting https://console.developers.google.com/"
                                  f"apis/api/lustre.googleapis.com/overview?project={number} then retry.")
    with pytest.raises(exceptions.PermissionDenied) as info:  # the deprecated project_id field counts too
        clients.gke(fresh).list_clusters(project_id=P, zone="us-east1")
    assert info.value.reason == "SERVICE_DISABLED" and info.value.metadata["service"] == "container.googleapis.com"


def test_batch_enable_is_an_operation_then_list_shows_enabled(fresh, clients) -> None:
    client = usage(fresh)
    op = client.batch_enable_services(request={"parent": f"projects/{P}", "service_ids": list(CODELAB_APIS)})
    assert op.operation.name.startswith(f"operations/acf.p2-{project_number(P)}-")
    response = op.result(timeout=30)
    assert sorted(s.config.name for s in response.services) == sorted(CODELAB_APIS)
    assert all(s.state == State.ENABLED for s in response.services)
    assert set(CODELAB_APIS) <= set(enabled(client))
    assert set(CODELAB_APIS) <= set(enabled(client, f"projects/{project_number(P)}"))  # by number too
    assert list(clients.lustre(fresh).list_instances(parent=f"projects/{P}/locations/us-east1-b")) == []
    got = client.batch_get_services(request={"parent": f"projects/{P}", "names": [
        f"projects/{P}/services/compute.googleapis.com", f"projects/{P}/services/bigquery.googleapis.com"]})
    assert [s.state for s in got.services] == [State.ENABLED, State.ENABLED]
    ops = [o for o in fresh.world.record.snapshot()["operations"] if o["kind"] == "serviceusage.batchEnable"]
    assert len(ops) == 1 and ops[0]["end_ref_s"] is not None
    # Enabling compute made the `default` network.
    assert [n.name for n in fresh.call(fresh.world.list_networks, P)] == ["default"]


def test_enable_one_and_the_limits(fresh) -> None:
    client = usage(fresh)
    done = client.enable_service(request={"name": f"projects/{P}/services/lustre.googleapis.com"}).result(timeout=30)
    assert isinstance(done, service_usage_v1.EnableServiceResponse)
    assert done.service.config.name == "lustre.googleapis.com" and done.service.state == State.ENABLED
    with pytest.raises(exceptions.InvalidArgument):
        client.batch_enable_services(request={"parent": f"projects/{P}",
                                              "service_ids": [f"api{i}.googleapis.com" for i in range(21)]})
    with pytest.raises(exceptions.InvalidArgument):
        client.list_services(request={"parent": f"projects/{P}", "filter": "state:ON"})
    pager = client.list_services(request={"parent": f"projects/{P}", "page_size": 5})
    assert len(pager._response.services) == 5 and pager.next_page_token
    assert len(list(pager)) > 20


async def test_the_async_client(fresh) -> None:
    client = service_usage_v1.ServiceUsageAsyncClient(transport=ServiceUsageGrpcAsyncIOTransport(
        channel=grpc.aio.insecure_channel(fresh.address)))
    op = await client.enable_service(request={"name": f"projects/{P}/services/container.googleapis.com"})
    done = await op.result(timeout=30)
    assert done.service.state == State.ENABLED
    pager = await client.list_services(request={"parent": f"projects/{P}", "filter": "state:ENABLED"})
    assert "container.googleapis.com" in [s.config.name async for s in pager]
