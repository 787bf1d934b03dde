"""API economy: what the Monitor and Metrics screens ask of the APIs (issue 13, item 4).

Starts its own sandbox in a temp folder, provisions it as a user does (`rltui up --yes
--sandbox` with assets/sandbox.env.sh) and submits the GRPO job (`rltui submit`), then runs the
real app in this process under Textual's pilot (`App.run_test`, 120x40, the wizard's RemoteSession on the
sandbox: no samples, no tmux), with the Monitor and Metrics screens open: the user switches
between them every half reference minute. The figures come from the sandbox's own call
counters (its record, GET <kube_api>/_sandbox/record; sandbox/rltui_sandbox/record.py), read once the
first reference minute after both screens opened is over and again ten reference minutes
later (reference minutes = real seconds x speed / 60, the sandbox's reference clock); the window
opens once the screens have pods and metrics and the job supervisor has made its first look:

- `timeseries_calls_per_metric_min`: ListTimeSeries calls per metric type per reference minute,
  the highest over the metric types (`monitoring:ListTimeSeries:<type>`). Goal <= 1: Cloud
  Monitoring samples the Lustre metrics every 60 s ("Sampled every 60 seconds. After sampling,
  data is not visible for up to 120 seconds", docs.cloud.google.com/monitoring/api/metrics_gcp_i_o,
  lustre.googleapis.com/instance/*), so a second call within a minute can only repeat the first.
- `pods_list_calls_per_min`: pod LIST calls per reference minute, the app's (`kube:LIST:pods`,
  the owner's credentials) and the job supervisor's on the cluster (a ServiceAccount's calls are
  counted apart, `kube:LIST:pods@<user>`; rltui/oncluster/supervisor.py, PodWatch). Goal 0: the
  pods come from a watch, resumed from the last resourceVersion when a stream ends, relisting
  only on 410 Gone (Kubernetes API concepts, "Efficient detection of changes"; the
  client-go reflector's ListAndWatch).

The other Kubernetes calls of the window are printed too (WATCH/LIST per resource).

    .venv/bin/python bench/api_calls.py [--speed 60] [--minutes 10]

Last two lines: `timeseries_calls_per_metric_min: Y (<= 1)`, then `pods_list_calls_per_min: X (0)`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
ENV_SH = ROOT / "assets" / "sandbox.env.sh"


def rltui(env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "rltui.cli", *args, "--sandbox", "--env", str(ENV_SH)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def provision(env: dict[str, str]) -> None:
    for args in (("up", "--yes"), ("submit",)):
        t0 = time.monotonic()
        out = rltui(env, *args)
        print(f"rltui {' '.join(args)}: exit {out.returncode} in {time.monotonic() - t0:.1f} s", flush=True)
        if out.returncode != 0:
            raise SystemExit(f"rltui {' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-2000:]}")


def calls(info: dict[str, Any]) -> dict[str, int]:
    with urllib.request.urlopen(f"{info['kube_api']}/_sandbox/record", timeout=10) as resp:
        return dict(json.load(resp)["calls"])


async def watch_screens(info: dict[str, Any], speed: float, minutes: float) -> tuple[dict[str, int], float]:
    """The app with Monitor and Metrics open; (counter deltas, reference minutes measured)."""
    from rltui.app import RLTuiApp
    from rltui.cloud.endpoints import Endpoints
    from rltui.remote import RemoteSession
    from rltui.widgets.chrome import HeaderInfo

    ref_min_s = 60.0 / speed  # real seconds per reference minute
    # What `rltui --sandbox` builds: its cloud calls go through its worker process.
    session = RemoteSession(ENV_SH, lambda: Endpoints.sandbox(info))
    app = RLTuiApp(session, header=HeaderInfo(mode="SANDBOX"))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.switch_mode("monitor")
        await pilot.pause()
        await app.switch_mode("metrics")
        await pilot.pause()
        deadline = time.monotonic() + 120
        while app.bus.metrics.last is None or not app.bus.pod_event.history:
            if time.monotonic() > deadline:
                raise SystemExit("the screens got no pods or metrics within 120 s")
            await asyncio.sleep(0.05)
        # The job supervisor's first look (its first pod LIST) too: it starts on the cluster
        # seconds after `rltui submit`, and the figure counts the LISTs after each one's first.
        while not any(k.startswith("kube:LIST:pods@") for k in await asyncio.to_thread(calls, info)):
            if time.monotonic() > deadline:
                raise SystemExit("the job supervisor did not look at the pods within 120 s")
            await asyncio.sleep(0.2)
        opened = time.monotonic()
        screens = ["monitor", "metrics"]
        switch_every = ref_min_s / 2
        first, t_first = None, 0.0
        end = opened + ref_min_s * (minutes + 1)
        n = 0
        while (now := time.monotonic()) < end:
            if first is None and now - opened >= ref_min_s:
                first, t_first = await asyncio.to_thread(calls, info), now
            await app.switch_mode(screens[n % 2])
            n += 1
            await asyncio.sleep(min(switch_every, max(end - time.monotonic(), 0.0)))
        last, t_last = await asyncio.to_thread(calls, info), time.monotonic()
        await session.close()
    assert first is not None
    measured = (t_last - t_first) / ref_min_s
    delta = {k: v - first.get(k, 0) for k, v in last.items() if v - first.get(k, 0)}
    return delta, measured


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--speed", type=float, default=60.0)
    ap.add_argument("--minutes", type=float, default=10.0, help="reference minutes after the first")
    args = ap.parse_args()
    from rltui_sandbox import manage

    with tempfile.TemporaryDirectory(prefix="rltui-bench-api-", dir="/tmp", ignore_cleanup_errors=True) as tmp:
        sbx = Path(tmp) / "sbx"
        env = {**os.environ, "RLTUI_SANDBOX_DIR": str(sbx), "XDG_STATE_HOME": f"{tmp}/state", "HOME": tmp}
        status = manage.start(speed=args.speed, root=sbx, timeout=60)  # a busy machine starts slowly
        try:
            provision(env)
            os.environ.update({k: env[k] for k in ("RLTUI_SANDBOX_DIR", "XDG_STATE_HOME")})
            delta, measured = asyncio.run(watch_screens(status.info, args.speed, args.minutes))
            # Ray's job SDK leaves aiohttp sessions for the GC, which says so on stderr at exit:
            # keep that noise from following the figures.
            logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        finally:
            manage.stop(sbx)
    print(f"window: {measured:.2f} reference minutes at speed {args.speed:g}, after the first")
    for key in sorted(k for k in delta if k.startswith(("kube:LIST", "kube:WATCH", "kube:GET"))):
        who = "  (the job supervisor, on the cluster)" if "@" in key else ""
        print(f"  {key}: {delta[key]} ({delta[key] / measured:.2f}/min){who}")
    series = {k.split(":", 2)[2]: v for k, v in delta.items() if k.startswith("monitoring:ListTimeSeries:")}
    for metric, n in sorted(series.items()):
        print(f"  ListTimeSeries {metric}: {n} ({n / measured:.2f}/min)")
    per_metric = max(series.values(), default=0) / measured
    pods_list = sum(v for k, v in delta.items() if k.split("@", 1)[0] == "kube:LIST:pods") / measured
    print(f"timeseries_calls_per_metric_min: {per_metric:.2f} (<= 1)")
    print(f"pods_list_calls_per_min: {pods_list:.2f} (0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
