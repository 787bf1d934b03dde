"""The codelab's env.sh variables and the job parameters, as one validated model.

Every problem is reported as `Problem(field, message)` where `field` is the env.sh variable
name the user sees. Secret values (HF_TOKEN, WANDB_API_KEY, NOTIFY_WEBHOOK) are `SecretStr`:
they never appear in repr, str, problems or exceptions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

# The data tables (Lustre tiers, device types) live in limits.py; importers keep finding them here.
from .capacity import Capacity, capacity_problem, parse_capacity
from .limits import DEVICE_TYPES as DEVICE_TYPES
from .limits import LUSTRE_TIERS as LUSTRE_TIERS
from .limits import MODEL_PARALLEL_SIZE as MODEL_PARALLEL_SIZE
from .limits import DeviceType as DeviceType
from .limits import LustreTier as LustreTier

# --- Problems ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Problem:
    field: str
    message: str
    meant: str = ""  # a misspelt variable's: the known one it is a small edit from

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class ConfigError(ValueError):
    """Raised with every problem found; its text holds no secret value."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))

    def __reduce__(self) -> tuple[Any, ...]:  # crosses to the wizard (rltui/cloudworker.py)
        return (ConfigError, (self.problems,))


# --- Field rules ------------------------------------------------------------------------------

PLACEHOLDER = re.compile(r"^(<[^>]*>|\{\{[^}]*\}\})$")
PROJECT_ID = re.compile(r"^(?:[a-z][-a-z0-9.]*\.[a-z]{2,}:)?[a-z][-a-z0-9]{4,28}[a-z0-9]$")
ZONE = re.compile(r"^([a-z]+-[a-z]+[0-9]+)-([a-z])$")
CLUSTER_NAME = re.compile(r"^[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?$")
RESOURCE_ID = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")  # Lustre IDs, VPC names
# The job's tokens (the job Secret, the Ray pods); NOTIFY_WEBHOOK is the supervisor's alone.
JOB_SECRET_FIELDS = frozenset({"HF_TOKEN", "WANDB_API_KEY"})
SECRET_FIELDS = JOB_SECRET_FIELDS | {"NOTIFY_WEBHOOK"}


def _placeholder(value: str) -> bool:
    return bool(PLACEHOLDER.match(value.strip()))


def _webhook_ok(url: str) -> bool:
    """https with a host; http only to a loopback host (a local receiver, as the sandbox's tests
    run one): a webhook URL carries its own credential, which plain http would show the network."""
    import ipaddress
    from urllib.parse import urlsplit

    if any(c.isspace() for c in url):
        return False
    try:
        parts = urlsplit(url)
        host, _port = parts.hostname or "", parts.port  # .port raises on a port that is no number
    except ValueError:
        return False
    if parts.scheme == "https":
        return bool(host)
    if parts.scheme != "http":
        return False
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def region_of(zone: str) -> str | None:
    m = ZONE.match(zone)
    return m.group(1) if m else None


