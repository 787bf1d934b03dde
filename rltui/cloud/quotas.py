"""What `rltui up --check` reads without creating anything: a region's Compute Engine quotas, its
Spot GPU quota (Cloud Quotas), a zone's machine type, and the caller's permissions on the project.

- Regional quotas: Compute Engine `regions.get`, whose Region carries `quotas[]` {metric, limit,
  usage} (google-cloud-compute 1.57 RegionsClient.get, compute_v1.types.Region / Quota; REST
  reference docs.cloud.google.com/compute/docs/reference/rest/v1/regions/get). It needs
  compute.googleapis.com on: a refusal with reason SERVICE_DISABLED is `None` here (unknown), not
  an error. A Region whose `quotaStatusWarning` is set ("populated only if fetching of the quotas
  field fails", compute_v1.types.QuotaStatusWarning) has no usable quotas: also None.
- The machine type: `machineTypes.get(project, zone, machine_type)`, NotFound when the zone does
  not offer it (compute_v1.MachineTypesClient.get).
- Permissions: Cloud Resource Manager v1 `projects.testIamPermissions` (POST
  v1/projects/{id}:testIamPermissions {"permissions": [...]} -> {"permissions": [held]}; "There are no
  permissions required for making this API call": docs.cloud.google.com/resource-manager/reference/
  rest/v1/projects/testIamPermissions). No client package for it is installed, so it is spoken over
  REST with an authorized session, as cloud/servicenetworking.py speaks its API.
- GPUs: Compute's regions.get does not list the newest families (the compute v1 Quota.Metric enum
  of google-cloud-compute 1.57 has no B200, H200 or H100 MEGA metric; dstackai/dstack's GCP backend
  notes "B200, H100 and H100_MEGA quotas are not returned by regions_client.list"). They are
  QuotaInfos of the Cloud Quotas API (cloudquotas.googleapis.com v1, google-cloud-quotas 0.6.3
  CloudQuotasAsyncClient.list_quota_infos, parent `projects/P/locations/global/services/
  compute.googleapis.com`; QuotaInfo {quota_id, metric, dimensions_infos[] {dimensions,
  details.value, applicable_locations}}, "ordered by their dimensions from more specific ones to
  less specific ones", a dimension left out of the map applying to every value not given its own
  entry: the library's types/resources.py docstrings). Spot GPUs: a compute.googleapis.com
  service config as `gcloud services list --format=json` prints it (a public test fixture) lists
  `compute.googleapis.com/quota/preemptible_gpus_per_gpu_family/limit` and `/usage` on
  compute.googleapis.com/Location beside gpus_per_gpu_family's, so the quota's metric is taken
  to be `compute.googleapis.com/preemptible_gpus_per_gpu_family` (inferred from those names, as
  gpus_per_gpu_family is listed with its own), dimensioned by `region` and `gpu_family` (Cloud
  Quotas' "Configure dimensions" page names gpu_family as Compute's GPU dimension). Its quota id
  is not established from a source here (the on-demand one is GPUS-PER-GPU-FAMILY-per-project-
  region in public tools; PREEMPTIBLE-GPUS-PER-GPU-FAMILY-per-project-region by analogy, in one
  public mock-up only): a QuotaInfo is taken when its metric is that, or its id starts so. The
  family value: `NVIDIA_B200` and `NVIDIA_H100` as public tools read them live (GPU_FAMILIES);
  the other accelerators' values were not found: their quota is reported unknown, with where to
  look. A QuotaInfo gives the limit in effect, not the usage (Cloud Monitoring's
  .../preemptible_gpus_per_gpu_family/usage has that): not read. The standard (on-demand) GPU
  quota of the family is read from the same answer: metric `compute.googleapis.com/
  gpus_per_gpu_family`, quota id GPUS-PER-GPU-FAMILY-per-project-region (public quota tools read
  it live under that id, dimensioned by region and gpu_family), because Spot VMs use it where no
  preemptible quota was granted ("In regions where you don't have preemptible CPU quota, you can
  use standard CPU quota to launch preemptible VMs", and once granted "all preemptible VMs count
  against that quota": docs.cloud.google.com/compute/docs/instances/create-use-preemptible,
  "Preemptible CPU quotas"; for GPUs too: "To prevent Spot VMs from consuming your quotas for
  standard VMs' CPUs, GPUs, and disks, consider requesting preemptible quota for Spot VMs",
  docs.cloud.google.com/compute/docs/instances/create-use-spot, "Before you begin"). The API must be enabled
  ("To use the Cloud Quotas API, you must first enable it": docs.cloud.google.com/docs/quotas/
  development-environment); off (SERVICE_DISABLED) is None here, with the fix.
- Lustre capacity: its quota (`lustre.googleapis.com/capacity`, "Lustre storage capacity (GiB) per
  zone and network") is a QuotaInfo of the Cloud Quotas API too; it is not read here (the check
  says unknown).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .endpoints import CALL_TIMEOUT_S, Endpoints
from .errors import api_disabled, retry


@dataclass(frozen=True)
class Quota:
    metric: str
    limit: float
    usage: float

    @property
    def free(self) -> float:
        return self.limit - self.usage


# GKE's accelerator name -> Cloud Quotas' gpu_family value (see the module docstring).
GPU_FAMILIES = {"nvidia-b200": "NVIDIA_B200", "nvidia-h100-80gb": "NVIDIA_H100"}
PREEMPTIBLE_GPUS_METRIC = "compute.googleapis.com/preemptible_gpus_per_gpu_family"
PREEMPTIBLE_GPUS_ID = "PREEMPTIBLE-GPUS-PER-GPU-FAMILY"
GPUS_METRIC = "compute.googleapis.com/gpus_per_gpu_family"   # standard (on-demand) GPUs
GPUS_ID = "GPUS-PER-GPU-FAMILY"
CLOUD_QUOTAS = "cloudquotas.googleapis.com"


@dataclass(frozen=True)
class FamilyQuota:
    """A GPU family's quota in a region, from Cloud Quotas: `limit` (None: not read, `why`)."""

    limit: float | None
    quota_id: str = ""
    why: str = ""        # "off": the API is off; "absent": no such QuotaInfo or no entry for it


