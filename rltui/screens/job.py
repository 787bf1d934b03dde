"""Job: the run's parameters (run_nemo_rl.sh overrides), a preview of what is uploaded, submit.

Each field is checked with `rltui.config.check_field` against the whole env.sh, so a batch
size that does not fit the prompts x generations shows why under GLOBAL_BATCH_SIZE. The
preview is `rltui.manifests.job_files` of the form's values; while they are invalid it lists
the problems instead and Submit is off; an emptied field is a problem (named), never the
default it would fall back to. Submit (ctrl+g) saves unsaved edits first: the job runs what
env.sh holds; resubmit-to-resume is in the palette and its button. Either way the engine asks
the Lustre volume what the checkpoint folder holds first (plan/checkpoints.py): a plain submit
into a folder holding checkpoints brings a prompt, resume or a new folder (the app's
`ask_checkpoint_folder`, screens/checkpoint_prompt.py), as `rltui submit` asks for --resume or
--new-folder. The preview opens full-screen (ctrl+o, `JobPreview.pane_text`) where its long
lines wrap. The Ray dashboard's URL shows when the app publishes it (the bus topic `dashboard`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, ContentSwitcher, Static, TabbedContent, TabPane, TextArea

from .. import manifests
from ..config import (
    ALIASES,
    JOB_SECRET_FIELDS,
    SECRET_FIELDS,
    ConfigError,
    Problem,
    RLConfig,
    check_field,
    parse_config,
    submit_problems,
)
from ..joblog import TrainingStep
from ..seam import JobStatusUpdate
from ..session import ConfigState
from ..widgets.chrome import HeaderInfo
from ..widgets.form import FormField
from ..widgets.jobstrip import JobStrip
from .base import WizardScreen, stylesheet

TRUE_FALSE = [("True", "True"), ("False", "False")]
# (group title, [(variable, choices or None)]) in run_nemo_rl.sh's order of concerns
GROUPS: list[tuple[str, list[tuple[str, list[tuple[str, str]] | None]]]] = [
    ("GRPO run", [("MAX_STEPS", None), ("PROMPTS_PER_STEP", None),
                  ("GENERATIONS_PER_PROMPT", None), ("GLOBAL_BATCH_SIZE", None)]),
    ("Checkpoints (on Lustre)", [("CHECKPOINT_ENABLED", TRUE_FALSE), ("CHECKPOINT_PERIOD", None),
                                 ("CHECKPOINT_KEEP_TOP_K", None), ("CHECKPOINT_METRIC", None),
                                 ("CHECKPOINT_DIR", None)]),
    ("Model and data", [("MODEL_NAME", None), ("CONVERTER_TYPE", None), ("DATASET", None)]),
    ("Weights & Biases (auto: on with a key)", [("WANDB_ENABLED", [("auto", "auto"), *TRUE_FALSE]),
                                                ("WANDB_RUN_NAME", None)]),
]
FIELDS = [name for _g, fields in GROUPS for name, _c in fields]
CHOICES = {name: choices for _g, fields in GROUPS for name, choices in fields if choices}
NUMERIC = {"MAX_STEPS", "PROMPTS_PER_STEP", "GENERATIONS_PER_PROMPT", "GLOBAL_BATCH_SIZE",
           "CHECKPOINT_PERIOD", "CHECKPOINT_KEEP_TOP_K"}
FILES = (manifests.RUN_SCRIPT_FILE, manifests.RAYIGNORE_FILE, manifests.RUNTIME_ENV_FILE)
AUTO = "auto"  # WANDB_ENABLED left empty in env.sh


def _tab_id(name: str) -> str:
    return "file-" + name.replace(".", "-").lstrip("-")


def default_of(name: str) -> str:
    """The model's default as env.sh text: what a variable env.sh leaves out means."""
    default = RLConfig.model_fields[ALIASES[name]].default
    if name == "WANDB_ENABLED" and default is None:
        return AUTO
    if isinstance(default, bool):
        return "True" if default else "False"
    return "null" if default is None and name == "CHECKPOINT_METRIC" else \
        "" if default is None else str(default)


def dashboard_url(payload: Any) -> str:
    """The URL in the `dashboard` topic's payload (a str, or a mapping with "url"); "" if none."""
    if isinstance(payload, str):
        return payload
    if isinstance(payload, dict):
        return str(payload.get("url") or "")
    return ""


class JobPreview(ContentSwitcher):
    """The files `ray job submit` uploads, or the problems that keep them from being built.
    `pane_text` (the pane protocol) gives the shown file whole, for the full view (ctrl+o)."""

    def pane_text(self) -> tuple[str, list[str]] | None:
        if self.current == "job-problems":
            problems = self.query_one("#job-problems", Static)
            return "Job: fix these to see the files", str(problems.render()).splitlines()
        tabs = self.query_one(TabbedContent)
        name = next((f for f in FILES if _tab_id(f) == tabs.active), None)
        if name is None:
            return None
        area = self.query_one(f"#text-{_tab_id(name)}", TextArea)
        return name, area.text.splitlines()


