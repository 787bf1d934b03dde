"""Pod logs: what a toy controller appends and `kubectl logs` (with -f) reads back."""

from __future__ import annotations

import asyncio

from rltui_sandbox.kube.disk import Disk

# Like the kubelet's log rotation: only the newest bytes of each container are kept.
MAX_LOG_CHARS = 4 * 1024 * 1024

Key = tuple[str, str, str]


class LogBook:
    def __init__(self, disk: Disk | None) -> None:
        self._disk = disk
        self._text: dict[Key, str] = {}
        # Characters ever written per container, so a follower's offset survives trimming.
        self._written: dict[Key, int] = {}
        self._changed: dict[tuple[str, str], asyncio.Event] = {}
        if disk is not None:
            for ns, pod, container, text in disk.load_logs():
                self._store((ns, pod, container), text)

    def _store(self, key: Key, text: str) -> None:
        combined = self._text.get(key, "") + text
        self._text[key] = combined[-MAX_LOG_CHARS:]
        self._written[key] = self._written.get(key, 0) + len(text)

    def append(self, key: Key, text: str) -> None:
        self._store(key, text)
        if self._disk is not None:
            self._disk.append_log(*key, text)
        self.notify(key[0], key[1])

    def notify(self, namespace: str, pod: str) -> None:
        """Wake followers of this pod (new text, or the pod ended)."""
        event = self._changed.pop((namespace, pod), None)
        if event is not None:
            event.set()

    async def wait(self, namespace: str, pod: str, timeout: float) -> None:
        event = self._changed.setdefault((namespace, pod), asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    def read(self, key: Key, tail_lines: int | None = None) -> str:
        text = self._text.get(key, "")
        if tail_lines is not None:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-tail_lines:]) if tail_lines > 0 else ""
        return text

    def written(self, key: Key) -> int:
        return self._written.get(key, 0)

    def since(self, key: Key, offset: int) -> tuple[str, int]:
        """Text written after `offset` (as far as still kept) and the new offset."""
        total = self._written.get(key, 0)
        text = self._text.get(key, "")
        missing = total - offset
        return (text[-missing:] if missing > 0 else ""), total

    def drop(self, namespace: str, pod: str) -> None:
        for key in [k for k in self._text if k[:2] == (namespace, pod)]:
            del self._text[key]
            self._written.pop(key, None)
        if self._disk is not None:
            self._disk.remove_logs(namespace, pod)
        self.notify(namespace, pod)