@dataclass(frozen=True)
class GpuFamilyQuotas:
    """A GPU family's two quotas in a region: the preemptible one (Spot VMs) and the standard one
    (what Spot VMs use where no preemptible quota was granted: see the module docstring)."""

    preemptible: FamilyQuota
    standard: FamilyQuota


def _is_preemptible(info: Any) -> bool:
    return bool(info.metric == PREEMPTIBLE_GPUS_METRIC
                or str(info.quota_id).upper().startswith(PREEMPTIBLE_GPUS_ID))


def _is_standard(info: Any) -> bool:
    return bool(info.metric == GPUS_METRIC or str(info.quota_id).upper().startswith(GPUS_ID))


def _family_quota(infos: list[Any], region: str, family: str) -> FamilyQuota:
    found = family_limit(infos, region, family)
    return FamilyQuota(None, why="absent") if found is None else FamilyQuota(found[0], found[1])


def family_limit(infos: Iterable[Any], region: str, family: str) -> tuple[float, str] | None:
    """The limit in effect for `family` in `region` among QuotaInfos of the metric: the first
    (most specific) dimensions info whose region and gpu_family are the asked ones or left out,
    and whose applicable locations hold the region."""
    for info in infos:
        for entry in info.dimensions_infos:
            dims = dict(entry.dimensions)
            if dims.get("gpu_family", family) != family or dims.get("region", region) != region:
                continue
            where = list(entry.applicable_locations)
            if where and where != ["global"] and region not in where:
                continue
            return float(entry.details.value), str(info.quota_id)
    return None


