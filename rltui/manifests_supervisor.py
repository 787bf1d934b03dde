"""The job supervisor's Kubernetes objects, as pure functions of the config and the run.

`rltui submit` makes them after Ray accepts the job's first attempt (rltui/oncluster/supervisor.py
says what the supervisor does). Least privilege: a ServiceAccount of its own whose Role may read and
write only this run's ConfigMap (by name), read the pods and the RayCluster, and nothing else: no
Secrets (the tokens stay in the job's Secret, which only the Ray pods read; NOTIFY_WEBHOOK is in a
Secret of its own that the kubelet mounts into the supervisor's pod alone, NOTIFY_SECRET, never
read through the API). Placement: the one
pool of xpk's cluster that is neither Spot nor GPU (node affinity on GKE's own node labels
`cloud.google.com/gke-spot` and `cloud.google.com/gke-accelerator`), so the preemption it recovers
from cannot take it too. On xpk's Cluster Toolkit path that is the `system` pool, tainted
`components.gke.io/gke-managed-components=true:NoSchedule` by default (cluster-toolkit v1.94.0
modules/scheduler/gke-cluster variables.tf, system_node_pool_taints); xpk gives Kueue and JobSet
the same toleration (xpk cluster_gcluster.py), and so does the supervisor.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from typing import Any

from .config import RLConfig
from .manifests import MANAGED_BY, RAY_VERSION
from .oncluster.watchdog import STALL_FLOOR_MIN_S, STALL_FLOOR_S, STALL_K

NAME = "rltui-supervisor"
NAMESPACE = "default"  # where the RayCluster and its Secret live (the codelab uses default)
CODE_CONFIGMAP = "rltui-supervisor-code"  # + a hash of the code: a new rltui never swaps a running one's
CODE_MOUNT = "/opt/rltui"
RUN_LABEL = "rltui/run"
ROLE_LABEL = "app.kubernetes.io/name"
IMAGE = f"rayproject/ray:{RAY_VERSION}"  # the RayCluster's own Ray version: its job client matches
MAX_ATTEMPTS = 3
SUBMIT_GRACE_S = 180
POLL_S = 10.0  # seconds between the supervisor's looks on GKE (a faster sandbox scales it down)
# kube-controller-manager --node-monitor-grace-period's default from Kubernetes 1.32 (40 s before):
# a node that vanished shows NotReady, and its pods not Ready, only after it. GKE runs its own
# control plane and does not publish the value it sets; one more poll covers the node controller's
# --node-monitor-period (5 s).
NODE_GRACE_S = 50.0 + POLL_S
# How long `submit` waits for the supervisor's pod to run before it says recovery is not on: a
# scheduled pod pulls rayproject/ray on the system node first (about a minute for its few GB).
START_WAIT_S = 300.0
GCS_RECONNECT_S = 60.0  # RAY_gcs_rpc_server_reconnect_timeout_s default (src/ray/common/ray_config_def.h)
DASHBOARD_PORT = 8265
# NOTIFY_WEBHOOK, the supervisor's alone: a Secret mounted as a file into its pod only (never the
# Ray pods': least privilege), read at each post (oncluster/webhook.py), so a later submit's
# value is the one used. Built in memory, never written to disk (like the job Secret).
NOTIFY_SECRET = f"{NAME}-notify"
NOTIFY_KEY = "NOTIFY_WEBHOOK"
NOTIFY_MOUNT = "/var/run/secrets/rltui-notify"
SYSTEM_POOL_TOLERATION = {"key": "components.gke.io/gke-managed-components", "operator": "Equal",
                          "value": "true", "effect": "NoSchedule"}


def run_key(job_id: str) -> str:
    """`rltui-20261201-093000-ab12cd` -> `20261201-093000-ab12cd` (names stay short and valid)."""
    return job_id.removeprefix("rltui-").lower()


def run_configmap(job_id: str) -> str:
    return f"rltui-run-{run_key(job_id)}"


def deployment_name(job_id: str) -> str:
    return f"{NAME}-{run_key(job_id)}"


# The command runs the first; it imports the others.
CODE_FILES = ("supervisor.py", "kubeapi.py", "rayapi.py", "jobstatus.py", "guard.py", "pods.py", "events.py",
              "webhook.py", "watchdog.py")

# The budget guard (rltui/oncluster/guard.py; `submit --down-after gpus`, `--max-cost USD`): its
# Google service account (accountId: 6-30 characters, [a-z][-a-z0-9]*[a-z0-9], iam v1
# projects.serviceAccounts.create), one per cluster, which the supervisor's Kubernetes
# ServiceAccount acts as through Workload Identity Federation: the KSA carries this annotation
# ("Link Kubernetes ServiceAccounts to IAM", cloud.google.com/kubernetes-engine/docs/how-to/
# workload-identity). The guard reads the GPU nodes, cluster-wide objects: a ClusterRole of its own.
GUARD_ACCOUNT_PREFIX = "rltui-guard-"
GSA_ANNOTATION = "iam.gke.io/gcp-service-account"
GUARD_ROLE_NAME = f"{NAME}-guard"


def supervisor_sources() -> dict[str, str]:
    """The supervisor's files by name, as its code ConfigMap carries them (one folder in the pod)."""
    folder = resources.files("rltui.oncluster")
    return {name: folder.joinpath(name).read_text(encoding="utf-8") for name in CODE_FILES}


