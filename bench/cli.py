"""`rltui status` as a whole process, against `gcloud container clusters list` on the same project.

Starts its own sandbox in a temp folder, provisions it as a user does (`rltui up --yes
--sandbox` with assets/sandbox.env.sh, a job submitted and followed to its end), then runs the
two commands alternately, each a fresh process, in the environment `rltui sandbox env` prints
(the real gcloud pointed at the sandbox's GKE API, with the project passed as a flag):
`rltui status --sandbox` asks every service of the plan (GKE, Compute, Lustre, Service Usage,
Service Networking, the Kubernetes API, the job's record), gcloud one. Both answer about the
same project. Also prints each command's CPU time and where rltui's goes before its calls:
the imports each of its two processes needs (the parent, and the child that asks Compute),
one after another in a fresh interpreter. The longer side is a floor no call can go below.

    .venv/bin/python bench/cli.py [--runs 7] [--speed 300]

Last line: `cli_status_ratio: X (goal <= 1.5)`, median wall over median wall.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV_FILE = ROOT / "assets" / "sandbox.env.sh"
RLTUI = [sys.executable, "-m", "rltui.cli"]

# What `rltui status` loads before it asks anything, in the order it needs them, in two fresh
# interpreters as it runs: the parent (its own code, then grpc's clients and kubernetes) and the
# Compute child, forked first thing (rltui/cloud/computereads.py).
FLOOR = r"""
import importlib, json, sys, time
def load(*names):
    return lambda: [importlib.import_module(m) for m in names]
def imports():
    return importlib.import_module("rltui.cloud.imports")
before_fork = [("rltui: cli; google-auth, api-core, proto-plus (before the fork)",
                load("rltui.cli", "rltui.cloud.computereads", "google.api_core.exceptions",
                     "google.auth.transport.requests", "proto"))]
parent = before_fork + [
    ("rltui: config, plan, headless, inventory", load("rltui.config", "rltui.plan.wiring",
                                                      "rltui.headless", "rltui.plan.inventory")),
    ("grpc, google-api-core, google-auth", load("google.api_core.grpc_helpers_async",
                                                "google.oauth2.service_account",
                                                "google.auth.transport.requests")),
    ("google-cloud-container", load("google.cloud.container_v1")),
    ("google-cloud-lustre", load("google.cloud.lustre_v1")),
    ("google-cloud-service-usage", load("google.cloud.service_usage_v1")),
    ("kubernetes.aio.client", lambda: imports().kube_client()),
]
child = before_fork + [
    ("google-cloud-compute: types.compute", lambda: imports().compute_types()),
    ("google-cloud-compute: 6 services", lambda: [imports().compute_client(k) for k in (
        "Networks", "Subnetworks", "Routers", "Addresses", "GlobalAddresses", "Firewalls")]),
]
out = []
for name, step in {"parent": parent, "child": child}[sys.argv[1]]:
    t = time.process_time()
    step()
    out.append((name, time.process_time() - t))
print(json.dumps(out))
"""


def tree_cpu(pid: int) -> float:
    """CPU seconds used so far by process `pid` and every process under it (/proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    mine, total, grew = {pid}, 0.0, True
    while grew:
        grew = False
        for p, (parent, _) in stats.items():
            if parent in mine and p not in mine:
                mine.add(p)
                grew = True
    for p in mine:
        total += stats.get(p, (0, 0.0))[1]
    return total


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one process run to its end; a failure stops the bench."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def sandbox_env(env: dict[str, str]) -> dict[str, str]:
    """The environment after `eval "$(rltui sandbox env)"`, read back from bash."""
    script = 'eval "$("$@" sandbox env)" && env -0'
    done = subprocess.run(["bash", "-c", script, "bash", *RLTUI], env=env, cwd=ROOT,
                          capture_output=True, check=True)
    pairs = (item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item)
    return dict(pairs)


def provision(env: dict[str, str]) -> None:
    for args in (("up", "--yes"), ("submit",), ("logs", "--follow")):
        t0 = time.monotonic()
        done = subprocess.run([*RLTUI, *args, "--sandbox", "--env", str(ENV_FILE)], env=env,
                              cwd=ROOT, capture_output=True, text=True, timeout=900)
        print(f"rltui {' '.join(args)}: exit {done.returncode} in {time.monotonic() - t0:.1f} s",
              flush=True)
        if done.returncode != 0:
            raise SystemExit(f"rltui {' '.join(args)} failed:\n{done.stderr[-2000:]}")


def floor(env: dict[str, str], side: str) -> list[tuple[str, float]]:
    """The imports' CPU seconds of one side of `rltui status` (median of 3 fresh interpreters)."""
    import json

    runs = []
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", FLOOR, side], env=env, cwd=ROOT,
                              capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout))
    return [(name, statistics.median(r[i][1] for r in runs)) for i, (name, _) in enumerate(runs[0])]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--speed", type=float, default=300.0)
    args = ap.parse_args()
    from rltui.config import parse_config
    from rltui.envfile import EnvFile
    from rltui_sandbox import manage

    project = parse_config(EnvFile.read(ENV_FILE).values()).project_id
    with tempfile.TemporaryDirectory(prefix="rltui-bench-cli-", dir="/tmp") as tmp:
        sbx = Path(tmp) / "sbx"
        env = {**os.environ, "RLTUI_SANDBOX_DIR": str(sbx), "XDG_STATE_HOME": f"{tmp}/state",
               "HOME": tmp}
        daemon = manage.start(speed=args.speed, root=sbx).pid
        try:
            provision(env)
            env = sandbox_env(env)
            status = [*RLTUI, "status", "--sandbox", "--env", str(ENV_FILE)]
            gcloud = ["gcloud", "container", "clusters", "list", f"--project={project}",
                      "--format=value(name)"]
            timed(status, env), timed(gcloud, env)   # warm the page cache: not counted
            ours, theirs = [], []
            cpu0, t0 = tree_cpu(daemon), time.monotonic()
            for _ in range(args.runs):
                ours.append(timed(status, env))
                theirs.append(timed(gcloud, env))
            # The sandbox shares the two cores: its kubelet probes and Ray head never rest.
            sandbox_share = (tree_cpu(daemon) - cpu0) / (time.monotonic() - t0)
            parts = {side: floor(env, side) for side in ("parent", "child")}
        finally:
            manage.stop(sbx)

    def med(rows: list[tuple[float, float]], i: int) -> float:
        return statistics.median(r[i] for r in rows)

    print(f"rltui status:                   wall {med(ours, 0):.3f} s, CPU {med(ours, 1):.3f} s"
          f" (medians of {args.runs})")
    print(f"gcloud container clusters list: wall {med(theirs, 0):.3f} s, CPU {med(theirs, 1):.3f} s")
    print(f"the sandbox (its daemon, Ray head and tools) used {sandbox_share:.2f} of a core meanwhile")
    gcloud_wall = med(theirs, 0)
    print("rltui status's imports, one after another (CPU s), on each side of the fork:")
    sides = {}
    for side, steps in parts.items():
        for name, cpu in steps:
            print(f"  {side:<6} {cpu:6.3f}  {name}")
        sides[side] = sum(c for _, c in steps)
        print(f"  {side:<6} {sides[side]:6.3f}  together")
    longest = max(sides.values())
    print(f"floor: the longer side's imports alone, {longest:.3f} s, are {longest / gcloud_wall:.2f}"
          " of gcloud's wall (before any call, and with two idle cores)")
    print(f"cli_status_ratio: {med(ours, 0) / med(theirs, 0):.2f} (goal <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
