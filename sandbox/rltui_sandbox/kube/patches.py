"""The three patch types kube-apiserver accepts: merge (RFC 7386), JSON (RFC 6902), strategic.

Strategic merge is approximated: a merge patch that merges lists of named items by their
merge key (containers by name, volumeMounts by mountPath, ...) and honours the `$patch`,
`$setElementOrder/...`, `$retainKeys` and `$deleteFromPrimitiveList/...` directives kubectl
sends, which is what `kubectl apply` and `kubectl patch` need on built-in objects.
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    """A patch that cannot be applied; the server answers 422 Invalid."""


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _walk(doc: Any, path: str) -> tuple[Any, str]:
    """The container holding the last token of a JSON pointer, and that token."""
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    tokens = [_unescape(t) for t in path[1:].split("/")]
    cur = doc
    for token in tokens[:-1]:
        try:
            cur = cur[int(token)] if isinstance(cur, list) else cur[token]
        except (KeyError, IndexError, ValueError, TypeError):
            raise PatchError(f"path {path!r} not found") from None
    return cur, tokens[-1]


def _get(doc: Any, path: str) -> Any:
    if path == "":
        return doc
    parent, token = _walk(doc, path)
    try:
        return parent[int(token)] if isinstance(parent, list) else parent[token]
    except (KeyError, IndexError, ValueError, TypeError):
        raise PatchError(f"path {path!r} not found") from None


def _add(doc: Any, path: str, value: Any) -> Any:
    if path == "":
        return value
    parent, token = _walk(doc, path)
    if isinstance(parent, list):
        index = len(parent) if token == "-" else int(token)
        if not 0 <= index <= len(parent):
            raise PatchError(f"index {token} out of range in {path!r}")
        parent.insert(index, value)
    elif isinstance(parent, dict):
        parent[token] = value
    else:
        raise PatchError(f"cannot add to {path!r}")
    return doc


def _remove(doc: Any, path: str) -> Any:
    parent, token = _walk(doc, path)
    try:
        if isinstance(parent, list):
            parent.pop(int(token))
        else:
            del parent[token]
    except (KeyError, IndexError, ValueError, TypeError):
        raise PatchError(f"unable to remove nonexistent key {token!r} at {path!r}") from None
    return doc


def json_patch(doc: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid JSON patch operation {op!r}")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            doc = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)
            doc = _add(_remove(doc, path), path, copy.deepcopy(op.get("value"))) if path else op.get("value")
        elif kind in ("move", "copy"):
            value = copy.deepcopy(_get(doc, op["from"]))
            if kind == "move":
                doc = _remove(doc, op["from"])
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise PatchError(f"testing value {path!r} failed")
        else:
            raise PatchError(f"unknown JSON patch operation {kind!r}")
    return doc


# Merge keys of the lists kubectl apply touches in the objects this server knows.
MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "volumes": "name", "env": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
    "imagePullSecrets": "name", "conditions": "type", "ownerReferences": "uid",
    "hostAliases": "ip", "resourceClaims": "name", "topologySpreadConstraints": "topologyKey",
}
# `ports` is keyed by containerPort in a container and by port in a Service.
_PORT_KEYS = ("containerPort", "port")
# Lists of scalars merged as sets rather than replaced.
MERGED_SCALAR_LISTS = {"finalizers"}


def _merge_key(field: str, items: list) -> str | None:
    if field == "ports":
        for key in _PORT_KEYS:
            if all(isinstance(i, dict) and key in i for i in items):
                return key
        return None
    return MERGE_KEYS.get(field)


def _merge_list(field: str, current: Any, patch: list) -> list:
    current = current if isinstance(current, list) else []
    if field in MERGED_SCALAR_LISTS:
        return current + [v for v in patch if v not in current]
    key = _merge_key(field, [p for p in patch if not (isinstance(p, dict) and "$patch" in p and len(p) == 1)])
    if key is None or not all(isinstance(i, dict) for i in current):
        if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
            return [p for p in patch if not (isinstance(p, dict) and "$patch" in p)]
        return copy.deepcopy(patch)
    result = [copy.deepcopy(i) for i in current]
    for item in patch:
        if not isinstance(item, dict):
            continue
        directive = item.get("$patch")
        if directive == "replace":
            return [p for p in patch if not (isinstance(p, dict) and p.get("$patch") == "replace")]
        index = next((n for n, cur in enumerate(result) if cur.get(key) == item.get(key)), None)
        if directive == "delete":
            if index is not None:
                result.pop(index)
        elif index is None:
            result.append(strategic_merge({}, item))
        else:
            result[index] = strategic_merge(result[index], item)
    return result


def _order(items: list, order: list, key: str | None) -> list:
    """Apply `$setElementOrder`: listed items first in that order, the rest after."""
    if key is None:
        return items
    wanted = [o.get(key) if isinstance(o, dict) else o for o in order]
    ranked = sorted(items, key=lambda i: wanted.index(i.get(key)) if i.get(key) in wanted else len(wanted))
    return ranked


def strategic_merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    orders = {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$setElementOrder/"):
            orders[key.split("/", 1)[1]] = value
        elif key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in value]
        elif value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        else:
            merged = strategic_merge(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
    for field, order in orders.items():
        if isinstance(result.get(field), list):
            result[field] = _order(result[field], order, _merge_key(field, result[field]))
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result
