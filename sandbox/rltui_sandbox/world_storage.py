"""The sandbox World's Cloud Storage: buckets (one global namespace) and their objects, enough of
the JSON API (storage/v1) for Managed Lustre's ExportData result, the real `gcloud storage` and
the google-cloud-storage client (rest_storage.py serves it); and Lustre's ExportData, which copies
a folder of an instance's filesystem into a bucket as a long-running operation.

Buckets, after https://cloud.google.com/storage/docs/buckets#naming and the JSON API's resource
(https://cloud.google.com/storage/docs/json_api/v1/buckets): 3-63 lowercase letters, digits,
dashes, underscores and dots, starting and ending with a letter or digit; a bucket belongs to one
project; `location` defaults to "US" (a multi-region) when the insert names none.

Refusals, as the JSON API's status-codes page says them
(https://cloud.google.com/storage/docs/json_api/v1/status-codes): a missing bucket is 404
"The specified bucket does not exist." (reason notFound); a name already taken is 409 (reason
conflict): "You already own this bucket. Please select another name." when it is the caller's,
else "The requested bucket name is not available. The bucket namespace is shared by all users of
the system. Please select a different name and try again." (that page's XML twin gives this
wording; the JSON wording for a name someone else holds is not verified). A bucket of a project
the caller has no role in is 403 (reason forbidden) "<account> does not have storage.buckets.get
access to the Google Cloud Storage bucket. Permission 'storage.buckets.get' denied on resource (or
it may not exist)." (the answer quoted in ansible-collections/google.cloud#575; for objects.list
the same sentence with storage.objects.list, actions-hub/gcloud#25).

Who owns what: every token is the user's, the owner of every project the sandbox made (rest_util,
iam_authz); a bucket of "another project" is one planted with `add_foreign_bucket` (what a test
needs to act out someone else's bucket: its name is taken, and the caller has no role on it).

State: `<state_dir>/gcs/buckets.json` (the buckets and their objects' metadata) and one file per
object under `<state_dir>/gcs/data/`, so buckets outlive a daemon restart as the rest of the World.

Sources in one place: sandbox/SOURCES.md#gcs-json-api, SOURCES.md#gcs-refusals and
SOURCES.md#lustre-export-data.

StorageMixin is mixed into World (world.py) and uses its plumbing (_tick, _commit, _schedule,
_arm, _lro, _instance, lustre_dir, clock, record).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from google.cloud import lustre_v1

from rltui_sandbox.grpc_util import (
    AlreadyExists, CloudError, FailedPrecondition, InvalidArgument, NotFound, PermissionDenied, utcnow,
)
from rltui_sandbox.world_model import project_number

# https://cloud.google.com/storage/docs/buckets#naming (names without dots: dotted names are
# domain-verified names, which the sandbox does not act out).
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]$")
CALLER = "rltui-sandbox@rltui-sandbox.iam.gserviceaccount.com"  # kube/auth.py SERVICE_ACCOUNT, the ADC's
# How long an export takes is not documented; the sandbox takes a reference minute plus the bytes
# at 1 GB/s (not verified), in four steps, each copying a quarter of the files.
EXPORT_BASE_S, EXPORT_BYTES_PER_S, EXPORT_STEPS = 60.0, 1e9, 4


class Conflict(AlreadyExists):
    """409 with the JSON API's `conflict` reason."""


@dataclass
class GcsObject:
    name: str
    size: int
    md5: str                      # base64 of the MD5 digest (the resource's md5Hash)
    generation: int
    created: str                  # RFC 3339
    content_type: str = "application/octet-stream"
    file: str = ""                # under <state_dir>/gcs/data/


@dataclass
class Bucket:
    name: str
    project: str
    location: str = "US"
    created: str = ""
    foreign: bool = False         # someone else's (add_foreign_bucket): the caller has no role on it
    objects: dict[str, GcsObject] = field(default_factory=dict)


def _rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts * 1000) % 1000:03d}Z"


def bucket_missing(name: str) -> NotFound:
    return NotFound("The specified bucket does not exist.", reason="notFound", domain="global",
                    metadata={"bucket": name})


def bucket_forbidden(name: str, permission: str) -> PermissionDenied:
    return PermissionDenied(f"{CALLER} does not have {permission} access to the Google Cloud Storage bucket. "
                            f"Permission '{permission}' denied on resource (or it may not exist).",
                            reason="forbidden", domain="global", metadata={"bucket": name})


