"""What rltui may use of the sandbox, and the version of that promise (CHANGELOG.md beside
pyproject.toml has one line per change).

rltui imports this module and nothing else of rltui_sandbox (rltui's import-linter contract).
The promise covers:
- `start(...)` and its options, `stop()`, `read_status()` and `sandbox_dir()`;
- the status JSON (`daemon.json`, `rltui sandbox status --json`): the keys in STATUS_KEYS, and
  `contract`, this version; a reader refuses a sandbox whose major version differs; `rest` maps
  an API's name to its REST base URL, `iam` among them (IAM v1 projects.serviceAccounts
  create/get/list/delete/getIamPolicy/setIamPolicy), and `cloudresourcemanager` serves the
  project's getIamPolicy/setIamPolicy (a stale etag is 409 ABORTED on both); `storage` (1.3) is
  the host root of the Cloud Storage JSON API (storage/v1 buckets and objects, uploads, media);
- Compute Engine's zonal reservations (1.3): reservations.get and reservations.list on the
  compute REST base (a missing one is 404 notFound); xpk's capacity flags as 1.16.0 takes them
  (exactly one of --spot, --on-demand, --reservation, described first; --flex refused);
- Managed Lustre's ExportData (1.3) on the gRPC and REST surfaces: an ACTIVE instance's folder
  copied into a sandbox bucket, as an operation whose ExportDataMetadata counters grow;
- Cloud Monitoring (`grpc`) serving, besides Lustre's metrics, GKE's accelerator metrics (1.3):
  kubernetes.io/container/accelerator/{duty_cycle,memory_used,memory_total} on k8s_container for
  each GPU worker pod, from the demo job's phases (busy in a step, idle while it saves);
- Workload Identity on the clusters xpk makes (Cluster Toolkit): workloadIdentityConfig.workloadPool
  `<project>.svc.id.goog`, every pool GKE_METADATA; a process pod on such a pool gets
  GCE_METADATA_HOST and GCE_METADATA_IP (its own `127.0.0.1:<port>` of the sandbox's GKE metadata
  server, which google-auth's compute_engine.Credentials reads); the server's tokens are allowed,
  by GKE, IAM and Resource Manager, only what their principal's roles grant (403
  PERMISSION_DENIED, ErrorInfo reason IAM_PERMISSION_DENIED), any other token is the owner's;
- the environment `rltui sandbox env` prints (`env_lines`, `shell_tools`), with (1.3)
  CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE for `gcloud storage`;
- the fault commands: `preempt`, `stall` (a job's driver frozen with SIGSTOP);
- the checks the CLI runs before starting one (`kuberay_version`, `ray_env_problem`,
  `missing_dependencies`, and (1.3) `capacity_knob` for `start`'s `unavailable_capacity`: GPU
  pools of a kind, spot or on-demand, failing as a GKE stockout).
A minor version adds (a key, an option, a command); a major one changes or removes.
"""

from __future__ import annotations

from .manage import (SandboxError, Status, env_lines, preempt, read_status, sandbox_dir, shell_tools, stall, start,
                     stop)

CONTRACT_VERSION = "1.3"

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


def capacity_knob(item: str) -> str:
    """`start`'s `--capacity KIND=unavailable` (1.3) -> KIND, for `unavailable_capacity`;
    ValueError (one line naming the flag) for another value."""
    from .world_capacity import parse_knob

    return parse_knob(item)


def ray_env_problem() -> str | None:
    """Why no sandbox could start here (its cluster's Ray environment is missing), or None."""
    from . import images

    try:
        images.ray_env()
    except images.MissingRayEnv as exc:
        return str(exc)
    return None


__all__ = [
    "CONTRACT_VERSION", "STATUS_KEYS", "SandboxError", "Status", "capacity_knob", "env_lines", "kuberay_version",
    "major", "missing_dependencies", "preempt", "ray_env_problem", "read_status", "sandbox_dir", "shell_tools", "stall",
    "start", "stop",
]
