"""Watches: the events of one resource type from a resourceVersion on, as the apiserver sends them."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from rltui_sandbox.kube.resources import ResourceType

if TYPE_CHECKING:
    from rltui_sandbox.kube.store import KubeStore


@dataclass(frozen=True)
class WatchEvent:
    rv: int
    type: str
    rtype: ResourceType
    obj: dict
    old: dict | None


class Watcher:
    """Events for one resource type from a resourceVersion on; async-iterate or `await next()`."""

    def __init__(self, store: KubeStore, rtype: ResourceType, namespace: str | None,
                 match: Callable[[dict], bool]) -> None:
        self._store = store
        self.rtype = rtype
        self.namespace = namespace
        self._match = match
        self._queue: asyncio.Queue[tuple[str, dict] | None] = asyncio.Queue()
        self.closed = False

    def _in_scope(self, obj: dict | None) -> bool:
        if obj is None:
            return False
        if self.namespace and obj["metadata"].get("namespace") != self.namespace:
            return False
        return self._match(obj)

    def offer(self, event: WatchEvent) -> None:
        if event.rtype is not self.rtype or self.closed:
            return
        now_in, was_in = self._in_scope(event.obj), self._in_scope(event.old)
        kind = event.type
        if kind == "MODIFIED":
            # An object moving in or out of a selector's scope appears ADDED / DELETED.
            kind = "MODIFIED" if now_in and was_in else "ADDED" if now_in else "DELETED" if was_in else ""
        elif not now_in:
            kind = ""
        if kind:
            self._queue.put_nowait((kind, event.obj))

    def pending(self) -> bool:
        return not self._queue.empty()

    async def next(self, timeout: float | None = None) -> tuple[str, dict] | None:
        """The next (type, object); None on timeout; StopAsyncIteration once closed."""
        if self.closed and self._queue.empty():
            raise StopAsyncIteration
        try:
            if timeout is not None and timeout <= 0:
                item = self._queue.get_nowait()  # wait_for(..., 0) would never take an item
            else:
                item = await asyncio.wait_for(self._queue.get(), timeout)
        except (asyncio.TimeoutError, asyncio.QueueEmpty):
            return None
        if item is None:
            raise StopAsyncIteration
        return item[0], copy.deepcopy(item[1])

    def __aiter__(self) -> Watcher:
        return self

    async def __anext__(self) -> tuple[str, dict]:
        while True:
            item = await self.next()
            if item is not None:
                return item

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._store._watchers.discard(self)
            self._queue.put_nowait(None)

    async def __aenter__(self) -> Watcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
