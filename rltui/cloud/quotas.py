"""What `rltui up --check` reads without creating anything: a region's Compute Engine quotas, a
zone's machine type, and the caller's permissions on the project.

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
- Lustre capacity: its quota (`lustre.googleapis.com/capacity`, "Lustre storage capacity (GiB) per
  zone and network") is reported by the Cloud Quotas API (cloudquotas.googleapis.com, v1
  projects.locations.services.quotaInfos: docs.cloud.google.com/docs/quotas/reference/rest/v1/
  projects.locations.services.quotaInfos/list), which is not on in a new project and whose
  client (google-cloud-quotas) rltui does not ship: not read here (the check says unknown).
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


class QuotaAdapter:
    def __init__(self, endpoints: Endpoints, project: str) -> None:
        self.endpoints, self.project = endpoints, project
        self._clients: dict[str, Any] = {}
        self._session: Any = None

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

    async def held_permissions(self, permissions: Iterable[str]) -> set[str]:
        """The subset of `permissions` the caller holds on the project."""
        wanted = sorted(set(permissions))

        def call() -> set[str]:
            from google.api_core import exceptions as gexc

            if self._session is None:
                from google.auth.transport.requests import AuthorizedSession

                self._session = AuthorizedSession(self.endpoints.credentials())
            url = (self.endpoints.api_url("cloudresourcemanager")
                   + f"v1/projects/{self.project}:testIamPermissions")
            resp = self._session.request("POST", url, json={"permissions": wanted},
                                         timeout=CALL_TIMEOUT_S)
            if resp.status_code >= 400:
                raise gexc.from_http_response(resp)
            return set((resp.json() if resp.content else {}).get("permissions") or [])

        return await retry(lambda: asyncio.to_thread(call), what="test IAM permissions")

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
