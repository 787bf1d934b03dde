"""Configure: the env.sh form. Snapshots (80x24 and 120x40) of the codelab's values and of a
state with problems; pilot tests of live validation (every broken field at once), Save (refused
while a field is bad; only changes are sent), reload asking before it drops edits, the focus
highlight, hidden secrets, derived values, and one round trip through a real Session and env.sh."""

from __future__ import annotations

import logging
import stat
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.widgets import Input, Static

from rltui.app import RLTuiApp
from rltui.cloud.endpoints import Endpoints
from rltui.screens.configure import ConfigureScreen
from rltui.session import Session
from rltui.widgets.form import FormField
from tests.tui.conftest import HEADER, SIZE
from tests.tui.samples_configure import bad_state, codelab_state

REPO = Path(__file__).resolve().parents[2]


class RecordingApp(RLTuiApp):
    """The real app; the two actions that need a session are recorded instead."""

    # Textual reads relative CSS paths beside the module defining the class: keep the app's.
    CSS_PATH = RLTuiApp.CSS_PATH  # absolute: a subclass here finds the one stylesheet

    def __init__(self) -> None:
        super().__init__(session=None, header=HEADER)
        self.saved: list[dict[str, str]] = []
        self.reloads = 0

    def save_config(self, values: dict[str, str]) -> None:
        self.saved.append(dict(values))

    def reload_config(self) -> None:
        self.reloads += 1


async def open_configure(app: RLTuiApp, pilot: Any, state: Any) -> ConfigureScreen:
    await app.switch_mode("configure")
    await pilot.pause()
    app.bus.config.publish(state)
    await pilot.pause()
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, ConfigureScreen)
    return screen


def message(screen: ConfigureScreen, name: str) -> str:
    return str(screen.field(name).query_one(".field-message", Static).render()).strip()


def summary(screen: ConfigureScreen) -> str:
    return str(screen.query_one("#configure-summary", Static).render())


async def type_into(pilot: Any, screen: ConfigureScreen, name: str, text: str) -> None:
    """Click the field, clear it, type the text key by key."""
    await pilot.click(f"#input-{name}")
    screen.field(name).query_one(Input).value = ""
    await pilot.press(*text)
    await pilot.pause()
    await pilot.pause()


async def paste_into(pilot: Any, screen: ConfigureScreen, name: str, text: str) -> None:
    """Replace the field's text at once, as a paste does (typing is ~0.15 s a key here)."""
    screen.field(name).query_one(Input).value = text
    await pilot.pause()
    await pilot.pause()


# --- the field on its own (the Job screen reuses it) ---

class OneField(App):
    def __init__(self, field: FormField) -> None:
        super().__init__()
        self.field, self.changes = field, []

    def compose(self):
        yield self.field

    def on_form_field_changed(self, event: FormField.Changed) -> None:
        self.changes.append((event.field.field_name, event.value))


async def test_form_field_reports_edits_and_shows_a_message_set_before_mount():
    field = FormField("MAX_STEPS", "20", hint="GRPO steps", restrict=r"[0-9]*")
    field.message = "must be at least 1, got 0"
    app = OneField(field)
    async with app.run_test(size=(100, 5)) as pilot:
        shown = str(field.query_one(".field-message", Static).render())
        assert "✗ must be at least 1, got 0" in shown
        assert field.has_class("-invalid")
        await pilot.click("#input-MAX_STEPS")
        await pilot.press("end", "x", "5")  # restrict drops the letter
        await pilot.pause()
        assert field.value == "205" and app.changes[-1] == ("MAX_STEPS", "205")
        field.message = ""
        await pilot.pause()
        assert not field.has_class("-invalid")


async def test_choice_field_keeps_an_unknown_value():
    field = FormField("CHECKPOINT_ENABLED", "yes", choices=[("True", "True"), ("False", "False")])
    app = OneField(field)
    async with app.run_test(size=(100, 5)) as pilot:
        assert field.value == "yes"
        field.value = "False"
        await pilot.pause()
        assert field.value == "False" and app.changes[-1] == ("CHECKPOINT_ENABLED", "False")


