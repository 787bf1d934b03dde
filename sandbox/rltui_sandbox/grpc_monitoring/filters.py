"""The subset of the Monitoring filter language the sandbox understands: ANDed `=` / `!=`
clauses on metric.type, resource.type and their labels, with starts_with, ends_with and
has_substring; and `_Invalid`, the INVALID_ARGUMENT answer of a request the sandbox refuses.

Not verified (the sandbox's own choice): the wording of these INVALID_ARGUMENT messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rltui_sandbox.grpc_monitoring.metrics import RESOURCE_TYPE
from rltui_sandbox.lustre_meter import InstanceKey

class _Invalid(Exception):
    """An INVALID_ARGUMENT answer, with the real API's kind of message."""


_CLAUSE = re.compile(
    r'\s*(?P<lhs>[A-Za-z_][\w.]*)\s*(?P<op>!=|=)\s*'
    r'(?:"(?P<lit>[^"]*)"|(?P<fn>starts_with|ends_with|has_substring)\(\s*"(?P<arg>[^"]*)"\s*\))\s*'
)
_AND = re.compile(r"\s+AND\s+")


@dataclass(frozen=True)
class _Clause:
    lhs: str
    op: str
    fn: str  # "eq", "starts_with", "ends_with", "has_substring"
    value: str

    def matches(self, actual: str | None) -> bool:
        if actual is None:
            hit = False
        elif self.fn == "eq":
            hit = actual == self.value
        elif self.fn == "starts_with":
            hit = actual.startswith(self.value)
        elif self.fn == "ends_with":
            hit = actual.endswith(self.value)
        else:
            hit = self.value in actual
        return hit if self.op == "=" else not hit


def _parse_filter(text: str) -> list[_Clause]:
    """The subset of the Monitoring filter language the sandbox understands: ANDed clauses."""
    clauses: list[_Clause] = []
    if not text.strip():
        return clauses
    for part in _AND.split(text.strip()):
        m = _CLAUSE.fullmatch(part)
        if m is None:
            raise _Invalid(f"Could not parse filter: {text!r} (near {part.strip()!r})")
        fn = m["fn"] or "eq"
        value = m["arg"] if m["fn"] else m["lit"]
        lhs = m["lhs"].replace("resource.label.", "resource.labels.").replace("metric.label.", "metric.labels.")
        if not (lhs in ("metric.type", "resource.type") or lhs.startswith(("resource.labels.", "metric.labels."))):
            raise _Invalid(f"Unknown field in filter: {m['lhs']!r}")
        clauses.append(_Clause(lhs, m["op"], fn, value))
    return clauses


def _container_fields(key: tuple[str, ...]) -> dict[str, str]:
    """A k8s_container's filter fields (grpc_monitoring/accelerators.py)."""
    from rltui_sandbox.gpu_meter import LABELS

    return {"resource.type": "k8s_container", **{f"resource.labels.{k}": v for k, v in zip(LABELS, key)}}


def _resource_fields(key: InstanceKey) -> dict[str, str]:
    project, location, instance_id = key
    return {
        "resource.type": RESOURCE_TYPE,
        "resource.labels.resource_container": project,
        "resource.labels.location": location,
        "resource.labels.instance_id": instance_id,
    }
