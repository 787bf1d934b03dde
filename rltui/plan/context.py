"""What every codelab step works with: the config, the endpoints, the adapters, the folders."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..config import RLConfig
from ..latency import reference_seconds
from ..statedir import state_root
from .folders import runs_subdir, xpk_subdir

if TYPE_CHECKING:
    from ..cloud.detached import Detached
    from ..cloud.endpoints import Endpoints
    from ..cloud.gke import GkeAdapter
    from ..cloud.iam import IamAdapter
    from ..cloud.kube import KubeAdapter
    from ..cloud.lustre import LustreAdapter
    from ..cloud.network import NetworkAdapter

A = TypeVar("A")


@dataclass
class Context:
    cfg: RLConfig
    endpoints: Endpoints
    root: Path = field(default_factory=state_root)
    _adapters: dict[str, Any] = field(default_factory=dict)
    dashboard_url: str | None = None
    # Down: the GKE cluster just deleted was rltui's, so are the networks xpk made for it.
    owned_networks: bool = False
    # One connection each for concurrent first callers (up's credentials, Secret and PV/PVC
    # steps ask together): without it each built its own and all but the last were never
    # closed ("Unclosed client session" at every headless up's exit).
    _connecting: dict[str, asyncio.Lock] = field(default_factory=dict)

    # --- folders ---

    @property
    def xpk_dir(self) -> Path:
        """One fixed folder per cluster: `xpk cluster delete` finds its networks only here."""
        return self.root / xpk_subdir(self.cfg.project_id, self.cfg.cluster_name)

    def xpk(self) -> Detached:
        """xpk's detached runs in `xpk_dir` (cloud/detached.py), its stop bounded on this
        cloud's clock (a sandbox runs faster)."""
        from ..cloud.detached import Detached

        return Detached(self.xpk_dir, "xpk", self.endpoints.time_scale)

    @property
    def run_dir(self) -> Path:
        return self.root / runs_subdir(self.cfg.project_id, self.cfg.cluster_name)

    @property
    def jobs_dir(self) -> Path:
        return self.run_dir / "jobs"

    def expected(self, key: str) -> float:
        """A reference duration in real seconds for these endpoints (a sandbox runs faster)."""
        return reference_seconds(key, self.endpoints.time_scale)

    # --- adapters, built on first use (their client libraries load lazily) ---

    def _get(self, name: str, build: Callable[[], A]) -> A:
        if name not in self._adapters:
            self._adapters[name] = build()
        adapter: A = self._adapters[name]
        return adapter

    @property
    def lustre(self) -> LustreAdapter:
        from ..cloud.lustre import LustreAdapter

        return self._get("lustre", lambda: LustreAdapter(self.endpoints, self.cfg.project_id,
                                                          self.cfg.zone))

    @property
    def gke(self) -> GkeAdapter:
        from ..cloud.gke import GkeAdapter

        return self._get("gke", lambda: GkeAdapter(self.endpoints, self.cfg.project_id,
                                                    self.cfg.region, self.cfg.cluster_name))

    @property
    def iam(self) -> IamAdapter:
        """IAM and Resource Manager's policies, for the budget guard's account (plan/guard.py)."""
        from ..cloud.iam import IamAdapter

        return self._get("iam", lambda: IamAdapter(self.endpoints, self.cfg.project_id))

    @property
    def network(self) -> NetworkAdapter:
        from ..cloud.network import NetworkAdapter

        return self._get("network", lambda: NetworkAdapter(self.endpoints, self.cfg.project_id))

    async def kube(self, cluster: Any = None, creds: Any = None) -> KubeAdapter:
        """A connected Kubernetes adapter, from the GKE cluster's endpoint and CA and an ADC
        token (in both modes: see Endpoints.credentials); the cluster and the credentials are
        asked for unless the caller has them already."""
        async with self._connecting.setdefault("kube", asyncio.Lock()):
            if "kube" not in self._adapters:
                from ..cloud.kube import KubeAdapter

                cluster = cluster if cluster is not None else await self.gke.get()
                adapter = KubeAdapter(self.endpoints, cluster=cluster)
                try:
                    await adapter.connect(creds)
                except BaseException:
                    await adapter.close()
                    raise
                self._adapters["kube"] = adapter
        kube: KubeAdapter = self._adapters["kube"]
        return kube

    async def dashboard(self) -> str:
        """The Ray dashboard's local URL through a port-forward this context owns."""
        async with self._connecting.setdefault("forward", asyncio.Lock()):
            if self.dashboard_url is None:
                from ..cloud.portforward import DashboardForward

                forward = DashboardForward(await self.kube(), self.cfg.head_service)
                url = await forward.start()
                try:
                    await forward.wait_ready(timeout_s=max(30.0, self.expected("pod_start") * 3))
                except BaseException:
                    await forward.close()
                    raise
                self._adapters["forward"] = forward
                self.dashboard_url = url
        return self.dashboard_url

    async def close(self) -> None:
        for name in ("forward", "kube"):
            adapter = self._adapters.pop(name, None)
            if adapter is not None:
                await adapter.close()
        self.dashboard_url = None
