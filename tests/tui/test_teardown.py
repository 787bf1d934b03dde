"""Teardown: what exists (whose, leaks), the typed confirmation gating the delete, progress
per deletion, and the leak scan's final word."""

from __future__ import annotations

import pytest
from textual.widgets import Button, Input, Log, Static

from rltui.plan.runner import RunResult
from rltui.plan.step import StepState as S
from rltui.seam import Notice
from rltui.session import ConfigState
from rltui.widgets.inventory import InventoryView
from rltui.widgets.steps import StepsView
from tests.tui.conftest import SIZE
from tests.tui.samples_teardown import (C, T, event, events_done, events_mid, inventory_after,
                                        inventory_after_left, inventory_before,
                                        inventory_deleting, result_ok)

SMALL = (80, 24)
SIZES = pytest.mark.parametrize("size", [SMALL, SIZE], ids=["80x24", "120x40"])


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

@SIZES
def test_teardown_inventory(snap_compare, wizard_app, frozen_clock, size):
    app = wizard_app()

    async def run_before(pilot):
        await _open(app, pilot, inventory_before())

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_teardown_confirmed(snap_compare, wizard_app, frozen_clock):
    app = wizard_app()

    async def run_before(pilot):
        await _open(app, pilot, inventory_before())
        await pilot.press(*C)
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


@SIZES
def test_teardown_deleting(snap_compare, wizard_app, frozen_clock, size):
    """Mid-teardown, the inventory asked again: Lustre DELETING, the Kubernetes objects gone."""
    app = wizard_app()

    async def run_before(pilot):
        await _open(app, pilot, inventory_before())
        for ev in events_mid():
            app.bus.teardown_event.publish(ev)
        app.bus.inventory.publish(inventory_deleting())
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@SIZES
def test_teardown_leak_scan_clean(snap_compare, wizard_app, frozen_clock, size):
    app = wizard_app()

    async def run_before(pilot):
        await _open(app, pilot, inventory_before())
        await _finish(app, pilot, events_done(), result_ok(), inventory_after())

    assert snap_compare(app, terminal_size=size, run_before=run_before)


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


async def test_ctrl_u_asks_the_cloud_again_and_ctrl_r_does_not(wizard_app, frozen_clock):
    """The key map: ctrl+u asks again (as on Start and Metrics); ctrl+r is Provision's run."""
    app = wizard_app()
    calls = _record(app, "refresh_inventory")
    async with app.run_test(size=SIZE) as pilot:
        await _open(app, pilot, inventory_before())
        await pilot.press("ctrl+r")
        assert calls == []
        await pilot.press("ctrl+u")
        await pilot.click("#refresh")
        assert len(calls) == 2


@pytest.mark.parametrize("width", [80, 120])
async def test_names_are_whole_at_80_and_120_columns(wizard_app, frozen_clock, width):
    """The name column comes first: the cluster name (what the user types) and every other
    name stay whole; kinds and owners shorten at 80 columns instead."""
    app = wizard_app()
    async with app.run_test(size=(width, 24)) as pilot:
        screen = await _open(app, pilot, inventory_before())
        table = screen.query_one(InventoryView)
        assert table.size.width <= width - 2
        rows = table.render().plain.splitlines()
        for r in inventory_before():
            if r.present:
                assert any(r.name in row for row in rows), (r.name, rows)
        assert all(len(row) <= table.size.width for row in rows)
        leak = next(row for row in rows if "rl-old-lustre" in row)
        foreign = next(row for row in rows if "precious-data " in row)
        assert "LEAK" in leak and "not" in foreign   # whose, shortened or not
        title, lines = table.pane_text()
        assert any("LEAK: not in env.sh's plan" in line for line in lines)   # full words there


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
        assert "deleted  0:48 / 1:00" in next(r for r in rows if f"RayCluster {C}" in r)
        lustre = rows.index(next(r for r in rows if T["lustre_instance"] in r))
        assert "deleting" in rows[lustre] and "43% 2:10 / 5:00" in rows[lustre]
        assert "└ state DELETING" in rows[lustre + 1]      # what the API says meanwhile
        assert "waits: Lustre instance" in next(r for r in rows if T["peering"] in r)
        assert "kept: they go with the GKE cluster" in next(r for r in rows if "Addons" in r)
        log = screen.query_one("#teardown-log", Log)
        assert log.display and "stopping job raysubmit_3F7a1 (RUNNING)" in log.lines
        assert "deleting" in _text(screen, "#run-summary")
        assert screen.query_one(InventoryView).display       # kept current by the poll
        assert not screen.query_one("#confirm-section").display   # nothing to type meanwhile
        # the same step's later event replaces its row
        app.bus.teardown_event.publish(event("peering", T["peering"], S.DESTROYED, 58.0, 60.0,
                                             "deleted"))
        await pilot.pause()
        rows = screen.query_one("#deletions", StepsView).render().plain.splitlines()
        peering = [r for r in rows if T["peering"] in r]
        assert len(peering) == 1 and "deleted  0:58 / 1:00" in peering[0]


async def test_deletion_rows_are_named_for_what_is_deleted_and_never_cut(wizard_app,
                                                                         frozen_clock):
    """80 columns: every title whole (what does not fit beside it goes below), and the rows
    say what happened: deleted, deleted by xpk cluster delete, kept and why."""
    app = wizard_app()
    async with app.run_test(size=SMALL) as pilot:
        screen = await _open(app, pilot, inventory_before())
        await _finish(app, pilot, events_done(), result_ok(), inventory_after())
        view = screen.query_one("#deletions", StepsView)
        text = view.render().plain
        rows = text.splitlines()
        assert all(len(r) <= view.size.width for r in rows)
        for title in T.values():
            assert title in text, (title, rows)
        for word in ("created", "create deleted", "ready deleted", "Network ready"):
            assert word not in text
        gke = rows.index(next(r for r in rows if T["xpk_cluster"] in r))
        assert "deleted  14:31 / 15:00" in rows[gke] + rows[gke + 1]
        net = rows.index(next(r for r in rows if T["network_ready"] in r))
        assert "deleted by xpk cluster delete" in rows[net] + rows[net + 1]
        assert "kept: other things in the project may use them" in text


