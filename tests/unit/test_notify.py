"""NOTIFY_WEBHOOK: the notifier (rltui/oncluster/webhook.py) against a real local HTTP server
(http.server in a thread): the body Slack and Google Chat take as is, each event posted once and
in order, a failing server retried with capped exponential back-off without ever holding up a
look, the URL never in a failure's text or a log line; env.sh's validation of the URL; and
`rltui notify --test`'s exit codes."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rltui import cli
from rltui.config import ConfigError, parse_config
from rltui.oncluster.events import add_event
from rltui.oncluster.webhook import BACKOFF_CAP_S, BACKOFF_S, MAX_TRIES, Notifier, PostFailed, backoff_s, post

SECRET = "T0KEN-" + "x9" * 12   # the part of a webhook URL that is its credential
T0 = 1_000_000.0


class Receiver:
    """A webhook that records each POST; it answers `codes` in turn (then 200), and a handler
    waits on `hold` first when it is cleared."""

    def __init__(self, codes: list[int] | None = None) -> None:
        self.codes = list(codes or [])
        self.posts: list[dict[str, Any]] = []
        self.hold = threading.Event()
        self.hold.set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                receiver.hold.wait(30)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.posts.append({"path": self.path, "type": self.headers.get("Content-Type"),
                                       "body": json.loads(body)})
                code = receiver.codes.pop(0) if receiver.codes else 200
                self.send_response(code)
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/{SECRET}?token={SECRET}"

    def close(self) -> None:
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


SPEC = {"run": "rltui-20261201-100000-aaaaaa"}


def _state(*kinds: str) -> dict[str, Any]:
    state: dict[str, Any] = {"attempts": [{"id": "a"}, {"id": "b", "last_step": 7}], "step": 7, "spend_usd": 12.5}
    for kind in kinds:
        add_event(state, SPEC, kind, f"the {kind} event", T0)
    return state


def _settle(n: Notifier, state: dict[str, Any]) -> None:
    """One look, then its post's outcome read by the next look (as two looks of the supervisor)."""
    n.look(state)
    n.wait()
    n.look(state)


def test_the_body_is_text_alone_with_the_run_attempt_and_step(receiver: Receiver) -> None:
    """Google Chat refuses a field its Message resource lacks; Slack and Chat both show `text`."""
    state = _state("stalled")
    n = Notifier(lambda: receiver.url, Clock())
    _settle(n, state)
    (got,) = receiver.posts
    assert got["type"] == "application/json; charset=UTF-8" and list(got["body"]) == ["text"]
    text = got["body"]["text"]
    assert text == ("rltui stalled: run rltui-20261201-100000-aaaaaa, attempt 2, step 7: the stalled event "
                    "(spent so far: about $12.50)")
    assert state["notify"]["posted"] == 1


def test_each_event_once_in_order_even_after_a_restart(receiver: Receiver) -> None:
    state = _state("preempted", "recovering", "resumed")
    n = Notifier(lambda: receiver.url, Clock())
    for _ in range(6):
        _settle(n, state)
    assert [p["body"]["text"].split(":")[0] for p in receiver.posts] == [
        "rltui preempted", "rltui recovering", "rltui resumed"]
    assert not n.pending(state)
    saved = json.loads(json.dumps(state))       # state.json as the supervisor saved it
    again = Notifier(lambda: receiver.url, Clock())   # a restarted supervisor
    for _ in range(3):
        _settle(again, saved)
    assert len(receiver.posts) == 3
    add_event(saved, SPEC, "succeeded", "the run succeeded", T0)
    _settle(again, saved)
    assert len(receiver.posts) == 4 and receiver.posts[-1]["body"]["text"].startswith("rltui succeeded")


