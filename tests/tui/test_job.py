"""Job: the run's parameters, the preview of what `ray job submit` uploads, submit / resume.
Snapshots (80x24 and 120x40) of the codelab's values and of a batch size that does not fit;
pilot tests of live checks (an emptied field named), the preview following the form and given
whole for the full view, Save sending only changes, Submit (ctrl+g) saving first and staying
off while invalid, Resubmit asking to resume, the last job's status and the dashboard URL."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Button, ContentSwitcher, Input, Static, TextArea

from rltui.app import RLTuiApp
from rltui.joblog import TrainingStep
from rltui.screens.job import JobScreen
from rltui.widgets.chrome import HeaderInfo
from tests.tui import samples_job as S
from tests.tui.conftest import SIZE

BAD_BATCH = "PROMPTS_PER_STEP x GENERATIONS_PER_PROMPT = 160 is not a multiple of 256"


class RecordingApp(RLTuiApp):
    """The real app; the actions that need a session are recorded instead."""

    CSS_PATH = RLTuiApp.CSS_PATH  # absolute: a subclass here finds the one stylesheet

    def __init__(self, header: HeaderInfo = S.HEADER, downloads_models: bool | None = None) -> None:
        super().__init__(session=None, header=header)
        self.calls: list[tuple[str, Any]] = []
        self._downloads_models = downloads_models

    @property
    def downloads_models(self) -> bool | None:  # the endpoints' capability, as a Session gives it
        return self._downloads_models

    def save_config(self, values: dict[str, str]) -> None:
        self.calls.append(("save", dict(values)))

    def submit_job(self, resume: bool = False) -> None:  # the real one is a worker
        self.calls.append(("submit", resume))


def without_tokens() -> Any:
    """The sample env.sh with neither HF_TOKEN nor WANDB_API_KEY set."""
    state = S.config_state()
    return type(state)(state.env_path, state.values, state.expressions, state.problems,
                       {"HF_TOKEN": False, "WANDB_API_KEY": False})


async def open_job(app: RLTuiApp, pilot: Any, state: Any = None) -> JobScreen:
    await app.switch_mode("job")
    await pilot.pause()
    app.bus.config.publish(state or S.config_state())
    await pilot.pause()
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, JobScreen)
    return screen


async def set_field(pilot: Any, screen: JobScreen, name: str, value: str) -> None:
    screen.field(name).value = value
    await pilot.pause()
    await pilot.pause()


def message(screen: JobScreen, name: str) -> str:
    return str(screen.field(name).query_one(".field-message", Static).render()).strip()


def preview(screen: JobScreen, name: str) -> str:
    return screen.query_one(f"#text-file-{name.replace('.', '-').lstrip('-')}", TextArea).text


# --- snapshots, at 80x24 (a plain terminal) and 120x40 ---

SIZES = [(80, 24), (120, 40)]

@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_job_codelab_defaults(snap_compare, wizard_app, size):
    app = wizard_app(S.HEADER)

    async def run_before(pilot):
        await open_job(app, pilot)
        app.bus.job_status.publish(S.JOB_STATUS)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_job_batch_size_does_not_fit(snap_compare, wizard_app, size):
    app = wizard_app(S.HEADER)

    async def run_before(pilot):
        await open_job(app, pilot, S.config_state(PROMPTS_PER_STEP="20"))

    assert snap_compare(app, terminal_size=size, run_before=run_before)


# --- pilot ---

async def test_a_batch_size_that_does_not_fit_is_explained_and_blocks_submit():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot)
        submit = screen.query_one("#job-submit", Button)
        assert not submit.disabled and message(screen, "GLOBAL_BATCH_SIZE") == ""
        assert screen.query_one(ContentSwitcher).current == "job-files"

        await pilot.click("#input-PROMPTS_PER_STEP")
        screen.field("PROMPTS_PER_STEP").query_one(Input).value = ""
        await pilot.press("2", "0")
        await pilot.pause()
        assert message(screen, "GLOBAL_BATCH_SIZE") == f"✗ {BAD_BATCH}"
        assert submit.disabled and screen.query_one("#job-resume", Button).disabled
        assert screen.query_one(ContentSwitcher).current == "job-problems"
        assert BAD_BATCH.split(" = ")[0] in str(screen.query_one("#job-problems", Static).render())

        await screen.run_action("submit(False)")  # the palette path: refused, and said why
        await pilot.pause()
        assert app.calls == [] and "Not submitted" in [n.title for n in app._notifications]

        await set_field(pilot, screen, "PROMPTS_PER_STEP", "64")
        assert message(screen, "GLOBAL_BATCH_SIZE") == "" and not submit.disabled
        assert "grpo.num_prompts_per_step=64" in preview(screen, "run_nemo_rl.sh")


async def test_the_preview_follows_the_form():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot)
        script = preview(screen, "run_nemo_rl.sh")
        assert "grpo.max_num_steps=20" in script and "checkpointing.enabled=True" in script
        assert "env.sh" in preview(screen, ".rayignore")
        assert '"HF_HOME": "/lustre/huggingface_cache"' in preview(screen, "ray_runtime_env_nemo.json")
        await set_field(pilot, screen, "MAX_STEPS", "40")
        await set_field(pilot, screen, "WANDB_ENABLED", "True")
        # W&B on without a key: a problem of env.sh's secrets, shown instead of the files
        assert "WANDB_API_KEY" in str(screen.query_one("#job-problems", Static).render())
        await set_field(pilot, screen, "WANDB_ENABLED", "auto")
        script = preview(screen, "run_nemo_rl.sh")
        assert "grpo.max_num_steps=40" in script and "logger.wandb_enabled=False" in script


async def test_save_sends_only_changes_and_submit_saves_first():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot)
        await pilot.press("ctrl+s")
        assert app.calls == []  # nothing changed, nothing written

        await set_field(pilot, screen, "CHECKPOINT_PERIOD", "5")
        await set_field(pilot, screen, "WANDB_ENABLED", "False")
        assert "2 unsaved" in str(screen.query_one("#job-summary", Static).render())
        await pilot.click("#job-submit")
        await pilot.pause()
        assert app.calls == [("save", {"CHECKPOINT_PERIOD": "5", "WANDB_ENABLED": "False"}),
                             ("submit", False)]

        app.calls.clear()
        await pilot.click("#job-resume")
        await pilot.pause()
        assert app.calls == [("submit", True)]  # saved already: resume only


async def test_an_edit_survives_a_new_env_sh_state():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot)
        await set_field(pilot, screen, "MAX_STEPS", "12")
        app.bus.config.publish(S.config_state(DATASET="OpenMathInstruct-2", MAX_STEPS="20"))
        await pilot.pause()
        await pilot.pause()
        assert screen.field("MAX_STEPS").value == "12"            # the user's edit stays
        assert screen.field("DATASET").value == "OpenMathInstruct-2"  # the rest follows env.sh


async def test_google_cloud_needs_hf_token_to_submit():
    app = RecordingApp(HeaderInfo(mode="Google Cloud", project=S.PROJECT, clock="12:04"), downloads_models=True)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot, without_tokens())
        assert screen.query_one("#job-submit", Button).disabled
        assert screen.query_one(ContentSwitcher).current == "job-files"  # the files are fine
        assert "HF_TOKEN: needed to submit" in str(screen.query_one("#job-summary", Static).render())


async def test_the_hf_token_rule_follows_the_endpoints_not_the_header_label():
    """The header says SANDBOX, but these endpoints download the model: the token is needed."""
    app = RecordingApp(HeaderInfo(mode="SANDBOX", project=S.PROJECT, clock="12:04"), downloads_models=True)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot, without_tokens())
        assert screen.query_one("#job-submit", Button).disabled
        assert "HF_TOKEN: needed to submit" in str(screen.query_one("#job-summary", Static).render())


async def test_a_job_screen_opened_late_shows_env_sh_and_the_last_job():
    """Modes are built on first visit: the bus replays env.sh's state and the job's status."""
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        app.bus.config.publish(S.config_state(MAX_STEPS="7"))
        app.bus.job_status.publish(S.JOB_STATUS)
        app.bus.step_records.publish([TrainingStep(3, 20, 1, avg_reward=0.25, step_time_s=351.0)])
        await app.switch_mode("job")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, JobScreen)
        assert screen.field("MAX_STEPS").value == "7"
        assert "grpo.max_num_steps=7" in preview(screen, "run_nemo_rl.sh")
        text = str(screen.query_one("#job-strip").render())
        assert "RUNNING" in text and "step 3/20" in text and S.JOB_STATUS.id in text


async def test_the_palette_saves_and_the_app_can_submit_through_the_screen():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot)
        await set_field(pilot, screen, "MAX_STEPS", "30")
        await pilot.press("ctrl+p", *"save param", "enter")
        await pilot.pause()
        assert app.calls == [("save", {"MAX_STEPS": "30"})]
        screen.resubmit()  # what the app's "Job: resubmit to resume" entry calls
        assert app.calls[-1] == ("submit", True)


# --- issue 12: keys, empty fields, the dashboard, the preview full-screen ---

def summary(screen: JobScreen) -> str:
    return str(screen.query_one("#job-summary", Static).render())


async def test_ctrl_g_submits_and_the_footer_says_so():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot)
        screen.field("MAX_STEPS").focus_input()  # from inside an input: the binding has priority
        await pilot.press("ctrl+g")
        await pilot.pause()
        assert app.calls == [("submit", False)]
        footer = app.export_screenshot().replace("&#160;", " ")
        assert "^g" in footer and "submit" in footer
        palette = [c.title for c in app.get_system_commands(screen)]
        assert "Job: submit" in palette and "Job: resubmit to resume" in palette


async def test_an_emptied_batch_size_is_named_and_blocks_submit():
    """Issue 12: an empty GLOBAL_BATCH_SIZE read "ready to submit" (env.sh's empty means the
    default, 256, which the form did not show)."""
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot)
        assert "ready to submit" in summary(screen)
        await set_field(pilot, screen, "GLOBAL_BATCH_SIZE", "")
        assert "empty" in message(screen, "GLOBAL_BATCH_SIZE") and "256" in message(screen, "GLOBAL_BATCH_SIZE")
        assert "ready to submit" not in summary(screen) and "GLOBAL_BATCH_SIZE" in summary(screen)
        assert screen.query_one("#job-submit", Button).disabled
        assert screen.query_one(ContentSwitcher).current == "job-problems"
        await pilot.press("ctrl+g")
        await pilot.pause()
        assert app.calls == [] and "Not submitted" in [n.title for n in app._notifications]
        await set_field(pilot, screen, "MAX_STEPS", "")  # every emptied field, at once
        assert {p.field for p in screen.problems} >= {"GLOBAL_BATCH_SIZE", "MAX_STEPS"}
        await set_field(pilot, screen, "GLOBAL_BATCH_SIZE", "128")
        await set_field(pilot, screen, "MAX_STEPS", "20")
        assert "ready to submit" in summary(screen)


async def test_a_parameter_env_sh_leaves_out_shows_its_default():
    """An env.sh that does not parse (a broken CLUSTER_NAME) comes without defaults filled in:
    the job's fields still show what they mean, not an empty field."""
    app = RecordingApp()
    state = S.config_state(CLUSTER_NAME="Ray-GPU")
    values = {k: v for k, v in state.values.items() if k not in ("GLOBAL_BATCH_SIZE", "WANDB_ENABLED")}
    state = type(state)(state.env_path, values, state.expressions, (), state.secrets_set)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot, state)
        assert screen.field("GLOBAL_BATCH_SIZE").value == "256"
        assert screen.field("WANDB_ENABLED").value == "auto"
        assert message(screen, "GLOBAL_BATCH_SIZE") == ""
        assert screen.changes() == {}
        assert "CLUSTER_NAME" in summary(screen)  # the Configure screen's problem, named here


