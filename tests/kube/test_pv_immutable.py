"""A PersistentVolume's source is immutable after creation, as kube-apiserver's
ValidatePersistentVolumeUpdate (pkg/apis/core/validation) has it: every way of writing the
object gets 422 Invalid, while metadata and claimRef stay writable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from kubernetes import client

DATA = Path(__file__).parent / "data"
PV = "rl-demo-gpu-lustre-pv"
FIRST_LINE = (f'PersistentVolume "{PV}" is invalid: spec.persistentvolumesource: Forbidden: '
              "spec.persistentvolumesource is immutable after creation")


def _pv() -> dict:
    return next(d for d in yaml.safe_load_all((DATA / "rl-lustre-volume.yaml").read_text())
                if d["kind"] == "PersistentVolume")


@pytest.fixture
def pv(core: client.CoreV1Api) -> dict:
    return core.create_persistent_volume(_pv()).to_dict()


def _assert_forbidden(err: client.ApiException) -> None:
    assert err.status == 422
    status = json.loads(err.body)
    assert status["kind"] == "Status" and status["status"] == "Failure"
    assert status["reason"] == "Invalid" and status["code"] == 422
    assert status["message"].split("\n")[0] == FIRST_LINE
    assert status["details"]["name"] == PV and status["details"]["kind"] == "PersistentVolume"
    [cause] = status["details"]["causes"]
    assert cause["reason"] == "FieldValueForbidden"
    assert cause["field"] == "spec.persistentvolumesource"
    assert cause["message"].startswith("Forbidden: spec.persistentvolumesource is immutable after creation")


NEW_IP = {"spec": {"csi": {"volumeAttributes": {"ip": "10.90.0.3", "filesystem": "lustre"}}}}


@pytest.mark.parametrize("how", ["merge", "strategic", "json", "put", "apply"])
def test_changing_the_csi_source_is_invalid(core: client.CoreV1Api, server, pv, how: str) -> None:
    with pytest.raises(client.ApiException) as err:
        if how == "merge":
            core.patch_persistent_volume(PV, NEW_IP, _content_type="application/merge-patch+json")
        elif how == "strategic":
            core.patch_persistent_volume(PV, NEW_IP)  # the client's default for a dict body
        elif how == "json":
            core.patch_persistent_volume(PV, [{"op": "replace", "path": "/spec/csi/volumeAttributes/ip",
                                               "value": "10.90.0.3"}])
        elif how == "put":
            body = client.ApiClient().sanitize_for_serialization(core.read_persistent_volume(PV))
            body["spec"]["csi"]["volumeAttributes"]["ip"] = "10.90.0.3"
            core.replace_persistent_volume(PV, body)
        else:
            manifest = _pv()
            manifest["spec"]["csi"]["volumeAttributes"]["ip"] = "10.90.0.3"
            core.patch_persistent_volume(PV, manifest, field_manager="rltui", force=True,
                                         _content_type="application/apply-patch+yaml")
    _assert_forbidden(err.value)
    assert core.read_persistent_volume(PV).spec.csi.volume_attributes["ip"] == "10.90.0.2"


def test_other_fields_stay_writable(core: client.CoreV1Api, pv) -> None:
    got = core.patch_persistent_volume(PV, {"metadata": {"labels": {"app": "rl-demo"},
                                                         "annotations": {"note": "x"}}})
    assert got.metadata.labels == {"app": "rl-demo"} and got.metadata.annotations == {"note": "x"}
    got = core.patch_persistent_volume(PV, [{"op": "remove", "path": "/spec/claimRef"}])
    assert got.spec.claim_ref is None
    got = core.patch_persistent_volume(PV, {"spec": {"persistentVolumeReclaimPolicy": "Delete"}})
    assert got.spec.persistent_volume_reclaim_policy == "Delete"
    # A CSI source without controllerExpandSecretRef may gain one (the one exception).
    got = core.patch_persistent_volume(PV, {"spec": {"csi": {"controllerExpandSecretRef": {
        "name": "expand", "namespace": "default"}}}})
    assert got.spec.csi.controller_expand_secret_ref.name == "expand"


def test_volume_mode_is_immutable(core: client.CoreV1Api, pv) -> None:
    with pytest.raises(client.ApiException) as err:
        core.patch_persistent_volume(PV, {"spec": {"volumeMode": "Block"}})
    assert err.value.status == 422
    assert json.loads(err.value.body)["details"]["causes"][0]["field"] == "volumeMode"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_apply_of_a_changed_volume_prints_the_real_error(server, tmp_path: Path) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    base = [shutil.which("kubectl"), "--kubeconfig", str(server.kubeconfig), "--cache-dir", str(tmp_path / "c")]
    volume = DATA / "rl-lustre-volume.yaml"
    subprocess.run([*base, "apply", "-f", str(volume)], env=env, check=True, capture_output=True, timeout=30)
    changed = tmp_path / "volume.yaml"
    changed.write_text(volume.read_text().replace("ip: 10.90.0.2", "ip: 10.90.0.3"))

    done = subprocess.run([*base, "apply", "-f", str(changed)], env=env, capture_output=True, text=True,
                          timeout=30)

    assert done.returncode == 1
    assert (f'The PersistentVolume "{PV}" is invalid: spec.persistentvolumesource: Forbidden: '
            "spec.persistentvolumesource is immutable after creation") in done.stderr
    assert "persistentvolumeclaim/rl-demo-gpu-lustre-pvc unchanged" in done.stdout
    label = subprocess.run([*base, "label", "pv", PV, "team=rl"], env=env, capture_output=True, text=True,
                           timeout=30)
    assert label.returncode == 0, label.stderr
