"""google.api.cloudquotas.v1.CloudQuotas over the World: the quotas Compute's regions.get does not
list, as the official google-cloud-quotas client reads them (`rltui up --check`'s Spot GPU quota).

Shapes (google-cloud-quotas 0.6.3, google/cloud/cloudquotas_v1/types/cloudquotas.py and
resources.py docstrings):
- ListQuotaInfos(parent `projects/P/locations/global/services/S`, page_size, page_token) ->
  quota_infos, next_page_token; GetQuotaInfo(name `.../services/S/quotaInfos/ID`) -> QuotaInfo.
- QuotaInfo {name, quota_id, metric, service, is_precise, container_type PROJECT, dimensions,
  metric_display_name, quota_display_name, metric_unit, quota_increase_eligibility, is_fixed,
  dimensions_infos[] {dimensions, details {value}, applicable_locations} "ordered by their
  dimensions from more specific ones to less specific ones", service_request_quota_uri}. The
  name's location "must be global".
- The API must be enabled in the project (docs.cloud.google.com/docs/quotas/development-environment:
  "To use the Cloud Quotas API, you must first enable it"); it is not on Google's list of
  services a new project starts with (sandbox/services.py DEFAULT_ENABLED), so a call before
  `gcloud services enable cloudquotas.googleapis.com` is refused SERVICE_DISABLED, as every API is.

What it serves for compute.googleapis.com (other services have none here):
- metric `compute.googleapis.com/preemptible_gpus_per_gpu_family` (a real compute service config
  lists it: see rltui/cloud/quotas.py), dimensions region and gpu_family. Its quota id
  PREEMPTIBLE-GPUS-PER-GPU-FAMILY-per-project-region is the sandbox's guess by analogy with the
  on-demand GPUS-PER-GPU-FAMILY-per-project-region, which public tools read live: NOT verified.
- `compute.googleapis.com/gpus_per_gpu_family` (GPUS-PER-GPU-FAMILY-per-project-region: the id
  public quota tools read live) and `compute.googleapis.com/cpus` (CPUS-per-project-region), so
  that a reader must pick by metric. The standard GPU family quota is the one Spot VMs use where
  no preemptible quota is granted (docs.cloud.google.com/compute/docs/instances/create-use-
  preemptible, "Preemptible CPU quotas"; rltui/plan/checks.py reads both, and the sandbox's node
  pools are charged the same way: world_gke_pools `_charged_metric`); its value is
  World.quotas["NVIDIA_B200_GPUS"] (`--quota NVIDIA_B200_GPUS=N`), 0 when unset.
- The values: the World's quotas (`rltui sandbox start --quota PREEMPTIBLE_NVIDIA_B200_GPUS=N`,
  the Compute metric names the sandbox's late node pool failure uses), else DEFAULTS - a sandbox
  choice matching rest_compute's regions.get defaults. A family the World names nothing for
  falls to the last, dimension-less entry: 0 (the sandbox's choice: a family nobody granted).
- The gpu_family values NVIDIA_B200 and NVIDIA_H100 as public tools read them; the others are
  the Compute metric's middle part (e.g. NVIDIA_H200_141GB): not verified.
- applicable_locations: REGIONS, a sandbox list (every region named anywhere in the sandbox).
Counted in the World's record as grpc:CloudQuotas/<Method>.
"""

from __future__ import annotations

import grpc
from google.cloud import cloudquotas_v1 as cq

from rltui_sandbox.grpc_util import InvalidArgument, NotFound, add_service, page, parse_name
from rltui_sandbox.world import World

SERVICE = "google.api.cloudquotas.v1.CloudQuotas"
API = "cloudquotas.googleapis.com"
PARENT = "projects/{project}/locations/{location}/services/{service}"
NAME = PARENT + "/quotaInfos/{quota}"
DEFAULT_PAGE = 100
REGIONS = ["us-central1", "us-east1", "us-east4", "us-east5", "us-south1", "us-west1", "us-west2",
           "us-west3", "us-west4", "northamerica-northeast1", "southamerica-east1", "europe-west1",
           "europe-west2", "europe-west3", "europe-west4", "europe-north1", "asia-east1",
           "asia-northeast1", "asia-southeast1", "australia-southeast1"]
# Compute metric (World.quotas keys) -> its value when the World sets none (sandbox choices).
DEFAULTS = {"PREEMPTIBLE_NVIDIA_B200_GPUS": 128.0, "NVIDIA_B200_GPUS": 0.0, "CPUS": 5000.0}
FAMILIES = {"NVIDIA_B200_GPUS": "NVIDIA_B200", "NVIDIA_H100_80GB_GPUS": "NVIDIA_H100"}
CONSOLE = "https://console.cloud.google.com/iam-admin/quotas"