def label_look(screen: Any, name: str) -> tuple[str, bool]:
    """How the field's label is drawn: its colour and whether it is bold."""
    from textual.widgets import Label

    label = screen.field(name).query_one(".field-label", Label)
    return str(label.styles.color), bool(label.styles.text_style.bold)


async def test_only_the_focused_field_is_highlighted():
    """Issue 12: fields stayed highlighted after focus left. The label's rule was
    `FormField:focus-within .field-label`; Textual restyles on a focus change only the subtree of
    an ancestor of the focused (or blurred) widget whose own rules use :focus-within
    (Screen._update_focus_styles, textual 8.2), and the label is not below the Input: a label
    restyled while its field had focus (an edit re-marks the field) kept the highlight."""
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_configure(app, pilot, codelab_state())
        plain = label_look(screen, "NUM_NODES")
        assert plain[1] is False
        for name, text in (("PROJECT_ID", "x"), ("CLUSTER_NAME", "Q"), ("DEVICE_TYPE", None)):
            screen.field(name).focus_input()
            await pilot.pause()
            if text:
                await pilot.press("end", text)  # an edit: the field's message and class change
            await pilot.pause()
            assert label_look(screen, name) != plain, name  # the focused field stands out
            await pilot.press("tab")
            await pilot.pause()
            await pilot.pause()
            assert label_look(screen, name) == plain, f"{name} still highlighted"
        screen.query_one("#configure-save").focus()
        await pilot.pause()
        lit = [f.field_name for f in screen.query(FormField) if label_look(screen, f.field_name) != plain]
        assert lit == []


# --- snapshots, at 80x24 (a plain terminal) and 120x40 ---

SIZES = [(80, 24), (120, 40)]

@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_codelab_values(snap_compare, wizard_app, size):
    app = wizard_app()

    async def run_before(pilot):
        await open_configure(app, pilot, codelab_state())

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_bad_region_and_capacity(snap_compare, wizard_app, size):
    app = wizard_app()

    async def run_before(pilot):
        await open_configure(app, pilot, bad_state())

    assert snap_compare(app, terminal_size=size, run_before=run_before)


# --- live validation ---

async def test_typed_bad_value_shows_its_message_and_clears_when_fixed():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_configure(app, pilot, codelab_state())
        assert message(screen, "LUSTRE_CAPACITY") == ""
        assert "no problems" in summary(screen)

        await type_into(pilot, screen, "LUSTRE_CAPACITY", "10000")
        shown = message(screen, "LUSTRE_CAPACITY")
        assert "must be a multiple of 9000 GiB" in shown and "9000 or 18000" in shown
        assert screen.field("LUSTRE_CAPACITY").has_class("-invalid")
        assert "1 problem (LUSTRE_CAPACITY)" in summary(screen)

        await type_into(pilot, screen, "LUSTRE_CAPACITY", "18000")
        assert message(screen, "LUSTRE_CAPACITY") == ""
        assert not screen.field("LUSTRE_CAPACITY").has_class("-invalid")
        assert "no problems" in summary(screen)


async def test_node_count_that_breaks_a_job_parameter_is_named():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_configure(app, pilot, codelab_state())
        await paste_into(pilot, screen, "NUM_NODES", "6")  # 48 GPUs: data-parallel size 3
        assert message(screen, "NUM_NODES") == ""
        assert "1 in the job parameters (Job screen: GLOBAL_BATCH_SIZE)" in summary(screen)
        assert "48 GPUs" in str(screen.field("NUM_NODES").query_one(".field-hint", Static).render())


async def test_tier_change_revalidates_capacity_and_shows_allowed_sizes():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_configure(app, pilot, codelab_state())
        screen.field("LUSTRE_THROUGHPUT").value = "125"
        await pilot.pause()
        await pilot.pause()
        assert "at least 72000 GiB for throughput tier 125" in message(screen, "LUSTRE_CAPACITY")
        hint = str(screen.field("LUSTRE_CAPACITY").query_one(".field-hint", Static).render())
        assert "min 72000, step 72000, max 12240000" in hint


