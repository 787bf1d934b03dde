"""What the real apiserver does on create/update of Deployments, ReplicaSets and ConfigMaps.

Defaults after kubernetes/kubernetes pkg/apis/apps/v1/defaults.go (SetDefaults_Deployment:
replicas 1, strategy RollingUpdate with maxUnavailable/maxSurge 25%, revisionHistoryLimit 10,
progressDeadlineSeconds 600; SetDefaults_ReplicaSet: replicas 1) and pkg/apis/core/v1/defaults.go
for the pod template (restartPolicy Always, dnsPolicy ClusterFirst, schedulerName
default-scheduler, terminationGracePeriodSeconds 30, securityContext {}, a container's
terminationMessagePath/Policy and imagePullPolicy - Always for `:latest` or no tag, else
IfNotPresent - a configMap volume's defaultMode 420, a fieldRef's apiVersion v1).

Validation after pkg/apis/apps/validation/validation.go (ValidateDeploymentSpec,
ValidateReplicaSetSpec, ValidatePodTemplateSpecForReplicaSet and the Update variants) and
pkg/apis/core/validation/validation.go (ValidateConfigMap): the messages are the field errors'
texts; a Go value in a message (`map[string]string{...}`) is printed as Go's %#v would.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rltui_sandbox.kube.errors import invalid
from rltui_sandbox.kube.resources import ResourceType
from rltui_sandbox.kube.selectors import SelectorError, label_selector_string, label_matcher

WORKLOADS = ("deployments", "replicasets")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
CONFIGMAP_MAX_BYTES = 1024 * 1024


def _go_map(labels: dict) -> str:
    return "map[string]string{" + ", ".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in sorted(labels.items())) + "}"


def default_pod_spec(spec: dict) -> None:
    """The core/v1 defaults of a pod spec inside a template (no status: it is no pod yet)."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        image = str(container.get("image", ""))
        tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
        latest = not tagged or image.endswith(":latest")
        container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("resources", {})
        for port in container.get("ports") or []:
            port.setdefault("protocol", "TCP")
        for entry in container.get("env") or []:
            ref = (entry.get("valueFrom") or {}).get("fieldRef")
            if isinstance(ref, dict):
                ref.setdefault("apiVersion", "v1")
    for volume in spec.get("volumes") or []:
        for source in ("configMap", "secret"):
            if isinstance(volume.get(source), dict):
                volume[source].setdefault("defaultMode", 420)


def defaults_on_create(rtype: ResourceType, obj: dict) -> None:
    defaults_on_update(rtype, obj)
    obj.pop("status", None)


