"""How much `rltui status` costs over the slowest single call it makes (issue 13, item 6).

Starts its own sandbox in a temp folder, provisions it as a user does (`rltui up --yes
--sandbox` with assets/sandbox.env.sh), runs a short job to its end (`submit`, then `logs
--follow`) so that status has a job to show, then, inside this process, runs the headless
`status --json` (rltui/headless.py) several times. Every call status makes to the cloud, the
Kubernetes API or the Ray dashboard is timed by wrapping the adapters' async methods here (the
product code is not touched): only the outermost call is counted (a port-forward's own
Kubernetes reads belong to it). Per run: the status wall time over the slowest single call.
With the calls concurrent where independent, the figure is the length of the longest chain
of dependent calls (the cluster -> its Kubernetes API -> the RayCluster) over its longest link.

    .venv/bin/python bench/status.py [--speed 300] [--runs 7]

Last line: `status_wall_ratio: X (goal <= 1.5)`, the median over the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import functools
import inspect
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_inside: contextvars.ContextVar[bool] = contextvars.ContextVar("inside", default=False)
CALLS: list[tuple[str, float, float]] = []  # (name, start, end), monotonic seconds


def _timed(name: str, fn: Any) -> Any:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _inside.get():
            return await fn(*args, **kwargs)
        token = _inside.set(True)
        t0 = time.monotonic()
        try:
            return await fn(*args, **kwargs)
        finally:
            CALLS.append((name, t0, time.monotonic()))
            _inside.reset(token)

    return wrapper


def instrument() -> None:
    """Wrap every public async method of the adapters status goes through."""
    from rltui.cloud.gke import GkeAdapter
    from rltui.cloud.kube import KubeAdapter
    from rltui.cloud.lustre import LustreAdapter
    from rltui.cloud.network import NetworkAdapter
    from rltui.cloud.portforward import DashboardForward
    from rltui.cloud.rayjobs import RayJobs

    for cls in (GkeAdapter, KubeAdapter, LustreAdapter, NetworkAdapter, DashboardForward, RayJobs):
        for attr, fn in list(vars(cls).items()):
            if attr.startswith("_") or attr == "close" or not inspect.iscoroutinefunction(fn):
                continue
            setattr(cls, attr, _timed(f"{cls.__name__}.{attr}", fn))


def rltui(env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "rltui.cli", *args, "--sandbox", "--env",
            str(ROOT / "assets" / "sandbox.env.sh")]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def provision(env: dict[str, str]) -> None:
    for args in (("up", "--yes"), ("submit",), ("logs", "--follow")):
        t0 = time.monotonic()
        out = rltui(env, *args)
        print(f"rltui {' '.join(args)}: exit {out.returncode} in {time.monotonic() - t0:.1f} s",
              flush=True)
        if out.returncode != 0:
            raise SystemExit(f"rltui {' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-2000:]}")


def measure(status_info: dict[str, Any], runs: int) -> list[float]:
    from rltui import headless
    from rltui.cloud.endpoints import Endpoints
    from rltui.config import parse_config
    from rltui.envfile import EnvFile

    cfg = parse_config(EnvFile.read(ROOT / "assets" / "sandbox.env.sh").values())
    ratios = []
    for n in range(runs):
        CALLS.clear()
        lines: list[str] = []
        t0 = time.monotonic()
        code = asyncio.run(headless.status(cfg, Endpoints.sandbox(status_info), as_json=True,
                                           out=lines.append))
        wall = time.monotonic() - t0
        if code != 0 or '"job": null' in lines[0]:
            raise SystemExit(f"status: exit {code}, no job: {lines}")
        slowest = max(CALLS, key=lambda c: c[2] - c[1])
        span = slowest[2] - slowest[1]
        ratios.append(wall / span)
        calls = sorted(CALLS, key=lambda c: c[1])
        print(f"run {n + 1}: wall {wall * 1000:.0f} ms, {len(CALLS)} calls, slowest {slowest[0]}"
              f" {span * 1000:.0f} ms, ratio {wall / span:.2f}")
        for name, a, b in calls:
            print(f"    {(a - t0) * 1000:7.0f} .. {(b - t0) * 1000:7.0f} ms  {name}")
    return ratios


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--speed", type=float, default=300.0)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    from rltui_sandbox import manage

    with tempfile.TemporaryDirectory(prefix="rltui-bench-status-", dir="/tmp") as tmp:
        sbx = Path(tmp) / "sbx"
        env = {**os.environ, "RLTUI_SANDBOX_DIR": str(sbx), "XDG_STATE_HOME": f"{tmp}/state",
               "HOME": tmp}
        status = manage.start(speed=args.speed, root=sbx)
        try:
            provision(env)
            os.environ["XDG_STATE_HOME"] = env["XDG_STATE_HOME"]
            instrument()
            ratios = measure(status.info, args.runs)
        finally:
            manage.stop(sbx)
    print(f"status_wall_ratio: {statistics.median(ratios):.2f} (goal <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
