"""NOTIFY_WEBHOOK: one JSON message per run event, posted to an incoming webhook. Used by the job
supervisor (beside supervisor.py in the cluster's image: Python 3.9, the standard library only)
and by rltui on the user's machine (rltui/notify.py: `rltui notify --test`, the teardown's
message), so both post the same way.

The body is `{"text": "<one sentence>"}` and nothing else, as both chats take it as is:
- Slack: "Sending messages using incoming webhooks" (api.slack.com/messaging/webhooks): POST
  JSON with Content-type application/json, `{"text": "Hello, World!"}`.
- Google Chat: "Build a Google Chat app as a webhook" (developers.google.com/workspace/chat/
  quickstart/webhooks) posts `{"text": ...}` with `Content-Type: application/json;
  charset=UTF-8`; the body is a Message resource (spaces.messages), and Chat's API refuses a
  field the resource does not have with 400 INVALID_ARGUMENT `Invalid JSON payload received.
  Unknown name "<field>" at 'message': Cannot find field.` (as ansible/awx issue 4665 and
  pydantic/logfire issue 1540 quote it). So run, attempt and step go inside the sentence,
  never in fields of their own.

The URL is a credential (Slack's path, Chat's `key` and `token` query parameters): it is read
from the supervisor's mounted Secret file at each post and never logged, saved or put in an
error. urllib's own errors can hold it (`Request` raises ValueError("unknown url type: '<url>'"),
http.client.InvalidURL quotes the port, HTTPError keeps .url), so a failure is described only
by what kind it was: the HTTP status, a timeout, the errno's name, the exception's class.

Posts never hold up the supervisor's looks: one post at a time runs in a thread with a short
timeout; a look starts at most one try (of the oldest event not posted yet, so a chat gets
them in order) and reads the outcome of the last one. A failed post is tried again after
5 s, 10 s, 20 s, ... at most 5 min apart (real seconds: the webhook is a real service in the
sandbox too), and given up after MAX_TRIES, or at once when the webhook refused it (a 4xx but
408 and 429: `PostFailed.refused`). state.json's `notify` keeps `posted` (how many of
`events` were posted: the index of the next), so a restarted supervisor does not post an event
twice; one whose post succeeded just before the process died (its look had not saved it yet)
is posted again.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Callable

try:  # in the package (rltui's tests), or beside these files in the ConfigMap's folder (the pod)
    from .events import sentence
except ImportError:
    from events import sentence  # type: ignore[import-not-found,no-redef]

log = logging.getLogger("rltui-supervisor")

FILE_ENV = "RLTUI_NOTIFY_FILE"  # where the supervisor's pod has the Secret's file (manifests_supervisor)
POST_TIMEOUT_S = 5.0
BACKOFF_S, BACKOFF_CAP_S = 5.0, 300.0
MAX_TRIES = 12  # about 35 minutes of tries for one event, then the next one's turn


class PostFailed(Exception):
    """A post that did not succeed; its text says how in a few words, never with the URL.
    `refused`: the webhook answered a 4xx other than 408 and 429 (RFC 9110 section 15.5: the
    client's error, which the same request repeats; Slack answers a revoked or archived hook,
    or a bad body, so: api.slack.com/messaging/webhooks "Handling errors"), not worth a retry."""

    def __init__(self, text: str, refused: bool = False) -> None:
        super().__init__(text)
        self.refused = refused


def payload(text: str) -> bytes:
    return json.dumps({"text": text}).encode()


def failure(exc: BaseException, timeout: float = POST_TIMEOUT_S) -> str:
    """What kind of failure `exc` is, in words that hold nothing of the URL."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"the webhook answered HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        return failure(exc.reason, timeout)
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, socket.gaierror):
        return "its host name did not resolve"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({type(exc).__name__})"
    if isinstance(exc, OSError) and isinstance(exc.errno, int) and exc.errno > 0:
        return os.strerror(exc.errno).lower()
    if isinstance(exc, ValueError):
        return "it is not a URL urllib can post to"
    return f"the post failed ({type(exc).__name__})"


