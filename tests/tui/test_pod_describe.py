"""Describe (`d` on a pod): the answer shows whenever it comes, also before the modal has
mounted (a fast API, a busy wizard), and a failed or unanswered call says so in the modal with
how to ask again, never "asking the API…" for ever. A stub session answers in the order each
test needs; the real call runs against the sandbox in tests/cloud/test_monitor_live.py."""

from __future__ import annotations

import asyncio
from typing import Any

from textual.widgets import Static

from rltui.cloud.errors import CloudError
from rltui.widgets import poddetail
from rltui.widgets.poddetail import PodDescribeView
from rltui.widgets.pods import PodsTable
from tests.tui import samples_monitor as S
from tests.tui.test_monitor import open_monitor, publish_all, settle


class StubSession:
    """describe_pod answers at once (no await: before the modal can mount), fails, or never."""

    def __init__(self, answer: str = "at once") -> None:
        self.answer = answer
        self.mounted_when_answered: list[bool] = []
        self.app: Any = None

    async def describe_pod(self, name: str) -> tuple[dict, list[dict]]:
        if self.answer == "never":
            await asyncio.Event().wait()
        if self.answer == "error":
            raise CloudError("pods \"x\" is forbidden: RBAC", transient=False, code="Forbidden")
        self.mounted_when_answered.append(self.app.screen.is_mounted)
        return S.worker(3), [e for e in S.kube_events() if e["involvedObject"]["name"] == S.PREEMPTED]

    async def close(self) -> None:
        pass


def describe_text(view: PodDescribeView) -> str:
    return str(view.query_one("#pod-describe", Static).render())


async def press_d(app: Any, pilot: Any, session: StubSession) -> PodDescribeView:
    screen = await open_monitor(app, pilot)
    publish_all(app)
    await settle(pilot)
    session.app = app
    app.session = session  # after start-up: the stub has nothing for the app's boot to ask
    screen.query_one(PodsTable).focus()
    await pilot.press("d")
    view = app.screen
    assert isinstance(view, PodDescribeView)
    return view


async def test_an_answer_that_comes_before_the_modal_mounted_is_shown(wizard_app):
    app = wizard_app(S.HEADER)
    session = StubSession()
    async with app.run_test(size=(120, 40)) as pilot:
        view = await press_d(app, pilot, session)
        await settle(pilot)
        assert session.mounted_when_answered == [False]  # the order this test is about
        text = describe_text(view)
        assert "asking the API" not in text
        assert f"Node:         {S.node(3)}" in text and "NodeShutdown" in text


async def test_show_before_the_push_is_drawn_once_mounted(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_monitor(app, pilot)
        view = PodDescribeView(S.PREEMPTED, now=lambda: S.NOW)
        view.show(S.worker(3), [])
        await app.push_screen(view)
        await pilot.pause()
        assert "Restarts:" in describe_text(view)


async def test_an_api_that_does_not_answer_is_given_up_with_how_to_ask_again(wizard_app, monkeypatch):
    monkeypatch.setattr(poddetail, "ANSWER_WITHIN_S", 0.3, raising=False)
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await press_d(app, pilot, StubSession("never"))
        await pilot.pause(0.6)
        text = describe_text(view)
        assert "no answer from the API within 0.3 s" in text
        assert "Escape, then d: ask again" in text
        # The call is not left waiting in the worker either.
        assert not [w for w in app.workers if w.group == "describe" and w.is_running]


async def test_an_api_error_shows_in_the_modal_with_how_to_ask_again(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(120, 40)) as pilot:
        view = await press_d(app, pilot, StubSession("error"))
        await settle(pilot)
        text = describe_text(view)
        assert "is forbidden: RBAC" in text and "Escape, then d: ask again" in text
