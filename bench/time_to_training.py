"""Time to training: rltui's plan vs the codelab's order, on the sandbox's own reference clock.

Two fresh sandboxes in a temp folder, each at the reference latency profile (untuned, seed 0):
1. rltui's plan, as a user runs it: `rltui up --yes`, then `rltui submit --follow` until the
job's first `Step 1/` line; 2. the codelab's order (plan/codelab.py CODELAB_ORDER: each step
started after the previous one finishes, one `Runner.up({step})` each, in a worker process),
then the same submit and logs. Both are timed on the sandbox's reference clock: Record.ref_now's
definition, (epoch - the record's started_at) x its speed, the record read from the daemon (GET
<kube_api>/_sandbox/record, sandbox/rltui_sandbox/record.py), from just before the first command
to the moment the `Step 1/` line is read. The critical path is read from the same record:
walking back from the end, the operation that ended last before the point reached, then the one
that ended last before that one started, and so on. Phases the sandbox models without an API
call of their own are operations there too, with their profile key (xpk's networks and
workloads, Terraform's poll lag, each pod's pod_start, the peering:
sandbox/rltui_sandbox/record.py), so a gap between two operations is real time no sandbox
operation explains (processes starting, gcloud and kubectl calls, rltui's own work, the job's
upload and start on the local Ray head); the local Ray head's start is recorded as real time
(`"real": true`) and only the part of it that its modelled pod_start does not cover counts.

The speed: real-time costs should stay under 5% of the figure (`real_time_share`, the larger
of the two runs, printed before the last line), and the bench must end within 15 minutes. A
run's real time is about the same seconds at any speed (processes starting, xpk's gcloud
calls, the job's upload and its start on the local Ray head: about 15 s for rltui's run, 20 s
for the codelab's), so its share is those seconds times the speed over the figure. rltui's
run goes at speed 6 (a real second is 6 reference seconds; about 6.5 real minutes), the
codelab's at 10 (about 10 real minutes); the two run at the same time, each in its own
sandbox, the codelab's 120 s after rltui's. The ratio is read on the reference clock, so the
speeds do not enter it except through that real time. Each run lists its biggest pieces of
real time with the operations and rltui's output lines around them.

The floors: the shortest chains the profile and the other actors allow. xpk 1.16's Toolkit
path cannot make the cluster with the addons (its a4 blueprint sets no Lustre or Ray option on
the gke-cluster module: xpk core/blueprint/blueprint_generator.py generate_a4_blueprint), and
nothing may change the cluster while xpk's Terraform works on it (the provider removes the
default pool right after the create without retrying a busy cluster:
terraform-provider-google v7.40.0 resource_container_cluster.go), so the update comes after
xpk's whole create and GKE's own upgrade after it. "recreated": then the GPU nodes lack the
Lustre driver (the sandbox's model; whether real GKE reaches nodes that exist is not settled)
and are recreated all at once after a bounded wait for it, then the image pull and the pod
start. "driver on existing nodes": the same without the wait and the recreation, the floor if
GKE's add-on reaches the nodes that exist. The job's own start to `Step 1/` is added to both
as measured.

    .venv/bin/python bench/time_to_training.py [--rltui-speed 6] [--speed 10] [--stagger 120]
        [--only rltui|codelab]
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GOAL = 0.60
SHARE_GOAL = 0.05   # real time's share of each run's figure (issue 13 item 1)
ENV_SH = ROOT / "assets" / "sandbox.env.sh"
RLTUI = [sys.executable, "-m", "rltui.cli"]


class Sandbox:
    """A sandbox daemon in its own folder; its record read as the daemon writes it."""

    def __init__(self, tmp: Path, speed: float) -> None:
        self.env = {**os.environ, "RLTUI_SANDBOX_DIR": str(tmp / "sbx"),
                    "XDG_STATE_HOME": str(tmp / "state"), "PYTHONPATH": str(ROOT)}
        self.speed = speed
        self._epoch: tuple[float, float] | None = None
        for _ in range(2):   # a busy machine can miss the daemon's 10 s to answer: once more
            started = subprocess.run([*RLTUI, "sandbox", "start", "--speed", f"{speed:g}"],
                                     env=self.env, capture_output=True, text=True, cwd=ROOT)
            if started.returncode == 0:
                break
            self.stop()
        if started.returncode != 0:
            raise RuntimeError(f"sandbox start: {started.stdout[-1000:]}{started.stderr[-2000:]}")
        status = json.loads(subprocess.run([*RLTUI, "sandbox", "status", "--json"], env=self.env,
                                           check=True, capture_output=True, text=True,
                                           cwd=ROOT).stdout)
        self.url = f"{status['kube_api']}/_sandbox/record"
        self.tls = ssl.create_default_context(cafile=status["kube_ca"])

    def record(self) -> dict[str, Any]:
        """GET <kube_api>/_sandbox/record: the record as the daemon holds it now."""
        with urllib.request.urlopen(self.url, context=self.tls, timeout=30) as resp:
            return dict(json.load(resp))

    def ref_now(self) -> float:
        """Reference seconds since the sandbox started (Record.ref_now's definition)."""
        if self._epoch is None:
            rec = self.record()
            self._epoch = (float(rec["started_at"]), float(rec["speed"]))
        started_at, speed = self._epoch
        return (time.time() - started_at) * speed

    def stop(self) -> None:
        subprocess.run([*RLTUI, "sandbox", "stop"], env=self.env, capture_output=True, cwd=ROOT)


def _run(sbx: Sandbox, *argv: str, timeout_s: float,
         log: list[tuple[float, str]] | None = None) -> None:
    """Run a command to its end; each line it prints goes to `log` with the reference time it
    was read (rltui's run log: what rltui was doing around a gap of the critical path)."""
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(list(argv), env=sbx.env, stdout=subprocess.PIPE, stderr=err,
                                text=True, cwd=ROOT)
        out: list[str] = []
        deadline = time.monotonic() + timeout_s
        assert proc.stdout is not None
        for line in proc.stdout:
            out.append(line)
            if log is not None:
                log.append((sbx.ref_now(), line.rstrip()))
            if time.monotonic() > deadline:
                proc.kill()   # our own child, by its handle
                break
        rc = proc.wait()
        if rc != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(argv[2:5])} exited {rc}:\n"
                               f"{''.join(out)[-3000:]}\n{err.read()[-2000:]}")


