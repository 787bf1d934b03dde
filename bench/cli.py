"""`rltui status` as a whole process, against `gcloud container clusters list` on the same project.

Starts its own sandbox in a temp folder, provisions it as a user does (`rltui up --yes
--sandbox` with assets/sandbox.env.sh, a job submitted and followed to its end), then runs the
two commands alternately, each a fresh process, in the environment `rltui sandbox env` prints
(the real gcloud pointed at the sandbox's GKE API, with the project passed as a flag):
`rltui status --sandbox` asks every service of the plan (GKE, Compute, Lustre, Service Usage,
Service Networking, the Kubernetes API, the job's record), gcloud one. Both answer about the
same project. Also prints each command's CPU time and where rltui's goes before its first call
(the imports it needs, one after another, in a fresh interpreter): the floor a single process
cannot go below.

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

# What `rltui status` loads before it asks anything, in the order it needs them.
FLOOR = r"""
import importlib, json, time
steps = [
    ("rltui: cli, headless, config, plan", lambda: [importlib.import_module(m) for m in
        ("rltui.cli", "rltui.headless", "rltui.plan.inventory", "rltui.config")]),
    ("grpc, google-api-core, google-auth", lambda: [importlib.import_module(m) for m in
        ("google.api_core.grpc_helpers_async", "google.oauth2.service_account",
         "google.auth.transport.requests")]),
    ("google-cloud-container", lambda: importlib.import_module("google.cloud.container_v1")),
    ("google-cloud-lustre", lambda: importlib.import_module("google.cloud.lustre_v1")),
    ("google-cloud-service-usage", lambda: importlib.import_module("google.cloud.service_usage_v1")),
    ("google-cloud-compute: types.compute", lambda: importlib.import_module(
        "rltui.cloud.imports").compute_types()),
    ("google-cloud-compute: 6 services", lambda: [importlib.import_module(
        "rltui.cloud.imports").compute_client(k) for k in ("Networks", "Subnetworks", "Routers",
        "Addresses", "GlobalAddresses", "Firewalls")]),
    ("kubernetes.aio.client", lambda: importlib.import_module("rltui.cloud.imports").kube_client()),
]
out = []
for name, step in steps:
    t = time.process_time()
    step()
    out.append((name, time.process_time() - t))
print(json.dumps(out))
"""


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


def floor(env: dict[str, str]) -> list[tuple[str, float]]:
    import json

    done = subprocess.run([sys.executable, "-c", FLOOR], env=env, cwd=ROOT, capture_output=True,
                          text=True, check=True)
    return [(name, float(s)) for name, s in json.loads(done.stdout)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--speed", type=float, default=300.0)
    args = ap.parse_args()
    from rltui.config import parse_config
    from rltui.envfile import EnvFile
    from rltui.sandbox import manage

    project = parse_config(EnvFile.read(ENV_FILE).values()).project_id
    with tempfile.TemporaryDirectory(prefix="rltui-bench-cli-", dir="/tmp") as tmp:
        sbx = Path(tmp) / "sbx"
        env = {**os.environ, "RLTUI_SANDBOX_DIR": str(sbx), "XDG_STATE_HOME": f"{tmp}/state",
               "HOME": tmp}
        manage.start(speed=args.speed, root=sbx)
        try:
            provision(env)
            env = sandbox_env(env)
            status = [*RLTUI, "status", "--sandbox", "--env", str(ENV_FILE)]
            gcloud = ["gcloud", "container", "clusters", "list", f"--project={project}",
                      "--format=value(name)"]
            timed(status, env), timed(gcloud, env)   # warm the page cache: not counted
            ours, theirs = [], []
            for _ in range(args.runs):
                ours.append(timed(status, env))
                theirs.append(timed(gcloud, env))
            parts = floor(env)
        finally:
            manage.stop(sbx)

    def med(rows: list[tuple[float, float]], i: int) -> float:
        return statistics.median(r[i] for r in rows)

    print(f"rltui status:                   wall {med(ours, 0):.3f} s, CPU {med(ours, 1):.3f} s"
          f" (medians of {args.runs})")
    print(f"gcloud container clusters list: wall {med(theirs, 0):.3f} s, CPU {med(theirs, 1):.3f} s")
    print("rltui status's imports, one after another (CPU s):")
    for name, cpu in parts:
        print(f"  {cpu:6.3f}  {name}")
    print(f"  {sum(c for _, c in parts):6.3f}  together: {sum(c for _, c in parts) / med(theirs, 0):.2f}"
          " of gcloud's wall")
    print(f"cli_status_ratio: {med(ours, 0) / med(theirs, 0):.2f} (goal <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