async def test_region_follows_zone_and_gpus_follow_device_type():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_configure(app, pilot, codelab_state())
        await paste_into(pilot, screen, "ZONE", "us-central1-a")
        assert screen.field("REGION").value == "us-central1"
        assert message(screen, "REGION") == ""
        screen.field("DEVICE_TYPE").value = "gb200-4"
        await pilot.pause()
        await pilot.pause()
        assert screen.field("GPUS_PER_NODE").value == "4"
        # A REGION typed by hand no longer follows: the mismatch is shown instead.
        await paste_into(pilot, screen, "REGION", "europe-west4")
        await paste_into(pilot, screen, "ZONE", "us-east1-b")
        assert screen.field("REGION").value == "europe-west4"
        assert "expected us-east1" in message(screen, "REGION")


async def test_unknown_device_type_stays_visible_and_flagged():
    app = RecordingApp()
    state = codelab_state()
    state = type(state)(state.env_path, {**state.values, "DEVICE_TYPE": "a100-8"},
                        state.expressions, state.problems, state.secrets_set)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_configure(app, pilot, state)
        assert screen.field("DEVICE_TYPE").value == "a100-8"
        assert "'a100-8' is not a known device type" in message(screen, "DEVICE_TYPE")
        screen.field("DEVICE_TYPE").value = "b200-8"
        await pilot.pause()
        await pilot.pause()
        assert message(screen, "DEVICE_TYPE") == ""


# --- save ---

async def test_ctrl_s_with_a_bad_field_does_not_save():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_configure(app, pilot, codelab_state())
        await type_into(pilot, screen, "CLUSTER_NAME", "Ray_Cluster")
        assert "is not a GKE cluster name" in message(screen, "CLUSTER_NAME")
        await pilot.press("ctrl+s")  # from inside the input: the binding has priority
        await pilot.pause()
        assert app.saved == []
        notes = [n for n in app._notifications]
        assert notes and notes[-1].title == "Not saved" and "CLUSTER_NAME" in notes[-1].message

        await paste_into(pilot, screen, "CLUSTER_NAME", "rl-b200")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.saved == [{"CLUSTER_NAME": "rl-b200"}]  # NETWORK_NAME stays a reference


async def test_save_sends_typed_secrets_only_and_clears_them():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_configure(app, pilot, codelab_state())
        await paste_into(pilot, screen, "WANDB_API_KEY", "wb0123456789abcdef")
        await pilot.click("#configure-save")
        await pilot.pause()
        assert app.saved == [{"WANDB_API_KEY": "wb0123456789abcdef"}]  # HF_TOKEN kept as is
        assert screen.field("WANDB_API_KEY").value == ""


async def test_secret_with_white_space_is_refused():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_configure(app, pilot, codelab_state())
        await paste_into(pilot, screen, "HF_TOKEN", "hf_abc def")
        assert "white space" in message(screen, "HF_TOKEN")
        await pilot.press("ctrl+s")
        assert app.saved == []


async def test_secrets_are_bullets_on_screen():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_configure(app, pilot, codelab_state())
        await paste_into(pilot, screen, "HF_TOKEN", "hf_TopSecretValue42")
        svg = app.export_screenshot().replace("&#160;", " ")
        assert "TopSecret" not in svg and "hf_" not in svg
        assert "•" * 19 in svg
        assert "typed: replaces" in svg  # HF_TOKEN's hint
        assert "optional: Weights" in svg and "not set" in svg  # WANDB_API_KEY's