def _submit_to_step1(sbx: Sandbox, timeout_s: float,
                     log: list[tuple[float, str]]) -> tuple[float, float]:
    """`rltui submit --follow` (as `ray job submit` follows by default) until a `Step 1/`
    line: (submit, step) ref s."""
    submitted = sbx.ref_now()
    log.append((submitted, "[bench] rltui submit --follow"))
    follow = subprocess.Popen([*RLTUI, "submit", "--sandbox", "--env", str(ENV_SH), "--follow"],
                              env=sbx.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, cwd=ROOT)
    try:
        assert follow.stdout is not None
        deadline = time.monotonic() + timeout_s
        for line in follow.stdout:
            log.append((sbx.ref_now(), line.rstrip()))
            if "Step 1/" in line:
                return submitted, log[-1][0]
            if time.monotonic() > deadline:
                break
        raise RuntimeError("the job's log ended or timed out before a `Step 1/` line")
    finally:
        follow.terminate()   # our own child, by its handle
        try:
            follow.wait(timeout=10)
        except subprocess.TimeoutExpired:
            follow.kill()


GAP, REAL, MODEL = "gap", "real", "model"


def _label(op: dict[str, Any]) -> str:
    key = f" [{op['key']}]" if op.get("key") else ""
    return f"{op['kind']} {op['target'].rsplit('/', 1)[-1]}{key}"


def _gap(op: dict[str, Any], cur: float, ops: list[dict[str, Any]]) -> list[tuple[str, float, float, str]]:
    """The time between `op`'s end and `cur` that no sandbox operation explains. One piece of it
    is rltui's own modelled wait, not real time: after the addon update, AddonsStep waits up to
    DRIVER_WAIT_MIN reference minutes for the Lustre CSI driver to register on the nodes that
    exist (rltui/plan/steps_addons.py) before it sets the GPU pool's upgrade settings; that
    much of a gap that ends at that settings update (an UPDATE_CLUSTER on a node pool) is the
    wait, the rest stays a gap."""
    from rltui.plan.steps_addons import DRIVER_WAIT_MIN

    start = op["end_ref_s"]
    after = [o for o in ops if abs(o["start_ref_s"] - cur) < 1e-3]
    waited = any(o["kind"] == "gke.update_cluster" and "/nodePools/" in o["target"] for o in after) \
        and op["kind"] == "gke.update_cluster" and "/nodePools/" not in op["target"]
    if not waited:
        return [("(no sandbox operation)", start, cur, GAP)]
    wait_end = min(cur, start + DRIVER_WAIT_MIN * 60.0)
    out = [("rltui's wait for the Lustre CSI driver [DRIVER_WAIT_MIN]", start, wait_end, MODEL)]
    if cur - wait_end > 1e-3:
        out.append(("(no sandbox operation)", wait_end, cur, GAP))
    return list(reversed(out))