def test_a_server_that_fails_twice_then_succeeds_is_retried_with_back_off() -> None:
    receiver, clock = Receiver(codes=[500, 503]), Clock()
    try:
        state = _state("stalled")
        n = Notifier(lambda: receiver.url, clock)
        _settle(n, state)
        assert len(receiver.posts) == 1 and state["notify"]["failures"] == 1
        assert state["notify"]["next_at"] == T0 + BACKOFF_S
        assert state["notify"]["error"] == "the webhook answered HTTP 500"
        clock.now += BACKOFF_S - 1
        _settle(n, state)
        assert len(receiver.posts) == 1               # not before its time
        clock.now += 1
        _settle(n, state)
        assert len(receiver.posts) == 2 and state["notify"]["next_at"] == clock.now + 2 * BACKOFF_S
        clock.now += 2 * BACKOFF_S
        _settle(n, state)
        assert len(receiver.posts) == 3 and state["notify"] == {"posted": 1, "failures": 0, "next_at": 0.0,
                                                                "error": ""}
        assert len({p["body"]["text"] for p in receiver.posts}) == 1
    finally:
        receiver.close()


def _looks(receiver: Receiver, state: dict[str, Any], looks: int) -> Notifier:
    """`looks` pairs of looks, each a back-off cap apart (so every retry is due)."""
    clock = Clock()
    n = Notifier(lambda: receiver.url, clock)
    for _ in range(looks):
        _settle(n, state)
        clock.now += BACKOFF_CAP_S
    return n


def test_the_back_off_doubles_up_to_its_cap_and_an_event_is_given_up_at_last() -> None:
    assert [backoff_s(f) for f in (1, 2, 3, 4)] == [BACKOFF_S, 2 * BACKOFF_S, 4 * BACKOFF_S, 8 * BACKOFF_S]
    assert backoff_s(30) == BACKOFF_CAP_S
    receiver = Receiver(codes=[503] * MAX_TRIES)
    try:
        state = _state("stalled", "recovering")
        n = _looks(receiver, state, MAX_TRIES)
        assert state["notify"]["posted"] == 1     # the first given up: the next one's turn
        _settle(n, state)
        assert receiver.posts[-1]["body"]["text"].startswith("rltui recovering")
    finally:
        receiver.close()


@pytest.mark.parametrize(("code", "tries"), [(404, 1), (410, 1), (400, 1), (429, 2), (408, 2)])
def test_a_refusal_is_not_tried_again_but_a_busy_webhook_is(code: int, tries: int) -> None:
    """A revoked or archived hook (Slack's 404 and 410) or a bad body answers the same again: the
    event is given up at once and the next one's turn comes; 408 and 429 mean "later"."""
    receiver = Receiver(codes=[code])
    try:
        state = _state("stalled", "recovering")
        _looks(receiver, state, tries)
        assert state["notify"]["posted"] == 1 and state["notify"]["error"] in ("", f"the webhook answered HTTP {code}")
        assert len(receiver.posts) == tries
        assert all(p["body"]["text"].startswith("rltui stalled") for p in receiver.posts)
    finally:
        receiver.close()


def test_a_look_never_waits_for_the_post(receiver: Receiver) -> None:
    """The handler holds the request: the look returns at once, at most one post is under way,
    and its outcome is read by a later look."""
    receiver.hold.clear()
    state = _state("stalled", "recovering")
    n = Notifier(lambda: receiver.url, Clock())
    assert n.look(state) is False and n.flight is not None
    assert n.look(state) is False and state["notify"]["posted"] == 0   # still under way: no second post
    assert n.pending(state)
    receiver.hold.set()
    n.wait()
    assert n.look(state) is True and state["notify"]["posted"] == 1


def test_the_url_never_shows_in_a_failure_or_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # closed again: nothing listens there
    caplog.set_level(logging.INFO, logger="rltui-supervisor")
    # Nothing here leaves the machine: a closed loopback port, and URLs urllib refuses itself.
    for url in (f"http://127.0.0.1:{port}/hooks/{SECRET}", f"ftp://example.com/{SECRET}", f"https://x:{SECRET}/",
                f"http://[{SECRET}/", f"{SECRET}://x/"):
        with pytest.raises(PostFailed) as failed:
            post(url, "hello", timeout=2)
        assert SECRET not in str(failed.value) and failed.value.__cause__ is None
        assert str(failed.value), url
    state = _state("stalled")
    n = Notifier(lambda: f"http://127.0.0.1:{port}/hooks/{SECRET}", Clock())
    _settle(n, state)
    assert "refused" in state["notify"]["error"] and SECRET not in json.dumps(state)
    assert caplog.records and all(SECRET not in r.getMessage() for r in caplog.records)


