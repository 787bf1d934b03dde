"""Monitor's pods, k9s-grade: counts against the RayCluster's desired size, the preempted row
kept and marked replaced after the recovery, columns dropped by priority at 80x24 and whole
at 120x40, the pod keys (enter / l logs, d describe, ctrl+d delete with a confirmation), the
palette, the Ray dashboard's address, and the pane protocol's text. The calls behind the keys
run against the sandbox's Kubernetes API in tests/cloud/test_monitor_live.py."""

from __future__ import annotations

from typing import Any


from rltui.plan.pods import KubeEvent
from rltui.screens.monitor import MonitorScreen, RecentEvents
from rltui.widgets.poddetail import ConfirmDeletePod, PodDescribeView, PodLogView
from rltui.widgets.pods import PodsTable
from tests.tui import samples_monitor as S
from tests.tui.test_monitor import open_monitor, publish_all, settle


def state(screen: MonitorScreen) -> str:
    return str(screen.query_one("#pods-state").render())


def shown_phases(table: PodsTable) -> dict[str, str]:
    col = list(table.columns).index("PHASE")
    return {str(key.value): str(table.get_row(key)[col]) for key in table.rows}


async def test_counts_follow_the_rayclusters_desired_size_and_the_preempted_row_is_marked_replaced(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_monitor(app, pilot)
        app.bus.raycluster.publish(S.raycluster())
        publish_all(app)
        await settle(pilot)
        assert state(screen) == "watch · 8/9 running  1 PREEMPTED"  # 1 head + 8 workers wanted
        table = screen.query_one(PodsTable)

        app.bus.pod_event.publish(KubeEvent("ADDED", S.replacement("Pending")))
        await settle(pilot)
        assert state(screen) == "watch · 8/9 running  1 PREEMPTED"  # not running yet
        app.bus.pod_event.publish(KubeEvent("MODIFIED", S.replacement()))
        await settle(pilot)
        assert state(screen) == "watch · 9/9 running · 1 replaced"
        assert shown_phases(table)[S.PREEMPTED] == "replaced"
        assert list(table.rows)[-1].value == S.PREEMPTED  # kept, below the live pods

        # Scaled down to 7 workers: 8 run, the cluster is whole, the count says so.
        app.bus.raycluster.publish(S.raycluster(replicas=7))
        await settle(pilot)
        assert state(screen).startswith("watch · 9/8 running")

        # Without a RayCluster (deleted) the live pods are the measure: no stale 10th pod.
        app.bus.raycluster.publish({})
        await settle(pilot)
        assert state(screen) == "watch · 9/9 running · 1 replaced"


async def test_only_the_newest_replaced_rows_are_kept(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_monitor(app, pilot)
        app.bus.raycluster.publish(S.raycluster(replicas=1))
        app.bus.pod_event.publish(KubeEvent("ADDED", S.head()))
        for i in range(8):  # the one worker preempted 8 times, replaced each time
            name = f"{S.CLUSTER}-gpu-worker-group-worker-r{i}"
            app.bus.pod_event.publish(KubeEvent("ADDED", S.pod(name, "worker", S.node(1), age_s=100 - i)))
            app.bus.pod_event.publish(KubeEvent("DELETED", S.pod(name, "worker", S.node(1))))
        last = S.pod(f"{S.CLUSTER}-gpu-worker-group-worker-live", "worker", S.node(2), age_s=5)
        app.bus.pod_event.publish(KubeEvent("ADDED", last))
        await settle(pilot)
        phases = shown_phases(screen.query_one(PodsTable))
        assert list(phases.values()).count("replaced") == 5
        assert f"{S.CLUSTER}-gpu-worker-group-worker-r7" in phases  # the newest stay
        assert f"{S.CLUSTER}-gpu-worker-group-worker-r0" not in phases
        assert state(screen) == "watch · 2/2 running · 5 replaced"


async def test_columns_drop_by_priority_at_80x24_and_show_whole_nodes_at_120x40(wizard_app):
    for size, columns in (((80, 24), ["NAME", "NODE", "PHASE", "R", "AGE"]),
                          ((120, 40), ["NAME", "TYPE", "NODE", "PHASE", "GPU", "CPU", "R", "AGE"])):
        app = wizard_app(S.HEADER)
        async with app.run_test(size=size) as pilot:
            screen = await open_monitor(app, pilot)
            app.bus.raycluster.publish(S.raycluster())
            publish_all(app)
            await settle(pilot)
            table = screen.query_one(PodsTable)
            assert [str(c.label) for c in table.columns.values()] == columns, size
            row = [str(c) for c in table.get_row(S.PREEMPTED)]
            node = row[columns.index("NODE")]
            assert node == ("d3k3" if size == (80, 24) else S.node(3)), size
            if size == (120, 40):
                assert row[columns.index("GPU")] == "8" and row[columns.index("CPU")] == "100"
            left, log = screen.query_one("#pods-pane"), screen.query_one("#log-pane")
            assert left.size.width >= 30 and log.size.width >= 30, size
            assert log.size.height >= 10, size
            assert table.region.right <= app.size.width and all(
                c.width <= table.size.width for c in table.columns.values())


async def test_pod_keys_open_logs_describe_and_a_delete_confirmation_naming_the_pod(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_monitor(app, pilot)
        publish_all(app)
        await settle(pilot)
        table = screen.query_one(PodsTable)
        table.focus()
        table.move_cursor(row=list(table.rows).index(next(k for k in table.rows if k.value == S.PREEMPTED)))
        await pilot.pause()
        for key in ("enter", "l"):
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, PodLogView) and app.screen.pod == S.PREEMPTED, key
            await pilot.press("escape")
            await pilot.pause()
            assert app.screen is screen

        screen.query_one("#job-log").focus()  # where Monitor opens: enter still means the pod's log
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, PodLogView) and app.screen.pod == S.PREEMPTED
        await pilot.press("escape")
        await pilot.pause()
        table.focus()

        await pilot.press("d")
        await pilot.pause()
        described = app.screen
        assert isinstance(described, PodDescribeView) and described.pod == S.PREEMPTED
        described.show(S.worker(3), [e for e in S.kube_events()
                                     if e["involvedObject"]["name"] == S.PREEMPTED])
        await pilot.pause()
        text = "\n".join(described.lines)
        assert f"Node:         {S.node(3)}" in text  # the whole node name
        assert "nvidia.com/gpu=8" in text and "Restarts:" in text
        assert "NodeShutdown" in text and "imminent node shutdown" in text
        await pilot.press("escape")
        await pilot.pause()

        await pilot.press("ctrl+d")
        await pilot.pause()
        confirm = app.screen
        assert isinstance(confirm, ConfirmDeletePod) and S.PREEMPTED in confirm.text().plain
        assert "replacement" in confirm.text().plain
        await pilot.press("escape")  # kept: nothing deleted, back on Monitor
        await pilot.pause()
        assert app.screen is screen and not [w for w in app.workers if w.group == "delete pod"]


async def test_the_palette_has_the_pod_actions(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_monitor(app, pilot)
        publish_all(app)
        await settle(pilot)
        titles = [c.title for c in app.get_system_commands(screen)]
        for title in ("Monitor: logs of the selected pod", "Monitor: describe the selected pod",
                      "Monitor: delete the selected pod"):
            assert title in titles
        await pilot.press("ctrl+p", *"describe", "enter")
        await pilot.pause()
        assert isinstance(app.screen, PodDescribeView)
        assert app.screen.pod == screen.query_one(PodsTable).selected().name


async def test_the_dashboard_url_shows_once_published(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_monitor(app, pilot)
        assert "once the RayCluster is up" in str(screen.query_one("#dashboard").render())
        app.bus.raycluster.publish(S.raycluster())
        app.bus.dashboard.publish(S.DASHBOARD)
        await pilot.pause()
        assert str(screen.query_one("#dashboard").render()) == S.DASHBOARD
        app.bus.raycluster.publish({})  # torn down: the address leads nowhere now
        await pilot.pause()
        assert "once the RayCluster is up" in str(screen.query_one("#dashboard").render())


async def test_pane_text_of_the_pods_and_the_events_is_whole(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_monitor(app, pilot)
        assert screen.query_one(PodsTable).pane_text() is None
        assert screen.query_one(RecentEvents).pane_text() is None
        app.bus.raycluster.publish(S.raycluster())
        publish_all(app)
        await settle(pilot)
        title, lines = screen.query_one(PodsTable).pane_text() or ("", [])
        assert title == "Pods" and lines[0] == "8/9 running · 1 PREEMPTED"
        row = next(line for line in lines if line.startswith(S.PREEMPTED))
        assert S.node(3) in row and "PREEMPTED" in row  # names and nodes whole, at 80 columns
        title, lines = screen.query_one(RecentEvents).pane_text() or ("", [])
        assert title == "Recent events"
        assert any(S.REPLACEMENT in line for line in lines)
        assert any("0/8 nodes are available: 1 node(s) were unschedulable, 7 Insufficient nvidia.com/gpu."
                   in line for line in lines)


async def test_a_pod_log_view_wraps_batches_and_says_when_the_container_ended():
    """The modal alone, fed as the app's worker feeds it."""
    from textual.app import App

    class Host(App):
        pass

    app = Host()
    async with app.run_test(size=(60, 20)) as pilot:
        closed: list[bool] = []
        view = PodLogView("ray-a4-worker-x", on_close=lambda: closed.append(True))
        await app.push_screen(view)
        long = "x" * 150
        view.write("first line\n" + long + "\npart")
        view.write("ial\n")
        await pilot.pause(0.2)
        assert view.lines == ["first line", long, "partial"]
        assert "following" in str(view.query_one("#pod-log-state").render())
        log: Any = view.query_one("#pod-log")
        assert len(log.lines) >= 4  # the long line wrapped
        view.end()
        await pilot.pause(0.2)
        assert "the container ended" in str(view.query_one("#pod-log-state").render())
        assert view.pane_text() == ("logs ray-a4-worker-x", ["first line", long, "partial"])
        await pilot.press("escape")
        await pilot.pause()
        assert closed == [True]


async def test_the_layout_follows_a_resize_made_while_another_screen_was_shown(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_monitor(app, pilot)
        body = screen.query_one("#monitor-body")
        assert not body.has_class("-wide")
        await app.switch_mode("job")
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        await app.switch_mode("monitor")
        await pilot.pause()
        assert body.has_class("-wide")
        pods = screen.query_one("#pods-pane")
        assert pods.size.width == 120  # across the screen, over the side pane and the log
        assert screen.query_one("#log-pane").region.y > pods.region.y
