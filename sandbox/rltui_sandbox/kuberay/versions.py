"""What the sandbox's KubeRay operator does differently by KubeRay version, as far as rltui sees it.

Every fact is read at the release tag in github.com/ray-project/kuberay (paths under
ray-operator/; "pod.go" is controllers/ray/common/pod.go, "constant.go"
controllers/ray/utils/constant.go, "raycluster_controller.go" controllers/ray/, "features.go"
pkg/features/features.go, "service.go" controllers/ray/common/service.go):

- status.conditions. The RayClusterStatusConditions feature gate does not exist before v1.2.0:
  no status.conditions at all. v1.2.x declares it Alpha, off by default (v1.2.2 features.go:19,27);
  v1.3.0 makes it Beta, on by default (v1.3.0 features.go:19,34; still so at v1.7.0
  features.go:106). With it calculateStatus writes HeadPodReady (from the head pod's Ready
  condition) and RayClusterProvisioned (v1.2.0 raycluster_controller.go:1195-1232); from v1.3.0
  also RayClusterSuspended and RayClusterSuspending, False while not suspended (v1.3.0
  raycluster_controller.go:1378-1396; v1.6.0:1680-1699). GKE's add-on exposes no feature gate,
  so the version's default is the behaviour.
- status.readyWorkerReplicas and status.stateTransitionTimes appear in v1.2.0
  (raycluster_controller.go:1178,1254); v1.1.x writes neither.
- status.state "ready": every pod of the cluster Running and Ready (utils CheckAllPodsRunning);
  from v1.3.0 also only when there are exactly desiredWorkerReplicas + 1 pods and the reconcile
  had no error (v1.3.0 raycluster_controller.go:1304; v1.6.0:1605). Never cleared afterwards in
  any version (only Ready or Suspended are ever assigned).
- The head service is headless (clusterIP None) from v1.2.0 unless the operator's
  ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE is "true" (v1.2.0 service.go:127-129; v1.1.0 has no such
  branch); status.head.serviceIP is then the head pod's IP (v1.6.0 raycluster_controller.go,
  getHeadServiceIPAndName).
- Probes. From v1.1.0 BuildPod injects a liveness and a readiness probe into the Ray container
  unless the operator's env ENABLE_PROBES_INJECTION is "false" (case-insensitive; v1.1.0
  pod.go:146,373; v1.6.0 pod.go:345,661), each only when the user gave none
  (initLivenessAndReadinessProbe: `if rayContainer.LivenessProbe == nil`, v1.6.0 pod.go:521,541).
  Both run the same check: the head checks the raylet (through the dashboard agent) and the
  GCS (through the dashboard), a worker the raylet only:
    `wget -T 2 -q -O- http://localhost:52365/api/local_raylet_healthz | grep success`
    ` && wget -T 2 -q -O- http://localhost:8265/api/gcs_healthz | grep success` (head)
  as `bash -c` (v1.1.0 pod.go:242-264, constant.go:164: -T 2 for both); from v1.2.0 the GCS
  check waits -T 10, the constant DefaultReadinessProbeFailureThreshold passed as the timeout
  (v1.2.0 pod.go:243-254); from v1.4.0 each wget has `--tries 1` (v1.4.0 constant.go:198); from
  v1.6.0 the ports come from rayStartParams dashboard-agent-listen-port / dashboard-port
  (v1.6.0 pod.go:479-509), and for a spec.rayVersion of 2.53.0 or later
  (supportsUnifiedHealthCheck, k8s ParseGeneric; unparsable or empty: no) both probes are
  `httpGet :<agent port>/api/healthz` instead (v1.6.0 pod.go:467-476, constant.go:260).
  Timings (constant.go: v1.1.0:142-154, v1.2.0:151-163, v1.2.2:153-169, v1.6.0:228-244):
  readiness initialDelaySeconds 10, periodSeconds 5, successThreshold 1, failureThreshold 10;
  liveness 30, 5, 1, 120; timeoutSeconds 1 in v1.1.x, 2 in v1.2.0-v1.2.1, and from v1.2.2 5 for
  the head and 2 for a worker (v1.2.2 pod.go:266-290).
- Worker pods get a `wait-gcs-ready` init container (`ray health-check` against the head
  service until it answers) unless ENABLE_INIT_CONTAINER_INJECTION is "false" (v1.1.0
  pod.go:169; v1.6.0 pod.go:368): a worker's Ray container, and with it its probes, starts only
  once the GCS answers.

v1.0.x is not imitated: it injects probes only with GCS fault tolerance on (v1.0.0 pod.go:320-348).
GKE's documentation names no KubeRay version for its RayOperator add-on (searched: "Ray
Operator on GKE", the enable-ray-on-gke and overview pages, GKE release notes), so DEFAULT is
the newest release tag in the KubeRay repository.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SUPPORTED = ("1.1.0", "1.1.1", "1.2.0", "1.2.1", "1.2.2", "1.3.0", "1.3.1", "1.3.2", "1.4.0", "1.4.1",
             "1.4.2", "1.5.0", "1.5.1", "1.5.2", "1.6.0", "1.6.1", "1.6.2", "1.7.0")
DEFAULT = "1.7.0"

AGENT_PORT = 52365      # DefaultDashboardAgentListenPort (v1.6.0 constant.go:105)
DASHBOARD_PORT = 8265   # DefaultDashboardPort (v1.6.0 constant.go:103)
RAYLET_HEALTH = "api/local_raylet_healthz"
GCS_HEALTH = "api/gcs_healthz"
NODE_HEALTH = "/api/healthz"   # RayNodeHealthPath (v1.6.0 constant.go:260)
UNIFIED_RAY = (2, 53, 0)       # supportsUnifiedHealthCheck's minimum (v1.6.0 pod.go:474)
PROBES_ENV = "ENABLE_PROBES_INJECTION"
CLUSTER_IP_ENV = "ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE"

# k8s.io/apimachinery/pkg/util/version: versionMatchRE; ParseGeneric wants two or more numeric
# fields, the first without a leading zero, and ignores what follows them.
_GENERIC = re.compile(r"^\s*v?([0-9]+(?:\.[0-9]+)*)(.*)$", re.S)


class UnsupportedVersion(ValueError):
    """A KubeRay version the sandbox does not imitate (the message is one line for the user)."""


def parse_generic(text: str) -> tuple[int, ...] | None:
    """The numeric fields of a version as k8s ParseGeneric reads it, or None when it fails."""
    m = _GENERIC.match(text or "")
    if m is None:
        return None
    fields = m.group(1).split(".")
    if len(fields) < 2 or (len(fields[0]) > 1 and fields[0].startswith("0")):
        return None
    return tuple(int(f) for f in fields)


def _at_least(have: tuple[int, ...], want: tuple[int, ...]) -> bool:
    """Version.AtLeast: field by field, a missing field counting as 0."""
    n = max(len(have), len(want))
    return (have + (0,) * (n - len(have))) >= (want + (0,) * (n - len(want)))


@dataclass(frozen=True)
class KubeRay:
    """One KubeRay release as the RayOperator add-on runs it, with the operator's env."""

    version: str = DEFAULT
    env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str | None, env: dict[str, str] | None = None) -> KubeRay:
        """`1.6.0` or `v1.6.0`; UnsupportedVersion (one line) for anything else."""
        if text is None:
            return cls(DEFAULT, tuple(sorted((env or {}).items())))
        plain = text.strip().removeprefix("v")
        if plain not in SUPPORTED:
            raise UnsupportedVersion(f"KubeRay version {text!r} is not one the sandbox imitates"
                                     f" (releases {SUPPORTED[0]} to {SUPPORTED[-1]}, e.g. {DEFAULT})")
        return cls(plain, tuple(sorted((env or {}).items())))

    @property
    def key(self) -> tuple[int, ...]:
        return tuple(int(p) for p in self.version.split("."))

    def _env(self, name: str) -> str:
        return dict(self.env).get(name, "")

    def since(self, version: str) -> bool:
        return self.key >= tuple(int(p) for p in version.split("."))

    # ---- status --------------------------------------------------------------------------
    @property
    def status_conditions(self) -> bool:
        """The RayClusterStatusConditions gate's default: absent < 1.2, Alpha off in 1.2, on from 1.3."""
        return self.since("1.3.0")

    @property
    def suspend_conditions(self) -> bool:
        return self.status_conditions and self.since("1.3.0")

    @property
    def ready_worker_replicas(self) -> bool:
        return self.since("1.2.0")

    @property
    def state_needs_pod_count(self) -> bool:
        return self.since("1.3.0")

    @property
    def headless_head_service(self) -> bool:
        return self.since("1.2.0") and self._env(CLUSTER_IP_ENV).lower() != "true"

    # ---- probes ----------------------------------------------------------------------------
    @property
    def injects_probes(self) -> bool:
        return self._env(PROBES_ENV).lower() != "false"

    def unified_health_check(self, ray_version: str) -> bool:
        parsed = parse_generic(ray_version)
        return self.since("1.6.0") and parsed is not None and _at_least(parsed, UNIFIED_RAY)

    def _timeout(self, head: bool) -> int:
        if not self.since("1.2.0"):
            return 1
        return 5 if head and self.since("1.2.2") else 2

    def _wget(self, timeout: int, port: int, path: str) -> str:
        if not self.since("1.2.0"):
            timeout = 2   # the v1.1.x command has its -T 2 written in
        tries = "--tries 1 " if self.since("1.4.0") else ""
        return f"wget {tries}-T {timeout} -q -O- http://localhost:{port}/{path} | grep success"

    def probe_action(self, head: bool, ray_start_params: dict, ray_version: str) -> dict:
        """The handler both injected probes share (a Kubernetes Probe's exec or httpGet)."""
        def port(key: str, default: int) -> int:
            if not self.since("1.6.0"):
                return default
            try:
                value = int(str((ray_start_params or {}).get(key, default)))
            except ValueError:
                return default
            return value if -2 ** 31 <= value < 2 ** 31 else default

        agent = port("dashboard-agent-listen-port", AGENT_PORT)
        if self.unified_health_check(ray_version):
            return {"httpGet": {"path": NODE_HEALTH, "port": agent, "scheme": "HTTP"}}
        commands = [self._wget(2, agent, RAYLET_HEALTH)]
        if head:
            commands.append(self._wget(10, port("dashboard-port", DASHBOARD_PORT), GCS_HEALTH))
        return {"exec": {"command": ["bash", "-c", " && ".join(commands)]}}

    def inject_probes(self, container: dict, head: bool, ray_start_params: dict, ray_version: str) -> None:
        """Give the Ray container the probes this KubeRay injects, keeping any the user wrote."""
        if not self.since("1.1.0") or not self.injects_probes:
            return
        action = self.probe_action(head, ray_start_params, ray_version)
        timeout = self._timeout(head)
        if container.get("livenessProbe") is None:
            container["livenessProbe"] = {**action, "initialDelaySeconds": 30, "timeoutSeconds": timeout,
                                          "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 120}
        if container.get("readinessProbe") is None:
            container["readinessProbe"] = {**action, "initialDelaySeconds": 10, "timeoutSeconds": timeout,
                                           "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 10}
