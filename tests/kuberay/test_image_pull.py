"""Images in the sandbox's kubelet: a container the sandbox runs for real runs with the environment
of its image (sandbox/rltui_sandbox/images.py), and an image no environment runs fails as an image the
kubelet cannot pull (ErrImagePull, then ImagePullBackOff), never as a process of another Ray.

The module's tests share one sandbox (an xpk cluster, no RayCluster) and run in file order.
"""

from __future__ import annotations

import re

import pytest
from kubernetes import client

from rltui_sandbox import images

pytestmark = [pytest.mark.timeout(60, func_only=True)]

# xpk's only CPU pool is the Toolkit's `system` pool, tainted; the pods tolerate it.
SYSTEM = [{"key": "components.gke.io/gke-managed-components", "operator": "Equal", "value": "true",
           "effect": "NoSchedule"}]
HEAD_LABELS = {"ray.io/node-type": "head", "ray.io/is-ray-node": "yes", "ray.io/cluster": "pulls"}
SCRIPT = "import sys, ray\nprint('ray', ray.__version__, 'prefix', sys.prefix, flush=True)\n"


@pytest.fixture(scope="module")
def box(make_box, tools):
    box = make_box()
    box.xpk_cluster(tools.config())
    return box


@pytest.fixture(scope="module")
def core(box) -> client.CoreV1Api:
    api = client.CoreV1Api(box.api())
    api.create_namespaced_config_map("default", {"metadata": {"name": "code"}, "data": {"show.py": SCRIPT}})
    return api


def process_pod(core: client.CoreV1Api, name: str, image: str, labels: dict | None = None) -> None:
    core.create_namespaced_pod("default", {"metadata": {"name": name, "labels": labels or {}}, "spec": {
        "tolerations": SYSTEM, "restartPolicy": "Never",
        "containers": [{"name": "c", "image": image, "command": ["python", "/opt/code/show.py"],
                        "volumeMounts": [{"name": "code", "mountPath": "/opt/code"}]}],
        "volumes": [{"name": "code", "configMap": {"name": "code"}}]}})


def waiting(core: client.CoreV1Api, name: str, reason: str):
    def check():
        st = (core.read_namespaced_pod(name, "default").status.container_statuses or [None])[0]
        return st and st.state.waiting and st.state.waiting.reason == reason and st
    return check


def test_a_process_runs_with_its_images_python(box, core, tools) -> None:
    process_pod(core, "on-246", "rayproject/ray:2.46.0")
    tools.wait_for(lambda: core.read_namespaced_pod("on-246", "default").status.phase == "Succeeded", 30,
                   "the pod to finish")
    log = core.read_namespaced_pod_log("on-246", "default")
    assert log == f"ray 2.46.0 prefix {images.ray_env().root}\n"


def test_an_image_without_an_environment_fails_to_pull(box, core, tools) -> None:
    image = "rayproject/ray:2.54.0"
    process_pod(core, "on-254", image)
    err = tools.wait_for(waiting(core, "on-254", "ErrImagePull"), 15, "ErrImagePull")
    error = f'rltui sandbox: no local environment runs image "{image}"'
    assert err.state.waiting.message.startswith(error)
    assert not err.ready and err.restart_count == 0
    back = tools.wait_for(waiting(core, "on-254", "ImagePullBackOff"), 10, "ImagePullBackOff")
    assert back.state.waiting.message == f'Back-off pulling image "{image}": ErrImagePull: {err.state.waiting.message}'
    pod = core.read_namespaced_pod("on-254", "default")
    assert pod.status.phase == "Pending"
    assert pod.metadata.uid not in box.controller.process_pids  # nothing ran with another Ray
    events = [(e.type, e.reason, e.message) for e in tools.events_for(core, "on-254")]
    pulls = [e for e in events if e[1] in ("Pulling", "Failed", "BackOff", "Pulled")]
    assert pulls[:5] == [("Normal", "Pulling", f'Pulling image "{image}"'),
                         ("Warning", "Failed", f'Failed to pull image "{image}": {err.state.waiting.message}'),
                         ("Warning", "Failed", "Error: ErrImagePull"),
                         ("Normal", "BackOff", f'Back-off pulling image "{image}"'),
                         ("Warning", "Failed", "Error: ImagePullBackOff")]
    assert not any(e[1] in ("Pulled", "Created", "Started") for e in events)
    core.delete_namespaced_pod("on-254", "default")


def test_a_head_pod_on_an_unknown_ray_image_starts_no_ray_head(box, core, tools) -> None:
    """A head pod's Ray container is a real Ray head (headpod.py): on an image no environment
    runs, no head starts (not even during the pull), and the pod waits in ImagePullBackOff."""
    before = len(box.children)
    core.create_namespaced_pod("default", {"metadata": {"name": "head-254", "labels": HEAD_LABELS}, "spec": {
        "tolerations": SYSTEM,
        "containers": [{"name": "ray-head", "image": "rayproject/ray:2.54.0",
                        "command": ["/bin/bash", "-lc", "--"], "args": ["ray start --head --block"]}]}})
    st = tools.wait_for(waiting(core, "head-254", "ImagePullBackOff"), 15, "ImagePullBackOff")
    assert re.fullmatch(r'Back-off pulling image "rayproject/ray:2\.54\.0": ErrImagePull: rltui sandbox: no local '
                        r'environment runs image "rayproject/ray:2\.54\.0".*', st.state.waiting.message)
    assert box.controller.head_pids == []
    assert all(not pids for pids in box.children[before:])  # no process was started meanwhile
    core.delete_namespaced_pod("head-254", "default")