class QuotaAdapter:
    def __init__(self, endpoints: Endpoints, project: str) -> None:
        self.endpoints, self.project = endpoints, project
        self._clients: dict[str, Any] = {}
        self._session: Any = None
        self._quotas: Any = None

    def _compute(self, kind: str) -> Any:
        if kind not in self._clients:
            self._clients[kind] = self.endpoints.compute(kind)
        return self._clients[kind]

    async def _compute_get(self, what: str, fn: Any) -> Any:
        """A compute get: the answer, `False` for NotFound, None when compute is off."""
        from google.api_core import exceptions as gexc

        def call() -> Any:
            try:
                return fn()
            except gexc.NotFound:
                return False
            except gexc.Forbidden as exc:
                if api_disabled(exc):
                    return None
                raise

        return await retry(lambda: asyncio.to_thread(call), what=what)

    async def region_quotas(self, region: str) -> dict[str, Quota] | None:
        """The region's quotas by metric; None when they cannot be read (compute off, or the
        Region says fetching them failed)."""
        got = await self._compute_get(
            f"region {region}", lambda: self._compute("Regions").get(
                project=self.project, region=region, timeout=CALL_TIMEOUT_S))
        if not got or (got.quota_status_warning and got.quota_status_warning.code):
            return None
        return {q.metric: Quota(q.metric, float(q.limit), float(q.usage)) for q in got.quotas}

    async def machine_type(self, zone: str, name: str) -> Any:
        """The MachineType, False when the zone does not offer it, None when compute is off."""
        return await self._compute_get(
            f"machine type {name} in {zone}", lambda: self._compute("MachineTypes").get(
                project=self.project, zone=zone, machine_type=name, timeout=CALL_TIMEOUT_S))

    async def reservation(self, zone: str, name: str) -> Any:
        """The zonal Reservation, False when there is none of that name, None when compute is off."""
        return await self._compute_get(
            f"reservation {name} in {zone}", lambda: self._compute("Reservations").get(
                project=self.project, zone=zone, reservation=name, timeout=CALL_TIMEOUT_S))

    async def held_permissions(self, permissions: Iterable[str]) -> set[str]:
        """The subset of `permissions` the caller holds on the project."""
        wanted = sorted(set(permissions))

        def call() -> set[str]:
            from google.api_core import exceptions as gexc

            if self._session is None:
                from google.auth.transport.requests import AuthorizedSession

                from .endpoints import user_agent

                self._session = AuthorizedSession(self.endpoints.credentials())
                self._session.headers["User-Agent"] = user_agent()
            url = (self.endpoints.api_url("cloudresourcemanager")
                   + f"v1/projects/{self.project}:testIamPermissions")
            resp = self._session.request("POST", url, json={"permissions": wanted},
                                         timeout=CALL_TIMEOUT_S)
            if resp.status_code >= 400:
                raise gexc.from_http_response(resp)
            return set((resp.json() if resp.content else {}).get("permissions") or [])

        return await retry(lambda: asyncio.to_thread(call), what="test IAM permissions")

    async def gpu_family_quotas(self, region: str, family: str) -> GpuFamilyQuotas:
        """The preemptible and the standard GPU quota of `family` in `region`, from one read
        of Cloud Quotas (see the module docstring)."""
        from google.api_core import exceptions as gexc

        parent = f"projects/{self.project}/locations/global/services/compute.googleapis.com"

        async def call() -> list[Any] | None:
            if self._quotas is None:
                self._quotas = self.endpoints.quotas()
            try:
                pager = await self._quotas.list_quota_infos(request={"parent": parent},
                                                            timeout=CALL_TIMEOUT_S)
                return [q async for q in pager if _is_preemptible(q) or _is_standard(q)]
            except gexc.PermissionDenied as exc:
                if api_disabled(exc):
                    return None
                raise

        infos = await retry(call, what="Cloud Quotas: compute.googleapis.com quotas")
        if infos is None:
            off = FamilyQuota(None, why="off")
            return GpuFamilyQuotas(off, off)
        return GpuFamilyQuotas(
            _family_quota([i for i in infos if _is_preemptible(i)], region, family),
            _family_quota([i for i in infos if _is_standard(i) and not _is_preemptible(i)],
                          region, family))

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    async def aclose(self) -> None:
        """close(), and the Cloud Quotas client's channel."""
        self.close()
        if self._quotas is not None:
            transport = getattr(self._quotas, "transport", None)
            self._quotas = None
            if transport is not None:
                await transport.close()
