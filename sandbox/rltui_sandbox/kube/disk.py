"""Persistence of the fake API's objects: one JSON file per object, written atomically.

Layout: `root/<group or core>/<version>/<plural>/<namespace or _cluster>/<name>.json`, plus
`root/_meta.json` (the resourceVersion counter), `root/_logs/` and `root/_ports.json`.
Secrets are stored here, so every directory is 0700 and every file 0600.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

from rltui_sandbox.kube.resources import ResourceType, find

CLUSTER_DIR = "_cluster"


def _mkdir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)


def write_json(path: Path, data: Any) -> None:
    """Replace `path` atomically: a reader never sees half a file."""
    _mkdir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, separators=(",", ":"), sort_keys=True)
    os.replace(tmp, path)


class Disk:
    def __init__(self, root: Path) -> None:
        self.root = root
        _mkdir(root)
        os.chmod(root, 0o700)

    def object_path(self, rtype: ResourceType, namespace: str, name: str) -> Path:
        return (self.root / (rtype.group or "core") / rtype.version / rtype.plural
                / (namespace or CLUSTER_DIR) / f"{name}.json")

    def save(self, rtype: ResourceType, obj: dict) -> None:
        meta = obj["metadata"]
        write_json(self.object_path(rtype, meta.get("namespace", ""), meta["name"]), obj)

    def remove(self, rtype: ResourceType, namespace: str, name: str) -> None:
        self.object_path(rtype, namespace, name).unlink(missing_ok=True)

    def load(self) -> Iterator[tuple[ResourceType, dict]]:
        for path in sorted(self.root.glob("*/*/*/*/*.json")):
            group, version, plural = path.parts[-5:-2]
            rtype = find("" if group == "core" else group, version, plural)
            if rtype is None:
                continue
            with path.open(encoding="utf-8") as fh:
                yield rtype, json.load(fh)

    def save_meta(self, meta: dict) -> None:
        write_json(self.root / "_meta.json", meta)

    def load_meta(self) -> dict:
        try:
            return json.loads((self.root / "_meta.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}

    def save_ports(self, ports: list) -> None:
        write_json(self.root / "_ports.json", ports)

    def load_ports(self) -> list:
        try:
            return json.loads((self.root / "_ports.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []

    def log_path(self, namespace: str, pod: str, container: str) -> Path:
        return self.root / "_logs" / namespace / pod / f"{container}.log"

    def append_log(self, namespace: str, pod: str, container: str, text: str) -> None:
        path = self.log_path(namespace, pod, container)
        _mkdir(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as fh:
            fh.write(text)

    def load_logs(self) -> Iterator[tuple[str, str, str, str]]:
        for path in sorted((self.root / "_logs").glob("*/*/*.log")):
            yield path.parts[-3], path.parts[-2], path.stem, path.read_text(encoding="utf-8")

    def remove_logs(self, namespace: str, pod: str) -> None:
        folder = self.root / "_logs" / namespace / pod
        if folder.is_dir():
            for path in folder.iterdir():
                path.unlink(missing_ok=True)
            folder.rmdir()
