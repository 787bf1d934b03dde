"""google.api.cloudquotas.v1.CloudQuotas (the sandbox's QuotaInfo reads) through the official
google-cloud-quotas client, and rltui's adapter that reads the Spot GPU quota from it: refused
SERVICE_DISABLED until the project enables cloudquotas.googleapis.com, as a new project is; the
limit `rltui sandbox start --quota PREEMPTIBLE_NVIDIA_B200_GPUS=N` sets is what the check reads."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.api_core import exceptions
from google.cloud import cloudquotas_v1
from google.cloud.cloudquotas_v1.services.cloud_quotas.transports import CloudQuotasGrpcTransport

from rltui.cloud.endpoints import Endpoints
from rltui.cloud.errors import api_disabled
from rltui.cloud.quotas import PREEMPTIBLE_GPUS_METRIC, QuotaAdapter
from rltui_sandbox.services import CODELAB_APIS

P = "quota-project-1"
PARENT = f"projects/{P}/locations/global/services/compute.googleapis.com"


@pytest.fixture
def on(make_grpc_box):
    return make_grpc_box(enabled_services=(*CODELAB_APIS, "cloudquotas.googleapis.com"))


def client(box) -> cloudquotas_v1.CloudQuotasClient:
    return cloudquotas_v1.CloudQuotasClient(transport=CloudQuotasGrpcTransport(
        channel=grpc.insecure_channel(box.address)))


def test_the_official_client_pages_quota_infos_and_gets_one(on) -> None:
    infos = list(client(on).list_quota_infos(request={"parent": PARENT, "page_size": 1}))
    spot = next(i for i in infos if i.metric == PREEMPTIBLE_GPUS_METRIC)
    assert set(spot.dimensions) == {"region", "gpu_family"}
    first = spot.dimensions_infos[0]
    assert dict(first.dimensions) == {"gpu_family": "NVIDIA_B200"} and first.details.value == 128
    assert "us-east1" in first.applicable_locations
    assert dict(spot.dimensions_infos[-1].dimensions) == {}   # the least specific comes last
    got = client(on).get_quota_info(request={"name": spot.name})
    assert got.quota_id == spot.quota_id
    with pytest.raises(exceptions.NotFound):
        client(on).get_quota_info(request={"name": f"{PARENT}/quotaInfos/NO-SUCH-QUOTA"})


def test_a_project_that_did_not_enable_cloud_quotas_is_refused_service_disabled(grpc_box) -> None:
    with pytest.raises(exceptions.PermissionDenied) as info:
        list(client(grpc_box).list_quota_infos(request={"parent": PARENT}))
    assert api_disabled(info.value)


def family_quotas(box, family: str = "NVIDIA_B200"):
    """QuotaAdapter.gpu_family_quotas against `box`, in us-east1, its channel closed after."""
    async def read():
        adapter = QuotaAdapter(Endpoints(label="SANDBOX", grpc_target=box.address), P)
        try:
            return await adapter.gpu_family_quotas("us-east1", family)
        finally:
            await adapter.aclose()

    return asyncio.run(read())


def test_the_adapter_reads_the_limit_the_sandbox_was_started_with(on) -> None:
    on.world.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"] = 16.0
    b200, h100 = (family_quotas(on).preemptible, family_quotas(on, "NVIDIA_H100").preemptible)
    assert (b200.limit, b200.quota_id) == (16.0, "PREEMPTIBLE-GPUS-PER-GPU-FAMILY-per-project-region")
    assert h100.limit == 0.0          # a family nobody granted: the dimension-less default


def test_the_adapter_says_off_when_the_api_is_off(grpc_box) -> None:
    got = family_quotas(grpc_box).preemptible
    assert got.limit is None and got.why == "off"


def test_the_adapter_reads_the_standard_family_quota_beside_the_preemptible_one(on) -> None:
    """Spot VMs use the standard GPU quota where no preemptible one is granted (cloud/quotas.py):
    one read gives both; the standard one is World.quotas["NVIDIA_B200_GPUS"], 0 when unset."""
    unset = family_quotas(on)
    assert (unset.standard.limit, unset.standard.quota_id) == (0.0, "GPUS-PER-GPU-FAMILY-per-project-region")
    on.world.quotas.update({"PREEMPTIBLE_NVIDIA_B200_GPUS": 0.0, "NVIDIA_B200_GPUS": 24.0})
    got = family_quotas(on)
    assert got.preemptible.limit == 0.0 and got.preemptible.quota_id.startswith("PREEMPTIBLE-")
    assert got.standard.limit == 24.0
