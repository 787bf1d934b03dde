"""Where the demo's Ray actors live, and how the driver learns that one of their nodes died.

NeMo-RL places its policy workers on every GPU node of the Ray cluster: one `RayWorkerGroup`
actor per GPU, named `{name_prefix}-{node_idx}-{bundle_idx}` (nemo_rl/distributed/worker_groups.py,
`_create_workers_from_bundle_indices`; the policy's name_prefix is "lm_policy",
nemo_rl/models/policy/lm_policy.py), of class MegatronPolicyWorker for the Megatron backend.
The sandbox's GPU nodes are Kubernetes objects only: the RayCluster's head pod writes the cluster's
pods to a JSON file (sandbox/rltui_sandbox/kuberay/placement.py keeps it current) whose path is in the
head's environment under ENV_VAR, which Ray hands on to the job's driver.

When a pod the driver placed actors on is gone, terminating, or restarted (another uid or
restartCount: a new raylet is a new Ray node), the driver fails as Ray makes it fail:
- for a node lost without warning (the sandbox's preemption kills pods at once) the GCS marks it
  dead after missed health checks and broadcasts "The node with node id: ... has been marked dead
  because the detector has missed too many heartbeats from it..." to every driver, printed as
  `(raylet) <message>` (ray/_private/worker.py listen_error_messages, print_worker_logs; the
  message from src/ray/gcs/gcs_node_manager.cc RemoveNodeFromCache, UNEXPECTED_TERMINATION only);
- the pending `ray.get` raises ray.exceptions.ActorDiedError whose context the GCS wrote with
  "The actor died because its node has died. Node Id: <hex>\n\tthe actor's node was terminated
  unexpectedly: health check failed due to missing too many heartbeats" (GenNodeDiedCause in
  src/ray/gcs/actor/gcs_actor_manager.cc; the reason text as python/ray/tests/
  test_node_death.py expects it), or "terminated expectedly: received SIGTERM" for a pod deleted
  gracefully. The exception is Ray's own class when ray is importable, so its text is Ray's.
The driver then exits 1 and Ray's job supervisor marks the job FAILED with "Job entrypoint command
failed with exit code 1, ..." (ray/dashboard/modules/job/job_supervisor.py).

Ray's messages name the node by its Ray node id and IP (the pod IP on KubeRay); one line marked
`rltui sandbox:` adds the Kubernetes pod and node it stood for. Not modelled: the health check's
delay (real Ray notices after about health_check_period_ms x failure_threshold; here the next
check, at most CHECK_INTERVAL_S later) and the generation (vLLM) workers.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ENV_VAR = "RLTUI_SANDBOX_RAYCLUSTER_FILE"
FORMAT = "rltui_sandbox/raycluster-nodes/v1"
CHECK_INTERVAL_S = 0.25  # a check at most this often: well within the ~0.5 s the sandbox promises
POLICY_PREFIX = "lm_policy"
POLICY_CLASS = "MegatronPolicyWorker"
RETRIES_ENV = "NRL_VIRTUAL_CLUSTER_MAX_RETRIES"
HEALTH_CHECK_FAILED = "health check failed due to missing too many heartbeats"
SIGTERM_RECEIVED = "received SIGTERM"


@dataclass(frozen=True)
class RayNode:
    """One Ray pod as a Ray node: a new pod (uid) or a restarted container is a new Ray node."""

    pod: str
    uid: str
    restarts: int
    node: str  # the Kubernetes node
    host_ip: str
    pod_ip: str
    node_type: str  # head | worker
    gpus: int
    ready: bool
    terminating: bool = False

    @property
    def key(self) -> tuple[str, int]:
        return self.uid, self.restarts

    @property
    def node_id(self) -> str:
        """A stable stand-in for the Ray NodeID (28 bytes, like Ray's) of this raylet."""
        return hashlib.sha224(f"{self.uid}/{self.restarts}".encode()).hexdigest()

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> "RayNode":
        return cls(pod=str(entry["pod"]), uid=str(entry["uid"]), restarts=int(entry.get("restarts", 0)),
                   node=str(entry.get("node", "")), host_ip=str(entry.get("hostIP", "")),
                   pod_ip=str(entry.get("podIP", "")), node_type=str(entry.get("nodeType", "worker")),
                   gpus=int(entry.get("gpus", 0)), ready=bool(entry.get("ready")),
                   terminating=bool(entry.get("terminating")))


@dataclass(frozen=True)
class Actor:
    name: str
    class_name: str
    node: RayNode

    @property
    def actor_id(self) -> bytes:
        """16 bytes, as Ray's ActorID (its hex is what ActorDiedError prints)."""
        return hashlib.blake2b(f"{self.name}/{self.node.uid}".encode(), digest_size=16).digest()


def read_nodes(path: Path) -> list[RayNode] | None:
    """The pods the file lists, or None when it cannot be read now (missing, another format)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return None
    return [RayNode.from_json(e) for e in doc.get("pods") or []]


def place(nodes: list[RayNode], gpus_per_node: int) -> list[Actor]:
    """The policy worker group on every ready worker pod, one actor per GPU."""
    workers = sorted((n for n in nodes if n.node_type == "worker" and n.ready and not n.terminating),
                     key=lambda n: n.pod)
    return [Actor(f"{POLICY_PREFIX}-{idx}-{gpu}", POLICY_CLASS, node)
            for idx, node in enumerate(workers) for gpu in range(node.gpus or gpus_per_node)]


class ResourceInsufficientError(Exception):
    """NeMo-RL's (nemo_rl/distributed/virtual_cluster.py), by name: the driver's traceback ends with it."""


ResourceInsufficientError.__module__ = "nemo_rl.distributed.virtual_cluster"


def gpus_up(nodes: list[RayNode], gpus_per_node: int) -> int:
    """The GPUs Ray counts (ray.cluster_resources()): those of the pods Running and Ready."""
    return sum(n.gpus or (gpus_per_node if n.node_type == "worker" else 0)
               for n in nodes if n.ready and not n.terminating)


def wait_for_gpus(path: Path, needed: int, gpus_per_node: int, environ: dict[str, str] | os._Environ[str],
                  sleep: Callable[[float], None] = time.sleep) -> list[RayNode]:
    """NeMo-RL v0.4.0's RayVirtualCluster._init_placement_groups (virtual_cluster.py:234-345):
    with fewer GPUs in the cluster than num_nodes x gpus_per_node it prints why and looks again
    2**i seconds later, NRL_VIRTUAL_CLUSTER_MAX_RETRIES times (6), then raises
    ResourceInsufficientError; so a job started while a worker still comes up waits for it and
    places actors on every node. The sleeps are NeMo-RL's real seconds, not the sandbox's."""
    retries = int(environ.get(RETRIES_ENV, 6))
    for i in range(retries):
        nodes = read_nodes(path) or []
        have = gpus_up(nodes, gpus_per_node)
        if have >= needed:
            return nodes
        print(f"Not enough GPUs available. Requested {needed} GPUs, but only {have} are available in the cluster.",
              flush=True)
        print(f"Retrying placement group creation... {i + 1}/{retries}. Next retry in {2**i} seconds.", flush=True)
        sleep(2**i)
    raise ResourceInsufficientError(
        f"Maximum number of retries reached ({retries}). Cluster resources may be insufficient or cluster itself "
        "is highly unstable. Please check your cluster configuration and your cluster logs.")


def lost(actors: list[Actor], nodes: list[RayNode]) -> list[tuple[Actor, RayNode | None]]:
    """The first actor of each placed node that is gone now, with what the file says of its pod
    (None: no pod with that uid; a RayNode: the pod terminating or its container restarted)."""
    current = {n.key: n for n in nodes}
    by_uid = {n.uid: n for n in nodes}
    out: list[tuple[Actor, RayNode | None]] = []
    seen: set[tuple[str, int]] = set()
    for actor in actors:
        key = actor.node.key
        if key in seen:
            continue
        seen.add(key)
        now = current.get(key)
        if now is None or now.terminating:
            out.append((actor, now if now is not None else by_uid.get(actor.node.uid)))
    return out


def actor_died_error(actor: Actor, reason_message: str, expected: bool) -> Exception:
    """ray.exceptions.ActorDiedError for `actor`, whose node died, as the GCS words it."""
    node = actor.node
    how = "terminated expectedly" if expected else "terminated unexpectedly"
    message = (f"The actor died because its node has died. Node Id: {node.node_id}\n"
               f"\tthe actor's node was {how}: {reason_message}")
    try:
        from ray.core.generated.common_pb2 import ActorDiedErrorContext, NodeDeathInfo  # type: ignore[attr-defined]
        from ray.exceptions import ActorDiedError
    except ImportError:
        return _FallbackActorDiedError(actor, message)
    death = NodeDeathInfo(reason=NodeDeathInfo.EXPECTED_TERMINATION if expected
                          else NodeDeathInfo.UNEXPECTED_TERMINATION, reason_message=reason_message)
    return ActorDiedError(ActorDiedErrorContext(
        error_message=message, actor_id=actor.actor_id, class_name=actor.class_name, name=actor.name,
        node_ip_address=node.pod_ip, reason=ActorDiedErrorContext.NODE_DIED, node_death_info=death))


class _FallbackActorDiedError(Exception):
    """The same text as Ray's ActorDiedError (ray/exceptions.py), when ray cannot be imported."""

    def __init__(self, actor: Actor, message: str) -> None:
        lines = ["The actor died unexpectedly before finishing this task.", f"\tclass_name: {actor.class_name}",
                 f"\tactor_id: {actor.actor_id.hex()}", f"\tname: {actor.name}"]
        if actor.node.pod_ip:
            lines.append(f"\tip: {actor.node.pod_ip}")
        super().__init__("\n".join([*lines, message]))


_FallbackActorDiedError.__module__ = "ray.exceptions"
_FallbackActorDiedError.__qualname__ = _FallbackActorDiedError.__name__ = "ActorDiedError"


def marked_dead_line(node: RayNode) -> str:
    """What the driver prints when the GCS broadcasts a node lost without warning."""
    return (f"(raylet) The node with node id: {node.node_id} and address: {node.pod_ip} and node name: "
            f"{node.pod_ip} has been marked dead because the detector has missed too many heartbeats from it. "
            "This can happen when a \t(1) raylet crashes unexpectedly (OOM, etc.) \n"
            "\t(2) raylet has lagging heartbeats due to slow network or busy workload.")


class ClusterWatch:
    """The driver's view of its actors' nodes: `check()` raises ActorDiedError once one is gone."""

    def __init__(self, path: Path, actors: list[Actor], clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.actors = actors
        self._clock = clock
        self._last_check = float("-inf")
        self._stamp: tuple[int, int] | None = None

    @classmethod
    def from_env(cls, environ: dict[str, str] | os._Environ[str], gpus_per_node: int, needed_gpus: int = 0,
                 sleep: Callable[[float], None] = time.sleep) -> "ClusterWatch | None":
        """None outside the sandbox's RayCluster (no file named): the demo runs on its own. On
        one, the actors are placed once the cluster has `needed_gpus` (wait_for_gpus)."""
        raw = environ.get(ENV_VAR, "").strip()
        if not raw:
            return None
        path = Path(raw)
        nodes = wait_for_gpus(path, needed_gpus, gpus_per_node, environ, sleep)
        return cls(path, place(nodes, gpus_per_node))

    @property
    def nodes(self) -> list[RayNode]:
        """The distinct nodes the actors were placed on, in placement order."""
        return list({a.node.key: a.node for a in self.actors}.values())

    def check(self, force: bool = False) -> None:
        """Read the file when it changed (at most every CHECK_INTERVAL_S unless forced); raise
        Ray's ActorDiedError, after Ray's and the sandbox's lines, when a placed node is lost.
        An unreadable file is no news: it goes only with the head, and the driver with it."""
        now = self._clock()
        if not self.actors or (not force and now - self._last_check < CHECK_INTERVAL_S):
            return
        self._last_check = now
        try:
            st = self.path.stat()
        except OSError:
            return
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return
        nodes = read_nodes(self.path)
        if nodes is None:
            return
        self._stamp = stamp
        gone = lost(self.actors, nodes)
        if gone:
            raise self._fail(*gone[0])

    def _fail(self, actor: Actor, now: RayNode | None) -> Exception:
        node = actor.node
        expected = now is not None and now.terminating
        if not expected:
            print(marked_dead_line(node), flush=True)
        fate = ("is terminating" if expected else
                f"restarted its container (restartCount {now.restarts})" if now is not None else "is gone")
        print(f"rltui sandbox: Ray node {node.pod_ip} ({node.node_id[:12]}...) was pod {node.pod} on Kubernetes "
              f"node {node.node} ({node.host_ip}); that pod {fate}, and with it the actors placed there",
              file=sys.stderr, flush=True)
        return actor_died_error(actor, SIGTERM_RECEIVED if expected else HEALTH_CHECK_FAILED, expected)
