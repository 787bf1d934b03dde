"""Monitor's pod actions and counts over the real stack, no samples: a Session whose context's
KubeAdapter talks to the sandbox's Kubernetes API (the official asyncio client, HTTPS, a
bearer token), the app's workers, and the screens. The test drives the API's store as the
KubeRay controller and the kubelet would (pods, their status, their log, Events).

Also KubeAdapter.pod_log alone: the tail, following, and the API's 400 / 404."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

import pytest

from rltui.app import RLTuiApp
from rltui.cloud.errors import CloudError
from rltui.cloud.kube import KubeAdapter
from rltui.screens.monitor import MonitorScreen
from rltui.session import Session
from rltui.widgets.chrome import HeaderInfo
from rltui.widgets.poddetail import ConfirmDeletePod, PodDescribeView, PodLogView
from rltui.widgets.pods import PodsTable
from tests.cloud.conftest import RUNNING

CLUSTER = "ray-a4"  # the conftest's head service is ray-a4-head-svc
GROUP = "gpu-worker-group"
WORKERS = (f"{CLUSTER}-{GROUP}-worker-aaaaa", f"{CLUSTER}-{GROUP}-worker-bbbbb")


def worker(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {"ray.io/cluster": CLUSTER, "ray.io/node-type": "worker",
                                    "ray.io/group": GROUP},
                         # Held in Terminating after a delete, as a kubelet's graceful stop does.
                         "finalizers": ["example.com/graceful"]},
            "spec": {"nodeName": f"gke-{CLUSTER}-np-a4-8f3a2b1c-{name[-2:]}",
                     "containers": [{"name": "ray-worker", "image": "nvcr.io/nvidia/nemo-rl:v0.4.0",
                                     "resources": {"requests": {"nvidia.com/gpu": 8, "cpu": "100"},
                                                   "limits": {"nvidia.com/gpu": 8, "cpu": "100"}}}]}}


RUNNING_WORKER = {**RUNNING, "containerStatuses": [{**RUNNING["containerStatuses"][0], "name": "ray-worker"}]}
RAYCLUSTER = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
              "metadata": {"name": CLUSTER, "namespace": "default"},
              "spec": {"rayVersion": "2.54.0", "headGroupSpec": {"rayStartParams": {}},
                       "workerGroupSpecs": [{"groupName": GROUP, "replicas": 2, "minReplicas": 2,
                                             "maxReplicas": 2}]}}


class WizardOnly(RLTuiApp):
    """The app without its boot (preflight runs gcloud; the inventory asks GKE): this test
    starts the workers it is about by hand."""

    def _boot(self) -> None:  # type: ignore[override]
        return None


async def until(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    async with asyncio.timeout(timeout):
        while not (found := check()):
            await asyncio.sleep(0.05)
    return found


@pytest.fixture
def session(api, kube: KubeAdapter, tmp_path: Path, monkeypatch) -> Session:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    env = tmp_path / "env.sh"
    env.write_text(f'export PROJECT_ID="rl-test"\nexport CLUSTER_NAME="{CLUSTER}"\nexport NUM_NODES="2"\n')
    env.chmod(0o600)
    session = Session(env, lambda: api.endpoints)
    session.context()._adapters["kube"] = kube  # connected to the sandbox's API (Context.kube)
    return session


async def test_pod_log_tails_follows_and_reports_the_apis_refusals(api, kube: KubeAdapter) -> None:
    store = api.store
    await store.create("pods", worker(WORKERS[0]), "default")
    with pytest.raises(CloudError, match="waiting to start"):  # 400: not started yet
        async for _ in kube.pod_log(WORKERS[0]):
            pass
    await store.patch_status("pods", WORKERS[0], RUNNING_WORKER, "default")
    await store.append_log("default", WORKERS[0], "".join(f"line {i}\n" for i in range(10)))
    tail = "".join([t async for t in kube.pod_log(WORKERS[0], tail_lines=3)])
    assert tail == "line 7\nline 8\nline 9\n"

    got: list[str] = []

    async def follow() -> None:
        async for text in kube.pod_log(WORKERS[0], follow=True, tail_lines=1):
            got.append(text)
    task = asyncio.create_task(follow())
    await until(lambda: "".join(got) == "line 9\n")
    await store.append_log("default", WORKERS[0], "line 10\n")
    await until(lambda: "".join(got).endswith("line 10\n"))
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    with pytest.raises(CloudError) as missing:  # 404
        async for _ in kube.pod_log("no-such-pod"):
            pass
    assert not missing.value.transient


async def test_monitor_counts_logs_describes_and_deletes_pods_over_the_api(
        api, session: Session, head, dashboard) -> None:
    store = api.store
    await head(f"{CLUSTER}-head-x7k2q", await dashboard("head"))
    await store.create("rayclusters", RAYCLUSTER, "default")
    for name in WORKERS:
        await store.create("pods", worker(name), "default")
        await store.patch_status("pods", name, RUNNING_WORKER, "default")
    await store.append_log("default", WORKERS[0], "worker started\n")
    for i, (obj, reason) in enumerate([(WORKERS[0], "Scheduled"), (WORKERS[1], "Pulled"),
                                       (WORKERS[0], "Started")]):
        await store.create("events", {
            "metadata": {"name": f"ev{i}"}, "type": "Normal", "reason": reason,
            "message": f"{reason} {obj}", "involvedObject": {"kind": "Pod", "name": obj},
            "lastTimestamp": f"2026-01-01T00:00:0{i}Z"}, "default")

    app = WizardOnly(session, header=HeaderInfo(mode="SANDBOX", cluster=CLUSTER))
    async with app.run_test(size=(120, 40)) as pilot:
        app.watch_pods()  # the pods, the RayCluster, the dashboard, the Events
        await app.switch_mode("monitor")
        screen = app.screen
        assert isinstance(screen, MonitorScreen)
        state = screen.query_one("#pods-state")
        await until(lambda: str(state.render()) == "watch · 3/3 running")  # 1 head + 2 workers
        url = app.bus.dashboard.last or await until(lambda: app.bus.dashboard.last)
        assert url.startswith("http://127.0.0.1:")
        await until(lambda: str(screen.query_one("#dashboard").render()) == url)

        table = screen.query_one(PodsTable)
        table.focus()
        await until(lambda: table.row_count == 3)
        table.move_cursor(row=[k.value for k in table.rows].index(WORKERS[0]))
        await pilot.press("enter")
        view = await until(lambda: isinstance(app.screen, PodLogView) and app.screen)
        await until(lambda: view.lines == ["worker started"])
        await store.append_log("default", WORKERS[0], "step 1 done\n")  # followed while open
        await until(lambda: view.lines == ["worker started", "step 1 done"])
        await pilot.press("escape")
        await until(lambda: not [w for w in app.workers if w.group == "pod_log" and w.is_running])

        # A pod whose container has not started: the API's reason, in the view and a toast.
        await store.create("pods", worker(f"{CLUSTER}-{GROUP}-worker-ccccc"), "default")
        await until(lambda: table.row_count == 4)
        table.move_cursor(row=[k.value for k in table.rows].index(f"{CLUSTER}-{GROUP}-worker-ccccc"))
        await pilot.press("l")
        waiting = await until(lambda: isinstance(app.screen, PodLogView) and app.screen)
        await until(lambda: "waiting to start" in waiting.ended)
        assert any("waiting to start" in n.message for n in app._notifications)
        await pilot.press("escape")
        await store.delete("pods", f"{CLUSTER}-{GROUP}-worker-ccccc", "default")
        await store.patch("pods", f"{CLUSTER}-{GROUP}-worker-ccccc", {"metadata": {"finalizers": None}}, "default")
        app.clear_notifications()
        await until(lambda: table.row_count == 3)
        table.move_cursor(row=[k.value for k in table.rows].index(WORKERS[0]))

        await pilot.press("d")
        described = await until(lambda: isinstance(app.screen, PodDescribeView) and app.screen)
        await until(lambda: described.lines)
        text = "\n".join(described.lines)
        assert f"Node:         gke-{CLUSTER}-np-a4-8f3a2b1c-aa" in text
        assert "Scheduled" in text and "Started" in text and "Pulled" not in text  # its Events only
        assert "nvidia.com/gpu=8" in text
        await pilot.press("escape")

        await pilot.press("ctrl+d")
        confirm = await until(lambda: isinstance(app.screen, ConfirmDeletePod) and app.screen)
        assert confirm.pod == WORKERS[0]
        await pilot.press("y")
        await until(lambda: (store.list_sync("pods", "default", field_selector=f"metadata.name={WORKERS[0]}")
                             or [{}])[0].get("metadata", {}).get("deletionTimestamp"))
        await until(lambda: str(state.render()) == "watch · 2/3 running")
        assert {r.name: r.phase for r in table.pod_rows()}[WORKERS[0]] == "Terminating"
        assert not [n for n in app._notifications if n.severity == "error"]
        await session.close()
