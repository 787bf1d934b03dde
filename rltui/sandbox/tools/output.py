"""gcloud's --format for the fake gcloud: json, yaml, value(...), table(...), csv(...), none.

Keys are dotted paths into the REST resource (camelCase; snake_case is accepted too), with
`[]` / `[N]` on lists and the transforms basename(), upper(), lower(); a `:label=X` names a
table column. Values print as gcloud prints them: True/False, lists joined by `;`, maps as
`k=v;...`, missing as an empty string.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_SPEC = re.compile(r"^\s*(?P<kind>[a-z-]+)\s*(?:\[(?P<attrs>[^\]]*)\])?\s*(?:\((?P<keys>.*)\))?\s*$", re.S)
_TRANSFORM = re.compile(r"\.(basename|upper|lower)\(\)$")
KINDS = ("json", "yaml", "value", "table", "csv", "none", "get", "default", "list")


class FormatError(ValueError):
    pass


@dataclass
class Key:
    path: str
    label: str
    transforms: list[str] = field(default_factory=list)


@dataclass
class Format:
    kind: str
    attrs: dict[str, str]
    keys: list[Key]


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses/brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def _header(path: str) -> str:
    last = re.sub(r"\[\d*\]", "", path).split(".")[-1]
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", last).upper()


def parse(spec: str) -> Format:
    match = _SPEC.match(spec or "")
    if match is None or match["kind"] not in KINDS:
        raise FormatError(f"Format [{(spec or '').split('(')[0].split('[')[0]}] not found.")
    attrs: dict[str, str] = {}
    for item in _split_top(match["attrs"] or ""):
        name, _, value = item.partition("=")
        attrs[name.strip()] = value.strip().strip("'\"")
    keys = []
    for raw in _split_top(match["keys"] or ""):
        path, _, opts = raw.partition(":")
        label = re.search(r"label=([^:]*)", opts)
        transforms: list[str] = []
        while (t := _TRANSFORM.search(path)) is not None:
            transforms.insert(0, t[1])
            path = path[:t.start()]
        keys.append(Key(path.strip(), label[1].strip("'\"") if label else _header(path), transforms))
    kind = {"get": "value", "list": "value", "default": "yaml"}.get(match["kind"], match["kind"])
    return Format(kind, attrs, keys)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def resolve(obj: Any, path: str) -> Any:
    for seg in re.findall(r"\[\d*\]|[^.\[\]]+", path):
        if obj is None:
            return None
        if seg == "[]":
            continue
        if seg.startswith("["):
            index = int(seg[1:-1])
            obj = obj[index] if isinstance(obj, list) and -len(obj) <= index < len(obj) else None
        elif isinstance(obj, list):
            obj = [resolve(item, seg) for item in obj]
        elif isinstance(obj, dict):
            obj = obj[seg] if seg in obj else obj.get(_camel(seg))
        else:
            return None
    return obj


def _transform(value: Any, name: str) -> Any:
    if isinstance(value, list):
        return [_transform(v, name) for v in value]
    if value is None:
        return None
    text = str(value)
    return {"basename": text.rstrip("/").rsplit("/", 1)[-1], "upper": text.upper(), "lower": text.lower()}[name]


def text(value: Any) -> str:
    """One value the way gcloud's value() prints it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, list):
        return ";".join(text(v) for v in value)
    if isinstance(value, dict):
        return ";".join(f"{k}={text(v)}" for k, v in value.items())
    return str(value)


def _cells(item: Any, keys: list[Key]) -> list[str]:
    out = []
    for key in keys:
        value = resolve(item, key.path)
        for name in key.transforms:
            value = _transform(value, name)
        out.append(text(value))
    return out


def _yaml(data: Any) -> str:
    import yaml  # only here: the tools stay quick to start for every other format

    return yaml.safe_dump(data, sort_keys=True, default_flow_style=False, allow_unicode=True)


def render(data: Any, spec: str, *, many: bool) -> str:
    """The text gcloud prints on stdout for `data` (one resource, or a list when many)."""
    fmt = parse(spec)
    items = data if many else [data]
    if fmt.kind == "none" or data is None:
        return ""
    if fmt.kind == "json":
        return json.dumps(data, indent=2, sort_keys=True) + "\n"
    if fmt.kind == "yaml":
        return "---\n".join(_yaml(item) for item in items)
    keys = fmt.keys or [Key("", "")]
    rows = [_cells(item, keys) if fmt.keys else [text(item)] for item in items]
    if fmt.kind == "value":
        sep = fmt.attrs.get("separator", "\t")
        return "".join(sep.join(row) + "\n" for row in rows)
    heading = "no-heading" not in fmt.attrs
    if fmt.kind == "csv":
        lines = ([",".join(k.path for k in keys)] if heading else []) + [",".join(r) for r in rows]
        return "".join(line + "\n" for line in lines)
    table = ([[k.label for k in keys]] if heading else []) + rows
    if not rows:
        return ""
    widths = [max(len(r[i]) for r in table) for i in range(len(keys))]
    return "".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n" for r in table)
