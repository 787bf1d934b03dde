"""The sandbox's Cloud Storage JSON API (rest_storage.py) as the REAL gcloud 528 uses it, and
Managed Lustre's ExportData (world_storage.py) through the real google-cloud-lustre client and
rltui's adapter: the files of an instance's folder land in a bucket under the destination path.

One World on a loop thread (tests/harness.py), its gRPC services and REST apps on loopback; gcloud
is pointed at the storage app by CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE, as `rltui sandbox env`
does (manage.tool_env). google-cloud-storage is not installed here, so it is not exercised.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from google.api_core import exceptions
from google.api_core import retry as retries
from google.cloud import lustre_v1

from rltui_sandbox.world import World
from tests import harness
from tests.grpc.test_lustre import codelab_instance

GCLOUD = "/usr/bin/gcloud"
PROJECT, ZONE, INSTANCE = "export-proj", "us-east1-b", "rl-demo-gpu-lustre"
NAME = f"projects/{PROJECT}/locations/{ZONE}/instances/{INSTANCE}"
FAST_POLL = retries.Retry(predicate=retries.if_exception_type(Exception), initial=0.02, maximum=0.1,
                          multiplier=1.5, timeout=20)
RUN = "nemo_rl_qwen_72b_ds_cp/nemo-rl-grpo-test1"  # CHECKPOINT_DIR below /lustre


class Box(harness.LoopThread):
    def __init__(self, root: Path) -> None:
        super().__init__("storage-sandbox", timeout=30)
        self.root = root
        self.world: World
        self.address = ""
        self.urls: dict[str, str] = {}

    async def _start(self) -> None:
        enter = self.stack.enter_async_context
        self.world = await enter(harness.world(self.root / "state", speed=6000.0))
        self.address = await enter(harness.grpc_server(self.world))
        self.urls = await enter(harness.rest_sites(self.world))


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory):
    b = Box(Path(tmp_path_factory.mktemp("storage")))
    b.start(b._start())
    client = lustre(b)
    client.create_instance(parent=f"projects/{PROJECT}/locations/{ZONE}", instance_id=INSTANCE,
                           instance=codelab_instance(network=f"projects/{PROJECT}/global/networks/default")
                           ).result(timeout=20, polling=FAST_POLL)
    folder = b.call(b.world.lustre_dir, PROJECT, ZONE, INSTANCE) / RUN
    for step in ("step_2", "step_4"):
        (folder / step / "policy").mkdir(parents=True)
        (folder / step / "training_info.json").write_text('{"step": %s}' % step[5:])
        (folder / step / "policy" / "weights.bin").write_bytes(os.urandom(2048))
    b.call(b.world.add_foreign_bucket, "someone-elses", "another-project")
    yield b
    b.stop()


def lustre(b: Box) -> lustre_v1.LustreClient:
    import grpc
    from google.cloud.lustre_v1.services.lustre.transports import LustreGrpcTransport

    return lustre_v1.LustreClient(transport=LustreGrpcTransport(channel=grpc.insecure_channel(b.address)))


def gcloud_env(b: Box, tmp: Path) -> dict[str, str]:
    token = tmp / "token"
    token.write_text("sandbox-token\n")
    token.chmod(0o600)
    (tmp / "gcloud").mkdir(exist_ok=True)
    return {**os.environ, "CLOUDSDK_CONFIG": str(tmp / "gcloud"), "CLOUDSDK_CORE_PROJECT": PROJECT,
            "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(token), "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
            "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "1", "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "1",
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE": b.urls["storage"] + "storage/v1/"}


def gcloud(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GCLOUD, *args], env=env, capture_output=True, text=True, timeout=90)


needs_gcloud = pytest.mark.skipif(not Path(GCLOUD).exists() or shutil.which("gcloud") is None,
                                  reason="the real Google Cloud SDK is not installed (/usr/bin/gcloud)")


def export(b: Box, uri: str, path: str = "/" + RUN) -> lustre_v1.ExportDataResponse:
    op = lustre(b).export_data(request=lustre_v1.ExportDataRequest(
        name=NAME, lustre_path=lustre_v1.LustrePath(path=path), gcs_path=lustre_v1.GcsPath(uri=uri)))
    return op


@needs_gcloud
def test_gcloud_creates_a_bucket_and_lists_what_an_export_put_under_its_prefix(box, tmp_path) -> None:
    env = gcloud_env(box, tmp_path)
    made = gcloud(env, "storage", "buckets", "create", "gs://bars-bucket")
    assert made.returncode == 0, made.stderr
    again = gcloud(env, "storage", "buckets", "create", "gs://bars-bucket")
    assert again.returncode == 1 and "409" in again.stderr

    op = export(box, "gs://bars-bucket/run1/")
    assert op.metadata.operation_metadata.counters.found_objects_count == 4
    assert op.metadata.operation_metadata.transfer_type == lustre_v1.TransferType.EXPORT
    op.result(timeout=20, polling=FAST_POLL)
    assert op.metadata.operation_metadata.counters.objects_copied_count == 4

    listed = gcloud(env, "storage", "ls", "gs://bars-bucket/run1/")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["gs://bars-bucket/run1/step_2/", "gs://bars-bucket/run1/step_4/"]
    info = gcloud(env, "storage", "cat", "gs://bars-bucket/run1/step_4/training_info.json")
    assert info.stdout == '{"step": 4}'


@needs_gcloud
def test_gcloud_is_refused_a_missing_bucket_and_another_projects_bucket(box, tmp_path) -> None:
    env = gcloud_env(box, tmp_path)
    missing = gcloud(env, "storage", "ls", "gs://no-such-bucket/")
    assert missing.returncode == 1 and "404" in missing.stderr, missing.stderr
    foreign = gcloud(env, "storage", "ls", "gs://someone-elses/")
    # gcloud words a 403 itself ("does not have permission to access b instance [...]"), then
    # quotes the answer's message.
    assert foreign.returncode == 1 and "does not have permission" in foreign.stderr, foreign.stderr
    assert "Permission 'storage.objects.list' denied" in foreign.stderr
    taken = gcloud(env, "storage", "buckets", "create", "gs://someone-elses")
    assert taken.returncode == 1 and "409" in taken.stderr


def test_export_to_a_missing_or_foreign_bucket_or_a_bad_uri_is_refused(box) -> None:
    with pytest.raises(exceptions.NotFound, match="bucket does not exist"):
        export(box, "gs://no-such-bucket/run1/")
    with pytest.raises(exceptions.PermissionDenied, match="storage.objects.create"):
        export(box, "gs://someone-elses/run1/")
    with pytest.raises(exceptions.InvalidArgument, match="gcs_path.uri"):
        export(box, "gs://bars-bucket/no-trailing-slash")
    with pytest.raises(exceptions.InvalidArgument, match="lustre_path.path"):
        export(box, "gs://bars-bucket/run1/", path="relative")
    with pytest.raises(exceptions.NotFound, match="does not exist"):
        export(box, "gs://bars-bucket/run1/", path="/no/such/folder")


def test_rltuis_adapter_exports_and_reads_the_counters(box) -> None:
    from rltui.cloud.endpoints import Endpoints
    from rltui.cloud.lustre import LustreAdapter

    box.call(box.world.create_bucket, PROJECT, "adapter-bucket")

    async def run() -> tuple[int, int, bool]:
        adapter = LustreAdapter(Endpoints(label="SANDBOX", grpc_target=box.address), PROJECT, ZONE)
        op = await adapter.export_data(INSTANCE, "/" + RUN + "/step_2", "gs://adapter-bucket/kept/")
        while not (state := await adapter.export_state(op)).done:
            await asyncio.sleep(0.02)
        return state.copied_files, state.found_files, bool(state.error)

    assert asyncio.run(run()) == (2, 2, False)
    items, prefixes = box.call(box.world.list_objects, "adapter-bucket", "kept/", "/")
    assert [o.name for o in items] == ["kept/training_info.json"] and prefixes == ["kept/policy/"]