class RLConfig(BaseModel):
    """env.sh of the codelab, plus the Lustre tier and the run script's parameters.

    Field aliases are the env.sh variable names. Construct with `parse_config()` to get
    every problem named by variable; the model alone checks single fields.
    """

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    # The codelab's env.sh
    project_id: str = Field(alias="PROJECT_ID")
    zone: str = Field("us-east1-b", alias="ZONE")
    region: str = Field("us-east1", alias="REGION")
    cluster_name: str = Field("ray-a4-gpu-spot", alias="CLUSTER_NAME")
    network_name: str = Field("", alias="NETWORK_NAME")  # "" means ${CLUSTER_NAME}-net-0
    lustre_instance_id: str = Field("rl-demo-gpu-lustre", alias="LUSTRE_INSTANCE_ID")
    lustre_capacity: int = Field(9000, alias="LUSTRE_CAPACITY")
    hf_token: SecretStr | None = Field(None, alias="HF_TOKEN")
    wandb_api_key: SecretStr | None = Field(None, alias="WANDB_API_KEY")
    num_nodes: int = Field(8, alias="NUM_NODES")
    gpus_per_node: int = Field(8, alias="GPUS_PER_NODE")
    device_type: str = Field("b200-8", alias="DEVICE_TYPE")
    # Beyond the codelab's env.sh (its commands hard-code these)
    lustre_throughput: int = Field(1000, alias="LUSTRE_THROUGHPUT")
    capacity: str = Field("spot", alias="CAPACITY")  # how the GPU nodes come: rltui/capacity.py
    model_name: str = Field("Qwen/Qwen2.5-72B-Instruct", alias="MODEL_NAME")
    converter_type: str = Field("Qwen2ForCausalLM", alias="CONVERTER_TYPE")
    max_steps: int = Field(20, alias="MAX_STEPS")
    generations_per_prompt: int = Field(8, alias="GENERATIONS_PER_PROMPT")
    prompts_per_step: int = Field(32, alias="PROMPTS_PER_STEP")
    global_batch_size: int = Field(256, alias="GLOBAL_BATCH_SIZE")
    checkpoint_enabled: bool = Field(True, alias="CHECKPOINT_ENABLED")
    checkpoint_period: int = Field(2, alias="CHECKPOINT_PERIOD")
    checkpoint_keep_top_k: int = Field(2, alias="CHECKPOINT_KEEP_TOP_K")
    checkpoint_metric: str | None = Field(None, alias="CHECKPOINT_METRIC")
    checkpoint_dir: str = Field("/lustre/nemo_rl_qwen_72b_ds_cp/nemo-rl-grpo-test1",
                                alias="CHECKPOINT_DIR")
    dataset: str = Field("DeepScaler", alias="DATASET")
    wandb_enabled: bool | None = Field(None, alias="WANDB_ENABLED")  # None: on iff a key is set
    wandb_run_name: str = Field("nemo-rl-grpo-test1", alias="WANDB_RUN_NAME")
    # An incoming webhook (Slack's, Google Chat's) the run's events are posted to (rltui/notify.py)
    notify_webhook: SecretStr | None = Field(None, alias="NOTIFY_WEBHOOK")

    # --- single-field rules (messages only; the field name is added by parse_config) ---

    @field_validator("project_id")
    @classmethod
    def _project_id(cls, v: str) -> str:
        if _placeholder(v):
            raise ValueError(f"still the template placeholder {v}: set your Google Cloud project ID")
        if ":" in v:
            # A domain-scoped ID ("example.com:proj") is a real project ID, which gcloud and
            # Terraform accept (terraform-provider-google's ProjectRegex allows "domain:"), but
            # rltui names its state folders after PROJECT_ID (plan/folders.py), xpk names its
            # blueprint folder "<project>-<region>" and hashes the project into the deployment
            # name, and no part of that was tried with a ':' in it: refused, not half supported.
            raise ValueError(
                f"{v!r} is a domain-scoped project ID, which rltui does not support: its state"
                " folders and xpk's blueprint names are made from PROJECT_ID and were never tried"
                " with a ':'; use a project whose ID has no domain")
        if not PROJECT_ID.match(v):
            raise ValueError(
                f"{v!r} is not a project ID: 6-30 lowercase letters, digits or hyphens,"
                " starting with a letter and not ending with a hyphen")
        return v

    @field_validator("zone")
    @classmethod
    def _zone(cls, v: str) -> str:
        if not ZONE.match(v):
            raise ValueError(f"{v!r} is not a zone like us-east1-b")
        return v

    @field_validator("region")
    @classmethod
    def _region(cls, v: str) -> str:
        if not re.match(r"^[a-z]+-[a-z]+[0-9]+$", v):
            raise ValueError(f"{v!r} is not a region like us-east1")
        return v

    @field_validator("cluster_name")
    @classmethod
    def _cluster_name(cls, v: str) -> str:
        if not CLUSTER_NAME.match(v):
            raise ValueError(
                f"{v!r} is not a GKE cluster name: at most 40 lowercase letters, digits or"
                " hyphens, starting with a letter and ending with a letter or digit")
        return v

    @field_validator("network_name")
    @classmethod
    def _network_name(cls, v: str) -> str:
        if v and not RESOURCE_ID.match(v):
            raise ValueError(f"{v!r} is not a VPC network name (1-63 lowercase letters, digits,"
                             " hyphens; starts with a letter)")
        return v

    @field_validator("lustre_instance_id")
    @classmethod
    def _lustre_id(cls, v: str) -> str:
        if not RESOURCE_ID.match(v):
            raise ValueError(
                f"{v!r} is not a Lustre instance ID: 1-63 lowercase letters, digits or hyphens,"
                " starting with a letter and ending with a letter or digit")
        return v

    @field_validator("hf_token", "wandb_api_key", mode="before")
    @classmethod
    def _secret(cls, v: Any) -> Any:
        raw = v.get_secret_value() if isinstance(v, SecretStr) else v
        if raw is None or (isinstance(raw, str) and (not raw.strip() or _placeholder(raw))):
            return None  # unset, or the template's placeholder
        if isinstance(raw, str) and any(c.isspace() for c in raw):
            raise ValueError("contains white space; paste the token alone")
        return v

    @field_validator("notify_webhook", mode="before")
    @classmethod
    def _webhook(cls, v: Any) -> Any:
        raw = v.get_secret_value() if isinstance(v, SecretStr) else v
        if raw is None or (isinstance(raw, str) and (not raw.strip() or _placeholder(raw))):
            return None
        if not isinstance(raw, str) or not _webhook_ok(raw):
            # Never the value: a webhook URL is its own credential.
            raise ValueError("must be an https:// URL (a Slack or Google Chat incoming webhook's);"
                             " http:// only to a loopback address (127.0.0.1, ::1 or localhost)")
        return v

    @field_validator("num_nodes")
    @classmethod
    def _num_nodes(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"must be at least 1, got {v}")
        return v

    @field_validator("device_type")
    @classmethod
    def _device_type(cls, v: str) -> str:
        if v not in DEVICE_TYPES:
            raise ValueError(f"{v!r} is not a known device type; known: {', '.join(DEVICE_TYPES)}")
        return v

    @field_validator("capacity")
    @classmethod
    def _capacity(cls, v: str) -> str:
        if problem := capacity_problem(v):
            raise ValueError(problem)
        return v.strip()

    @field_validator("lustre_throughput")
    @classmethod
    def _tier(cls, v: int) -> int:
        if v not in LUSTRE_TIERS:
            raise ValueError(f"must be one of {', '.join(map(str, sorted(LUSTRE_TIERS)))} MB/s per TiB")
        return v

    @field_validator("max_steps", "generations_per_prompt", "prompts_per_step",
                     "global_batch_size", "checkpoint_period", "checkpoint_keep_top_k",
                     "gpus_per_node", "lustre_capacity")
    @classmethod
    def _positive(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"must be at least 1, got {v}")
        return v

    @field_validator("checkpoint_metric", mode="before")
    @classmethod
    def _metric(cls, v: Any) -> Any:
        if v is None or (isinstance(v, str) and v.strip().lower() in ("", "null", "none")):
            return None
        if not (isinstance(v, str) and re.match(r"^(val|train):[A-Za-z0-9_./-]+$", v)):
            raise ValueError(f"{v!r} must be 'val:NAME' or 'train:NAME' (or null)")
        return v

    @field_validator("checkpoint_dir")
    @classmethod
    def _ckpt_dir(cls, v: str) -> str:
        if not v.startswith("/lustre/"):
            raise ValueError(f"{v!r} must be under /lustre/, the Lustre volume's mount point")
        return v

    @field_validator("model_name", "converter_type", "dataset", "wandb_run_name")
    @classmethod
    def _safe_word(cls, v: str) -> str:
        # These land in a shell script inside single quotes: keep them plain.
        if not v or not re.match(r"^[A-Za-z0-9._/@:+-]+$", v):
            raise ValueError(f"{v!r} may hold only letters, digits and . _ / @ : + -")
        return v

    # --- derived values ---

    @property
    def network(self) -> str:
        return self.network_name or f"{self.cluster_name}-net-0"

    @property
    def device(self) -> DeviceType:
        return DEVICE_TYPES[self.device_type]

    @property
    def capacity_type(self) -> Capacity:
        return parse_capacity(self.capacity)

    @property
    def lustre_tier(self) -> LustreTier:
        return LUSTRE_TIERS[self.lustre_throughput]

    @property
    def use_wandb(self) -> bool:
        return self.wandb_api_key is not None if self.wandb_enabled is None else self.wandb_enabled

    @property
    def world_size(self) -> int:
        return self.num_nodes * self.gpus_per_node

    @property
    def address_name(self) -> str:
        return f"google-managed-services-{self.network}"

    @property
    def pv_name(self) -> str:
        return f"{self.lustre_instance_id}-pv"

    @property
    def pvc_name(self) -> str:
        return f"{self.lustre_instance_id}-pvc"

    @property
    def head_service(self) -> str:
        return f"{self.cluster_name}-head-svc"

    def env_values(self) -> dict[str, str]:
        """The non-secret variables as env.sh strings (what a form shows and a file stores)."""
        out: dict[str, str] = {}
        for name, field in type(self).model_fields.items():
            alias = field.alias or name
            if alias in SECRET_FIELDS:
                continue
            value = getattr(self, name)
            if value is None:
                out[alias] = "null" if alias == "CHECKPOINT_METRIC" else ""
            elif isinstance(value, bool):
                out[alias] = "True" if value else "False"
            else:
                out[alias] = str(value)
        return out


