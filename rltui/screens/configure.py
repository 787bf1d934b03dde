"""Configure: the codelab's env.sh as a form, checked on every keystroke.

The message for each field comes from `rltui.config.check_field` and shows under the field.
Saving (ctrl+s) sends only what changed, so a value written as `${CLUSTER_NAME}-net-0` stays a
reference; secrets are sent only when typed and never shown (bullets, then "set"). Reloading
(ctrl+l) with unsaved edits asks first (`DiscardEdits`): edits are never dropped silently.
Job parameters live on the Job screen.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ..config import (
    ALIASES,
    DEVICE_TYPES,
    LUSTRE_TIERS,
    SECRET_FIELDS,
    ConfigError,
    RLConfig,
    check_field,
    misspelling_of,
    parse_config,
    region_of,
)
from ..session import ConfigState
from ..widgets.form import FormField
from ..widgets.inputframe import DrawsInputNow
from .base import WizardScreen, env_path_text, stylesheet

# (group title, [(variable, what it is)]) in the codelab's order
GROUPS: list[tuple[str, list[tuple[str, str]]]] = [
    ("Project & location", [("PROJECT_ID", "your Google Cloud project ID"),
                            ("ZONE", "where the GPUs and Lustre live"),
                            ("REGION", "")]),
    ("Cluster", [("CLUSTER_NAME", "the GKE cluster xpk creates"),
                 ("NETWORK_NAME", ""),
                 ("NUM_NODES", ""),
                 ("DEVICE_TYPE", ""),
                 ("GPUS_PER_NODE", "")]),
    ("Lustre", [("LUSTRE_INSTANCE_ID", ""),
                ("LUSTRE_THROUGHPUT", ""),
                ("LUSTRE_CAPACITY", "")]),
    ("Secrets", [("HF_TOKEN", "needed only to submit (the model comes from Hugging Face)"),
                 ("WANDB_API_KEY", "optional: Weights & Biases logging")]),
]
FIELDS = [name for _g, fields in GROUPS for name, _w in fields]
WHAT = {name: what for _g, fields in GROUPS for name, what in fields}
FORM_SECRETS = [name for name in FIELDS if name in SECRET_FIELDS]  # NOTIFY_WEBHOOK: env.sh only
NUMERIC = {"NUM_NODES", "GPUS_PER_NODE", "LUSTRE_CAPACITY"}
CHOICES = {
    "DEVICE_TYPE": [(f"{d.name}  {d.machine_type}", d.name) for d in DEVICE_TYPES.values()],
    "LUSTRE_THROUGHPUT": [(f"{t} MB/s per TiB", str(t)) for t in LUSTRE_TIERS],
}
DERIVED_NETWORK = "${CLUSTER_NAME}-net-0"


def default_of(name: str) -> str:
    """The model's default as env.sh text ("" when there is none)."""
    default = RLConfig.model_fields[ALIASES[name]].default
    return "" if default is None or not isinstance(default, (str, int)) else str(default)


def problems_elsewhere(values: dict[str, str]) -> list[str]:
    """Variables outside this form (the job's) that the form's values leave invalid; a misspelt
    variable counts as the one it is close to (shown on that field, here or on the Job screen)."""
    try:
        parse_config(values)
    except ConfigError as exc:
        return sorted({p.meant or p.field for p in exc.problems} - set(FIELDS))
    return []


