"""regions.get and machineTypes.get through google.cloud.compute_v1, as `rltui up --check` reads
them: the Region's quotas[] parse into Quota objects (metric, limit, usage), a `--quota` limit
shows in them, and a zone that does not offer a machine
type is the client's NotFound."""

from __future__ import annotations

import pytest
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1

P = "regions-test-project"
GPUS = "PREEMPTIBLE_NVIDIA_H100_GPUS"   # in compute_v1 Quota.Metric
B200 = "PREEMPTIBLE_NVIDIA_B200_GPUS"  # not: Google publishes it through Cloud Quotas only


def client(cloud, cls):
    return cls(client_options={"api_endpoint": cloud.endpoint}, credentials=AnonymousCredentials())


def test_a_regions_quotas_carry_the_limit_set_and_the_usage(cloud) -> None:
    cloud.world.quotas[GPUS] = 16.0
    region = client(cloud, compute_v1.RegionsClient).get(project=P, region="us-east1")
    assert region.name == "us-east1" and region.status == "UP"
    assert region.self_link.endswith(f"/projects/{P}/regions/us-east1")
    assert any(z.endswith("/zones/us-east1-b") for z in region.zones)
    quotas = {q.metric: q for q in region.quotas}
    assert quotas[GPUS].limit == 16.0 and quotas[GPUS].usage == 0.0
    cloud.world.quotas[B200] = 16.0
    region = client(cloud, compute_v1.RegionsClient).get(project=P, region="us-east1")
    assert B200 not in {q.metric for q in region.quotas}    # the enum has no B200 metric
    assert {q.metric for q in region.quotas} <= set(compute_v1.Quota.Metric.__members__)
    assert quotas["CPUS"].limit > 0
    with pytest.raises(exceptions.NotFound):
        client(cloud, compute_v1.RegionsClient).get(project=P, region="nowhere")


def test_a_zone_offers_a4_unless_the_world_says_it_does_not(cloud) -> None:
    types = client(cloud, compute_v1.MachineTypesClient)
    a4 = types.get(project=P, zone="us-east1-b", machine_type="a4-highgpu-8g")
    assert a4.guest_cpus == 224 and a4.accelerators[0].guest_accelerator_type == "nvidia-b200"
    assert a4.accelerators[0].guest_accelerator_count == 8
    cloud.world.machine_type_zones = {"a4-highgpu-8g": {"us-east1-c"}}
    with pytest.raises(exceptions.NotFound):
        types.get(project=P, zone="us-east1-b", machine_type="a4-highgpu-8g")
    assert types.get(project=P, zone="us-east1-c", machine_type="a4-highgpu-8g").name == "a4-highgpu-8g"
    with pytest.raises(exceptions.NotFound):
        types.get(project=P, zone="us-east1-b", machine_type="no-such-type")
