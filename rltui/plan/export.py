"""Checkpoints kept past teardown: Managed Lustre's ExportData copies the run's checkpoint folder
(or the whole file system) into Cloud Storage before the instance, and its files, are deleted.

The devrel-demos README says to copy the checkpoints to Cloud Storage before the teardown; the
Lustre API does it server-side (google-cloud-lustre 0.4.3 `export_data`, the method behind
`gcloud lustre instances export-data`): ExportDataRequest names a folder of the file system
(lustre_path, starting with "/") and a destination (gcs_path, gs://BUCKET/PATH/ ending with "/");
the files under the folder land under that path, so a run's `step_N/` folders land directly under
PREFIX. Its long-running operation's metadata counts the files found and copied
(TransferOperationMetadata.counters): the progress shown here.

The run's folder: the newest submit's checkpoint folder (jobs.json: `--new-folder` may have
chosen CHECKPOINT_DIR-N), else env.sh's CHECKPOINT_DIR. The RayCluster mounts the instance's root
at /lustre (manifests.LUSTRE_MOUNT; checkpoints.MOUNT), so /lustre/a/b is the instance's /a/b.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass

from .checkpoints import MOUNT as LUSTRE_MOUNT
from .context import Context
from .jobs import Refused, job_records

__all__ = ["ExportDone", "checkpoint_folder", "destination", "export_checkpoints", "lustre_path",
           "ready_to_export"]

# https://cloud.google.com/storage/docs/buckets#naming (without dots: domain-named buckets aside)
_BUCKET = re.compile(r"[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]")
# How long an export takes is not documented: poll about 20 times a reference minute, at least
# every 10 s (the sandbox's clock scales it).
_POLL_REF_S = 3.0


@dataclass(frozen=True)
class ExportDone:
    source: str        # the folder on the instance ("/": all of it)
    destination: str   # gs://BUCKET/PREFIX/
    files: int
    bytes: int

    def line(self) -> str:
        return (f"exported {self.files} file{'s' if self.files != 1 else ''} ({_size(self.bytes)}) from"
                f" {self.source} on Lustre to {self.destination}")


def destination(uri: str, flag: str = "--to") -> str:
    """gs://BUCKET/PREFIX as ExportData takes it (a path inside the bucket ends with "/");
    Refused (exit 2) naming `flag` for anything else."""
    m = re.fullmatch(r"gs://([^/]+)(?:/(.*))?", uri.strip())
    if m is None or not _BUCKET.fullmatch(m[1]):
        raise Refused(f"{flag} {uri!r} is not a Cloud Storage folder: use gs://BUCKET/PREFIX (a bucket"
                      " name of 3-63 lowercase letters, digits, - or _)")
    prefix = (m[2] or "").strip("/")
    if "//" in prefix:
        raise Refused(f"{flag} {uri!r} has an empty folder name in it: use gs://BUCKET/PREFIX")
    return f"gs://{m[1]}/" + (prefix + "/" if prefix else "")


def checkpoint_folder(ctx: Context) -> str:
    """The run's checkpoint folder as the pods see it (under /lustre)."""
    jobs = job_records(ctx)
    return jobs[-1].checkpoint_dir if jobs else ctx.cfg.checkpoint_dir


def lustre_path(folder: str) -> str:
    """A folder under the RayCluster's mount as ExportData names it on the instance."""
    if folder != LUSTRE_MOUNT and not folder.startswith(LUSTRE_MOUNT + "/"):
        raise Refused(f"CHECKPOINT_DIR {folder!r} is not on the Lustre volume ({LUSTRE_MOUNT}/...): nothing"
                      " of it to export; pass --all to export the whole file system")
    return folder[len(LUSTRE_MOUNT):] or "/"


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


async def ready_to_export(ctx: Context, to: str, *, whole: bool = False) -> tuple[str, str]:
    """(destination, folder on the instance) once the export can start: checked before a
    teardown stops the jobs, so a refusal stops nothing. CloudError when the instance is not
    ACTIVE; Refused for a bad address or folder."""
    from ..cloud.errors import CloudError

    dest = destination(to)
    source = "/" if whole else lustre_path(checkpoint_folder(ctx))
    instance = ctx.cfg.lustre_instance_id
    inst = await ctx.lustre.get(instance)
    if inst is None or inst.state.name != "ACTIVE":
        raise CloudError(f"Lustre instance {instance} is {'absent' if inst is None else inst.state.name}:"
                         " nothing to export", transient=False, code="NotFound")
    return dest, source


async def export_checkpoints(ctx: Context, to: str, *, whole: bool = False,
                             out: Callable[[str], None] = print) -> ExportDone:
    """Export the run's checkpoint folder (`whole`: the file system) to `to`, waiting for the
    operation; a line per change of its counters. A refusal or a failed export raises the
    adapter's CloudError (the teardown then deletes nothing of Lustre)."""
    from ..cloud.errors import CloudError

    dest, source = await ready_to_export(ctx, to, whole=whole)
    instance = ctx.cfg.lustre_instance_id
    out(f"exporting {source} from Lustre instance {instance} to {dest}")
    op = await ctx.lustre.export_data(instance, source, dest)
    interval = max(0.2, min(10.0, _POLL_REF_S * ctx.endpoints.time_scale))
    last = None
    while True:
        state = await ctx.lustre.export_state(op)
        seen = (state.copied_files, state.found_files)
        if seen != last and not state.error:
            out(f"  {state.copied_files}/{state.found_files} files, {_size(state.copied_bytes)}"
                f" of {_size(state.found_bytes)}")
            last = seen
        if state.done:
            if state.error:
                raise CloudError(f"the export to {dest} failed: {state.error}", transient=False,
                                 code=f"rpc{state.error_code}")
            # The counters say whether everything came over (TransferCounters: objects_failed_count);
            # a partial or empty copy is not a copy the teardown may delete the instance after.
            if state.failed_files:
                raise CloudError(f"the export to {dest} copied {state.copied_files} of {state.found_files} files;"
                                 f" {state.failed_files} failed: Lustre is kept", transient=False,
                                 code="ExportIncomplete")
            if not state.found_files:
                raise CloudError(f"the export found no file under {source} on Lustre instance {instance}:"
                                 " nothing was copied, so Lustre is kept (pass --all for the whole file system)",
                                 transient=False, code="ExportEmpty")
            return ExportDone(source, dest, state.copied_files, state.copied_bytes)
        await asyncio.sleep(interval)
