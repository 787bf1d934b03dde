"""A kubeconfig pointing kubectl and the `kubernetes` client at the sandbox's API server."""

from __future__ import annotations

from pathlib import Path

import yaml

from ...atomic import write_private

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
    write_private(path, yaml.safe_dump(config, sort_keys=False))
    return path