class StorageMixin:
    """Cloud Storage buckets and objects, and Lustre's ExportData (mixed into World)."""

    state_dir: Path
    _gcs: dict[str, Bucket] | None = None

    # ---- plumbing --------------------------------------------------------------------------------

    @property
    def _gcs_root(self) -> Path:
        return self.state_dir / "gcs"

    def _buckets(self) -> dict[str, Bucket]:
        if self._gcs is None:
            self._gcs = {}
            try:
                data = json.loads((self._gcs_root / "buckets.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = {}
            for name, b in data.items():
                objects = {n: GcsObject(**o) for n, o in b.pop("objects", {}).items()}
                self._gcs[name] = Bucket(**b, objects=objects)
        return self._gcs

    def _save_buckets(self) -> None:
        self._gcs_root.mkdir(parents=True, exist_ok=True)
        tmp = self._gcs_root / "buckets.json.tmp"
        tmp.write_text(json.dumps({n: asdict(b) for n, b in self._buckets().items()}, indent=1), encoding="utf-8")
        os.replace(tmp, self._gcs_root / "buckets.json")

    def _bucket(self, name: str, permission: str) -> Bucket:
        bucket = self._buckets().get(name)
        if bucket is None:
            raise bucket_missing(name)
        if bucket.foreign:
            raise bucket_forbidden(name, permission)
        return bucket

    # ---- buckets ---------------------------------------------------------------------------------

    def create_bucket(self, project: str, name: str, location: str = "") -> Bucket:
        if not BUCKET_NAME.match(name or ""):
            raise InvalidArgument(f"Invalid bucket name: '{name}'", reason="invalid", domain="global")
        self._project(project)  # type: ignore[attr-defined]  # a malformed project id is refused
        taken = self._buckets().get(name)
        if taken is not None:
            raise Conflict("You already own this bucket. Please select another name." if not taken.foreign else
                           "The requested bucket name is not available. The bucket namespace is shared by all "
                           "users of the system. Please select a different name and try again.",
                           reason="conflict", domain="global")
        bucket = Bucket(name, project, (location or "US").upper(), _rfc3339(time.time()))
        self._buckets()[name] = bucket
        self._save_buckets()
        return bucket

    def add_foreign_bucket(self, name: str, project: str) -> None:
        """A bucket of another project, on which the caller has no role (see the module docstring)."""
        self._buckets()[name] = Bucket(name, project, "US", _rfc3339(time.time()), foreign=True)
        self._save_buckets()

    def get_bucket(self, name: str) -> Bucket:
        return self._bucket(name, "storage.buckets.get")

    def list_buckets(self, project: str) -> list[Bucket]:
        return [b for n, b in sorted(self._buckets().items()) if b.project == project and not b.foreign]

    # ---- objects ---------------------------------------------------------------------------------

    def put_object(self, bucket_name: str, name: str, data: bytes,
                   content_type: str = "application/octet-stream") -> GcsObject:
        bucket = self._bucket(bucket_name, "storage.objects.create")
        if not name or len(name.encode()) > 1024:
            raise InvalidArgument("The object name is required and at most 1024 bytes.", reason="invalid",
                                  domain="global")
        folder = self._gcs_root / "data"
        folder.mkdir(parents=True, exist_ok=True)
        file = uuid.uuid4().hex
        (folder / file).write_bytes(data)
        old = bucket.objects.get(name)
        generation = time.time_ns() // 1000
        bucket.objects[name] = GcsObject(name, len(data), base64.b64encode(hashlib.md5(data).digest()).decode(),
                                         generation, _rfc3339(time.time()), content_type or "application/octet-stream",
                                         file)
        if old is not None:
            (folder / old.file).unlink(missing_ok=True)
        self._save_buckets()
        return bucket.objects[name]

    def get_object(self, bucket_name: str, name: str) -> GcsObject:
        obj = self._bucket(bucket_name, "storage.objects.get").objects.get(name)
        if obj is None:
            raise NotFound(f"No such object: {bucket_name}/{name}", reason="notFound", domain="global")
        return obj

    def object_data(self, obj: GcsObject) -> bytes:
        return (self._gcs_root / "data" / obj.file).read_bytes()

    def list_objects(self, bucket_name: str, prefix: str = "", delimiter: str = "") -> tuple[list[GcsObject], list[str]]:
        """(objects, prefixes) as objects.list answers: with a delimiter, names with another
        delimiter after the prefix are rolled up into `prefixes` (each once, sorted)."""
        bucket = self._bucket(bucket_name, "storage.objects.list")
        items, prefixes = [], set()
        for name in sorted(bucket.objects):
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix):]
            if delimiter and delimiter in rest:
                prefixes.add(prefix + rest.split(delimiter, 1)[0] + delimiter)
            else:
                items.append(bucket.objects[name])
        return items, sorted(prefixes)

    # ---- Managed Lustre ExportData ---------------------------------------------------------------

    def export_lustre_data(self, project: str, location: str, instance_id: str, lustre_path: str,
                           gcs_uri: str, *, request_id: str = "") -> Any:
        """Start ExportData (lustre_v1 ExportDataRequest): copy the files under `lustre_path` (a
        folder of the filesystem, "/" the whole of it) to `gcs_uri` (gs://BUCKET/ or
        gs://BUCKET/PATH/), each file's path below the folder appended to the URI's path.
        The request's rules are the field docs of google-cloud-lustre 0.4.3's types/transfer.py
        (the Lustre path starts with "/"; a path inside the bucket ends with "/"). Refusing a
        missing or forbidden bucket at the request (not in the operation) is not verified.
        The operation's metadata is ExportDataMetadata whose TransferOperationMetadata counters
        grow as files are copied; its response is ExportDataResponse."""
        self._tick()  # type: ignore[attr-defined]
        if request_id and request_id in self._request_ids:  # type: ignore[attr-defined]
            return self._lro.get(self._request_ids[request_id])  # type: ignore[attr-defined]
        path = lustre_path or "/"
        if not path.startswith("/") or "/../" in path + "/":
            raise InvalidArgument(f"lustre_path.path {path!r} is invalid: it must start with '/'")
        match = re.fullmatch(r"gs://([^/]+)/(.*)", gcs_uri or "")
        if match is None or (match[2] and not match[2].endswith("/")):
            raise InvalidArgument(f"gcs_path.uri {gcs_uri!r} is invalid: use gs://<bucket_name>/ or "
                                  "gs://<bucket_name>/<path_inside_bucket>/ (ending with '/')")
        inst = self._instance(project, location, instance_id)  # type: ignore[attr-defined]
        if inst.state != lustre_v1.Instance.State.ACTIVE:
            raise FailedPrecondition(f"Instance {inst.name} is {inst.state.name}, not ACTIVE")
        bucket, prefix = match[1], match[2]
        self._bucket(bucket, "storage.objects.create")
        root = self.lustre_dir(project, location, instance_id)  # type: ignore[attr-defined]
        source = root / path.strip("/")
        if not source.is_dir():
            raise NotFound(f"lustre_path.path {path!r} does not exist on instance {inst.name}")
        files = sorted(str(p.relative_to(source)) for p in source.rglob("*") if p.is_file())
        size = sum((source / f).stat().st_size for f in files)
        op_id = f"operation-{int(time.time() * 1000)}-{uuid.uuid4().hex[:12]}"
        op_name = f"projects/{project}/locations/{location}/operations/{op_id}"
        meta = lustre_v1.ExportDataMetadata(
            create_time=utcnow(), target=inst.name, verb="exportData", api_version="v1",  # verb: not verified
            operation_metadata=lustre_v1.TransferOperationMetadata(
                source_lustre_path=lustre_v1.LustrePath(path=path),
                destination_gcs_path=lustre_v1.GcsPath(uri=gcs_uri),
                transfer_type=lustre_v1.TransferType.EXPORT,
                counters=lustre_v1.TransferCounters(found_objects_count=len(files), bytes_found_count=size)))
        self._lro.start(op_name, meta)  # type: ignore[attr-defined]
        if request_id:
            self._request_ids[request_id] = op_name  # type: ignore[attr-defined]
        total_s = (EXPORT_BASE_S + size / EXPORT_BYTES_PER_S) / self.clock.speed  # type: ignore[attr-defined]
        for step in range(EXPORT_STEPS):
            chunk = files[step * len(files) // EXPORT_STEPS:(step + 1) * len(files) // EXPORT_STEPS]
            self._schedule("lustre_export_step", {  # type: ignore[attr-defined]
                "operation": op_name, "source": str(source), "bucket": bucket, "prefix": prefix, "files": chunk,
                "last": step == EXPORT_STEPS - 1}, seconds=total_s * (step + 1) / EXPORT_STEPS)
        self._commit()  # type: ignore[attr-defined]
        return self._lro.get(op_name)  # type: ignore[attr-defined]

    def _on_lustre_export_step(self, operation: str, source: str, bucket: str, prefix: str, files: list[str],
                               last: bool) -> None:
        if not self._lro.running(operation):  # type: ignore[attr-defined]
            return
        meta = self._lro.metadata(operation, lustre_v1.ExportDataMetadata)  # type: ignore[attr-defined]
        counters = meta.operation_metadata.counters
        error: CloudError | None = None
        for rel in files:
            try:
                data = (Path(source) / rel).read_bytes()
                self.put_object(bucket, prefix + rel, data)
                counters.objects_copied_count += 1
                counters.bytes_copied_count += len(data)
            except (OSError, CloudError) as exc:  # the instance or the bucket went away meanwhile
                counters.objects_failed_count += 1
                error = exc if isinstance(exc, CloudError) else NotFound(f"{rel}: {exc.strerror}")
        if error is not None:
            meta.end_time = utcnow()
            self._lro.finish(operation, metadata=meta, error=error)  # type: ignore[attr-defined]
            self._due = [d for d in self._due if d.args.get("operation") != operation]  # type: ignore[has-type]
        elif last:
            meta.end_time = utcnow()
            self._lro.finish(operation, metadata=meta, response=lustre_v1.ExportDataResponse())  # type: ignore[attr-defined]
        else:
            self._lro.set_metadata(operation, meta)  # type: ignore[attr-defined]