ALIASES: dict[str, str] = {(f.alias or n): n for n, f in RLConfig.model_fields.items()}
ENV_FIELDS = tuple(ALIASES)  # every variable rltui knows, in the model's order
CODELAB_FIELDS = ENV_FIELDS[: ENV_FIELDS.index("DEVICE_TYPE") + 1]


def _cross_checks(cfg: RLConfig, broken: frozenset[str] = frozenset()) -> list[Problem]:
    """The rules across fields. `broken`: the variables that failed their own rule (`cfg` holds
    their defaults instead); a rule reading one of them is skipped, so a broken base value is
    one problem of its own and never a second, made-up one (REGION against a ZONE that is not a
    zone). Every other rule still runs: one broken field never hides another's problem."""
    problems: list[Problem] = []

    def ok(*names: str) -> bool:
        return not broken.intersection(names)

    expected_region = region_of(cfg.zone)
    if ok("ZONE", "REGION") and expected_region and cfg.region != expected_region:
        problems.append(Problem(
            "REGION", f"{cfg.region} does not match ZONE {cfg.zone}: expected {expected_region}"))
    if ok("LUSTRE_CAPACITY", "LUSTRE_THROUGHPUT"):
        tier_problem = cfg.lustre_tier.check(cfg.lustre_capacity)
        if tier_problem:
            problems.append(Problem("LUSTRE_CAPACITY", f"{cfg.lustre_capacity} GiB: {tier_problem}"))
    elif ok("LUSTRE_CAPACITY") and not any(t.allows(cfg.lustre_capacity) for t in LUSTRE_TIERS.values()):
        least = min(LUSTRE_TIERS.values(), key=lambda t: t.min_gib)
        problems.append(Problem("LUSTRE_CAPACITY", f"{cfg.lustre_capacity} GiB fits no throughput"
                                f" tier (the smallest: {least.min_gib} GiB at {least.throughput}"
                                " MB/s per TiB)"))
    device = cfg.device
    if ok("GPUS_PER_NODE", "DEVICE_TYPE") and cfg.gpus_per_node != device.gpus_per_node:
        problems.append(Problem(
            "GPUS_PER_NODE",
            f"{cfg.device_type} nodes have {device.gpus_per_node} GPUs, not {cfg.gpus_per_node}"))
    samples = cfg.prompts_per_step * cfg.generations_per_prompt
    if ok("PROMPTS_PER_STEP", "GENERATIONS_PER_PROMPT", "GLOBAL_BATCH_SIZE") and \
            samples % cfg.global_batch_size:
        problems.append(Problem(
            "GLOBAL_BATCH_SIZE",
            f"PROMPTS_PER_STEP x GENERATIONS_PER_PROMPT = {samples} is not a multiple of"
            f" {cfg.global_batch_size}"))
    if not ok("NUM_NODES", "GPUS_PER_NODE"):
        pass
    elif cfg.world_size % MODEL_PARALLEL_SIZE:
        problems.append(Problem(
            "NUM_NODES", f"{cfg.world_size} GPUs cannot hold the 70B config's TP 4 x PP 4"
                         f" ({MODEL_PARALLEL_SIZE} GPUs per model copy)"))
    elif ok("GLOBAL_BATCH_SIZE"):
        dp = cfg.world_size // MODEL_PARALLEL_SIZE
        if cfg.global_batch_size % dp:
            problems.append(Problem(
                "GLOBAL_BATCH_SIZE",
                f"{cfg.global_batch_size} does not divide by the data-parallel size {dp}"
                f" ({cfg.world_size} GPUs / TP 4 x PP 4)"))
    if ok("WANDB_ENABLED", "WANDB_API_KEY") and cfg.wandb_enabled and cfg.wandb_api_key is None:
        problems.append(Problem("WANDB_API_KEY", "needed when WANDB_ENABLED is True"))
    if ok("CLUSTER_NAME", "NETWORK_NAME", "DEVICE_TYPE"):
        problems += _network_problems(cfg)
        problems += _name_problems(cfg, with_region=ok("ZONE"))
    return problems


