"""APIs, the VPC network xpk makes, the peering range and the Service Networking peering.

Through gcloud (argv lists): the packages rltui depends on have no client for Service
Networking, and these are the codelab's own commands.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from .endpoints import Endpoints
from .tools import gcloud_json, run_tool, tool_error

SERVICE_NETWORKING = "servicenetworking.googleapis.com"


class NetworkAdapter:
    def __init__(self, endpoints: Endpoints, project: str) -> None:
        self.endpoints, self.project = endpoints, project

    def _p(self) -> str:
        return f"--project={self.project}"

    async def _run(self, args: list[str], on_line: Callable[[str], None] | None = None,
                   timeout_s: float = 600.0) -> None:
        res = await run_tool(["gcloud", *args, self._p()], self.endpoints, on_line=on_line,
                             timeout_s=timeout_s)
        if not res.ok:
            raise tool_error(res)

    # --- APIs ---

    async def enabled_apis(self) -> set[str]:
        items = await gcloud_json(["services", "list", "--enabled"], self.endpoints,
                                  project=self.project) or []
        return {i.get("config", {}).get("name", "") for i in items}

    async def enable_apis(self, apis: Iterable[str], on_line: Callable[[str], None] | None = None) -> None:
        await self._run(["services", "enable", *apis], on_line)

    # --- networks (made by xpk) ---

    async def network(self, name: str) -> dict[str, Any] | None:
        return await gcloud_json(["compute", "networks", "describe", name], self.endpoints,
                                 project=self.project)

    async def networks(self) -> list[dict[str, Any]]:
        return await gcloud_json(["compute", "networks", "list"], self.endpoints,
                                 project=self.project) or []

    # --- the range Service Networking peers with ---

    async def address(self, name: str) -> dict[str, Any] | None:
        return await gcloud_json(["compute", "addresses", "describe", name, "--global"],
                                 self.endpoints, project=self.project)

    async def addresses(self) -> list[dict[str, Any]]:
        return await gcloud_json(["compute", "addresses", "list"], self.endpoints,
                                 project=self.project) or []

    async def create_address(self, name: str, network: str, prefix_length: int = 24,
                             on_line: Callable[[str], None] | None = None) -> None:
        await self._run(["compute", "addresses", "create", name, "--global",
                         "--purpose=VPC_PEERING", f"--prefix-length={prefix_length}",
                         f"--network={network}"], on_line)

    async def delete_address(self, name: str, on_line: Callable[[str], None] | None = None) -> None:
        await self._run(["compute", "addresses", "delete", name, "--global", "--quiet"], on_line)

    # --- the peering ---

    async def peering(self, network: str) -> dict[str, Any] | None:
        items = await gcloud_json(["services", "vpc-peerings", "list", f"--network={network}"],
                                  self.endpoints, project=self.project) or []
        return next((i for i in items if i.get("service", "").endswith(SERVICE_NETWORKING)), None)

    async def connect_peering(self, network: str, ranges: list[str],
                              on_line: Callable[[str], None] | None = None) -> None:
        """`connect`, or `update --force` when a peering is already there (the codelab's `||`)."""
        common = [f"--service={SERVICE_NETWORKING}", f"--ranges={','.join(ranges)}",
                  f"--network={network}"]
        res = await run_tool(["gcloud", "services", "vpc-peerings", "connect", *common, self._p()],
                             self.endpoints, on_line=on_line, timeout_s=600.0)
        if res.ok:
            return
        await self._run(["services", "vpc-peerings", "update", *common, "--force"], on_line)

    async def delete_peering(self, network: str, on_line: Callable[[str], None] | None = None) -> None:
        await self._run(["services", "vpc-peerings", "delete", f"--service={SERVICE_NETWORKING}",
                         f"--network={network}", "--quiet"], on_line)