class DiscardEdits(ModalScreen[bool], DrawsInputNow):
    """Asked before a reload would drop unsaved edits: True to discard them and read env.sh
    again, False to keep them (Escape, and the button focused first: the safe answer)."""

    DEFAULT_CSS = """
    DiscardEdits { align: center middle; }
    DiscardEdits > Vertical {
        width: 64; max-width: 100%; height: auto;
        border: round $warning; background: $surface; padding: 0 1;
    }
    DiscardEdits #discard-question { height: auto; margin: 0 0 1 0; }
    DiscardEdits Horizontal { height: auto; }
    DiscardEdits Button { margin: 0 2 0 0; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,k", "answer(False)", "keep the edits"),
        Binding("d", "answer(True)", "discard and reload")]

    def __init__(self, names: list[str]) -> None:
        super().__init__()
        self.names = names

    def compose(self) -> ComposeResult:
        count = len(self.names)
        with Vertical():
            yield Static(Text.assemble(
                (f"{count} unsaved change{'s' if count != 1 else ''}", "bold"),
                f" ({', '.join(self.names)}).\nReload env.sh from disk and discard "
                f"{'them' if count != 1 else 'it'}?"), id="discard-question")
            with Horizontal():
                yield Button("Keep editing  k / Esc", id="discard-keep", variant="primary",
                             compact=True)
                yield Button("Discard and reload  d", id="discard-yes", variant="error",
                             compact=True)

    def on_mount(self) -> None:
        self.query_one("#discard-keep", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "discard-yes")

    def action_answer(self, discard: bool) -> None:
        self.dismiss(discard)


class ConfigureScreen(WizardScreen):
    CSS_PATH = stylesheet(__file__)
    MODE = "configure"
    TITLE = "Configure"
    # "-narrow" (WizardScreen, below 110 columns): each hint goes under its input (configure.tcss);
    # beside it, it wrapped into a 17-column strip at 80x24, two or three lines a field.

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "save env.sh", priority=True),
        Binding("ctrl+l", "reload", "reload env.sh", priority=True),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._state: ConfigState | None = None
        self._baseline: dict[str, str] = {}   # what env.sh holds, as the form would send it
        self._shown: dict[str, str] = {}      # what the form showed when the state arrived
        self._discard_edits = False
        self._validate_pending = False
        self._in_step = {"REGION": False, "GPUS_PER_NODE": False}  # follows ZONE / DEVICE_TYPE

    def compose_body(self) -> ComposeResult:
        yield Static(Text("Waiting for env.sh… (ctrl+l reads it again)"), id="configure-summary")
        with VerticalScroll(id="configure-form"):
            for title, fields in GROUPS:
                yield Static(title, classes="section-title")
                for name, what in fields:
                    yield FormField(name, hint=what, choices=CHOICES.get(name),
                                    password=name in SECRET_FIELDS,
                                    restrict=r"[0-9]*" if name in NUMERIC else None)
        with Horizontal(id="configure-actions"):
            yield Button("Save  ctrl+s", id="configure-save", action="screen.save", compact=True,
                         variant="primary")
            yield Button("Reload  ctrl+l", id="configure-reload", action="screen.reload",
                         compact=True)
            yield Button("Next: Provision  F4", id="configure-next",
                         action="app.switch_mode('provision')", compact=True)

    def on_mount(self) -> None:
        self.wizard.bus.config.subscribe(self, self._on_config)
        last = getattr(self.wizard.bus.config, "last", None)  # a state published before we mounted
        if last is not None:
            self._on_config(last)

    def system_commands(self) -> Iterable[SystemCommand]:
        """This screen's actions for the command palette."""
        yield SystemCommand("Configure: save env.sh", "Write the form to env.sh (ctrl+s)",
                            self.action_save)
        yield SystemCommand("Configure: reload env.sh",
                            "Read env.sh from disk again; asks before dropping unsaved edits"
                            " (ctrl+l)", self.action_reload)

    # --- the state from env.sh ---

    def field(self, name: str) -> FormField:
        return self.query_one(f"#field-{name}", FormField)

    def _on_config(self, state: ConfigState) -> None:
        self._state = state
        self.query_one("#configure-form").display = True
        baseline = {name: self._baseline_of(name, state) for name in FIELDS}
        for name in FIELDS:
            if name in SECRET_FIELDS:
                if self._discard_edits:
                    self.field(name).value = ""
                continue
            field = self.field(name)
            shown = baseline[name] or ("" if name == "NETWORK_NAME" else default_of(name))
            # A variable env.sh leaves out means its default: showing it is not an edit.
            baseline[name] = shown
            edited = name in self._shown and field.value != self._shown[name]
            if self._discard_edits or not edited:
                field.value = shown
            self._shown[name] = shown
        self._baseline = baseline
        self._discard_edits = False
        self._validate_all()

    @staticmethod
    def _baseline_of(name: str, state: ConfigState) -> str:
        if name in SECRET_FIELDS:
            return ""
        if name == "NETWORK_NAME" and (state.expressions.get(name) == DERIVED_NETWORK
                                       or not state.values.get(name)):
            return ""  # derived from CLUSTER_NAME: left empty, shown as the placeholder
        return state.values.get(name, "")

    # --- live validation and derived values ---

    def on_form_field_changed(self, event: FormField.Changed) -> None:
        if self._state is not None:
            self._follow(event.field.field_name, event.value)
        self._schedule_validate()

    def _follow(self, name: str, new: str) -> None:
        """REGION follows ZONE, GPUS_PER_NODE follows DEVICE_TYPE, while they were in step."""
        if name == "ZONE" and self._in_step["REGION"] and region_of(new):
            self.field("REGION").value = region_of(new) or ""
        elif name == "DEVICE_TYPE" and self._in_step["GPUS_PER_NODE"] and new in DEVICE_TYPES:
            self.field("GPUS_PER_NODE").value = str(DEVICE_TYPES[new].gpus_per_node)

    def _note_in_step(self, values: dict[str, str]) -> None:
        """Whether the follower matched its leader, judged when the leader was last valid."""
        region = region_of(values["ZONE"])
        if region:
            self._in_step["REGION"] = values["REGION"] == region
        device = DEVICE_TYPES.get(values["DEVICE_TYPE"])
        if device:
            self._in_step["GPUS_PER_NODE"] = values["GPUS_PER_NODE"] == str(device.gpus_per_node)

    def _schedule_validate(self) -> None:
        if not self._validate_pending:
            self._validate_pending = True
            self.call_after_refresh(self._validate_all)

    def form_values(self) -> dict[str, str]:
        """Every variable the checks need: env.sh's, overlaid with the form's."""
        assert self._state is not None
        values = dict(self._state.values)
        for name in FIELDS:
            value = self.field(name).value
            if name in SECRET_FIELDS:  # a stand-in: the checks only ask whether one is set
                value = value or ("set" if self._state.secrets_set.get(name) else "")
            values[name] = value
        return values

    def _validate_all(self) -> None:
        self._validate_pending = False
        if self._state is None:
            return
        values = self.form_values()
        self._note_in_step(values)
        for name in FIELDS:
            field = self.field(name)
            typed = field.value
            if name in SECRET_FIELDS and not typed:
                # empty keeps what env.sh has; a misspelt one there is still this field's problem
                field.message = misspelling_of(name, values) or ""
            else:
                field.message = check_field(name, values[name], values) or ""
            field.hint = self._hint(name, values)
        self._placeholders(values)
        self._summarise()

    def _hint(self, name: str, values: dict[str, str]) -> Text:
        state = self._state
        assert state is not None
        text = Text(WHAT.get(name, ""), style="dim")
        if name == "REGION":
            region = region_of(values["ZONE"])
            text = Text("derived from ZONE: ", style="dim").append(region or "(no valid ZONE)")
        elif name == "NETWORK_NAME":
            text = Text("empty means ", style="dim").append(DERIVED_NETWORK).append(
                ", the VPC xpk creates", style="dim")
        elif name == "NUM_NODES" and (values[name] + values["GPUS_PER_NODE"]).isdigit():
            nodes, gpus = int(values[name]), int(values["GPUS_PER_NODE"])
            text = Text(f"Spot nodes: {nodes} x {gpus} GPUs = ", style="dim").append(
                f"{nodes * gpus} GPUs")
        elif name == "DEVICE_TYPE" and values["DEVICE_TYPE"] in DEVICE_TYPES:
            d = DEVICE_TYPES[values["DEVICE_TYPE"]]
            text = Text(f"{d.gpus_per_node} x {d.accelerator} per node", style="dim")
        elif name == "GPUS_PER_NODE" and values["DEVICE_TYPE"] in DEVICE_TYPES:
            d = DEVICE_TYPES[values["DEVICE_TYPE"]]
            text = Text(f"{d.name} nodes have {d.gpus_per_node} GPUs", style="dim")
        elif name == "LUSTRE_INSTANCE_ID":
            lid = values[name] or "LUSTRE_INSTANCE_ID"
            text = Text(f"the volume: PV {lid}-pv and PVC …-pvc", style="dim")
        elif name == "LUSTRE_THROUGHPUT":
            text = self._throughput_hint(values)
        elif name == "LUSTRE_CAPACITY":
            tier = LUSTRE_TIERS.get(int(values["LUSTRE_THROUGHPUT"])) if \
                values["LUSTRE_THROUGHPUT"].isdigit() else None
            text = Text("GiB", style="dim") if tier is None else Text(
                f"GiB; tier {tier.throughput} allows ", style="dim").append(tier.describe())
        elif name in SECRET_FIELDS:
            text = self._secret_hint(name, state)
        expr = state.expressions.get(name)
        if expr and expr != DERIVED_NETWORK:
            text.append(f"  (env.sh: {expr})", style="dim")
        return text

    def _placeholders(self, values: dict[str, str]) -> None:
        """What an empty input means: the derived network, or the secret env.sh keeps."""
        assert self._state is not None
        cluster = values["CLUSTER_NAME"] or "CLUSTER_NAME"
        self.field("NETWORK_NAME").set_placeholder(f"{cluster}-net-0")
        for name in FORM_SECRETS:
            kept = self._state.secrets_set.get(name)
            self.field(name).set_placeholder("kept from env.sh; type to replace" if kept
                                             else "paste it here")

    @staticmethod
    def _throughput_hint(values: dict[str, str]) -> Text:
        tput, cap = values["LUSTRE_THROUGHPUT"], values["LUSTRE_CAPACITY"]
        if not (tput.isdigit() and cap.isdigit()):
            return Text("MB/s per TiB of capacity", style="dim")
        gbps = int(tput) * int(cap) / 1024 / 1000
        return Text("at LUSTRE_CAPACITY: about ", style="dim").append(f"{gbps:.1f} GB/s").append(
            " in total", style="dim")

    def _secret_hint(self, name: str, state: ConfigState) -> Text:
        if self.field(name).value:
            status = Text("typed: replaces env.sh's on save", style="bold")
        elif state.secrets_set.get(name):
            status = Text("set", style="bold green")
        else:
            status = Text("not set", style="bold")
        return status.append(" · " + WHAT[name], style="dim")

    def _summarise(self) -> None:
        state = self._state
        assert state is not None
        bad = [f.field_name for f in self.query(FormField) if f.message]
        changes = len(self.changes())
        text = env_path_text(state.env_path)
        if changes:
            text.append(f"  {changes} unsaved change{'s' if changes != 1 else ''}", style="bold")
        text.append("\n")
        if state.load_error:
            text.append(f"✗ env.sh not read: {state.load_error}  ", style="bold red")
        if bad:
            text.append(f"✗ {len(bad)} problem{'s' if len(bad) != 1 else ''}", style="bold red")
            text.append(f" ({', '.join(bad)})", style="red")
        else:
            text.append("✓ no problems", style="bold green")
        elsewhere = problems_elsewhere(self.form_values())
        if elsewhere:
            text.append(f" · {len(elsewhere)} in the job parameters (Job screen: "
                        f"{', '.join(elsewhere)})", style="yellow")
        self.query_one("#configure-summary", Static).update(text)

    # --- actions ---

    def changes(self) -> dict[str, str]:
        """What Save sends: values that differ from env.sh's, and secrets that were typed."""
        out = {}
        for name in FIELDS:
            value = self.field(name).value
            if name in SECRET_FIELDS:
                if value:
                    out[name] = value
            elif value != self._baseline.get(name, ""):
                out[name] = value
        return out

    def problems(self) -> list[str]:
        """The fields whose values would not save (each says why under it), checked now."""
        if self._state is None:
            return []
        self._validate_all()
        return [f.field_name for f in self.query(FormField) if f.message]

    def action_save(self) -> bool:
        """Whether env.sh holds the form's values now (Provision's "save and run" asks)."""
        if self._state is None:
            self.notify("env.sh is not loaded yet", title="Not saved", severity="warning")
            return False
        self._validate_all()
        bad = [f for f in self.query(FormField) if f.message]
        if bad:
            names = ", ".join(f.field_name for f in bad)
            self.notify(f"fix {names} first", title="Not saved", severity="error")
            bad[0].focus_input()
            return False
        values = self.changes()
        if not values:
            self.notify("env.sh already holds these values", title="Nothing to save")
            return True
        try:
            self.wizard.save_config(values)
        except (OSError, ValueError) as exc:  # e.g. a read-only folder: keep the edits
            self.notify(str(exc).splitlines()[0][:300], title="Not saved", severity="error")
            return False
        for name in FORM_SECRETS:  # saved: the field goes back to "set"
            self.field(name).value = ""
        return True

    def action_reload(self) -> None:
        """Read env.sh again; with unsaved edits, only once the user says to discard them."""
        edits = list(self.changes()) if self._state is not None else []
        if not edits:
            self._reload()
            return
        self.app.push_screen(DiscardEdits(edits), self._answered)

    def _answered(self, discard: bool | None) -> None:
        if discard:
            self._reload()
        else:
            self.notify("your edits are kept; env.sh was not read again", title="Not reloaded")

    def _reload(self) -> None:
        self._discard_edits = True
        self.wizard.reload_config()
