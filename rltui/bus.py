"""The message bus's signals: each remembers what it published, so that a screen built later
(modes are built on first visit) gets it when it subscribes (rltui/app.py Bus)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from textual.signal import Signal

if TYPE_CHECKING:
    from textual.app import App

T = TypeVar("T")


class ReplaySignal(Signal[T], Generic[T]):
    """A signal that remembers: a screen created later (modes are built on first visit)
    receives the last value, or the bounded history of a stream, when it subscribes."""

    def __init__(self, owner: App[Any], name: str, keep: int) -> None:
        super().__init__(owner, name)
        self.history: deque[T] = deque(maxlen=keep)

    @property
    def last(self) -> T | None:
        return self.history[-1] if self.history else None

    def publish(self, data: T) -> None:
        self.history.append(data)
        super().publish(data)

    def subscribe(self, node: Any, callback: Callable[[T], Any], immediate: bool = False) -> None:
        super().subscribe(node, callback, immediate)
        for data in list(self.history):
            callback(data)


class LineReplaySignal(ReplaySignal[list[str]]):
    """A stream of line batches whose history is bounded by lines, not batches: a screen
    built later replays at most `keep` of the newest lines (all the log pane can hold). Two
    thousand batches of a 20k lines/s burst held every line of a million (427 MB, issue 13)."""

    def __init__(self, owner: App[Any], name: str, keep: int) -> None:
        super().__init__(owner, name, keep=keep)
        self.history = deque()
        self.keep_lines = keep
        self.lines = 0

    def publish(self, data: list[str]) -> None:
        if len(data) > self.keep_lines:
            data = data[-self.keep_lines:]
        if not self.history:
            self.lines = 0  # cleared (reset_job): nothing left to count
        self.history.append(data)
        self.lines += len(data)
        while self.lines - len(self.history[0]) >= self.keep_lines:
            self.lines -= len(self.history.popleft())
        Signal.publish(self, data)