def _network_problems(cfg: RLConfig) -> list[Problem]:
    """On the Cluster Toolkit path (b200-8) xpk 1.16.0 puts the nodes on `<CLUSTER_NAME>-net-0`
    whatever env.sh says (src/xpk/core/blueprint/blueprint_generator.py
    generate_a4_blueprint: network_name f"{cluster_name}-net-0"), and the GKE cluster must
    run in the Managed Lustre instance's VPC network to mount it ("Your GKE cluster should
    run in the same VPC network as the Managed Lustre instance":
    cloud.google.com/kubernetes-engine/docs/concepts/managed-lustre, Requirements)."""
    from .names import TOOLKIT_MACHINE_TYPES

    xpks = f"{cfg.cluster_name}-net-0"
    if cfg.device_type not in TOOLKIT_MACHINE_TYPES or cfg.network == xpks:
        return []
    return [Problem("NETWORK_NAME", f"{cfg.network} is not {xpks}, the network xpk puts"
                    f" {cfg.device_type} nodes on: Lustre on another network cannot be mounted"
                    " from them (set NETWORK_NAME to ${CLUSTER_NAME}-net-0)")]


def _name_problems(cfg: RLConfig, with_region: bool) -> list[Problem]:
    """Every name xpk's blueprint and rltui derive that would break a Google limit (rltui/names.py),
    one line each on the variable it grows from, quoting the name and the limit. The NAT IPs are
    named after the region xpk derives from ZONE (xpk gcloud_context.py zone_to_region); with a
    broken ZONE they are not checked."""
    from .names import message, too_long

    values = {"CLUSTER_NAME": cfg.cluster_name, "NETWORK_NAME": cfg.network}
    region = region_of(cfg.zone) or cfg.region
    return [Problem(d.base, message(d, values[d.base]))
            for d in too_long(cfg.project_id, region, cfg.cluster_name, cfg.network, cfg.device_type)
            if with_region or "NAT IP" not in d.what]


