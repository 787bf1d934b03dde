"""Teardown: what exists (whose, leaks), the typed confirmation gating the delete, progress
per deletion, and the leak scan's final word."""

from __future__ import annotations

import pytest
from textual.widgets import Button, Input, Log, Static

from rltui.plan.runner import RunResult
from rltui.plan.step import StepState as S
from rltui.session import ConfigState
from rltui.widgets.inventory import InventoryView
from rltui.widgets.steps import StepsView
from tests.tui.conftest import SIZE
from tests.tui.samples_teardown import (C, event, events_done, events_mid, inventory_after,
                                        inventory_after_left, inventory_before, result_ok)


@pytest.fixture
def frozen_clock(monkeypatch):
    monkeypatch.setattr(StepsView, "TICK_S", 3600.0)


async def _open(app, pilot, inventory=None):
    await app.switch_mode("teardown")
    await pilot.pause()
    app.screen.query_one("#confirm", Input).cursor_blink = False   # steady snapshots
    if inventory is not None:
        app.bus.inventory.publish(inventory)
        await pilot.pause()
    return app.screen


def _text(screen, selector: str) -> str:
    return str(screen.query_one(selector, Static).content)


def _record(app, name: str) -> list:
    calls: list = []
    setattr(app, name, lambda *a, **kw: calls.append((a, kw)))
    return calls


async def _finish(app, pilot, events, result, inventory) -> None:
    for ev in events:
        app.bus.teardown_event.publish(ev)
    app.bus.run_result.publish(result)
    app.bus.inventory.publish(inventory)
    await pilot.pause(0.2)


# --- snapshots -----------------------------------------------------------------------------

def test_teardown_inventory(snap_compare, wizard_app, frozen_clock):
    app = wizard_app()

    async def run_before(pilot):
        await _open(app, pilot, inventory_before())

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_teardown_confirmed(snap_compare, wizard_app, frozen_clock):
    app = wizard_app()

    async def run_before(pilot):
        await _open(app, pilot, inventory_before())
        await pilot.press(*C)
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_teardown_deleting(snap_compare, wizard_app, frozen_clock):
    app = wizard_app()

    async def run_before(pilot):
        await _open(app, pilot, inventory_before())
        for ev in events_mid():
            app.bus.teardown_event.publish(ev)
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_teardown_leak_scan_clean(snap_compare, wizard_app, frozen_clock):
    app = wizard_app()

    async def run_before(pilot):
        await _open(app, pilot, inventory_before())
        await _finish(app, pilot, events_done(), result_ok(), inventory_after())

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


# --- what exists ---------------------------------------------------------------------------

async def test_inventory_says_whose_and_flags_the_leak(wizard_app, frozen_clock):
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)
        assert "asking the cloud" in screen.query_one(InventoryView).render().plain
        app.bus.inventory.publish(inventory_before())
        await pilot.pause()
        rows = screen.query_one(InventoryView).render().plain.splitlines()
        assert "not rltui's (left alone)" in next(r for r in rows if "precious-data " in r)
        assert "LEAK" in next(r for r in rows if "rl-old-lustre" in r)
        assert not any("-job-secrets" in r for r in rows)   # absent: counted, not listed
        assert "1 more in the plan: absent" in rows[-1]
        summary = screen.query_one("#inventory-summary", Static)
        assert "10 of rltui's exist" in _text(screen, "#inventory-summary")
        assert summary.has_class("leak")


async def test_refresh_asks_the_app(wizard_app, frozen_clock):
    app = wizard_app()
    calls = _record(app, "refresh_inventory")
    async with app.run_test(size=SIZE) as pilot:
        await _open(app, pilot, inventory_before())
        await pilot.press("ctrl+r")
        await pilot.click("#refresh")
        assert len(calls) == 2


# --- typed confirmation --------------------------------------------------------------------

async def test_delete_stays_disabled_until_the_exact_cluster_name_is_typed(wizard_app, frozen_clock):
    app = wizard_app()
    calls = _record(app, "start_teardown")
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, inventory_before())
        button = screen.query_one("#delete", Button)
        assert screen.focused is screen.query_one("#confirm", Input)
        assert button.disabled
        await pilot.press(*C[:-1])                 # one character short
        await pilot.press("ctrl+d")
        await pilot.click("#delete")
        await pilot.press(C[-1], "x")              # one too many
        await pilot.press("ctrl+d", "enter")
        assert button.disabled and calls == []
        await pilot.press("backspace")             # now exactly the name
        assert not button.disabled
        await pilot.press("ctrl+d")
        assert calls == [((), {})]
        assert button.disabled                     # deleting: no second start
        assert screen.query_one("#confirm", Input).disabled
        await pilot.press("ctrl+d")
        assert len(calls) == 1


