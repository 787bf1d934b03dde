"""The chrome on every screen: where am I, what exists, is the job alive; and the page bar."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual import events
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from ..seam import JobStatusUpdate


@dataclass(frozen=True)
class CostInfo:
    """The cost meter's estimate (rltui/cost.py Estimate), as of `at` (time.time())."""
    per_hour: float                # of what exists now
    since: float                   # what it had cost since creation, at `at`
    at: float
    plan_per_hour: float           # of the whole plan while it runs
    currency: str = "USD"
    unpriced: tuple[str, ...] = ()       # lines that exist and have no price: left out, named
    plan_unpriced: tuple[str, ...] = ()  # the plan's lines without a price

    @classmethod
    def of(cls, est: Any) -> CostInfo | None:
        """From an Estimate (None: no prices, nothing shown)."""
        if est is None:
            return None
        return cls(est.per_hour, est.since_created, time.time(), est.plan_per_hour, est.currency,
                   tuple(est.unpriced), tuple(est.plan_unpriced))

    def total(self, now: float | None = None) -> float:
        """The running total: since creation, up to `now`."""
        now = time.time() if now is None else now
        return self.since + self.per_hour * max(0.0, now - self.at) / 3600.0


def money(amount: float, currency: str = "USD") -> str:
    """rltui/cost.py fmt_money (imported when there is a cost to show: it imports pydantic)."""
    from ..cost import fmt_money

    return fmt_money(amount, currency)


def _estimate(unpriced: tuple[str, ...]) -> str:
    """"(estimate)", or "(estimate; no price for: A; B)" naming what the figure leaves out."""
    if not unpriced:
        return "(estimate)"
    return f"(estimate; no price for: {'; '.join(unpriced)})"


def plan_cost_text(cost: CostInfo | None) -> str:
    """Start's line before `up`: "about $324/h while it runs (estimate)"; "" while unknown.
    A line of the plan without a price is named ("... (estimate; no price for: Lustre ...)")."""
    if cost is None or (cost.plan_per_hour <= 0 and not cost.plan_unpriced):
        return ""
    return f"about {money(cost.plan_per_hour, cost.currency)}/h while it runs {_estimate(cost.plan_unpriced)}"


def stops_text(cost: CostInfo | None) -> str:
    """Teardown's: "deleting stops about $324/h (estimate)"; "" when nothing priced exists. What
    exists without a price is named ("... (estimate; no price for: ...)")."""
    if cost is None or (cost.per_hour <= 0 and not cost.unpriced):
        return ""
    return f"deleting stops about {money(cost.per_hour, cost.currency)}/h {_estimate(cost.unpriced)}"


@dataclass(frozen=True)
class HeaderInfo:
    """What the header shows; published by the app on its `header` signal."""
    mode: str = "SANDBOX"          # "SANDBOX" or "Google Cloud"
    project: str = ""
    cluster: str = ""
    job: str = ""                  # e.g. "RUNNING 7/20"
    clock: str | None = None       # fixed text in snapshots; None: the wall clock
    cost: CostInfo | None = None   # the cost meter; shown while anything priced exists
    now: float | None = None       # fixed time for the running total in tests; None: the wall clock


class JobHeadline:
    """The header's `job` ("RUNNING 7/20"), told what the screens are told: the app's
    `job_status` topic (status, or a reset) and its `step_records` (the newest step). One
    source, so the newest answer wins on the header and on every screen alike."""

    def __init__(self, show: Callable[[str], Any]) -> None:
        self.show = show
        self.state: str | None = None          # None: no status yet (the header keeps its own)
        self.step: tuple[int, int] | None = None
        self.shown: str | None = None

    def status(self, payload: JobStatusUpdate) -> None:
        if payload.reset:   # a new job, or none: the old one's step goes
            self.step = None
        self.state = payload.status or ("" if payload.reset else self.state)
        self._show()

    def records(self, records: list[Any]) -> None:
        if records:
            self.step = (records[-1].step, records[-1].total_steps)
            self._show()

    def _show(self) -> None:
        if self.state is None:
            return
        job = f"{self.state} {self.step[0]}/{self.step[1]}" if self.state and self.step \
            else self.state
        if job != self.shown:
            self.shown = job
            self.show(job)


