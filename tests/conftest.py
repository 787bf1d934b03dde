"""Session fixtures shared by the suites that need the whole sandbox, and every test's isolation
from the developer's own configuration.

One daemon per test session (each can start a Ray head: ~650 MB, ~5 s), in a private
state folder, stopped by PID at the end. Suites that test one service start only that
service (see their own conftest.py, built from tests/harness.py).

Fixture names mean one thing across the suite: `sandbox` is that daemon (its status);
the one-service boxes are named for what they hold (`grpc_box`, `box`, `cloud`, `server`,
`demo_ray`, ...).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

import pytest

from rltui_sandbox.nemo_rl_tree import install_fake_nemo_rl, write_uv_shim
from rltui_sandbox.rayhead import RayHead

SPEED = 300.0  # 300 simulated minutes per real minute: a 25-minute xpk create takes 5 s

# What of the developer's shell must not reach a test: their gcloud configuration and account
# (CLOUDSDK_*; CLOUDSDK_PYTHON* only choose the interpreter gcloud runs on), kubeconfig,
# rltui settings (RLTUI_SANDBOX_DIR would point tests at their own sandbox), Google
# credentials and project (GOOGLE_APPLICATION_CREDENTIALS, GOOGLE_CLOUD_PROJECT, ...) and a Ray
# cluster address.
DEVELOPER_PREFIXES = ("CLOUDSDK_", "KUBECONFIG", "RLTUI_", "GOOGLE_", "GCLOUD_", "RAY_ADDRESS")
KEPT = ("CLOUDSDK_PYTHON",)
# $HOME and the XDG base directories rltui, gcloud, kubectl and Ray fall back to.
HOME_DIRS = {"XDG_CONFIG_HOME": ".config", "XDG_CACHE_HOME": ".cache", "XDG_STATE_HOME": ".local/state",
             "XDG_DATA_HOME": ".local/share"}


def pytest_sessionstart(session: pytest.Session) -> None:
    """Every Ray head of the suite (the sandbox's, the demo's, the clients') runs the cluster's Ray
    from the sandbox's Ray environment (sandbox/rltui_sandbox/images.py): without it, stop at once with
    the one line that says how to install it, not with a failure per test minutes later. Checked
    as the tests see it: without the developer's RLTUI_SANDBOX_RAY_ENV (developer_env_removed)."""
    if hasattr(session.config, "workerinput"):  # an xdist worker: its controller checked
        return
    from rltui_sandbox import images

    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(images.ENV_VAR, raising=False)
        try:
            images.ray_env()
        except images.MissingRayEnv as exc:
            pytest.exit(f"tests: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)


# What the session itself sets for every process it starts. The demo job's saves, wherever a
# sandbox's Ray head runs it: 5 MB rather than 50 (each MiB fsynced), a tenth of the writes for
# the same saves, spikes and markers.
SESSION_ENV = {"RLTUI_DEMO_CHECKPOINT_MB": "5"}


def developer_vars(environ: Mapping[str, str]) -> list[str]:
    return sorted(name for name in environ if name.startswith(DEVELOPER_PREFIXES) and not name.startswith(KEPT)
                  and name not in SESSION_ENV)


def _use_home(mp: pytest.MonkeyPatch, home: Path) -> Path:
    mp.setenv("HOME", str(home))
    for var, sub in HOME_DIRS.items():
        (home / sub).mkdir(parents=True, exist_ok=True)
        mp.setenv(var, str(home / sub))
    return home


@pytest.fixture(scope="session", autouse=True)
def developer_env_removed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """For the whole session, before any other fixture (the sandbox daemon, Ray heads, module
    fixtures start processes that inherit the environment): the developer's variables above
    removed, HOME and the XDG directories in a session folder. Restored at the end."""
    with pytest.MonkeyPatch.context() as mp:
        for name in developer_vars(os.environ):
            mp.delenv(name)
        for name, value in SESSION_ENV.items():
            mp.setenv(name, value)
        yield _use_home(mp, tmp_path_factory.mktemp("session-home"))


@pytest.fixture(autouse=True)
def isolated_env(developer_env_removed: Path, request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test: a fresh HOME with its own XDG config, cache, state and data folders (rltui's
    run state, gcloud's and kubectl's fallbacks), so no test sees the developer's files nor
    another test's; and RLTUI_SANDBOX_DIR only where the test uses the session's `sandbox`
    (which sets it once started). Returns that HOME. A test may still monkeypatch any of them."""
    if "sandbox" not in request.fixturenames:
        monkeypatch.delenv("RLTUI_SANDBOX_DIR", raising=False)
    return _use_home(monkeypatch, tmp_path_factory.mktemp("home"))


@pytest.fixture(scope="session")
def sandbox_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Short path: Ray's unix sockets live below it.
    return Path(tmp_path_factory.mktemp("sbx"))


@pytest.fixture(scope="session")
def sandbox(sandbox_dir: Path) -> Iterator[dict]:
    """A running sandbox daemon; yields its status (what `rltui sandbox status --json` prints).
    RLTUI_SANDBOX_DIR names it for the session (rltui run by a test finds it)."""
    from rltui_sandbox import manage

    claim = _claim_for_this_worker("sandbox")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLTUI_SANDBOX_DIR", str(sandbox_dir))
        # KubeRay 1.6.0: the release from which a rayVersion of 2.53 or later gets the unified
        # probes; every `up` and job of the shared sandbox runs on it (the default is newer).
        status = manage.start(speed=SPEED, root=sandbox_dir, kuberay_version="1.6.0")
        try:
            yield status.info
        finally:
            manage.stop(sandbox_dir)
            if claim is not None:
                claim.unlink(missing_ok=True)


def _claim_for_this_worker(name: str) -> Path | None:
    """Under xdist, fail if another worker of this run already started the shared `name`: its
    tests were meant to be one group (pytest_collection_modifyitems below). Without that check
    a grouping lost to hook order went unseen: two sandboxes, each test half as fast."""
    run, worker = os.environ.get("PYTEST_XDIST_TESTRUNUID"), os.environ.get("PYTEST_XDIST_WORKER", "")
    if not run:
        return None
    claim = Path(tempfile.gettempdir()) / f"rltui-tests-{run}-{name}"
    try:
        fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        pytest.fail(f"the {name} fixture started in {claim.read_text()} and in {worker}: its tests "
                    "must be one xdist group (tests/conftest.py)")
    os.write(fd, worker.encode())
    os.close(fd)
    return claim


# Session fixtures that hold a process worth sharing: the sandbox daemon (and its Ray head) and
# the demo's Ray head. `make test` runs two pytest-xdist workers with `--dist loadgroup`.
SHARED = ("sandbox", "demo_ray")


@pytest.hookimpl(tryfirst=True)   # before xdist's, which reads the marks into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """One xdist group per shared session fixture (every test that uses it runs in one worker,
    in collection order, so it starts once per run), and one per file for the rest (a module's
    fixtures, a Ray head or a one-service box, start once). The shared groups go first: the
    sandbox's is the longest, and the other worker takes the files meanwhile (`make test` runs
    with --no-loadscope-reorder, which keeps this order). Without xdist the marks do nothing."""
    def group(item: pytest.Item) -> str:
        return next((name for name in SHARED if name in item.fixturenames), item.nodeid.split("::")[0])

    rank = {name: i for i, name in enumerate(SHARED)}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group(item)))
    items.sort(key=lambda item: rank.get(group(item), len(SHARED)))   # stable: files keep their order


@dataclass
class DemoRay:
    head: RayHead
    nemo_rl_dir: Path
    lustre: Path
    bin_dir: Path
    env: dict[str, str]


@pytest.fixture(scope="session")
def demo_ray(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoRay]:
    """A real Ray head whose jobs see the fake /opt/nemo-rl, /lustre and uv, like the GKE pods (not
    the sandbox daemon: that is tests/conftest.py's `sandbox`)."""
    root = tmp_path_factory.mktemp("demo-ray")
    nemo_rl = install_fake_nemo_rl(root / "nemo-rl")
    lustre = root / "lustre"
    lustre.mkdir()
    bin_dir = write_uv_shim(root / "bin").parent
    env = {
        "NEMO_RL_DIR": str(nemo_rl),
        "LUSTRE_MOUNT": str(lustre),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "RLTUI_DEMO_STEP_SECONDS": "0",
        "RLTUI_DEMO_CHECKPOINT_MB": "0.5",
    }
    demo = DemoRay(RayHead.start(None, env, num_cpus=1), nemo_rl, lustre, bin_dir, env)
    try:
        demo.head.wait_ready(timeout=90)
        yield demo
    finally:
        demo.head.stop()  # the one running now (ray_head may have replaced the first)


@pytest.fixture
def ray_head(demo_ray: DemoRay) -> RayHead:
    """The session's Ray head (demo_ray's), for tests of Ray's clients: one head start of the
    image's Ray for every suite that needs one. A test that stops it on purpose (tests/demo's
    stop test) leaves it to the next user to start another."""
    if not demo_ray.head.alive():
        demo_ray.head = RayHead.start(None, demo_ray.env, num_cpus=1)
        demo_ray.head.wait_ready(timeout=90)
    return demo_ray.head