async def test_reload_asks_before_discarding_edits():
    """ctrl+l (or the Reload button) reads env.sh again; with an unsaved edit it asks first: keep
    (Esc, or Enter on the focused button) leaves the edit and reads nothing, discard (d) reloads.
    ctrl+r is Provision's run key, not a reload here. At 80x24: the question fits."""
    from rltui.screens.configure import DiscardEdits

    app = RecordingApp()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_configure(app, pilot, codelab_state())
        await pilot.press("ctrl+l")  # nothing edited: no question
        await pilot.pause()
        assert app.reloads == 1 and app.screen is screen
        await type_into(pilot, screen, "NUM_NODES", "16")
        assert "1 unsaved change" in summary(screen)
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert app.reloads == 1 and app.screen is screen

        await pilot.press("ctrl+l")
        await pilot.pause()
        assert isinstance(app.screen, DiscardEdits) and app.reloads == 1
        question = str(app.screen.query_one("#discard-question", Static).render())
        assert "1 unsaved change (NUM_NODES)" in question
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen and app.reloads == 1
        assert screen.field("NUM_NODES").value == "16"
        assert app._notifications and list(app._notifications)[-1].title == "Not reloaded"

        await pilot.click("#configure-reload")  # the button asks too; Enter keeps (focused)
        await pilot.pause()
        assert isinstance(app.screen, DiscardEdits)
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is screen and app.reloads == 1

        await pilot.press("ctrl+l")
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()
        assert app.screen is screen and app.reloads == 2
        app.bus.config.publish(codelab_state())  # what the app publishes after reading env.sh
        await pilot.pause()
        await pilot.pause()
        assert screen.field("NUM_NODES").value == "8"
        assert "unsaved" not in summary(screen)


async def test_a_republished_state_keeps_unsaved_edits():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_configure(app, pilot, codelab_state())
        await type_into(pilot, screen, "NUM_NODES", "16")
        app.bus.config.publish(codelab_state())  # e.g. the Job screen saved its parameters
        await pilot.pause()
        await pilot.pause()
        assert screen.field("NUM_NODES").value == "16"


async def test_state_published_before_mount_is_shown():
    """The app's signals replay their last payload; a screen mounted later starts from it."""
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        app.bus.config.publish(bad_state())  # before the screen exists: replayed on mount
        await app.switch_mode("configure")
        await pilot.pause()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ConfigureScreen)
        assert screen.field("REGION").value == "us-central1"
        assert "expected us-east1" in message(screen, "REGION")


async def test_palette_commands_run_the_actions():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_configure(app, pilot, codelab_state())
        commands = {c.title: c for c in screen.system_commands()}
        assert set(commands) == {"Configure: save env.sh", "Configure: reload env.sh"}
        await type_into(pilot, screen, "NUM_NODES", "16")
        commands["Configure: save env.sh"].callback()
        assert app.saved == [{"NUM_NODES": "16"}]


# --- a real Session and env.sh ---

class EnvOnlyApp(RLTuiApp):
    """The real app and Session, without the boot that asks the cloud (preflight, inventory)."""

    CSS_PATH = RecordingApp.CSS_PATH

    def _boot(self) -> None:
        pass


@pytest.fixture
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    yield tmp_path / "state"
    log = logging.getLogger("rltui")
    for handler in [h for h in log.handlers if str(tmp_path) in getattr(h, "baseFilename", "")]:
        log.removeHandler(handler)
        handler.close()


async def test_round_trip_through_env_sh(tmp_path: Path, state_home: Path):
    env = tmp_path / "env.sh"
    env.write_text((REPO / "assets" / "env.sh.example").read_text())
    # A placeholder project: nothing reaches for a cloud while the test runs.
    session = Session(env, lambda: Endpoints(label="SANDBOX"))
    app = EnvOnlyApp(session=session, header=HEADER)
    async with app.run_test(size=SIZE) as pilot:
        await app.switch_mode("configure")
        await pilot.press("ctrl+l")
        await pilot.pause()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ConfigureScreen)
        assert "still the template placeholder" in message(screen, "PROJECT_ID")

        await paste_into(pilot, screen, "PROJECT_ID", "team-rl-sandbox-42")
        await paste_into(pilot, screen, "HF_TOKEN", "hf_RoundTripToken7")
        await pilot.press("ctrl+s")
        await pilot.pause()
        await pilot.pause()

        text = env.read_text()
        assert 'export PROJECT_ID="team-rl-sandbox-42"' in text
        assert 'export HF_TOKEN="hf_RoundTripToken7" # Required for downloading models' in text
        assert 'export NETWORK_NAME="${CLUSTER_NAME}-net-0"' in text  # still a reference
        assert stat.S_IMODE(env.stat().st_mode) == 0o600
        assert "no problems" in summary(screen)
        hint = str(screen.field("HF_TOKEN").query_one(".field-hint", Static).render())
        assert hint.startswith("set")
        assert "RoundTrip" not in app.export_screenshot()


