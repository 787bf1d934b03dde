"""Service Networking (the VPC peering Lustre needs) over its REST API, with ADC.

There is no client package for it (sandbox/SOURCES.md#official-clients), and the real gcloud
cannot be pointed elsewhere for it: gcloud 528 has no `api_endpoint_overrides/servicenetworking`
property. So rltui speaks the REST API itself, as the servicenetworking.v1 discovery document
gives it (google-api-python-client 2.202.0), through an authorized session whose base URL
comes from the Endpoints value: one code path for Google and the sandbox.

- GET   v1/services/servicenetworking.googleapis.com/connections?network=projects/N/global/networks/X
- POST  v1/services/servicenetworking.googleapis.com/connections            -> Operation
- PATCH v1/services/servicenetworking.googleapis.com/connections/-?updateMask=reservedPeeringRanges&force=true
- POST  v1/services/servicenetworking.googleapis.com/connections/servicenetworking-googleapis-com:deleteConnection
- GET   v1/operations/*
`network` names the project by NUMBER (the discovery document); it comes from Cloud Resource
Manager v1 projects.get, as gcloud gets it. Absence is an empty connection list.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from .endpoints import CALL_TIMEOUT_S, Endpoints
from .errors import CloudError, retry

SERVICE = "servicenetworking.googleapis.com"
PEERING = "servicenetworking-googleapis-com"
Line = Callable[[str], None]


class ServiceNetworking:
    def __init__(self, endpoints: Endpoints, project: str) -> None:
        self.endpoints, self.project = endpoints, project
        self._session: Any = None
        self._number: str | None = None

    # --- plumbing: one authorized session, sync requests in a thread ---

    def _http(self) -> Any:
        if self._session is None:
            from google.auth.transport.requests import AuthorizedSession

            from .endpoints import user_agent

            self._session = AuthorizedSession(self.endpoints.credentials())
            self._session.headers["User-Agent"] = user_agent()   # as the client libraries' ClientInfo
        return self._session

    async def _call(self, what: str, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
        def call() -> dict[str, Any]:
            from google.api_core import exceptions as gexc

            resp = self._http().request(method, url, timeout=CALL_TIMEOUT_S, **kwargs)
            if resp.status_code >= 400:
                raise gexc.from_http_response(resp)
            return resp.json() if resp.content else {}

        return await retry(lambda: asyncio.to_thread(call), what=what)

    def _url(self, path: str) -> str:
        return self.endpoints.api_url("servicenetworking") + path

    async def _network(self, network: str) -> str:
        if self._number is None:
            url = self.endpoints.api_url("cloudresourcemanager") + f"v1/projects/{self.project}"
            project = await self._call(f"project {self.project}", "GET", url)
            self._number = str(project["projectNumber"])
        return f"projects/{self._number}/global/networks/{network}"

    async def _wait(self, what: str, op: dict[str, Any], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        pause = 0.1
        while not op.get("done"):
            if time.monotonic() > deadline:
                raise CloudError(f"{what}: not done after {timeout_s:.0f} s", transient=True,
                                 code="Timeout")
            await asyncio.sleep(pause)
            pause = min(5.0 * self.endpoints.time_scale, pause * 2)   # 5 s of the cloud's clock
            op = await self._call(what, "GET", self._url(f"v1/{op['name']}"))
        error = op.get("error")
        if error:
            raise _operation_error(what, error)

    # --- the connection ---

    async def connection(self, network: str) -> dict[str, Any] | None:
        """`network`'s connection to Service Networking, or None (an empty list)."""
        listed = await self._call("list peerings", "GET", self._url(
            f"v1/services/{SERVICE}/connections"), params={"network": await self._network(network)})
        return next(iter(listed.get("connections") or []), None)

    async def connect(self, network: str, ranges: list[str], *, timeout_s: float = 600.0,
                      on_line: Line | None = None) -> None:
        """Create the connection, or (the codelab's `|| update --force`) replace its ranges when
        one exists: decided from the list, not from create's refusal."""
        body = {"network": await self._network(network), "reservedPeeringRanges": ranges}
        base = self._url(f"v1/services/{SERVICE}/connections")
        if await self.connection(network) is None:
            op = await self._call("connect peering", "POST", base, json=body)
        else:
            op = await self._call("update peering", "PATCH", base + "/-", json=body,
                                  params={"updateMask": "reservedPeeringRanges", "force": "true"})
        if on_line:
            on_line(f"peering {network} with {SERVICE} ({op.get('name', '')})")
        await self._wait("peering", op, timeout_s)

    async def delete(self, network: str, *, timeout_s: float = 600.0,
                     on_line: Line | None = None) -> None:
        """deleteConnection. Refused while the producer (Lustre) still holds the connection,
        sometimes minutes after the instance is gone (hashicorp/terraform-provider-google #19908;
        sandbox/SOURCES.md#servicenetworking-peering-delete): that refusal is transient."""
        body = {"consumerNetwork": await self._network(network)}
        try:
            op = await self._call("delete peering", "POST", self._url(
                f"v1/services/{SERVICE}/connections/{PEERING}:deleteConnection"), json=body)
            if on_line:
                on_line(f"deleting the peering of {network} ({op.get('name', '')})")
            await self._wait("delete peering", op, timeout_s)
        except CloudError as exc:
            if await self.connection(network) is None:
                return  # gone after all
            raise CloudError(exc.message, transient=True, code="PeeringInUse") from None


def _operation_error(what: str, error: dict[str, Any]) -> CloudError:
    """An operation's google.rpc.Status as one line; FAILED_PRECONDITION (9) and friends are
    worth another try here (a producer still releasing), INVALID_ARGUMENT (3) is not."""
    code = int(error.get("code") or 0)
    message = str(error.get("message") or "failed")
    return CloudError(f"{what}: {message}", transient=code in (4, 9, 10, 13, 14),
                      code=f"rpc{code}")


__all__ = ["ServiceNetworking"]