def critical_path(ops: list[dict[str, Any]], t0: float,
                  t1: float) -> list[tuple[str, float, float, str]]:
    """(label, start, end, what) in reference seconds, first to last, `what` one of MODEL (an
    operation whose time the sandbox models: the profile's phases, Terraform's poll), REAL (an
    operation the sandbox records as real time, `"real": true`: the part of it that no modelled
    operation beside it covers) and GAP (time no sandbox operation explains: processes, gcloud
    and kubectl calls, rltui's work, the job's start on the local Ray head). Every gap counts,
    however short."""
    done = [op for op in ops if op.get("end_ref_s") is not None and op["end_ref_s"] > t0]
    path: list[tuple[str, float, float, str]] = []
    cur = t1
    while cur > t0:
        before = [op for op in done if op["end_ref_s"] <= cur + 1e-6 and op["start_ref_s"] < cur]
        if not before:
            break
        op = max(before, key=lambda o: (o["end_ref_s"], o["end_ref_s"] - o["start_ref_s"]))
        if cur - op["end_ref_s"] > 1e-3:
            path += _gap(op, cur, done)
        if op.get("real"):
            beside = [o for o in before if not o.get("real") and o["end_ref_s"] > op["start_ref_s"]]
            if beside:   # e.g. the head's pod_start beside its real Ray head: only the excess is real
                modelled_end = max(o["end_ref_s"] for o in beside)
                path.append((f"real: {_label(op)}", modelled_end, op["end_ref_s"], REAL))
                cur = modelled_end
                continue
        path.append((_label(op), max(op["start_ref_s"], t0), op["end_ref_s"],
                     REAL if op.get("real") else MODEL))
        cur = op["start_ref_s"]
    if cur - t0 > 1e-3:
        path.append(("(no sandbox operation)", t0, cur, GAP))
    return list(reversed(path))


def real_share(m: dict[str, Any]) -> float:
    """The share of the figure that is real time: gaps and real operations on the critical path."""
    real = sum(b - a for _, a, b, what in m["path"] if what != MODEL)
    return float(real / (m["step1"] - m["t0"]))


def floor_minutes(num_nodes: int) -> dict[str, tuple[float, list[tuple[str, float]]]]:
    """The profile's shortest chains to the pods running (see the module docstring). The
    recreation takes every node at once (rltui/plan/steps_addons.py: max_unavailable = the
    pool's size), so one node's time, beside two upgrade-settings updates (gke_set_labels each)."""
    from rltui.latency import LatencyProfile
    from rltui.plan.steps_addons import DRIVER_WAIT_MIN

    m = LatencyProfile.load().minutes
    after = [("enable_apis", m("enable_apis")), ("xpk_done", m("xpk_done")),
             ("gke_auto_upgrade", m("gke_auto_upgrade")), ("addon_update", m("addon_update"))]
    pods = [("image_pull", m("image_pull")), ("pod_start", m("pod_start"))]
    recreate = [("driver wait", DRIVER_WAIT_MIN), ("upgrade settings x 2", 2 * m("gke_set_labels")),
                (f"node_pool_recreate, {num_nodes} nodes at once", m("node_pool_recreate"))]
    return {"recreated": (sum(v for _, v in after + recreate + pods), after + recreate + pods),
            "driver on existing nodes": (sum(v for _, v in after + pods), after + pods)}


def measure(name: str, speed: float, drive: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"rltui-ttt-{name}-", dir="/tmp") as tmp:
        sbx = Sandbox(Path(tmp), speed)
        try:
            log: list[tuple[float, str]] = []
            t0 = sbx.ref_now()
            real0 = time.monotonic()
            _run(sbx, *drive, timeout_s=14 * 60, log=log)
            ready = sbx.ref_now()
            submitted, step1 = _submit_to_step1(sbx, timeout_s=5 * 60, log=log)
            real_s = time.monotonic() - real0
            ops = sbx.record()["operations"]
        finally:
            sbx.stop()
    return {"name": name, "t0": t0, "ready": ready, "submitted": submitted, "step1": step1,
            "real_s": real_s, "path": critical_path(ops, t0, step1), "ops": ops, "log": log,
            "speed": speed}


def codelab_steps() -> int:
    """The worker for the codelab's order: one step after the other, in this process."""
    import asyncio

    from rltui.cli import _load_env
    from rltui.plan.codelab import CODELAB_ORDER
    from rltui.plan.context import Context
    from rltui.plan.wiring import make_runner
    from rltui.sandbox_link import endpoints_for

    _, cfg = _load_env(str(ENV_SH))

    async def main() -> int:
        ctx = Context(cfg, endpoints_for(True))
        runner = make_runner(ctx, lambda ev: None)
        try:
            for step in CODELAB_ORDER:
                result = await runner.up({step})
                if not result.ok:
                    print(f"{step} failed: {result.messages}", file=sys.stderr)
                    return 1
        finally:
            await ctx.close()
        return 0

    return asyncio.run(main())