async def test_a_variable_env_sh_leaves_out_is_its_default_not_an_unsaved_change():
    """The template has no LUSTRE_THROUGHPUT: the form shows 1000, and that is not an edit
    (before, a fresh env.sh read '1 unsaved change' and a reload asked about it)."""
    app = RecordingApp()
    state = codelab_state()
    values = {k: v for k, v in state.values.items() if k != "LUSTRE_THROUGHPUT"}
    state = type(state)(state.env_path, values, state.expressions, (), state.secrets_set)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_configure(app, pilot, state)
        assert screen.field("LUSTRE_THROUGHPUT").value == "1000"
        assert screen.changes() == {} and "unsaved" not in summary(screen)
        screen.field("LUSTRE_THROUGHPUT").value = "500"
        await pilot.pause()
        await pilot.pause()
        assert screen.changes() == {"LUSTRE_THROUGHPUT": "500"}


async def test_the_form_names_every_broken_field_at_once():
    """Issue 12: LUSTRE_CAPACITY=10000 went unreported while CLUSTER_NAME was also wrong."""
    app = RecordingApp()
    state = codelab_state()
    state = type(state)(state.env_path, {**state.values, "CLUSTER_NAME": "Ray-GPU",
                                         "LUSTRE_CAPACITY": "10000", "ZONE": "us-east1"},
                        state.expressions, (), state.secrets_set)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_configure(app, pilot, state)
        assert "not a GKE cluster name" in message(screen, "CLUSTER_NAME")
        assert "nearest: 9000 or 18000" in message(screen, "LUSTRE_CAPACITY")
        assert "not a zone" in message(screen, "ZONE")
        assert message(screen, "REGION") == ""  # compared with a valid ZONE only
        assert "3 problems (ZONE, CLUSTER_NAME, LUSTRE_CAPACITY)" in summary(screen)


async def test_quit_with_unsaved_edits_asks_first_and_a_second_ctrl_q_quits():
    """Unsaved edits are never dropped without asking: not by a reload, and not by ctrl+q
    (its question is a modal: tests/tui/test_quit_prompt.py)."""
    from rltui.screens.quit_prompt import QuitPrompt

    app = RecordingApp()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_configure(app, pilot, codelab_state())
        await type_into(pilot, screen, "NUM_NODES", "16")
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert app.is_running and isinstance(app.screen, QuitPrompt)
        assert "unsaved edits on Configure" in app.screen.text().plain
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert not app.is_running


async def test_quit_without_edits_quits_at_once():
    app = RecordingApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await open_configure(app, pilot, codelab_state())
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert not app.is_running


async def test_a_misspelt_variable_in_env_sh_shows_on_the_field_it_misspells():
    """env.sh's LUSTRE_CAPACTY would leave LUSTRE_CAPACITY at its default: the form says so on
    that field (and Save is refused, as for any problem); a misspelt secret shows on its field
    too, though the form leaves a secret kept from env.sh empty."""
    app = RecordingApp()
    state = codelab_state()
    state = type(state)(state.env_path, {**state.values, "LUSTRE_CAPACTY": "18000", "HF_TOKN": "x",
                                         "FOO_BAR": "mine"}, state.expressions, (), state.secrets_set)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_configure(app, pilot, state)
        shown = message(screen, "LUSTRE_CAPACITY")
        assert "LUSTRE_CAPACTY" in shown and "did you mean LUSTRE_CAPACITY?" in shown, shown
        assert "HF_TOKN" in message(screen, "HF_TOKEN")
        assert message(screen, "ZONE") == ""
        text = summary(screen)
        assert "2 problems (LUSTRE_CAPACITY, HF_TOKEN)" in text and "job parameters" not in text, text
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.saved == []
