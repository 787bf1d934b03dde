"""How long `rltui down` takes on the sandbox's clock over the sum of its deletion steps
(issue 13, item 5).

Starts its own sandbox in a temp folder (reference latency profile, untuned), provisions it as
a user does (`rltui up --yes --sandbox` with assets/sandbox.env.sh), then runs the headless
`down --yes` (rltui/headless.py: the background xpk and the jobs' supervisors first, the
Runner's teardown, the leak scan) inside this process, with a listener added to its Runner
(the product code is not touched). Every time is on the sandbox's reference clock (its record,
sandbox/rltui_sandbox/record.py: real seconds since the sandbox started times its speed):

- a deletion step's duration: from its row turning `destroying` to `destroyed` (the Runner's
  RunEvent wall times, read on that clock); the sandbox's operations during down (the record's
  ops with their reference start and end) are printed beside them with --ops;
- down's span: from the first step leaving `pending` to the last one settling.

The ratio `span / sum` is 1.0 for deletions run one after another and falls as independent
ones overlap (the GKE cluster while Lustre goes). Lower is better. Real-time costs (gcloud,
xpk and kubectl start-up) count as reference time too: the default speed keeps them small.

    .venv/bin/python bench/teardown.py [--speed 60] [--ops]

Last line: `teardown_wall_ratio: X (<= 0.75)`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ROWS: list[tuple[str, str, str, float]] = []   # (step, title, state, reference seconds)


def rltui(env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "rltui.cli", *args, "--sandbox", "--env",
            str(ROOT / "assets" / "sandbox.env.sh")]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def listen(to_ref: Any) -> None:
    """Every Runner made from here on also tells ROWS its state changes (reference seconds)."""
    from rltui import headless
    from rltui.plan import wiring

    def make_runner(ctx: Any, listener: Any) -> Any:
        def both(ev: Any) -> None:
            if getattr(ev, "kind", "state") == "state":
                ROWS.append((ev.step, ev.title, ev.state.value, to_ref(ev.at)))
            listener(ev)

        return wiring.make_runner(ctx, both)

    headless.make_runner = make_runner   # type: ignore[assignment]


def steps_of(rows: list[tuple[str, str, str, float]]) -> dict[str, tuple[str, float, float]]:
    """Each deleted step's (title, destroying since, destroyed at)."""
    out: dict[str, tuple[str, float, float]] = {}
    began: dict[str, float] = {}
    for step, title, state, t in rows:
        if state == "destroying" and step not in began:
            began[step] = t
        elif state == "destroyed" and step in began:
            out[step] = (title, began[step], t)
    return out


def down(info: dict[str, Any]) -> int:
    from rltui import headless
    from rltui.cloud.endpoints import Endpoints
    from rltui.config import parse_config
    from rltui.envfile import EnvFile

    cfg = parse_config(EnvFile.read(ROOT / "assets" / "sandbox.env.sh").values())
    lines: list[str] = []
    code = asyncio.run(headless.down(cfg, Endpoints.sandbox(info), yes=True, verbose=False,
                                     out=lines.append))
    if code != 0:
        raise SystemExit("down failed:\n" + "\n".join(lines[-60:]))
    return code


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--speed", type=float, default=60.0)
    ap.add_argument("--ops", action="store_true", help="also print the sandbox's operations of down")
    args = ap.parse_args()
    from rltui_sandbox import manage

    with tempfile.TemporaryDirectory(prefix="rltui-bench-down-", dir="/tmp") as tmp:
        sbx = Path(tmp) / "sbx"
        env = {**os.environ, "RLTUI_SANDBOX_DIR": str(sbx), "XDG_STATE_HOME": f"{tmp}/state",
               "HOME": tmp}
        status = manage.start(speed=args.speed, root=sbx)
        try:
            t0 = time.monotonic()
            out = rltui(env, "up", "--yes")
            print(f"rltui up: exit {out.returncode} in {time.monotonic() - t0:.1f} s", flush=True)
            if out.returncode != 0:
                raise SystemExit(f"rltui up failed:\n{out.stdout[-4000:]}\n{out.stderr[-2000:]}")
            record_file = Path(status.info["record"])
            meta = json.loads(record_file.read_text(encoding="utf-8"))
            started_at, speed = float(meta["started_at"]), float(meta["speed"])

            def to_ref(wall: float) -> float:
                return (wall - started_at) * speed   # record.Record.ref_now

            os.environ.update({k: env[k] for k in ("RLTUI_SANDBOX_DIR", "XDG_STATE_HOME", "HOME")})
            listen(to_ref)
            since = to_ref(time.time())
            t0 = time.monotonic()
            down(status.info)
            real = time.monotonic() - t0
            time.sleep(1.0)   # the record is written at most twice a second
            record = json.loads(record_file.read_text(encoding="utf-8"))
        finally:
            manage.stop(sbx)
    if args.ops:
        print("the sandbox's operations during down (reference minutes from its start):")
        for op in record["operations"]:
            if op["start_ref_s"] >= since:
                end = "running" if op["end_ref_s"] is None else f"{(op['end_ref_s'] - since) / 60:6.2f}"
                print(f"  {(op['start_ref_s'] - since) / 60:6.2f} .. {end}  {op['kind']}"
                      f"  {op.get('error') or ''}")
    steps = steps_of(ROWS)
    if not steps:
        raise SystemExit("down deleted nothing")
    total = 0.0
    print("deletion steps (reference minutes from down's start):")
    for _, (title, a, b) in sorted(steps.items(), key=lambda kv: kv[1][1]):
        total += b - a
        print(f"  {(a - since) / 60:6.2f} .. {(b - since) / 60:6.2f}  {(b - a) / 60:6.2f} min  {title}")
    moved = [t for _, _, state, t in ROWS if state not in ("pending",)]
    span = max(t for *_, t in ROWS) - min(moved)
    print(f"sum of the deletion steps: {total / 60:.2f} min; down's span: {span / 60:.2f} min"
          f" (headless down took {real:.1f} s real at speed {speed:g} ="
          f" {real * speed / 60:.1f} reference min with its inventory and leak scan)")
    print(f"teardown_wall_ratio: {span / total:.2f} (<= 0.75)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
