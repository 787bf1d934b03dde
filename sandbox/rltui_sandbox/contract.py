"""What rltui may use of the sandbox, and the version of that promise (CHANGELOG.md beside
pyproject.toml has one line per change).

rltui imports this module and nothing else of rltui_sandbox (rltui's import-linter contract).
The promise covers:
- `start(...)` and its options, `stop()`, `read_status()` and `sandbox_dir()`;
- the status JSON (`daemon.json`, `rltui sandbox status --json`): the keys in STATUS_KEYS, and
  `contract`, this version; a reader refuses a sandbox whose major version differs; `rest` maps
  an API's name to its REST base URL, `iam` among them (IAM v1 projects.serviceAccounts
  create/get/list/delete/getIamPolicy/setIamPolicy), and `cloudresourcemanager` serves the
  project's getIamPolicy/setIamPolicy (a stale etag is 409 ABORTED on both);
- Workload Identity on the clusters xpk makes (Cluster Toolkit): workloadIdentityConfig.workloadPool
  `<project>.svc.id.goog`, every pool GKE_METADATA; a process pod on such a pool gets
  GCE_METADATA_HOST and GCE_METADATA_IP (its own `127.0.0.1:<port>` of the sandbox's GKE metadata
  server, which google-auth's compute_engine.Credentials reads); the server's tokens are allowed,
  by GKE, IAM and Resource Manager, only what their principal's roles grant (403
  PERMISSION_DENIED, ErrorInfo reason IAM_PERMISSION_DENIED), any other token is the owner's;
- the environment `rltui sandbox env` prints (`env_lines`, `shell_tools`);
- the fault commands: `preempt`, `stall` (a job's driver frozen with SIGSTOP);
- the checks the CLI runs before starting one (`kuberay_version`, `ray_env_problem`,
  `missing_dependencies`).
A minor version adds (a key, an option, a command); a major one changes or removes.
"""

from __future__ import annotations

from .manage import (SandboxError, Status, env_lines, preempt, read_status, sandbox_dir, shell_tools, stall, start,
                     stop)

CONTRACT_VERSION = "1.2"

# Keys of the status JSON that rltui reads (daemon.py writes them); others are the sandbox's own.
STATUS_KEYS = ("contract", "pid", "grpc", "kube_api", "compute", "rest", "adc", "bin_dir", "tool_env",
               "speed", "kuberay_version")


def major(version: str) -> int:
    """The major number of a contract version ("1.0" -> 1); -1 when it is not one."""
    head = str(version).partition(".")[0]
    return int(head) if head.isdigit() else -1


def kuberay_version(text: str) -> str:
    """The KubeRay release `--kuberay-version` names, as the sandbox will run it; ValueError
    (one line for the user) for one it does not imitate."""
    from .kuberay.versions import KubeRay

    return KubeRay.parse(text).version


# The third-party modules the daemon and its servers import (sandbox/pyproject.toml's dependencies).
_NEEDS = ("aiohttp", "cryptography", "grpc", "numpy", "ray", "yaml")


def missing_dependencies() -> list[str]:
    """Which of the sandbox's own dependencies this Python lacks: an editable rltui without its
    `test` extra puts this package on sys.path without them."""
    import importlib.util

    return [name for name in _NEEDS if importlib.util.find_spec(name) is None]


def ray_env_problem() -> str | None:
    """Why no sandbox could start here (its cluster's Ray environment is missing), or None."""
    from . import images

    try:
        images.ray_env()
    except images.MissingRayEnv as exc:
        return str(exc)
    return None


__all__ = [
    "CONTRACT_VERSION", "STATUS_KEYS", "SandboxError", "Status", "env_lines", "kuberay_version",
    "major", "missing_dependencies", "preempt", "ray_env_problem", "read_status", "sandbox_dir", "shell_tools", "stall",
    "start", "stop",
]
