"""The checkpoints the job saved, from the log parser: step, seconds per save, path."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from ..joblog import CheckpointEvent


def shorten_path(path: str, width: int) -> str:
    """Keep the end of a path (the step_N directory and its parent), cut on a '/'."""
    if len(path) <= width:
        return path
    keep = path[-(width - 1):]
    cut = keep.find("/")
    return "…" + (keep[cut:] if 0 <= cut < len(keep) - 1 else keep)


class CheckpointsList(Widget):
    """Newest first; a step saved again (after a resume) replaces its row."""

    COMPONENT_CLASSES = {"checkpoints--header", "checkpoints--empty"}
    DEFAULT_CSS = """
    CheckpointsList { height: auto; }
    CheckpointsList > .checkpoints--header { color: $text-muted; text-style: bold; }
    CheckpointsList > .checkpoints--empty { color: $text-muted; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._saved: dict[int, CheckpointEvent] = {}

    def add(self, event: CheckpointEvent) -> None:
        self._saved[event.step] = event
        self.refresh(layout=True)

    @property
    def checkpoints(self) -> list[CheckpointEvent]:
        return [self._saved[s] for s in sorted(self._saved, reverse=True)]

    def get_content_height(self, container, viewport, width: int) -> int:
        return 1 + max(1, len(self._saved))

    def render(self) -> Text:
        text = Text("STEP   SECONDS  PATH", style=self.get_component_rich_style("checkpoints--header"))
        saved = self.checkpoints
        if not saved:
            return text.append("\nnone saved yet", style=self.get_component_rich_style("checkpoints--empty"))
        room = max(10, self.size.width - 17)
        for ckpt in saved:
            path = shorten_path(ckpt.path, room) if ckpt.path else "(directory not known yet)"
            text.append(f"\n{ckpt.step:<6} {ckpt.seconds:>7.1f}  {path}")
        return text
