"""Label and field selectors, parsed and matched the way kube-apiserver does."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_RE = re.compile(rf"^\s*(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)\s*$")
_CMP_RE = re.compile(rf"^\s*(?P<key>{_KEY})\s*(?P<op>==|!=|=)\s*(?P<value>{_VALUE})\s*$")
_EXISTS_RE = re.compile(rf"^\s*(?P<neg>!?)\s*(?P<key>{_KEY})\s*$")
_VALUE_RE = re.compile(rf"^{_VALUE}$")


class SelectorError(ValueError):
    """A selector the real server would refuse with 400 BadRequest."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        return not present or value not in self.values  # "!=", "notin"


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside `in (...)` value lists."""
    parts, depth, current = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def parse_labels(selector: str | None) -> list[Requirement]:
    if not selector or not selector.strip():
        return []
    reqs = []
    for part in _split_top_level(selector):
        if m := _SET_RE.match(part):
            values = [v.strip() for v in m["values"].split(",")]
            if any(not _VALUE_RE.match(v) for v in values):
                raise SelectorError(f"unable to parse requirement: invalid label value in {part.strip()!r}")
            reqs.append(Requirement(m["key"], m["op"], frozenset(values)))
        elif m := _CMP_RE.match(part):
            op = "=" if m["op"] in ("=", "==") else "!="
            reqs.append(Requirement(m["key"], op, frozenset([m["value"]])))
        elif m := _EXISTS_RE.match(part):
            reqs.append(Requirement(m["key"], "!" if m["neg"] else "exists"))
        else:
            raise SelectorError(f"unable to parse requirement: found '{part.strip()}', expected: "
                                "'=', '!=', '==', 'in', notin'")
    return reqs


def label_matcher(selector: str | None) -> Callable[[dict], bool]:
    reqs = parse_labels(selector)

    def match(obj: dict) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(r.matches(labels) for r in reqs)
    return match


def field_value(obj: dict, path: str) -> str:
    """The string a field selector compares against; absent fields read as ""."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return ""
        cur = cur[part]
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return "" if cur is None else str(cur)


def parse_fields(selector: str | None, allowed: set[str]) -> list[tuple[str, bool, str]]:
    """(path, equal?, value) triples; unknown fields raise SelectorError like the server."""
    if not selector or not selector.strip():
        return []
    out = []
    for part in selector.split(","):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
        if not m:
            raise SelectorError(f"invalid selector: '{selector}'; can't understand '{part}'")
        path, op, value = m.groups()
        if path not in allowed:
            raise SelectorError(f"field label not supported: {path}")
        out.append((path, op != "!=", value))
    return out


def field_matcher(selector: str | None, allowed: set[str]) -> Callable[[dict], bool]:
    terms = parse_fields(selector, allowed)

    def match(obj: dict) -> bool:
        return all((field_value(obj, p) == v) == eq for p, eq, v in terms)
    return match


def label_selector_string(selector: dict | None) -> str:
    """A metav1.LabelSelector (matchLabels, matchExpressions) as selector text, as
    metav1.LabelSelectorAsSelector turns it into one (In, NotIn, Exists, DoesNotExist)."""
    selector = selector or {}
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
        else:
            raise SelectorError(f'"{op}" is not a valid label selector operator')
    return ",".join(parts)