def guard_account_id(cfg: RLConfig) -> str:
    """`rltui-guard-<8 hex>`: a short hash of the project, region and cluster (20 characters)."""
    where = f"{cfg.project_id}/{cfg.region}/{cfg.cluster_name}"
    return GUARD_ACCOUNT_PREFIX + hashlib.sha256(where.encode()).hexdigest()[:8]


# optional: without NOTIFY_WEBHOOK there is no Secret (or no key), and the pod starts with an
# empty folder; `items` names the one key, so nothing else a Secret of that name holds is
# mounted (kubernetes.io API reference, SecretVolumeSource: "optional: Specify whether the
# Secret or its keys must be defined"; items: "If specified, the listed keys will be projected
# into the specified paths, and unlisted keys will not be present").
NOTIFY_VOLUME = {"name": "notify", "secret": {"secretName": NOTIFY_SECRET, "optional": True,
                                              "items": [{"key": NOTIFY_KEY, "path": NOTIFY_KEY}]}}


def notify_secret(cfg: RLConfig) -> dict[str, Any] | None:
    """The Secret that holds NOTIFY_WEBHOOK for the supervisors, None when env.sh sets none.
    Keep it in memory: never dump it."""
    if cfg.notify_webhook is None:
        return None
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": _meta(NOTIFY_SECRET, cfg),
            "stringData": {NOTIFY_KEY: cfg.notify_webhook.get_secret_value()}}


def _meta(name: str, cfg: RLConfig, job_id: str | None = None) -> dict[str, Any]:
    labels = {**MANAGED_BY, ROLE_LABEL: NAME}
    if job_id:
        labels[RUN_LABEL] = run_key(job_id)
    return {"name": name, "namespace": NAMESPACE, "labels": labels}