class JobScreen(WizardScreen):
    CSS_PATH = stylesheet(__file__)
    MODE = "job"
    TITLE = "Job"
    # "-narrow" (WizardScreen, below 110 columns): the form is about 40 wide, and a message
    # under a field uses all of it (job.tcss) instead of the 14 columns beside the labels,
    # where it took one line per word.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "save parameters", priority=True),
        Binding("ctrl+g", "submit(False)", "submit", priority=True)]

    def __init__(self) -> None:
        super().__init__()
        self._state: ConfigState | None = None
        self._baseline: dict[str, str] = {}   # env.sh's values, as the form shows them
        self.problems: list[Problem] = []
        self.files: dict[str, str] = {}
        self._check_pending = False

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="job-body"):
            with VerticalScroll(id="job-form"):
                yield Static(Text("Waiting for env.sh…", style="dim"), id="job-summary")
                for title, fields in GROUPS:
                    yield Static(title, classes="section-title")
                    for name, choices in fields:
                        yield FormField(name, label=name, choices=choices,
                                        restrict=r"[0-9]*" if name in NUMERIC else None)
            with Vertical(id="job-right"):
                yield Static("Uploaded by ray job submit --working-dir", classes="job-title")
                with JobPreview(initial="job-files", id="job-preview"):
                    with TabbedContent(id="job-files"):
                        for name in FILES:
                            with TabPane(name, id=_tab_id(name)):
                                yield TextArea("", read_only=True, soft_wrap=False,
                                               id=f"text-{_tab_id(name)}")
                    yield Static("", id="job-problems")
                yield Static("Last job", classes="job-title")
                yield JobStrip(empty="no job status yet", id="job-strip")
                yield Static("", id="job-dashboard")
        with Horizontal(id="job-actions"):
            yield Button("Save  ctrl+s", id="job-save", action="screen.save", compact=True)
            yield Button("Submit  ctrl+g", id="job-submit", action="screen.submit(False)",
                         compact=True, variant="primary")
            yield Button("Resubmit to resume", id="job-resume", action="screen.submit(True)",
                         compact=True)
            yield Button("Monitor  F8", id="job-monitor", action="app.switch_mode('monitor')",
                         compact=True)

    def on_mount(self) -> None:
        bus = self.wizard.bus
        bus.config.subscribe(self, self._on_config)
        bus.job_status.subscribe(self, self._on_job_status)
        bus.step_records.subscribe(self, self._on_step_records)  # each replays what came before
        self.query_one("#job-dashboard").display = False
        dashboard = getattr(bus, "dashboard", None)  # published by the app once it answers
        if dashboard is not None:
            dashboard.subscribe(self, self._on_dashboard)
        self._check()

    def system_commands(self) -> Iterable[SystemCommand]:
        """This screen's own palette entries (submit / resume: see `submit`, `resubmit`)."""
        yield SystemCommand("Job: save parameters", "Write the job parameters to env.sh (ctrl+s)",
                            self.action_save)

    # zero-argument entry points for the app's palette (`on_screen("job", "submit")`)
    def submit(self) -> None:
        self.action_submit(False)

    def resubmit(self) -> None:
        self.action_submit(True)

    def field(self, name: str) -> FormField:
        return self.query_one(f"#field-{name}", FormField)

    # --- env.sh's state ---

    def _on_config(self, state: ConfigState) -> None:
        old = self._baseline
        self._state = state
        self._baseline = {name: self._shown(name, state) for name in FIELDS}
        for name in FIELDS:
            field = self.field(name)
            if name not in old or field.value == old[name]:  # keep what the user is editing
                field.value = self._baseline[name]
        self._check()

    @staticmethod
    def _shown(name: str, state: ConfigState) -> str:
        value = state.values.get(name, "")
        if name == "WANDB_ENABLED":
            return value if value in ("True", "False") else AUTO
        return value or default_of(name)  # left out of env.sh (or empty): the default

    def _on_job_status(self, status: JobStatusUpdate) -> None:
        self.query_one(JobStrip).set_status(status)

    def _on_step_records(self, records: list[TrainingStep]) -> None:
        self.query_one(JobStrip).add_records(records)

    def _on_dashboard(self, payload: Any) -> None:
        url = dashboard_url(payload)
        line = self.query_one("#job-dashboard", Static)
        line.update(Text("Ray dashboard  ", style="dim").append(url, style="bold link " + url)
                    if url else "")
        line.display = bool(url)

    def _header(self, info: HeaderInfo) -> None:
        super()._header(info)
        if self.is_mounted:
            self._check()

    # --- checks and preview ---

    def on_form_field_changed(self, _event: FormField.Changed) -> None:
        if not self._check_pending:  # one check per refresh, however many fields changed
            self._check_pending = True
            self.call_after_refresh(self._check)

    def form_values(self) -> dict[str, str]:
        """env.sh's values overlaid with the form's (secrets only as 'set' stand-ins)."""
        values = dict(self._state.values) if self._state else {}
        for name in FIELDS:
            value = self.field(name).value
            values[name] = "" if name == "WANDB_ENABLED" and value == AUTO else value
        if self._state:
            for name in JOB_SECRET_FIELDS:  # stand-ins; NOTIFY_WEBHOOK stays as env.sh has it
                values[name] = "set" if self._state.secrets_set.get(name) else ""
        return values

    def changes(self) -> dict[str, str]:
        """What Save writes: the fields that differ from env.sh."""
        out = {}
        for name in FIELDS:
            value = self.field(name).value
            if value != self._baseline.get(name, value):
                out[name] = "" if name == "WANDB_ENABLED" and value == AUTO else value
        return out

    def _check(self) -> None:
        self._check_pending = False
        values = self.form_values()
        for name in FIELDS:
            self.field(name).message = (check_field(name, values[name], values) or "") \
                if self._state else ""
        self.problems, self.files = [], {}
        if self._state is None:
            self.problems = [Problem("env.sh", "not loaded yet")]
        else:
            try:
                self.files = manifests.job_files(parse_config(values))
            except ConfigError as exc:
                self.problems = list(exc.problems)
            # What only the form knows (an emptied field): the files would show a default.
            named = {p.field for p in self.problems}
            blank = [Problem(n, self.field(n).message) for n in FIELDS
                     if self.field(n).message and n not in named]
            if blank:
                self.problems[:0], self.files = blank, {}
        self.problems += self._submit_problems(values)
        self._show_preview()
        self._summarise()

    def _submit_problems(self, values: dict[str, str]) -> list[Problem]:
        """config.submit_problems' rule, asked of the endpoints (Google Cloud downloads the model
        from Hugging Face, the sandbox does not); unknown yet: submit itself enforces it."""
        if not self.wizard.downloads_models or self._state is None:
            return []
        try:
            return submit_problems(parse_config(values), True)
        except ConfigError:
            return []

    def _show_preview(self) -> None:
        switcher = self.query_one(ContentSwitcher)
        if self.files:
            for name, content in self.files.items():
                area = self.query_one(f"#text-{_tab_id(name)}", TextArea)
                if area.text != content:
                    area.load_text(content)
        if self.problems and not self.files:
            text = Text("Fix these to see the files:\n\n", style="bold")
            for p in self.problems:
                where = "" if p.field in FIELDS else "  (Configure screen, F3)" \
                    if p.field in ALIASES or p.field in SECRET_FIELDS else ""
                text.append("✗ ", style="bold red").append(p.field, style="bold")
                text.append(f": {p.message}{where}\n")
            self.query_one("#job-problems", Static).update(text)
            switcher.current = "job-problems"
        else:
            switcher.current = "job-files"
        ok = not self.problems
        self.query_one("#job-submit", Button).disabled = not ok
        self.query_one("#job-resume", Button).disabled = not ok

    def _summarise(self) -> None:
        text = Text()
        state = self._state
        if state is None:
            self.query_one("#job-summary", Static).update(Text("Waiting for env.sh…", style="dim"))
            return
        bad = list(dict.fromkeys(p.field for p in self.problems))
        if bad:
            text.append(f"✗ {len(self.problems)} problem{'s' if len(self.problems) != 1 else ''}",
                        style="bold red")
            text.append(f" ({', '.join(bad)})", style="red")
            if self.files:  # the files are fine; what blocks is elsewhere (e.g. HF_TOKEN)
                text.append("\n" + "; ".join(str(p) for p in self.problems), style="red")
        else:
            text.append("✓ ready to submit", style="bold green")
        changes = len(self.changes())
        if changes:
            text.append(f" · {changes} unsaved (Submit saves them)", style="bold")
        for name in sorted(JOB_SECRET_FIELDS):
            text.append(f" · {name} ", style="dim")
            text.append("set" if state.secrets_set.get(name) else "not set")
        self.query_one("#job-summary", Static).update(text)

    # --- actions ---

    def action_save(self) -> bool:
        """Write the changed fields to env.sh; False when there is nothing valid to write."""
        if self._state is None:
            self.notify("env.sh is not loaded yet", title="Not saved", severity="warning")
            return False
        self._check()
        bad = [self.field(n) for n in FIELDS if self.field(n).message]
        if bad:
            self.notify(f"fix {', '.join(f.field_name for f in bad)} first", title="Not saved",
                        severity="error")
            bad[0].focus_input()
            return False
        values = self.changes()
        if values:
            try:
                self.wizard.save_config(values)
            except (OSError, ValueError) as exc:  # e.g. a read-only folder: keep the edits
                self.notify(str(exc).splitlines()[0][:300], title="Not saved", severity="error")
                return False
            self._baseline.update({k: self.field(k).value for k in values})
            self._summarise()
        return True

    def action_submit(self, resume: bool) -> None:
        self._check()
        if self.problems:
            self.notify("; ".join(str(p) for p in self.problems)[:300], title="Not submitted",
                        severity="error")
            return
        if self.changes() and not self.action_save():
            return
        self.wizard.submit_job(resume)