def post(url: str, text: str, timeout: float = POST_TIMEOUT_S) -> None:
    """POST `{"text": text}` to `url`; PostFailed (the URL never in it) unless a 2xx answered."""
    try:
        req = urllib.request.Request(url, data=payload(text), method="POST",
                                     headers={"Content-Type": "application/json; charset=UTF-8"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            resp.read(65536)
    except Exception as exc:  # noqa: BLE001 - every kind is described below, never by its text
        refused = isinstance(exc, urllib.error.HTTPError) and 400 <= exc.code < 500 and exc.code not in (408, 429)
        raise PostFailed(failure(exc, timeout), refused) from None


def read_url(env: dict[str, str] | None = None) -> str | None:
    """The webhook URL from the mounted Secret's file (its path in RLTUI_NOTIFY_FILE), read now:
    a later `rltui submit` may have changed the Secret. None when there is none."""
    path = (os.environ if env is None else env).get(FILE_ENV) or ""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def backoff_s(failures: int) -> float:
    return min(BACKOFF_CAP_S, BACKOFF_S * 2.0 ** max(0, failures - 1))


class _Flight:
    """One post running in a thread."""

    def __init__(self, index: int, send: Callable[[str, str], None], url: str, text: str) -> None:
        self.index, self.error, self.refused = index, "", False
        self.thread = threading.Thread(target=self._run, args=(send, url, text), name="notify", daemon=True)
        self.thread.start()

    def _run(self, send: Callable[[str, str], None], url: str, text: str) -> None:
        try:
            send(url, text)
        except PostFailed as exc:
            self.error, self.refused = str(exc) or "the post failed", exc.refused
        except Exception as exc:  # noqa: BLE001 - a bug must not leave the flight without an outcome
            self.error = f"the post failed ({type(exc).__name__})"


class Notifier:
    """Posts state.json's `events` in order, each once, without holding up a look (see above)."""

    def __init__(self, url: Callable[[], str | None] = read_url, clock: Callable[[], float] = time.time,
                 send: Callable[[str, str], None] = post) -> None:
        self.url, self.clock, self.send = url, clock, send
        self.flight: _Flight | None = None

    @staticmethod
    def book(state: dict[str, Any]) -> dict[str, Any]:
        book: dict[str, Any] = state.setdefault("notify", {"posted": 0, "failures": 0, "next_at": 0.0, "error": ""})
        return book

    def pending(self, state: dict[str, Any]) -> bool:
        """Whether an event still waits to be posted (or a post is under way) to a webhook that is set."""
        if self.flight is not None:
            return True
        posted = int((state.get("notify") or {}).get("posted") or 0)
        return posted < len(state.get("events") or []) and self.url() is not None

    def look(self, state: dict[str, Any]) -> bool:
        """Read the last post's outcome, then start the next try if one is due; never waits.
        True when `state` changed (the caller saves it)."""
        book, now = self.book(state), self.clock()
        changed = False
        if self.flight is not None:
            if self.flight.thread.is_alive():
                return False
            flight, self.flight = self.flight, None
            if flight.index == int(book["posted"]):
                changed = True
                self._settle(book, flight, now)
        events = state.get("events") or []
        index = int(book["posted"])
        if index >= len(events) or now < float(book.get("next_at") or 0):
            return changed
        url = self.url()
        if url is None:
            return changed
        self.flight = _Flight(index, self.send, url, sentence(events[index]))
        return changed

    def _settle(self, book: dict[str, Any], flight: _Flight, now: float) -> None:
        if not flight.error:
            book.update(posted=flight.index + 1, failures=0, next_at=0.0, error="")
            return
        failures = int(book.get("failures") or 0) + 1
        if failures >= MAX_TRIES or flight.refused:
            log.info("notification %d not posted after %d tries (%s): going on to the next",
                     flight.index + 1, failures, flight.error)
            book.update(posted=flight.index + 1, failures=0, next_at=0.0, error=flight.error)
            return
        wait = backoff_s(failures)
        log.info("notification %d not posted (%s): trying again in %.0f s", flight.index + 1, flight.error, wait)
        book.update(failures=failures, next_at=round(now + wait, 3), error=flight.error)

    def wait(self, timeout: float = POST_TIMEOUT_S + 5) -> None:
        """Until the post under way has an outcome (tests; the supervisor never waits)."""
        if self.flight is not None:
            self.flight.thread.join(timeout)
