"""A kubeconfig pointing kubectl and the `kubernetes` client at the sandbox's API server."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

# Not a secret: the sandbox accepts any token; real clusters never see this file.
SANDBOX_TOKEN = "rltui-sandbox"


def write_kubeconfig(path: Path, server: str, context: str = "rltui-sandbox") -> Path:
    """Write (mode 0600) a kubeconfig for the plain-http `server`, with `context` current."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server}}],
        "users": [{"name": context, "user": {"token": SANDBOX_TOKEN}}],
        "contexts": [{"name": context,
                      "context": {"cluster": context, "user": context, "namespace": "default"}}],
        "current-context": context,
        "preferences": {},
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        yaml.safe_dump(config, fh, sort_keys=False)
    os.replace(tmp, path)
    os.chmod(path, 0o600)
    return path
