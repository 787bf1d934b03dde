"""Before a submit: what the Lustre volume holds in the checkpoint folder, asked of the cluster.

Why ask the volume and not rltui's own records: NeMo-RL decides new-or-resumed from the folder
alone. GRPO's `setup` (nemo_rl/algorithms/grpo.py, v0.4.0) calls
`CheckpointManager.get_latest_checkpoint_path()` (nemo_rl/utils/checkpoint.py): the entries of
checkpoint_dir whose name is `step_\\d+` (glob `step_*`, then `re.fullmatch`), highest N, and
loads its training_info.json; a save at step N records total_steps = N (grpo.py `Saving
checkpoint for step {total_steps + 1}`), and the loop runs `while ... total_steps <
max_num_steps`. So a folder another machine or user filled resumes silently, and one holding
step_20 with grpo.max_num_steps 20 "succeeds" with no step trained.

How it asks: a short Ray job, the way `submit` reaches the cluster anyway (the same dashboard
port-forward, rltui's Ray job client, cloud/rayjobs.py). Its entrypoint runs on the Ray head
(a job that asks for no entrypoint resources is pinned to the head node: ray's
dashboard/modules/job/job_manager.py `_get_label_selector`; the workers mount the same volume
anyway), whose container mounts the volume at /lustre (manifests.ray_cluster); it reads the mount
through ${LUSTRE_MOUNT:-/lustre} as run_nemo_rl.sh does (manifests.run_script) and prints one
JSON line, read back from the job's log. Not the Kubernetes exec API: the sandbox's API server
has no pods/exec (sandbox/rltui_sandbox/kube/), and exec answers on a streamed SPDY/WebSocket channel
the Kubernetes adapter does not speak. A few seconds, nearly all of it Ray starting the job: a
price paid once a submit, before a run of hours (the measurements: docs/decisions/checkpoint-check.md).

One question covers the whole family: the folder env.sh names and its `-N` siblings (the
fresh names a new run takes), so a fresh name is also one the volume does not hold. The check
job is deleted afterwards (Ray's DELETE /api/jobs/{id}, `JobSubmissionClient.delete_job`), so
it is not taken for the user's newest job.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import shlex
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .context import Context

MOUNT = "/lustre"  # manifests.LUSTRE_MOUNT: where the RayCluster mounts the volume
MARK = "RLTUI_CHECKPOINTS"
PROBE_FILE = "rltui_checkpoints.py"
PROBE_TIMEOUT_S = 120.0  # a cold head sets up the job's runtime env first
METADATA = {"rltui_probe": "checkpoints"}

# Runs on the Ray head as `python3`, the image's venv (NeMo-RL v0.4.0 docker/Dockerfile puts
# /opt/nemo_rl_venv/bin first on PATH); the standard library only. Lists as
# get_latest_checkpoint_path does: names that fullmatch step_<digits>, files included.
PROBE = '''"""rltui's question to the Lustre volume before a submit: one JSON line."""
import errno
import json
import os
import re
import sys

mount = os.environ.get("LUSTRE_MOUNT") or "/lustre"  # ${LUSTRE_MOUNT:-/lustre}
rest, name = sys.argv[1], sys.argv[2]
parent = mount + rest
family = re.compile(re.escape(name) + r"(-[0-9]+)?")
step = re.compile(r"step_([0-9]+)")
answer = {"mounted": os.path.isdir(mount), "folders": {}, "error": None}
try:
    if os.path.isdir(parent):
        for entry in sorted(os.listdir(parent)):
            if not family.fullmatch(entry):
                continue
            path = os.path.join(parent, entry)
            found = [step.fullmatch(e) for e in os.listdir(path)] if os.path.isdir(path) else []
            answer["folders"][entry] = sorted(int(m.group(1)) for m in found if m)
except OSError as exc:
    answer["error"] = {"errno": errno.errorcode.get(exc.errno or 0, str(exc.errno)),
                       "path": exc.filename}