async def test_the_name_to_type_comes_from_env_sh(wizard_app, frozen_clock):
    app = wizard_app()
    calls = _record(app, "start_teardown")
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, inventory_before())
        app.bus.config.publish(ConfigState("env.sh", {"CLUSTER_NAME": "rl-b200",
                                                      "PROJECT_ID": "p-1"}, {}, (), {}))
        await pilot.pause()
        assert "rl-b200" in _text(screen, "#confirm-label")
        screen.query_one("#confirm", Input).value = C   # the header's old name no longer counts
        await pilot.pause()
        assert screen.query_one("#delete", Button).disabled
        screen.query_one("#confirm", Input).value = ""
        await pilot.press(*"rl-b200", "enter")     # enter also starts, once confirmed
        assert calls == [((), {})]


# --- progress and the leak scan ------------------------------------------------------------

async def test_progress_per_deletion_and_plain_lines(wizard_app, frozen_clock):
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, inventory_before())
        for ev in events_mid():
            app.bus.teardown_event.publish(ev)
        await pilot.pause(0.3)
        rows = screen.query_one("#deletions", StepsView).render().plain.splitlines()
        assert "deleted  0:48 / 1:00" in next(r for r in rows if "RayCluster" in r)
        assert "43%   2:10 / 5:00" in next(r for r in rows if r[3:].startswith("Lustre"))
        assert "waits: Lustre instance" in next(r for r in rows if r[3:].startswith("VPC peering"))
        assert "waits: IP range, VPC peering" in next(r for r in rows if "xpk" in r)
        log = screen.query_one("#teardown-log", Log)
        assert log.display and "stopping job raysubmit_3F7a1 (RUNNING)" in log.lines
        assert "deleting" in _text(screen, "#run-summary")
        assert not screen.query_one(InventoryView).display   # stale until asked again
        # the same step's later event replaces its row
        app.bus.teardown_event.publish(event("peering", "VPC peering", S.DESTROYED, 58.0, 60.0,
                                             "deleted"))
        await pilot.pause()
        rows = screen.query_one("#deletions", StepsView).render().plain.splitlines()
        peering = [r for r in rows if r[3:].startswith("VPC peering")]
        assert len(peering) == 1 and "deleted  0:58 / 1:00" in peering[0]


async def test_leak_scan_clean_after_teardown(wizard_app, frozen_clock):
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, inventory_before())
        await _finish(app, pilot, events_done(), result_ok(), inventory_after())
        scan = screen.query_one("#leak-scan", Static)
        assert _text(screen, "#leak-scan") == "leak scan: nothing of rltui's left in team-rl-sandbox-42"
        assert scan.has_class("clean")
        assert _text(screen, "#run-summary") == "teardown finished in 16:51"
        assert screen.query_one(InventoryView).display
        assert "nothing of this plan exists" in screen.query_one(InventoryView).render().plain


async def test_what_is_left_is_named_in_red(wizard_app, frozen_clock):
    failed = RunResult("down", False, {"xpk_cluster": S.FAILED},
                       {"xpk_cluster": "xpk cluster delete exited with 1: quota"}, 900.0)
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, inventory_before())
        await _finish(app, pilot, [], failed, inventory_after_left())
        scan = _text(screen, "#leak-scan")
        assert scan.startswith("left behind (still billed):")
        assert f"GKE cluster {C} (running)" in scan and "LEAK Lustre instance rl-old-lustre" in scan
        assert screen.query_one("#leak-scan", Static).has_class("dirty")
        assert "FAILED" in _text(screen, "#run-summary")
        assert not screen.query_one("#confirm", Input).disabled   # retry: type the name again


async def test_a_crashed_teardown_worker_stops_showing_deleting(wizard_app, frozen_clock):
    app = wizard_app()
    _record(app, "start_teardown")
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, inventory_before())
        screen.query_one("#confirm", Input).value = C
        await pilot.pause()
        await pilot.press("ctrl+d")
        app.bus.notice.publish(("error", "teardown", "could not reach the Lustre API"))
        await pilot.pause()
        assert "could not reach the Lustre API" in _text(screen, "#run-summary")
        assert not screen.query_one("#confirm", Input).disabled


async def test_the_log_stays_bounded_and_keeps_the_newest(wizard_app, frozen_clock):
    from rltui.screens.teardown import LOG_KEEP, LOG_MAX

    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, inventory_before())
        for i in range(LOG_MAX + 50):
            app.bus.teardown_event.publish(event("xpk_cluster", "xpk cluster create",
                                                 S.DESTROYING, 10.0, 900.0, "deleting",
                                                 kind="line", line=f"[XPK] line {i}"))
        await pilot.pause(0.4)
        lines = screen.query_one("#teardown-log", Log).lines
        assert LOG_KEEP <= len(lines) <= LOG_MAX
        assert lines[-1] == f"[xpk cluster create] [XPK] line {LOG_MAX + 49}"
