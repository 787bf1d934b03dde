"""The Job screen's submit when the checkpoint folder already holds checkpoints on the Lustre
volume: a prompt (resume from step N, or a new folder; Escape submits nothing), and each answer
submits as asked. The real app's submit path, with a session that answers as the engine does
(plan/jobs.py FolderChoice for a plain submit into a folder with checkpoints)."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Button, Static

from rltui.app import RLTuiApp
from rltui.plan.jobs import FolderChoice
from rltui.screens.checkpoint_prompt import CheckpointPrompt
from rltui.screens.job import JobScreen
from tests.tui import samples_job as S
from tests.tui.conftest import NARROW, SIZES

BASE = "/lustre/nemo_rl_qwen_72b_ds_cp/nemo-rl-grpo-test1"


class VolumeSession:
    """What the app asks of a Session on this path; `found` is what the volume holds."""

    downloads_models = False  # the sandbox's: no HF_TOKEN needed to submit

    def __init__(self, found: FolderChoice) -> None:
        self.found = found
        self.submits: list[tuple[bool, bool]] = []
        self.endpoints = type("E", (), {"time_scale": 1.0})()

    async def submit(self, resume: bool, new_folder: bool = False) -> str:
        self.submits.append((resume, new_folder))
        if not (resume or new_folder):
            raise self.found
        return f"rltui-job-{len(self.submits)}"

    def last_job_id(self) -> str:
        return f"rltui-job-{len(self.submits)}"

    def last_job_supervised(self) -> bool:
        return False

    async def follow_job(self, on_update: Any, job_id: str | None = None) -> tuple[str, None]:
        return "SUCCEEDED", None

    def background(self) -> None:
        return None

    async def close(self) -> None:
        pass


async def job_screen(app: RLTuiApp, pilot: Any, found: FolderChoice) -> VolumeSession:
    await app.switch_mode("job")
    await pilot.pause()
    app.bus.config.publish(S.config_state())
    await pilot.pause()
    assert isinstance(app.screen, JobScreen)
    session = VolumeSession(found)
    app.session = session  # after mount: the app boots nothing, as in the other screen tests
    return session


async def until(pilot: Any, check: Any) -> None:
    for _ in range(50):
        if check():
            return
        await pilot.pause(0.02)
    raise AssertionError("not reached")


async def prompted(app: RLTuiApp, pilot: Any) -> CheckpointPrompt:
    await pilot.press("ctrl+g")
    await until(pilot, lambda: isinstance(app.screen, CheckpointPrompt))
    screen = app.screen
    assert isinstance(screen, CheckpointPrompt)
    return screen


@pytest.mark.parametrize(("key", "submitted"), [("r", (True, False)), ("n", (False, True))])
async def test_the_prompt_appears_and_each_answer_submits_as_asked(key, submitted):
    app = RLTuiApp(session=None, header=S.HEADER)
    async with app.run_test(size=NARROW) as pilot:
        session = await job_screen(app, pilot, FolderChoice(BASE, 4, 2, BASE + "-2", 20))
        prompt = await prompted(app, pilot)
        text = str(prompt.query_one("#checkpoint-text", Static).render())
        assert BASE in text and "step_4" in text and BASE + "-2" in text
        assert "Resume from step 4" in str(prompt.query_one("#checkpoint-resume", Button).label)
        await pilot.press(key)
        await until(pilot, lambda: len(session.submits) == 2)
        assert session.submits == [(False, False), submitted]
        assert isinstance(app.screen, JobScreen)
        assert "submitted rltui-job-2" in [n.message for n in app._notifications]


async def test_the_buttons_answer_too_and_escape_submits_nothing():
    app = RLTuiApp(session=None, header=S.HEADER)
    async with app.run_test(size=NARROW) as pilot:
        session = await job_screen(app, pilot, FolderChoice(BASE, 4, 2, BASE + "-2", 20))
        await prompted(app, pilot)
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, JobScreen))
        await pilot.pause()
        assert session.submits == [(False, False)]

        await prompted(app, pilot)
        await pilot.click("#checkpoint-new")
        await until(pilot, lambda: len(session.submits) == 3)
        assert session.submits[-1] == (False, True)


async def test_a_finished_run_cannot_be_resumed_from_the_prompt():
    """step_20 with MAX_STEPS 20: resuming would train nothing, so only a new folder is offered."""
    app = RLTuiApp(session=None, header=S.HEADER)
    async with app.run_test(size=NARROW) as pilot:
        session = await job_screen(app, pilot, FolderChoice(BASE, 20, 2, BASE + "-2", 20))
        prompt = await prompted(app, pilot)
        assert prompt.query_one("#checkpoint-resume", Button).disabled
        assert "MAX_STEPS is 20" in str(prompt.query_one("#checkpoint-text", Static).render())
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, CheckpointPrompt) and session.submits == [(False, False)]
        await pilot.press("enter")  # the focused answer: New folder
        await until(pilot, lambda: len(session.submits) == 2)
        assert session.submits[-1] == (False, True)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_prompt(snap_compare, size):
    app = RLTuiApp(session=None, header=S.HEADER)

    async def run_before(pilot: Any) -> None:
        await job_screen(app, pilot, FolderChoice(BASE, 4, 2, BASE + "-2", 20))
        await prompted(app, pilot)

    assert snap_compare(app, terminal_size=size, run_before=run_before)