def _message(err: Mapping[str, Any]) -> str:
    msg = str(err.get("msg", "invalid"))
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            return msg[len(prefix):]
    return msg


def unknown_variables(names: Iterable[str]) -> tuple[list[Problem], list[str]]:
    """env.sh's variables that rltui does not read: a problem for each that is a small edit from
    one it reads (a misspelling, which would leave that one at its default unnoticed), and the
    names of the others (the user's own: a warning at most); envfile.misspelling says which."""
    from .envfile import misspelling

    misspelt: list[Problem] = []
    others: list[str] = []
    for name in dict.fromkeys(n for n in names if n not in ALIASES):
        if near := misspelling(name, ENV_FIELDS):
            misspelt.append(Problem(name, f"unknown; did you mean {near}?", meant=near))
        else:
            others.append(name)
    return misspelt, others


def parse_config(values: Mapping[str, Any]) -> RLConfig:
    """Build the config from env.sh-style values; raise ConfigError naming every bad field.

    Every problem at once: pydantic reports each field's own rule together; then the fields
    that failed are set aside (their defaults stand in) and the rules across fields run on
    the rest, so LUSTRE_CAPACITY's tier is checked even while CLUSTER_NAME is wrong.
    Unknown keys are ignored (env.sh may hold the user's own variables), except a misspelling
    of a known one (unknown_variables), listed first.
    """
    misspelt = unknown_variables(values)[0]
    try:
        cfg = _parse_known(values)
    except ConfigError as exc:
        raise ConfigError(misspelt + exc.problems) from None
    if misspelt:
        raise ConfigError(misspelt)
    return cfg


def _parse_known(values: Mapping[str, Any]) -> RLConfig:
    known = {k: v for k, v in values.items() if k in ALIASES}
    problems: list[Problem] = []
    if not str(known.get("PROJECT_ID", "")).strip():
        problems.append(Problem("PROJECT_ID", "missing: set your Google Cloud project ID"))
        known.pop("PROJECT_ID", None)
    # Empty strings mean "not set": fall back to the default.
    data = {k: v for k, v in known.items() if not (isinstance(v, str) and v == "" and k not in SECRET_FIELDS)}
    cfg, own = _field_problems(data, known, skip_project=bool(problems))
    problems += own
    broken = frozenset(p.field for p in problems)
    if {"CLUSTER_NAME", "NETWORK_NAME"} <= broken and \
            known.get("NETWORK_NAME") == f"{known.get('CLUSTER_NAME')}-net-0":
        # env.sh's ${CLUSTER_NAME}-net-0, expanded: fixing CLUSTER_NAME fixes it, one problem
        problems = [p for p in problems if p.field != "NETWORK_NAME"]
    if cfg is None or broken:
        # A stand-in for each broken field (PROJECT_ID has no default): only to run the rest.
        rest = {k: v for k, v in data.items() if k not in broken}
        rest.setdefault("PROJECT_ID", "stand-in-project")
        try:
            cfg = RLConfig.model_validate(rest)
        except ValidationError:  # not expected: every field left passed its own rule
            raise ConfigError(problems) from None
        raise ConfigError(problems + _cross_checks(cfg, broken))
    problems = _cross_checks(cfg)
    if problems:
        raise ConfigError(problems)
    return cfg


