"""A kubeconfig pointing kubectl and the `kubernetes` client at the sandbox's API server
(https with the sandbox CA's `certificate-authority-data` and a bearer token)."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from rltui.atomic import write_private

# Not a secret: the fixed token the sandbox's Kubernetes API always accepts (beside the ones its
# token endpoint issues); real clusters never see it.
SANDBOX_TOKEN = "rltui-sandbox"


def write_kubeconfig(path: Path, server: str, context: str = "rltui-sandbox", *,
                     ca_pem: bytes | None = None, token: str = SANDBOX_TOKEN) -> Path:
    """Write (mode 0600) a kubeconfig for `server` (https: give the CA's PEM), `context` current."""
    cluster: dict = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": context, "user": {"token": token}}],
        "contexts": [{"name": context,
                      "context": {"cluster": context, "user": context, "namespace": "default"}}],
        "current-context": context,
        "preferences": {},
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, yaml.safe_dump(config, sort_keys=False))
    return path