def run_spec(cfg: RLConfig, job_id: str, *, entrypoint: str, runtime_env: dict[str, Any],
             metadata: dict[str, str], submitted_at: float, max_attempts: int = MAX_ATTEMPTS,
             time_scale: float = 1.0, guard: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the supervisor needs to submit the job again (no working_dir: the files travel in the
    run's ConfigMap; no secret: runtime_env never holds one). Its waits are the cloud's times
    times `time_scale` (1 on Google; a faster sandbox runs them faster); its polls, like the
    wizard's, at least a real second apart. `guard`: the budget guard's settings
    (rltui/plan/guard.py `prepare_guard`: pools, price, where GKE is; no secret), else none."""
    spec = {"run": job_id, "raycluster": cfg.cluster_name, "namespace": NAMESPACE,
            "entrypoint": entrypoint, "runtime_env": runtime_env, "metadata": metadata,
            "max_attempts": max_attempts, "submit_grace_s": SUBMIT_GRACE_S, "submitted_at": submitted_at,
            "poll_s": max(1.0, POLL_S * time_scale), "node_grace_s": round(NODE_GRACE_S * time_scale, 3),
            "gcs_reconnect_s": round(GCS_RECONNECT_S * time_scale, 3), "stall_k": STALL_K,
            "stall_floor_s": max(STALL_FLOOR_MIN_S, round(STALL_FLOOR_S * time_scale, 3)),
            "preemptible": cfg.capacity_type.preemptible}   # only Spot nodes are preempted
    if guard is not None:
        spec["guard"] = dict(guard)
    return spec


def first_state(job_id: str, submitted_at: float) -> dict[str, Any]:
    return {"status": "RUNNING", "attempts": [{"id": job_id, "by": "rltui", "reason": "submitted",
                                               "resumed_from_step": 0, "started_at": submitted_at,
                                               "status": "PENDING"}]}


def supervisor_objects(cfg: RLConfig, job_id: str, spec: dict[str, Any], files: dict[str, str]) -> list[dict[str, Any]]:
    """In apply order: the identity and its rights, the code, the run, then the Deployment."""
    key = run_key(job_id)
    cm_name, run_name = run_configmap(job_id), deployment_name(job_id)
    selector = {ROLE_LABEL: NAME, RUN_LABEL: key}
    state = first_state(job_id, float(spec["submitted_at"]))
    account_meta = _meta(NAME, cfg)
    guard = spec.get("guard") or {}
    if guard.get("service_account"):  # Workload Identity: the KSA acts as the guard's GSA
        account_meta["annotations"] = {GSA_ANNOTATION: str(guard["service_account"])}
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": account_meta}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta(run_name, cfg, job_id),
            "rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "update", "patch"],
                 "resourceNames": [cm_name]},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get", "list", "watch"]},
            ]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": _meta(run_name, cfg, job_id),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": run_name},
               "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]}
    sources = supervisor_sources()
    code_name = f"{CODE_CONFIGMAP}-{hashlib.sha256(json.dumps(sources, sort_keys=True).encode()).hexdigest()[:10]}"
    code = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(code_name, cfg), "data": sources}
    run = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(cm_name, cfg, job_id),
           "data": {"spec.json": json.dumps(spec, indent=1, sort_keys=True),
                    "state.json": json.dumps(state, sort_keys=True),
                    **{f"job.{name}": text for name, text in files.items()}}}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [
            {"key": "cloud.google.com/gke-spot", "operator": "NotIn", "values": ["true"]},
            {"key": "cloud.google.com/gke-accelerator", "operator": "DoesNotExist"},
        ]}]}}}
    ray_address = f"http://{cfg.head_service}.{NAMESPACE}.svc.cluster.local:{DASHBOARD_PORT}"
    container = {
        "name": "supervisor", "image": IMAGE, "command": ["python", f"{CODE_MOUNT}/supervisor.py"],
        "env": [{"name": "RLTUI_RUN_CONFIGMAP", "value": cm_name},
                {"name": "RAY_ADDRESS", "value": ray_address},
                {"name": "RLTUI_NOTIFY_FILE", "value": f"{NOTIFY_MOUNT}/{NOTIFY_KEY}"},
                {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
        "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
        "volumeMounts": [{"name": "code", "mountPath": CODE_MOUNT, "readOnly": True},
                         {"name": "notify", "mountPath": NOTIFY_MOUNT, "readOnly": True}],
    }
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(run_name, cfg, job_id),
        "spec": {"replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": selector},
                 "template": {"metadata": {"labels": selector},
                              "spec": {"serviceAccountName": NAME, "terminationGracePeriodSeconds": 10,
                                       "affinity": affinity, "tolerations": [dict(SYSTEM_POOL_TOLERATION)],
                                       "containers": [container],
                                       "volumes": [{"name": "code", "configMap": {"name": code_name}},
                                                   NOTIFY_VOLUME]}}},
    }
    return [account, role, binding, *guard_rbac(cfg, guard), code, run, deployment]


def guard_rbac(cfg: RLConfig, guard: dict[str, Any]) -> list[dict[str, Any]]:
    """What the guard reads in Kubernetes, least privilege: `list` of Nodes (cluster-scoped, so
    a ClusterRole and a ClusterRoleBinding of its own; the guard lists the GPU pools' Nodes by
    their pool label, never one by name). None without a guard."""
    if not guard:
        return []
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {k: v for k, v in _meta(GUARD_ROLE_NAME, cfg).items() if k != "namespace"},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {k: v for k, v in _meta(GUARD_ROLE_NAME, cfg).items() if k != "namespace"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": GUARD_ROLE_NAME},
               "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]}
    return [role, binding]
