"""Time to a ready RayCluster: rltui's graph vs the codelab's sequential order.

Runs `rltui up` against a fresh sandbox (reference latency profile, untuned) and converts
the real seconds into reference minutes (real seconds x speed / 60). Prints the ratio to the
codelab's sequential order (57 min, counted before the sandbox had GKE's own upgrade after a
create and the GPU nodes' recreation for the Lustre CSI driver: about 40 minutes that the
codelab skips, and that rltui must wait for) and to the shortest chain (30 min, likewise).
Lower is better. issue 13 replaces this with a time-to-training bench on the sandbox's record.

    .venv/bin/python bench/time_to_ready.py [--speed 120]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEQUENTIAL_MIN = 57.0
SHORTEST_MIN = 30.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--speed", type=float, default=120.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rltui-bench-", dir="/tmp") as tmp:
        env = {**os.environ, "RLTUI_SANDBOX_DIR": f"{tmp}/sbx", "XDG_STATE_HOME": f"{tmp}/state"}
        rltui = [sys.executable, "-m", "rltui.cli"]
        env_sh = ROOT / "assets" / "sandbox.env.sh"
        subprocess.run([*rltui, "sandbox", "start", "--speed", str(args.speed)], env=env, check=True,
                       capture_output=True)
        try:
            t0 = time.monotonic()
            out = subprocess.run([*rltui, "up", "--sandbox", "--yes", "--env", str(env_sh)],
                                 env=env, capture_output=True, text=True)
            real_s = time.monotonic() - t0
        finally:
            subprocess.run([*rltui, "sandbox", "stop"], env=env, capture_output=True)
    if out.returncode != 0:
        print(out.stdout[-3000:], out.stderr[-2000:])
        return 1
    minutes = real_s * args.speed / 60.0
    print(f"rltui up: {real_s:.1f} s real at speed {args.speed:g} = {minutes:.1f} reference minutes")
    print(f"ratio to the codelab's sequential order ({SEQUENTIAL_MIN:g} min): {minutes / SEQUENTIAL_MIN:.2f}")
    print(f"ratio to the shortest chain ({SHORTEST_MIN:g} min): {minutes / SHORTEST_MIN:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