async def test_the_ray_dashboard_url_shows_once_published():
    from rltui.bus import ReplaySignal

    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        if getattr(app.bus, "dashboard", None) is None:  # the app's topic (issue 12, H3)
            app.bus.dashboard = ReplaySignal(app, "dashboard", keep=1)
        screen = await open_job(app, pilot)
        line = screen.query_one("#job-dashboard", Static)
        assert not line.display
        app.bus.dashboard.publish("http://127.0.0.1:8265")
        await pilot.pause()
        assert line.display and "Ray dashboard  http://127.0.0.1:8265" in str(line.render())
        app.bus.dashboard.publish(None)  # the port-forward went away
        await pilot.pause()
        assert not line.display


async def test_the_preview_gives_each_file_whole_for_the_full_view():
    """The pane protocol: ctrl+o opens `pane_text()` full-screen, lines wrapped, so the script's
    long override lines can be read at 80 columns."""
    from textual.widgets import TabbedContent

    from rltui.screens.job import JobPreview

    app = RecordingApp()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_job(app, pilot)
        preview_pane = screen.query_one(JobPreview)
        title, lines = preview_pane.pane_text()
        assert title == "run_nemo_rl.sh"
        assert lines == preview(screen, "run_nemo_rl.sh").splitlines()
        assert max(len(line) for line in lines) > 80  # what the pane cuts at this width
        screen.query_one(TabbedContent).active = "file-rayignore"
        await pilot.pause()
        assert preview_pane.pane_text() == (".rayignore", preview(screen, ".rayignore").splitlines())
        await set_field(pilot, screen, "PROMPTS_PER_STEP", "20")
        title, lines = preview_pane.pane_text()
        assert title.startswith("Job: fix these") and any(BAD_BATCH.split(" = ")[0] in ln for ln in lines)
