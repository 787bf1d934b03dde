"""`make screens`: the wizard's screens rendered from a live sandbox run, one SVG each.

Starts a private sandbox, drives the real app with a real Session through the codelab
(configure -> provision -> submit -> monitor -> metrics -> teardown) and saves each screen
as it looks at that moment. Also an end-to-end check of the wizard: it fails when a step
does not get where a user would.

    .venv/bin/python -m rltui.gallery [--out screens] [--speed 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.pilot import Pilot

ROOT = Path(__file__).resolve().parent.parent
SIZE = (120, 40)


async def _until(what: str, check: Callable[[], Any], pilot: Pilot[None], timeout_s: float) -> Any:
    """check()'s first true value, polled every 0.2 s; a worker's error meanwhile fails it."""
    from .app import RLTuiApp

    app = pilot.app
    assert isinstance(app, RLTuiApp)
    deadline = time.monotonic() + timeout_s
    errors = app.bus.notice.history
    seen = len(errors)
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        fresh = [n for n in list(errors)[seen:] if n.severity == "error"]
        if fresh:
            raise RuntimeError(f"gallery: waiting for {what}: {fresh[0].group} failed: {fresh[0].message}")
        await pilot.pause(0.2)
    raise TimeoutError(f"gallery: {what} did not happen within {timeout_s:.0f} s")


async def drive(out: Path, speed: float, log: Callable[[str], None]) -> list[Path]:
    from textual.widgets import Input

    from .app import RLTuiApp
    from .cloud.endpoints import Endpoints
    from .oncluster.jobstatus import FINAL
    from .plan.step import StepState
    from .sandbox_link import check_status, contract
    from .session import Session
    from .widgets.chrome import HeaderInfo

    saved: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="rltui-gallery-", dir="/tmp") as tmp:
        tmp_path = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(tmp_path / "state")
        manage = contract()
        status = manage.start(speed=speed, root=tmp_path / "sbx")
        env_path = tmp_path / "env.sh"
        shutil.copy(ROOT / "assets" / "sandbox.env.sh", env_path)
        env_path.chmod(0o600)
        session = Session(env_path, lambda: Endpoints.sandbox(check_status(status.info)))
        app = RLTuiApp(session, header=HeaderInfo(mode="SANDBOX"))
        try:
            async with app.run_test(size=SIZE) as pilot:
                async def shot(name: str) -> None:
                    await pilot.pause(0.5)
                    saved.append(Path(app.save_screenshot(f"{name}.svg", str(out))))
                    log(f"saved {name}")

                bus = app.bus
                await _until("preflight", lambda: bus.preflight.last, pilot, 60)
                await shot("start")
                await app.switch_mode("configure")
                await shot("configure")

                await app.switch_mode("provision")
                app.start_provision()

                def overlapping() -> bool:
                    plan = bus.plan.last
                    states = {v.name: v.state for v in plan.steps} if plan else {}
                    return (states.get("xpk_cluster") == StepState.RUNNING
                            and states.get("lustre_instance") in (StepState.RUNNING, StepState.DONE))

                await _until("the Lustre chain running beside xpk", overlapping, pilot, 120)
                await shot("provision")
                result = await _until("provisioning", lambda: bus.run_result.last, pilot, 300)
                if not result.ok:
                    raise RuntimeError(f"gallery: provisioning failed: {result.messages}")

                await app.switch_mode("job")
                await shot("job")
                app.submit_job(False)
                await app.switch_mode("monitor")
                await _until("step 8", lambda: any(r.step >= 8 for r in bus.step_records.replayed()),
                             pilot, 180)
                await shot("monitor")
                await app.switch_mode("metrics")
                await _until("two checkpoints and throughput points",
                             lambda: len(bus.checkpoints.replayed()) >= 2 and bus.metrics.last
                             and bus.metrics.last.write, pilot, 180)
                await _until("the job's end", lambda: bus.job_status.last is not None
                             and bus.job_status.last.status in FINAL, pilot, 300)
                app.poll_metrics()
                await pilot.pause(2.0)
                await shot("metrics")

                await app.switch_mode("teardown")
                app.refresh_inventory()
                await _until("the inventory", lambda: bus.inventory.last, pilot, 60)
                screen = app.screen
                name_input = screen.query_one("Input", Input)
                if session.cfg is None:
                    raise RuntimeError("gallery: the session has no configuration at teardown")
                name_input.value = session.cfg.cluster_name
                await shot("teardown")
                app.action_help()
                await shot("help")
                await app.pop_screen()
                before = bus.run_result.last
                app.start_teardown()
                await _until("teardown", lambda: bus.run_result.last is not before, pilot, 300)
                await _until("the leak scan", lambda: bus.inventory.last and not any(
                    r.present and (r.owned or r.leak) for r in bus.inventory.last), pilot, 120)
                await shot("teardown-done")
        finally:
            await session.close()
            manage.stop(tmp_path / "sbx")
    return saved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rltui.gallery")
    ap.add_argument("--out", type=Path, default=ROOT / "screens")
    ap.add_argument("--speed", type=float, default=300.0)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    saved = asyncio.run(drive(args.out, args.speed, print))
    print(f"{len(saved)} screens in {args.out} ({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
