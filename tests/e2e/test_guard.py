"""The budget guard, end to end, with no rltui process running once `submit` returns: `submit
--down-after gpus` ends SUCCEEDED, the webhook hears it, and the GPU node pool goes soon after,
taking the per-hour cost down with it (Lustre and the checkpoints stay); then, on a new cluster,
`submit --max-cost X` with X below what the run needs: the job is stopped once the estimate
crosses X, the webhook hears `budget`, and the GPU node pool goes. Everything is read from the
outside (kubectl, the receiver) or through `status --json`."""

from __future__ import annotations

import calendar
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

from tests.headless_user import User, make_user, private_sandbox, run_state, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]  # two clusters, two runs

GPU_POOL = "a4-highgpu-8g-ray-a4-gpu-spot-a4-pool"  # xpk's a4 pool for ray-a4-gpu-spot


class Receiver:
    """A chat's incoming webhook on loopback: every body posted to it, as text."""

    def __init__(self) -> None:
        self.bodies: list[str] = []
        received = self.bodies

        class Hook(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                received.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def heard(self, word: str) -> bool:
        return any(word in body for body in self.bodies)


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()


@pytest.fixture(scope="module")
def user(tmp_path_factory, receiver) -> Iterator[User]:
    # A sandbox of its own: two clusters and two runs, beside the shared sandbox's tests.
    root = tmp_path_factory.mktemp("guardsbx")
    with private_sandbox(root, speed=300.0, kuberay_version="1.6.0", timeout=60.0) as status:
        u = make_user(tmp_path_factory.mktemp("guard"), "guard-e2e", root, status)
        with u.env_sh.open("a") as f:
            f.write(f'export NOTIFY_WEBHOOK="{receiver.url}"\n')
        yield u


def gpu_pools(status: dict[str, Any]) -> list[str]:
    return [r["name"] for r in status["resources"] if r["kind"] == "GKE node pool" and r["name"] == GPU_POOL
            and r["state"] != "absent"]


def submit(user: User, *flags: str) -> str:
    out = user.run("submit", *flags)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "budget guard: deletes GPU pool " + GPU_POOL in out.stderr, out.stderr
    return out.stdout.strip().splitlines()[-1]


def spec_of(user: User, job_id: str) -> dict[str, Any]:
    name = "rltui-run-" + job_id.removeprefix("rltui-")
    return dict(json.loads(user.kubectl("get", "configmap", name, "-o", "jsonpath={.data.spec\\.json}").stdout))


# What the first run teaches the second: its guard's price and clock, how long it ran.
SEEN: dict[str, Any] = {}


def test_down_after_gpus_deletes_the_gpu_pool_once_the_run_succeeds(user, receiver) -> None:
    up = user.run("up", "--yes")
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-2000:]
    t0 = time.monotonic()
    job_id = submit(user, "--down-after", "gpus")
    SEEN["guard"] = spec_of(user, job_id)["guard"]
    training = user.status_json()
    assert gpu_pools(training) == [GPU_POOL]
    assert "guard: deletes GPU pool" in json.dumps(training["job"].get("guard")), training["job"]
    # From here on nothing of rltui runs: kubectl reads the supervisor's record.
    final = wait_for("the run to end", lambda: (s := run_state(user, job_id)) and s.get("status") in
                     ("SUCCEEDED", "FAILED", "STOPPED") and s, 600, every_s=1.0)
    assert final["status"] == "SUCCEEDED", json.dumps(final, indent=1)[-3000:]
    ended = time.monotonic()
    SEEN["run_s"] = ended - t0
    wait_for("the webhook to hear the run succeeded", lambda: receiver.heard("succeeded"), 60)

    def gone() -> dict[str, Any] | None:
        status = user.status_json()
        return None if gpu_pools(status) else status

    after = wait_for("no GPU node pool in status", gone, 60, every_s=2.0)
    deleted = time.monotonic()
    guard = after["job"]["guard"]
    assert guard["state"] == "done" and guard["pools"] == {GPU_POOL: "deleted"}, guard
    assert receiver.heard("GPU node pool(s) " + GPU_POOL + " deleted; Lustre and the checkpoints are kept")
    said = user.run("status").stdout
    assert f"guard: GPU pool {GPU_POOL} deleted; spent ~$" in said, said
    lustre = next(r for r in after["resources"] if r["kind"] == "Lustre instance")
    assert lustre["state"] == "active", lustre  # kept
    before, now = training["cost"]["per_hour"], after["cost"]["per_hour"]
    print(f"per hour while training {before:.2f}, after the guard {now:.2f}; run {ended - t0:.0f} s,"
          f" pool gone {deleted - ended:.0f} s after the run ended")
    assert now < 0.3 * before, (before, now, after["cost"])


def test_max_cost_stops_the_job_and_deletes_the_gpu_pool(user, receiver) -> None:
    """A new cluster (the guard deleted the last one's GPU pool, which `up` does not remake), and a
    budget the run would pass about a third of the way in: from the first run's record, the
    node-hour price and how long the run took; from the new nodes' ages, what is spent already."""
    if not SEEN.get("run_s"):
        pytest.skip("needs the first run's price and length (test_down_after_gpus_...)")
    down = user.run("down", "--yes")   # xpk's delete, over the pool the guard deleted
    assert down.returncode == 0, down.stdout[-4000:] + down.stderr[-2000:]
    up = user.run("up", "--yes")
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-2000:]
    nodes = json.loads(user.kubectl("get", "nodes", "-l", f"cloud.google.com/gke-nodepool={GPU_POOL}",
                                    "-o", "json").stdout)["items"]
    assert nodes, "the new cluster's GPU nodes"
    guard_spec = SEEN["guard"]
    rate, scale = float(guard_spec["gpu_node_hour_usd"]), float(guard_spec["time_scale"])
    now = time.time()
    spent = sum((now - calendar.timegm(time.strptime(n["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")))
                for n in nodes) / scale / 3600 * rate
    run_cost = len(nodes) * SEEN["run_s"] / scale / 3600 * rate
    budget = round(spent + run_cost / 3, 2)
    job_id = submit(user, "--max-cost", str(budget))
    final = wait_for("the run to end", lambda: (s := run_state(user, job_id)) and s.get("status") in
                     ("SUCCEEDED", "FAILED", "STOPPED") and s, 600, every_s=1.0)
    assert final["status"] == "STOPPED", json.dumps(final, indent=1)[-3000:]
    assert "the budget was reached" in final["message"], final["message"]
    assert int(final.get("step") or 0) < 20, final
    wait_for("the webhook to hear the budget", lambda: receiver.heard("budget"), 60)
    after = wait_for("no GPU node pool in status", lambda: (s := user.status_json()) and not gpu_pools(s) and s,
                     120, every_s=2.0)
    guard = after["job"]["guard"]
    assert guard["state"] == "done" and guard["spend_usd"] >= budget and guard["limit_usd"] == budget, guard
    print(f"budget {budget}: stopped at step {final.get('step')}, spent ~{guard['spend_usd']}")