print("%MARK% " + json.dumps(answer), flush=True)
'''.replace("%MARK%", MARK)


@dataclass(frozen=True)
class Folder:
    """One checkpoint folder as the volume holds it."""

    path: str                       # as env.sh names it, under /lustre
    present: bool = False           # something of that name exists on the volume
    steps: tuple[int, ...] = ()     # its step_N checkpoints, oldest first

    @property
    def newest(self) -> int | None:
        return self.steps[-1] if self.steps else None


@dataclass(frozen=True)
class Volume:
    """The folder env.sh names and its `-N` siblings, as the check job found them."""

    base: str
    folders: Mapping[str, Folder] = field(default_factory=dict)  # by path: the present ones
    seconds: float = 0.0  # how long the question took

    def folder(self, path: str) -> Folder:
        return self.folders.get(path) or Folder(path)

    def fresh(self, used: set[str]) -> str:
        """The first of the family that the volume does not hold and no recorded job used."""
        return next(name for name in family(self.base)
                    if name not in used and not self.folder(name).present)


def family(base: str) -> Iterator[str]:
    """base, base-2, base-3, ...: the names a new run takes (as checkpoint_dir_for always did)."""
    yield base
    n = 2
    while True:
        yield f"{base}-{n}"
        n += 1


def in_family(path: str, base: str) -> bool:
    return path == base or re.fullmatch(re.escape(base) + r"-[0-9]+", path) is not None


def _split(base: str) -> tuple[str, str]:
    """(the parent's path below the mount, the folder's name): `/lustre/a/b` -> ("/a", "b")."""
    parent, _, name = base.rpartition("/")
    return parent[len(MOUNT):] if parent.startswith(MOUNT) else parent, name


def entrypoint(base: str) -> str:
    rest, name = _split(base)
    return f"python3 {PROBE_FILE} {shlex.quote(rest)} {shlex.quote(name)}"


class ProbeError(Exception):
    """The check job answered, but not with what rltui can use (no mount, a read error)."""


def parse_answer(text: str, base: str) -> Volume:
    """The check job's log -> Volume; ProbeError when it holds no answer or an unusable one."""
    lines = [line for line in text.splitlines() if line.startswith(MARK + " ")]
    if not lines:
        raise ProbeError("its log holds no answer")
    try:
        answer: dict[str, Any] = json.loads(lines[-1][len(MARK) + 1:])
        found = {str(k): tuple(sorted(int(s) for s in v)) for k, v in answer["folders"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ProbeError(f"its answer is not what rltui wrote ({type(exc).__name__})") from None
    if answer.get("error"):
        err = answer["error"]
        raise ProbeError(f"reading {err.get('path')} on the volume failed: {err.get('errno')}")
    if not answer.get("mounted"):
        raise ProbeError(f"the Ray head has no Lustre volume at {MOUNT} (LUSTRE_MOUNT)")
    parent = base.rpartition("/")[0]
    folders = {f"{parent}/{name}": Folder(f"{parent}/{name}", True, steps) for name, steps in found.items()
               if in_family(f"{parent}/{name}", base)}
    return Volume(base, folders)


async def ask_volume(ctx: Context, base: str) -> Volume:
    """What the volume holds of `base`'s family, from a short Ray job on the head (see above).
    A CloudError when it cannot be known: a submit then does not guess."""
    from ..cloud.errors import CloudError
    from ..cloud.rayjobs import RayJobs
    from ..cloud.rayrest import RayRest
    from ..oncluster.jobstatus import FINAL

    what = f"checking {base} on the Lustre volume"
    started = time.monotonic()
    url = await ctx.dashboard()
    jobs = RayJobs(url)
    job_id = f"rltui-checkpoints-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    with tempfile.TemporaryDirectory(prefix="rltui-probe-") as folder:
        (Path(folder) / PROBE_FILE).write_text(PROBE)
        await jobs.submit(Path(folder), entrypoint=entrypoint(base), runtime_env={},
                          submission_id=job_id, metadata=METADATA)
    try:
        pause = 0.1
        while (info := await jobs.info(job_id)).status not in FINAL:
            if time.monotonic() - started > PROBE_TIMEOUT_S:
                await jobs.stop(job_id)
                raise CloudError(f"{what}: the check job {job_id} is still {info.status} after"
                                 f" {PROBE_TIMEOUT_S:.0f} s", transient=True, code="ProbeTimeout")
            await asyncio.sleep(pause)
            pause = min(pause * 1.5, 1.0)
        text = await jobs.logs(job_id)
    finally:
        try:  # tidy, not needed: a left-over check job only shows in Ray's job list
            await RayRest(url).call("DELETE", f"/api/jobs/{job_id}", ok=(200, 404))
        except Exception:  # noqa: BLE001 - best effort (a job still running cannot be deleted)
            pass
    if info.status != "SUCCEEDED":
        # Ray's own first line (e.g. the exit code), not the log tail it appends after it.
        said = f": {info.message.strip().splitlines()[0][:200]}" if info.message.strip() else ""
        raise CloudError(f"{what}: the check job {job_id} ended {info.status}{said}",
                         transient=False, code="ProbeFailed")
    try:
        volume = parse_answer(text, base)
    except ProbeError as exc:
        raise CloudError(f"{what}: {exc}", transient=False, code="ProbeFailed") from None
    return Volume(volume.base, volume.folders, time.monotonic() - started)