def _field_problems(data: Mapping[str, Any], known: Mapping[str, Any],
                    skip_project: bool) -> tuple[RLConfig | None, list[Problem]]:
    """Each field's own rule, all fields at once (pydantic collects every field's error):
    the model when every field passed, else the problems."""
    try:
        return RLConfig.model_validate(data), []
    except ValidationError as exc:
        problems: list[Problem] = []
        for err in exc.errors(include_input=False, include_url=False):
            loc = err.get("loc") or ("?",)
            name = str(loc[0])
            field = RLConfig.model_fields.get(name)
            alias = (field.alias if field else None) or name
            if alias == "PROJECT_ID" and skip_project:
                continue
            message = _message(err)
            if err.get("type") in ("int_parsing", "int_from_float"):
                message = f"must be a whole number, got {str(known.get(alias))!r}"
            elif err.get("type") == "bool_parsing":
                message = f"must be True or False, got {str(known.get(alias))!r}"
            problems.append(Problem(alias, message))
        return None, problems


# What an empty field means in a form; any other field must hold a value there.
EMPTY_MEANS = {"NETWORK_NAME": "${CLUSTER_NAME}-net-0", "HF_TOKEN": "not set (or kept)",
               "WANDB_API_KEY": "not set (or kept)", "NOTIFY_WEBHOOK": "not set (or kept)",
               "CHECKPOINT_METRIC": "null", "WANDB_ENABLED": "on iff WANDB_API_KEY is set"}


def empty_problem(name: str, value: str) -> str | None:
    """An emptied form field that needs a value. In env.sh a variable left out means the
    default; in a form an empty field is the user's blank, which must not pass as a default
    nobody sees (an empty GLOBAL_BATCH_SIZE showing "ready to submit")."""
    if value.strip() or name in EMPTY_MEANS or name not in ALIASES:
        return None
    if name == "PROJECT_ID":
        return "missing: set your Google Cloud project ID"
    default = RLConfig.model_fields[ALIASES[name]].default
    return f"empty: type a value (the codelab's is {default})"


def check_field(name: str, value: str, others: Mapping[str, str] | None = None) -> str | None:
    """The message for one env.sh field as a form shows it under the input, or None if fine.

    Cross-field rules are included when `others` (the rest of the form) is given.
    """
    empty = empty_problem(name, value)
    if empty:
        return empty
    values = dict(others or {})
    values[name] = value
    values.setdefault("PROJECT_ID", "placeholder-project")
    try:
        parse_config(values)
    except ConfigError as exc:
        mine = [p.message for p in exc.problems if p.field == name]
        mine += [m for m in [misspelling_of(name, values)] if m]
        return "; ".join(mine) if mine else None   # every problem of the field, at once
    return None


def misspelling_of(name: str, values: Mapping[str, Any]) -> str | None:
    """The message for a form field whose variable env.sh misspells, else None (a field the
    form leaves empty on purpose, e.g. a secret kept from env.sh, still shows it)."""
    return "; ".join(f"env.sh sets {p.field}: unknown; did you mean {name}? (rename it in env.sh)"
                     for p in unknown_variables(values)[0] if p.meant == name) or None


def submit_problems(cfg: RLConfig, downloads_models: bool = True) -> list[Problem]:
    """What blocks `ray job submit`: where the job downloads the model from Hugging Face
    (Endpoints.downloads_models: Google Cloud, not the sandbox's demo), HF_TOKEN."""
    if downloads_models and cfg.hf_token is None:
        return [Problem("HF_TOKEN", "needed to submit the job (Qwen2.5-72B downloads from"
                                    " Hugging Face): set it in env.sh or the Configure screen")]
    return []
