"""The pure core and the CLI's startup path load none of the heavy libraries."""

import subprocess
import sys

import pytest

HEAVY = ("textual", "grpc", "google", "kubernetes", "ray")
PURE = ["rltui.config", "rltui.names", "rltui.cost", "rltui.envfile", "rltui.latency", "rltui.plan", "rltui.manifests", "rltui.script", "rltui.joblog", "rltui.saves",
        "rltui.report", "rltui.cli", "rltui.runs", "rltui.cloud.rayjobs", "rltui.notify"]


@pytest.mark.parametrize("module", PURE)
def test_module_imports_no_heavy_library(module):
    code = (f"import sys, {module}\n"
            f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))\n"
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} imports {out.stdout.strip()}"


RAY_JOBS_CALL = """
import asyncio, socket, sys
from rltui.cloud.errors import CloudError
from rltui.cloud.rayjobs import RayJobs
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]  # closed again: nothing listens there
try:
    asyncio.run(RayJobs(f"http://127.0.0.1:{port}", backoff_s=0.001).status("x"))
except CloudError as exc:
    print(exc.transient)
print(sorted({m.split('.')[0] for m in sys.modules} & {'ray', 'requests'}))
"""


def test_a_ray_job_call_loads_no_ray():
    """The wizard's job calls speak Ray's REST API themselves (issue 13): ray.job_submission
    (~49 MB, 0.4 s) never loads, even once a call has gone out."""
    out = subprocess.run([sys.executable, "-c", RAY_JOBS_CALL], capture_output=True, text=True,
                         check=True, timeout=60)
    transient, loaded = out.stdout.strip().splitlines()[-2:]
    assert transient == "True", out.stdout  # the call was made, and failed as unreachable
    assert loaded == "[]", f"a Ray job call loaded {loaded}"


def test_cli_commands_that_need_no_cloud_stay_light(tmp_path):
    code = ("import sys, runpy\nsys.argv=['rltui','--version']\n"
            "from rltui import cli\ntry:\n    cli.main(['--version'])\nexcept SystemExit:\n    pass\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


# ---- modules of one job: the layers themselves are import-linter contracts (pyproject.toml) ----

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2] / "rltui"
SANDBOX = ROOT.parent / "sandbox" / "rltui_sandbox"


def test_no_module_is_over_600_lines():
    long = {str(p.relative_to(ROOT.parent)): n for p in [*ROOT.rglob("*.py"), *SANDBOX.rglob("*.py")]
            if (n := len(p.read_text().splitlines())) > 600}
    assert not long, long


# ---- the first frame: the Start screen is painted before any heavy library loads ----

FIRST_FRAME_HEAVY = ("google", "grpc", "kubernetes", "ray", "numpy", "plotext", "textual_plotext",
                     "pydantic")
FIRST_FRAME = f"""
import asyncio, sys
from pathlib import Path
from rltui import cli
from rltui.app import RLTuiApp
from rltui.widgets.chrome import HeaderInfo

at_first_frame = []

class Probe(RLTuiApp):
    def on_mount(self):
        # Queued before the app's own after-refresh boot: runs once the first frame is out.
        self.call_after_refresh(lambda: at_first_frame.append(
            sorted({{m.split('.')[0] for m in sys.modules}} & set({FIRST_FRAME_HEAVY!r}))))
        super().on_mount()

def endpoints():
    raise RuntimeError("no endpoints in this test")

def session():  # what `rltui --sandbox` builds (cli.cmd_wizard)
    from rltui.remote import RemoteSession
    return RemoteSession(Path(sys.argv[1]), endpoints)

async def main():
    app = Probe(cli._DeferredSession(session), header=HeaderInfo(mode="SANDBOX"))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        print(type(app.screen).__name__, "SANDBOX" in str(app.screen.query_one("#start-badge").render()))
        print(at_first_frame[0])

asyncio.run(main())
"""


def test_the_start_screen_paints_before_any_heavy_library_loads():
    env_sh = ROOT.parent / "assets" / "sandbox.env.sh"
    out = subprocess.run([sys.executable, "-c", FIRST_FRAME, str(env_sh)], capture_output=True,
                         text=True, check=True)
    screen, modules = out.stdout.strip().splitlines()[-2:]
    assert screen == "StartScreen True", out.stdout
    assert modules == "[]", f"loaded before the first frame: {modules}"