def _family(metric: str) -> str:
    """NVIDIA_B200_GPUS -> NVIDIA_B200 (see the module docstring)."""
    return FAMILIES.get(metric, metric.removesuffix("_GPUS"))


def _gpu_info(parent: str, quota_id: str, metric: str, display: str, limits: dict[str, float],
              prefix: str) -> cq.QuotaInfo:
    """A GPUs-per-family QuotaInfo: one entry per family the limits name (Compute metrics that
    start with `prefix`), then the dimension-less default."""
    entries = [cq.DimensionsInfo(dimensions={"gpu_family": _family(m.removeprefix(prefix))},
                                 details=cq.QuotaDetails(value=int(v)), applicable_locations=REGIONS)
               for m, v in sorted(limits.items())
               if m.startswith(prefix) and m.endswith("_GPUS") and (prefix or not m.startswith("PREEMPTIBLE_"))]
    entries.append(cq.DimensionsInfo(dimensions={}, details=cq.QuotaDetails(value=0),
                                     applicable_locations=REGIONS))
    return cq.QuotaInfo(
        name=f"{parent}/quotaInfos/{quota_id}", quota_id=quota_id, metric=metric,
        service="compute.googleapis.com", is_precise=True,
        container_type=cq.QuotaInfo.ContainerType.PROJECT, dimensions=["region", "gpu_family"],
        metric_display_name=display, quota_display_name=f"{display} per project per region",
        metric_unit="1", quota_increase_eligibility=cq.QuotaIncreaseEligibility(is_eligible=True),
        dimensions_infos=entries, service_request_quota_uri=CONSOLE)


def quota_infos(world: World, project: str, service: str) -> list[cq.QuotaInfo]:
    parent = f"projects/{project}/locations/global/services/{service}"
    if service != "compute.googleapis.com":
        return []
    limits = {**DEFAULTS, **{k: float(v) for k, v in world.quotas.items()}}
    cpus = cq.QuotaInfo(
        name=f"{parent}/quotaInfos/CPUS-per-project-region", quota_id="CPUS-per-project-region",
        metric="compute.googleapis.com/cpus", service="compute.googleapis.com", is_precise=True,
        container_type=cq.QuotaInfo.ContainerType.PROJECT, dimensions=["region"],
        metric_display_name="CPUs", quota_display_name="CPUs per project per region", metric_unit="1",
        dimensions_infos=[cq.DimensionsInfo(dimensions={}, details=cq.QuotaDetails(value=int(limits["CPUS"])),
                                            applicable_locations=REGIONS)],
        service_request_quota_uri=CONSOLE)
    return [cpus,
            _gpu_info(parent, "GPUS-PER-GPU-FAMILY-per-project-region", "compute.googleapis.com/gpus_per_gpu_family",
                      "GPUs per GPU family", limits, ""),
            _gpu_info(parent, "PREEMPTIBLE-GPUS-PER-GPU-FAMILY-per-project-region",
                      "compute.googleapis.com/preemptible_gpus_per_gpu_family", "Preemptible GPUs per GPU family",
                      limits, "PREEMPTIBLE_")]


def add_quotas_service(server: grpc.aio.Server, world: World) -> None:
    """Register CloudQuotas' QuotaInfo reads on `server` (the daemon's, or a test's)."""

    def parent_of(parent: str) -> dict[str, str]:
        p = parse_name(PARENT, parent, "parent")
        if p["location"] != "global":
            raise InvalidArgument(f"location {p['location']!r} is invalid: QuotaInfos live in locations/global")
        world.require_service(p["project"], API)
        return p

    def list_quota_infos(req: cq.ListQuotaInfosRequest) -> cq.ListQuotaInfosResponse:
        p = parent_of(req.parent)
        items = quota_infos(world, p["project"], p["service"])
        items, token = page(items, req.page_size or DEFAULT_PAGE, req.page_token)
        return cq.ListQuotaInfosResponse(quota_infos=items, next_page_token=token)

    def get_quota_info(req: cq.GetQuotaInfoRequest) -> cq.QuotaInfo:
        n = parse_name(NAME, req.name)
        parent_of(req.name.rsplit("/quotaInfos/", 1)[0])
        for info in quota_infos(world, n["project"], n["service"]):
            if info.quota_id == n["quota"]:
                return info
        raise NotFound(f"QuotaInfo {req.name} not found")  # the wording is the sandbox's

    add_service(server, SERVICE, {
        "ListQuotaInfos": (list_quota_infos, cq.ListQuotaInfosRequest, cq.ListQuotaInfosResponse),
        "GetQuotaInfo": (get_quota_info, cq.GetQuotaInfoRequest, cq.QuotaInfo),
    }, getattr(world, "faults", None))