class WizardHeader(Widget):
    """` rltui  SANDBOX  project P  cluster C  job RUNNING 7/20  cost $1,234 est ($324/h)  12:04 `"""

    info: reactive[HeaderInfo] = reactive(HeaderInfo)  # one row (chrome.tcss): a repaint, no layout

    def on_mount(self) -> None:
        # The clock moves on its own, not only when something else redraws the header.
        self._shown_minute = time.strftime("%H:%M")
        self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        # It shows minutes: repaint when the minute changes, not every second.
        shown = time.strftime("%H:%M")
        if self.info.clock is None and shown != self._shown_minute:
            self._shown_minute = shown
            self.refresh()

    # What gives way, in order: the labels, the project, the app's own name (the badge says
    # where it points), the count of unpriced lines ("+?" stays), and last the rate.
    FALLBACKS = ((True, True, True, "full"), (False, True, True, "full"),
                 (False, False, True, "full"), (False, False, False, "full"),
                 (False, False, False, "short"), (False, False, False, ""))

    def render(self) -> Text:
        """The most that fits (FALLBACKS), so the job, the cluster, the running total ("est":
        an estimate) and its rate per hour stay whole at 80 columns."""
        i = self.info
        clock = i.clock if i.clock is not None else time.strftime("%H:%M")
        width = self.size.width or 80
        for labels, project, name, rate in self.FALLBACKS:
            text = self._text(labels, project, rate, name)
            if text.cell_len + len(clock) + 2 <= width:
                break
        text.truncate(max(1, width - len(clock) - 2), overflow="ellipsis")
        pad = max(1, width - text.cell_len - len(clock) - 1)
        return text.append(" " * pad).append(clock + " ")

    def _text(self, labels: bool, project: bool, rate: str = "full", name: bool = True) -> Text:
        i = self.info
        text = Text(" rltui " if name else " ", style="bold")
        badge = "badge-sandbox" if i.mode == "SANDBOX" else "badge-real"
        text.append(f" {i.mode} ", style=self.get_component_rich_style(badge))
        parts = [("project", i.project if project else ""), ("cluster", i.cluster),
                 ("job", i.job), ("cost", self._cost(rate))]
        for label, value in parts:
            if value:
                text.append(f"  {label} " if labels else "  ", style="dim")
                text.append(value, style="bold")
        return text

    def _cost(self, rate: str) -> str:
        """"$1,234 est ($324/h)"; with a line that exists and has no price, "+?" after the total
        and (`rate` "full") "n unpriced" after the rate (Start and Teardown name those lines)."""
        c = self.info.cost
        if c is None or (c.per_hour <= 0 and not c.unpriced):
            return ""
        more = "+?" if c.unpriced else ""
        total = f"{money(c.total(self.info.now), c.currency)}{more} est"
        if not rate:
            return total
        unpriced = f", {len(c.unpriced)} unpriced" if c.unpriced and rate == "full" else ""
        return f"{total} ({money(c.per_hour, c.currency)}/h{unpriced})"

    COMPONENT_CLASSES: ClassVar[set[str]] = {"badge-sandbox", "badge-real"}


class PageBar(Widget):
    """The wizard's pages on one line; also the navigation (click, or the keys in the footer).
    One widget, not one per page: every screen builds it, the first frame among them."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"page-bar--page", "page-bar--hover", "page-bar--current"}

    class Selected(Message):
        def __init__(self, mode: str) -> None:
            super().__init__()
            self.mode = mode

    hover: reactive[str | None] = reactive(None)

    def __init__(self, pages: list[tuple[str, str]], current: str) -> None:
        super().__init__(id="page-bar")
        self.pages, self.current = pages, current

    def spans(self) -> list[tuple[int, int, str]]:
        """[start, end) columns of each page's label, and its mode."""
        out, x = [], 0
        for mode, title in self.pages:
            out.append((x, x + len(title) + 2, mode))
            x += len(title) + 3    # " title " and one column between
        return out

    def render(self) -> Text:
        text = Text(no_wrap=True, end="")
        for mode, title in self.pages:
            role = "current" if mode == self.current else "hover" if mode == self.hover else "page"
            text.append(f" {title} ", style=self.get_component_rich_style(f"page-bar--{role}"))
            text.append(" ")
        return text

    def _mode_at(self, x: int) -> str | None:
        return next((mode for start, end, mode in self.spans() if start <= x < end), None)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        self.hover = self._mode_at(event.x)

    def on_leave(self) -> None:
        self.hover = None

    def on_click(self, event: events.Click) -> None:
        mode = self._mode_at(event.x)
        if mode is not None:
            self.post_message(PageBar.Selected(mode))