def test_no_webhook_means_no_pending_work() -> None:
    state = _state("succeeded")
    n = Notifier(lambda: None, Clock())
    assert not n.pending(state) and n.look(state) is False and n.flight is None


# ---- env.sh ------------------------------------------------------------------------------------

BASE = {"PROJECT_ID": "team-rl-sandbox-42"}


@pytest.mark.parametrize("url", ["https://hooks.slack.com/services/T000/B000/XXXX",
                                 "https://chat.googleapis.com/v1/spaces/AAA/messages?key=K&token=T",
                                 "http://127.0.0.1:8080/hook", "http://localhost/hook", "http://[::1]:9/hook"])
def test_a_webhook_url_is_https_or_a_loopback_http(url: str) -> None:
    cfg = parse_config({**BASE, "NOTIFY_WEBHOOK": url})
    assert cfg.notify_webhook is not None and cfg.notify_webhook.get_secret_value() == url
    assert url not in repr(cfg) and url not in str(cfg)
    assert "NOTIFY_WEBHOOK" not in cfg.env_values()


@pytest.mark.parametrize("url", [f"http://hooks.example.com/{SECRET}", f"ftp://example.com/{SECRET}",
                                 f"https:///{SECRET}", f"https://example.com/{SECRET} trailing",
                                 f"https://example.com:port/{SECRET}", SECRET])
def test_any_other_url_is_one_line_naming_the_field_not_the_url(url: str) -> None:
    with pytest.raises(ConfigError) as bad:
        parse_config({**BASE, "NOTIFY_WEBHOOK": url})
    (problem,) = bad.value.problems
    assert problem.field == "NOTIFY_WEBHOOK" and "https://" in problem.message
    assert SECRET not in str(bad.value) and "\n" not in str(bad.value)


def test_unset_or_the_placeholder_means_no_notifications() -> None:
    for value in ("", "<YOUR_WEBHOOK_URL>"):
        assert parse_config({**BASE, "NOTIFY_WEBHOOK": value}).notify_webhook is None


# ---- rltui notify --test -----------------------------------------------------------------------

def _env(tmp_path: Path, url: str = "") -> Path:
    path = tmp_path / "env.sh"
    path.write_text('PROJECT_ID="team-rl-sandbox-42"\n' + (f'NOTIFY_WEBHOOK="{url}"\n' if url else ""))
    path.chmod(0o600)
    return path


def test_notify_test_posts_one_message(tmp_path: Path, receiver: Receiver, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["notify", "--test", "--env", str(_env(tmp_path, receiver.url))]) == 0
    (got,) = receiver.posts
    assert list(got["body"]) == ["text"] and "test message" in got["body"]["text"]
    assert SECRET not in "".join(capsys.readouterr())


def test_notify_test_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["notify", "--test", "--env", str(_env(tmp_path))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("NOTIFY_WEBHOOK: not set"), err
    failing = Receiver(codes=[403])
    try:
        assert cli.main(["notify", "--test", "--env", str(_env(tmp_path, failing.url))]) == 1
    finally:
        failing.close()
    out, err = capsys.readouterr()
    assert err.strip() == "notify: the post to NOTIFY_WEBHOOK failed: the webhook answered HTTP 403"
    assert SECRET not in out + err
    assert cli.main(["notify", "--env", str(_env(tmp_path))]) == 2      # --test is the only action
    assert cli.main(["notify", "--test", "--env", str(_env(tmp_path, f"http://example.com/{SECRET}"))]) == 2
    out, err = capsys.readouterr()
    assert "NOTIFY_WEBHOOK: must be an https:// URL" in err and SECRET not in out + err


def test_notify_loads_no_heavy_library(tmp_path: Path) -> None:
    code = ("import sys\nfrom rltui import cli\n"
            f"cli.main(['notify', '--test', '--env', {str(_env(tmp_path))!r}])\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'textual', 'grpc', 'google', 'kubernetes', 'ray', 'rich'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr
