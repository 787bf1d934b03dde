"""A stalled run recovers with no rltui process running: `rltui submit` with NOTIFY_WEBHOOK set (a
local receiver), `rltui sandbox stall` at step 5 or later (the driver frozen with SIGSTOP, every
pod as it was, Ray still saying RUNNING), and then only `status`: the supervisor's watchdog calls
it stalled, stops it through Ray's job API, resubmits from the newest checkpoint, and the run
ends SUCCEEDED; the webhook got a message per event, and its URL is nowhere rltui writes or
prints. `down` posts the teardown's message last."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.headless_user import make_user, run_state, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # a whole run, stalled and recovered

SECRET = "St4llW3bh00k" * 3   # the webhook URL's own credential: never to be seen outside env.sh


class Receiver:
    """An incoming webhook on the loopback (the http:// env.sh allows for it alone)."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.bodies: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                if self.path == f"/hooks/{SECRET}?token={SECRET}":
                    receiver.bodies.append(body)
                    receiver.texts.append(str(body.get("text")))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/{SECRET}?token={SECRET}"

    def got(self, word: str) -> list[str]:
        return [t for t in self.texts if word in t]


@pytest.fixture(scope="module")
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()
    r.server.server_close()


@pytest.fixture(scope="module")
def user(sandbox, sandbox_dir, tmp_path_factory, receiver):
    u = make_user(tmp_path_factory.mktemp("stall"), "stall-e2e", sandbox_dir, sandbox)
    u.env_sh.write_text(u.env_sh.read_text() + f'NOTIFY_WEBHOOK="{receiver.url}"\n')
    yield u
    u.run("down", "--yes")  # the sandbox's one Kubernetes API is shared: leave it empty


def test_a_stalled_run_is_resumed_with_no_rltui_running(user, receiver):
    up = user.run("up", "--yes")
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-2000:]
    sub = user.run("submit")
    assert sub.returncode == 0, sub.stderr
    job_id = sub.stdout.strip().splitlines()[-1]
    # From here on no rltui command but `sandbox stall` and `status`: kubectl reads the record.
    wait_for("step 5", lambda: int((run_state(user, job_id) or {}).get("step") or 0) >= 5, 180, every_s=0.2)
    stall = subprocess.run([sys.executable, "-m", "rltui.cli", "sandbox", "stall"], env=user.env,
                           capture_output=True, text=True, timeout=60)
    assert stall.returncode == 0, stall.stdout + stall.stderr
    assert "SIGSTOP" in stall.stdout and job_id in stall.stdout
    print(f"{stall.stdout.strip()} at step {(run_state(user, job_id) or {}).get('step')}")   # shown with -s
    final = wait_for("the run to end", lambda: (s := run_state(user, job_id)) and s.get("status") in
                     ("SUCCEEDED", "FAILED", "STOPPED") and s, 420, every_s=1.0)
    if final["status"] != "SUCCEEDED":   # the job's own words say why, not the record alone
        log = user.run("logs", timeout=120)
        pytest.fail(json.dumps(final, indent=1)[-3000:] + "\n--- rltui logs:\n" + log.stdout[-6000:]
                    + log.stderr[-1000:])
    attempts = final["attempts"]
    assert len(attempts) >= 2, json.dumps(final, indent=1)[-4000:]
    first, second = attempts[0], attempts[1]
    assert first["status"] == "STOPPED" and first["stalled"]["step"] >= 5, first
    assert "stalled at step" in second["reason"] and second["resumed_from_step"] >= 4, second
    assert second["first_step"] == second["resumed_from_step"] + 1
    kinds = [e["kind"] for e in final["events"]]
    assert kinds[:3] == ["stalled", "recovering", "resumed"] and kinds[-1] == "succeeded", kinds
    # The webhook: one message per event, `text` alone, the run, attempt and step in its sentence.
    wait_for("the succeeded message", lambda: receiver.got("succeeded"), 60)
    (stalled,) = receiver.got("rltui stalled")
    assert f"run {job_id}, attempt 1, step {first['stalled']['step']}" in stalled
    assert all(list(b) == ["text"] for b in receiver.bodies)
    assert len(receiver.texts) == len(final["events"])
    # `status` and its JSON say what the Monitor's strip shows.
    job = user.status_json()["job"]
    assert job["status"] == "SUCCEEDED" and (job["step"], job["total_steps"]) == (20, 20), job
    assert job["recovery"].startswith(f"stalled at step {first['stalled']['step']}: no new step for "), job
    assert f"; resumed from step {second['resumed_from_step']}" in job["recovery"]
    assert job["attempts"][0]["stalled"]["log_tail"], job["attempts"][0]
    # The run's summary (`rltui runs`) gets the events once a follower has read the run.
    logs = user.run("logs", "--follow")
    assert logs.returncode == 0 and logs.stdout.rstrip("\n").splitlines()[-1] == "SUCCEEDED", logs.stderr[-2000:]
    summaries = list((user.home / "state").rglob(f"summaries/{job_id}.json"))
    assert len(summaries) == 1
    recorded = json.loads(summaries[0].read_text())
    assert [e["kind"] for e in recorded["events"]] == kinds


def test_the_webhook_url_is_nowhere_but_env_sh_and_its_secret(user):
    """state.json and spec.json (the run's ConfigMap), the supervisor's log, `status --json`,
    everything under the state folder and every command's output: no trace of the URL."""
    texts = [user.kubectl("get", "configmaps", "-o", "json").stdout,
             user.kubectl("get", "deployments", "-o", "json").stdout,
             user.kubectl("logs", "-l", "app.kubernetes.io/name=rltui-supervisor", "--tail", "-1").stdout,
             json.dumps(user.status_json())]
    assert '"rltui-run-' in texts[0] and "spec.json" in texts[0] and "rltui-supervisor" in texts[2]
    texts += [p.read_text(errors="replace") for p in (user.home / "state").rglob("*") if p.is_file()]
    texts += user.outputs
    assert all(SECRET not in text for text in texts)
    secret = json.loads(user.kubectl("get", "secret", "rltui-supervisor-notify", "-o", "json").stdout)
    assert list(secret["data"]) == ["NOTIFY_WEBHOOK"]   # where it is kept, for the supervisor only


def test_down_posts_the_teardown_message(user, receiver):
    down = user.run("down", "--yes")
    assert down.returncode == 0, down.stdout[-3000:]
    assert "notify: posted the teardown's message to NOTIFY_WEBHOOK" in down.stdout
    (torn,) = receiver.got("rltui torn_down")
    assert "is deleted" in torn