async def test_the_inventory_is_asked_again_while_deleting_never_twice_at_once(
        wizard_app, frozen_clock, monkeypatch):
    """Rows follow the cloud during a teardown (Lustre ACTIVE -> DELETING -> gone): the screen
    asks every POLL_S, skips a tick while the last ask runs, and stops when the run ends."""
    import asyncio

    from rltui.screens.teardown import TeardownScreen

    monkeypatch.setattr(TeardownScreen, "POLL_S", 0.05)
    app = wizard_app()
    _record(app, "start_teardown")
    answers = [inventory_deleting(), inventory_after()]
    release = asyncio.Event()
    asked: list[int] = []

    def refresh_inventory() -> None:   # a slow cloud: the first ask answers when released
        async def ask() -> None:
            asked.append(len(asked))
            if len(asked) == 1:
                await release.wait()
            if answers:
                app.bus.inventory.publish(answers.pop(0))
        app.run_worker(ask(), group="inventory")

    app.refresh_inventory = refresh_inventory
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, inventory_before())
        screen.query_one("#confirm", Input).value = C
        await pilot.pause()
        await pilot.press("ctrl+d")
        await pilot.pause(0.4)
        assert asked == [0]                  # the first ask still runs: no second one
        release.set()
        await pilot.pause(0.3)
        assert len(asked) >= 2
        table = screen.query_one(InventoryView).render().plain
        assert "nothing of this plan exists" in table or "deleting" in table
        app.bus.run_result.publish(result_ok())
        await pilot.pause(0.1)
        n = len(asked)
        await pilot.pause(0.3)
        assert len(asked) == n               # done: no more polling


async def test_lustre_row_moves_from_active_to_deleting_to_gone(wizard_app, frozen_clock):
    app = wizard_app()
    _record(app, "start_teardown")
    async with app.run_test(size=SMALL) as pilot:
        screen = await _open(app, pilot, inventory_before())
        table = screen.query_one(InventoryView)
        screen.query_one("#confirm", Input).value = C
        await pilot.pause()
        await pilot.press("ctrl+d")
        app.bus.inventory.publish(inventory_deleting())
        await pilot.pause()
        row = next(r for r in table.render().plain.splitlines() if "rl-demo-gpu-lustre" in r)
        assert "deleting" in row
        assert "asked again every" in _text(screen, "#inventory-summary")
        app.bus.inventory.publish(inventory_after())
        await pilot.pause()
        assert "rl-demo-gpu-lustre" not in table.render().plain


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
        app.bus.notice.publish(Notice("error", "teardown", "could not reach the Lustre API"))
        await pilot.pause()
        assert "could not reach the Lustre API" in _text(screen, "#run-summary")
        assert not screen.query_one("#confirm", Input).disabled


async def test_the_log_stays_bounded_and_keeps_the_newest(wizard_app, frozen_clock):
    from rltui.screens.teardown import LOG_KEEP, LOG_MAX

    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, inventory_before())
        for i in range(LOG_MAX + 50):
            app.bus.teardown_event.publish(event("xpk_cluster", T["xpk_cluster"],
                                                 S.DESTROYING, 10.0, 900.0, "deleting",
                                                 kind="line", line=f"[XPK] line {i}"))
        await pilot.pause(0.4)
        lines = screen.query_one("#teardown-log", Log).lines
        assert LOG_KEEP <= len(lines) <= LOG_MAX
        assert lines[-1] == f"[GKE cluster {C}] [XPK] line {LOG_MAX + 49}"


async def test_ctrl_o_opens_the_whole_teardown_with_every_word(wizard_app, frozen_clock):
    """At 80 columns a wait line is cut; the full view (ctrl+o) holds each row whole, the log
    and the inventory."""
    from rltui.widgets.fullview import FullView

    app = wizard_app()
    async with app.run_test(size=SMALL) as pilot:
        screen = await _open(app, pilot, inventory_before())
        for ev in events_mid():
            app.bus.teardown_event.publish(ev)
        await pilot.pause(0.3)
        title, lines = screen.pane_text()
        text = "\n".join(lines)
        assert f"{T['xpk_cluster']}: waiting (waits: {T['ip_range']}, {T['peering']})" in text
        assert "stopping job raysubmit_3F7a1 (RUNNING)" in text
        assert "LEAK: not in env.sh's plan" in text
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert isinstance(app.screen, FullView)


async def test_an_export_address_is_passed_on_and_a_bad_one_starts_nothing(wizard_app, frozen_clock):
    """The offer to keep the checkpoints: a gs:// folder typed beside the confirmation goes to
    the teardown (the export runs before the Lustre delete); a bad one is said and starts nothing."""
    app = wizard_app()
    calls = _record(app, "start_teardown")
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, inventory_before())
        export = screen.query_one("#export-to", Input)
        export.value = "bars-bucket/run1"
        await pilot.press(*C, "ctrl+d")
        await pilot.pause()
        assert calls == [] and screen.focused is export and screen.phase == "idle"
        export.value = "gs://bars-bucket/run1"
        await pilot.press("ctrl+d")
        assert calls == [((), {"export_to": "gs://bars-bucket/run1/"})]