def defaults_on_update(rtype: ResourceType, obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    if rtype.plural == "deployments":
        strategy = spec.setdefault("strategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxUnavailable", "25%")
            rolling.setdefault("maxSurge", "25%")
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
    template = spec.get("template")
    if isinstance(template, dict):
        template.setdefault("metadata", {})
        default_pod_spec(template.setdefault("spec", {}))


def validate(rtype: ResourceType, obj: dict) -> None:
    """ValidateDeploymentSpec / ValidateReplicaSetSpec for the fields the sandbox uses."""
    if rtype.plural == "configmaps":
        return _validate_configmap(rtype, obj)
    name = obj["metadata"]["name"]
    spec = obj.get("spec") or {}
    selector = spec.get("selector")
    if not isinstance(selector, dict):
        raise invalid(rtype, name, "spec.selector", "FieldValueRequired", "Required value")
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        raise invalid(rtype, name, "spec.selector", "FieldValueInvalid",
                      f"Invalid value: {_go_selector(selector)}: empty selector is invalid for deployment")
    replicas = spec.get("replicas", 1)
    if not isinstance(replicas, int) or replicas < 0:
        raise invalid(rtype, name, "spec.replicas", "FieldValueInvalid",
                      f"Invalid value: {replicas}: must be greater than or equal to 0")
    template = spec.get("template")
    if not isinstance(template, dict) or not (template.get("spec") or {}).get("containers"):
        raise invalid(rtype, name, "spec.template.spec.containers", "FieldValueRequired", "Required value")
    labels = (template.get("metadata") or {}).get("labels") or {}
    try:
        matches = label_matcher(label_selector_string(selector))({"metadata": {"labels": labels}})
    except SelectorError as exc:
        raise invalid(rtype, name, "spec.selector", "FieldValueInvalid", f"Invalid value: {exc}") from None
    if not matches:
        raise invalid(rtype, name, "spec.template.metadata.labels", "FieldValueInvalid",
                      f"Invalid value: {_go_map(labels)}: `selector` does not match template `labels`")
    policy = (template.get("spec") or {}).get("restartPolicy", "Always")
    if policy != "Always":
        raise invalid(rtype, name, "spec.template.spec.restartPolicy", "FieldValueNotSupported",
                      f'Unsupported value: "{policy}": supported values: "Always"')
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate" and strategy.get("rollingUpdate") is not None:
        raise invalid(rtype, name, "spec.strategy.rollingUpdate", "FieldValueForbidden",
                      "Forbidden: may not be specified when strategy `type` is 'Recreate'")
    if strategy.get("type") not in (None, "Recreate", "RollingUpdate"):
        raise invalid(rtype, name, "spec.strategy.type", "FieldValueNotSupported",
                      f'Unsupported value: "{strategy.get("type")}": supported values: "Recreate", "RollingUpdate"')


def _go_selector(selector: dict) -> str:
    return f"v1.LabelSelector{{MatchLabels:{_go_map(selector.get('matchLabels') or {})}, MatchExpressions:[]}}"


def validate_update(rtype: ResourceType, old: dict, new: dict) -> None:
    """apps/v1 selectors are immutable (ValidateDeploymentUpdate / ValidateReplicaSetUpdate);
    an immutable ConfigMap keeps its data (ValidateConfigMapUpdate)."""
    name = new["metadata"]["name"]
    if rtype.plural == "configmaps":
        if old.get("immutable"):
            if new.get("data") != old.get("data") or new.get("binaryData") != old.get("binaryData"):
                raise invalid(rtype, name, "data", "FieldValueForbidden",
                              "Forbidden: field is immutable when `immutable` is set")
            if not new.get("immutable"):
                raise invalid(rtype, name, "immutable", "FieldValueForbidden",
                              "Forbidden: field is immutable when `immutable` is set")
        return
    old_sel, new_sel = (old.get("spec") or {}).get("selector"), (new.get("spec") or {}).get("selector")
    if old_sel != new_sel:
        raise invalid(rtype, name, "spec.selector", "FieldValueInvalid",
                      f"Invalid value: {_go_selector(new_sel or {})}: field is immutable")


def _validate_configmap(rtype: ResourceType, obj: dict) -> None:
    name = obj["metadata"]["name"]
    total = 0
    for field in ("data", "binaryData"):
        section = obj.get(field) or {}
        if not isinstance(section, dict):
            raise invalid(rtype, name, field, "FieldValueInvalid", "Invalid value: must be a map of strings")
        for key, value in section.items():
            if len(key) > 253 or not _CONFIG_KEY.match(key) or key in (".", ".."):
                raise invalid(rtype, name, f"{field}[{key}]", "FieldValueInvalid",
                              f'Invalid value: "{key}": a valid config key must consist of alphanumeric '
                              "characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or "
                              "'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")
            if not isinstance(value, str):
                raise invalid(rtype, name, f"{field}[{key}]", "FieldValueInvalid",
                              "Invalid value: must be a string")
            total += len(value.encode()) + len(key)
    if total > CONFIGMAP_MAX_BYTES:
        raise invalid(rtype, name, "[]", "FieldValueTooLong",
                      f"Too long: must have at most {CONFIGMAP_MAX_BYTES} bytes")


def pod_template_hash(template: Any, collision_count: int = 0) -> str:
    """A stable hash of the template, spelled as the controller spells pod-template-hash
    (FNV-32a, then rand.SafeEncodeString's alphabet). The real one hashes the Go struct printed
    by spew (pkg/controller/controller_utils.go ComputeHash), which the sandbox cannot
    reproduce: the value has the real shape, not the real digits."""
    text = json.dumps(template, sort_keys=True, separators=(",", ":")) + (f"#{collision_count}" if collision_count else "")
    h = 0x811C9DC5
    for byte in text.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    digits = str(h)
    return "".join(alphabet[ord(d) % len(alphabet)] for d in digits)