def _report(m: dict[str, Any], top: int = 6) -> None:
    def mins(s: float) -> str:
        return f"{s / 60:.1f}"

    total = m["step1"] - m["t0"]
    print(f"{m['name']}: {mins(total)} reference min to `Step 1/` (ready {mins(m['ready'] - m['t0'])},"
          f" submit to Step 1 {mins(m['step1'] - m['submitted'])}; {m['real_s']:.0f} s real at speed {m['speed']:g})")
    print("  critical path (reference minutes from the start; [key] = the profile's phase):")
    for label, a, b, what in m["path"]:
        if what != GAP or b - a > 6.0:   # gaps under a tenth of a minute are counted, not listed
            print(f"    {mins(a - m['t0']):>6} -> {mins(b - m['t0']):>6}  {b / 60 - a / 60:5.2f}  {label}")
    real = [(b - a, a, b, label) for label, a, b, what in m["path"] if what != MODEL]
    print(f"  real time on the critical path: {sum(r[0] for r in real) / 60:.2f} min in {len(real)}"
          f" pieces, {real_share(m):.1%} of the figure; the biggest, with what was around them:")
    for dur, a, b, label in sorted(real, reverse=True)[:top]:
        print(f"    {dur:6.1f} ref s ({dur / m['speed']:.1f} real s) at {mins(a - m['t0'])} min: {label}")
        ended = [op for op in m["ops"] if op.get("end_ref_s") is not None
                 and a - 3.0 <= op["end_ref_s"] <= a + 1e-3]
        started = [op for op in m["ops"] if a - 1e-3 <= op["start_ref_s"] <= b + 3.0]
        for op in ended[-2:]:
            print(f"        before: {_label(op)} ended {op['end_ref_s'] - a:+.1f} s")
        for op in started[:2]:
            print(f"        after: {_label(op)} started {op['start_ref_s'] - a:+.1f} s")
        lines = [(t, line) for t, line in m["log"] if a - 3.0 <= t <= b + 3.0]
        for t, line in (lines if len(lines) <= 8 else [*lines[:4], *lines[-4:]]):
            print(f"        rltui {t - a:+6.1f} s | {line[:110]}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--speed", type=float, default=10.0, help="the codelab's run")
    ap.add_argument("--rltui-speed", type=float, default=6.0, help="rltui's run (the shorter figure)")
    ap.add_argument("--stagger", type=float, default=120.0, help="s between the two runs' starts")
    ap.add_argument("--only", choices=("rltui", "codelab"))
    ap.add_argument("--codelab-steps", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.codelab_steps:  # out without the interpreter's teardown, as `rltui` (cli.run)
        code = codelab_steps()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.path.insert(0, str(ROOT))
    from rltui.config import parse_config
    from rltui.envfile import EnvFile

    num_nodes = parse_config(EnvFile.read(str(ENV_SH)).values()).num_nodes
    drives = {"rltui": ("rltui's plan", args.rltui_speed, 0.0,
                        [*RLTUI, "up", "--sandbox", "--yes", "--env", str(ENV_SH)]),
              "codelab": ("the codelab's order", args.speed, args.stagger,
                          [sys.executable, str(Path(__file__).resolve()), "--codelab-steps"])}
    wanted = [k for k in drives if args.only in (None, k)]

    def one(key: str) -> dict[str, Any]:
        name, speed, delay, drive = drives[key]
        time.sleep(delay if len(wanted) > 1 else 0.0)
        return measure(name, speed, drive)

    # The two runs at once, in sandboxes of their own: each waits on its reference clock most
    # of the time (about 40 s of CPU in 12 minutes), so neither slows the other's figure; the
    # codelab's starts `--stagger` s later, so that the two runs' real-time pieces (process
    # starts, xpk's gcloud calls, the job's start) fall at different moments.
    with ThreadPoolExecutor(len(wanted)) as pool:
        futures = {key: pool.submit(one, key) for key in wanted}
        runs = {key: future.result() for key, future in futures.items()}
    for m in runs.values():
        _report(m)
    job = min(m["step1"] - m["submitted"] for m in runs.values()) / 60
    floors = floor_minutes(num_nodes)
    for name, (floor, chain) in floors.items():
        print(f"floor from the profile, {name}: {floor:.1f} min to the pods running ("
              + " + ".join(f"{k} {v:g}" for k, v in chain) + f"), + {job:.1f} min of the job's start")
    share = max(real_share(m) for m in runs.values())
    if len(runs) < 2:
        print(f"real_time_share: {share:.1%} (< {SHARE_GOAL:.0%})")
        return 0
    a, b = ((runs[k]["step1"] - runs[k]["t0"]) / 60 for k in ("rltui", "codelab"))
    print("floor ratios: " + ", ".join(f"{name} {(f + job) / b:.2f}"
                                       for name, (f, _) in floors.items()))
    print(f"real_time_share: {share:.1%} (< {SHARE_GOAL:.0%}; the larger of the two runs)")
    print(f"time_to_training_ratio: {a / b:.2f} (<= {GOAL:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
