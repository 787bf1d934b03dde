"""The sandbox's toy KubeRay operator, with the scheduler and kubelet it needs.

Three roles on the daemon's event loop, all acting on the in-process KubeStore:
- nodes: the World's GKE node pools become Node objects (sandbox/rltui_sandbox/nodes/); a Spot
  preemption takes a GPU node and its pods away, and the node comes back fresh after `spot_replace`;
- scheduler + kubelet: every pod is bound to a node that fits it, waits for its volumes (a Lustre
  PV mounts only when its instance is ACTIVE and the PV names the instance's IP), pulls its image
  (once per node), starts; a KubeRay head pod runs a REAL local Ray head (sandbox/rltui_sandbox/rayhead.py);
- operator: a RayCluster gets its head service, pods and the status KubeRay writes, but only while
  a GKE cluster's RayOperator add-on is enabled.

Pods carry a finalizer so that a deleted pod shows Terminating for `raycluster_delete` time, as a
real pod's graceful shutdown does; the controller removes it once the "containers" stopped.
Everything is derived from the store and the World, so a restarted daemon re-adopts what exists.

One module per role; KubeRayController (controller.py) is the one object that plays them all:
- controller.py: KubeRayController, its lifecycle, watches, Events and `POST /_sandbox/preempt`;
- scheduler.py: binding a pod to a node that fits it (FailedScheduling until one does);
- kubelet.py: a bound pod's life: image pulls, env and secrets, Running, graceful termination;
- volumes.py: the kubelet's volume manager, Lustre CSI mounts and their failures;
- headpod.py: the head pod's container, a real local Ray head supervised like a container;
- placement.py: the cluster file the head's jobs read, and workers restarting when the GCS is lost;
- operator.py: the KubeRay operator: RayCluster -> head service, pods, status;
- templates.py: the pods and service KubeRay builds from a RayCluster;
- pods.py: reading pods and writing pod status as the API shows them.
"""

from rltui_sandbox.kuberay.controller import IDLE_RECHECK_S as IDLE_RECHECK_S
from rltui_sandbox.kuberay.controller import KubeRayController, add_preempt_route
from rltui_sandbox.kuberay.headpod import HEAD_READY_TIMEOUT_S as HEAD_READY_TIMEOUT_S
from rltui_sandbox.kuberay.headpod import KUBERAY_ENV as KUBERAY_ENV
from rltui_sandbox.kuberay.headpod import LOCAL_PORT_FLAGS as LOCAL_PORT_FLAGS
from rltui_sandbox.kuberay.operator import OPERATOR as OPERATOR
from rltui_sandbox.kuberay.pods import FINALIZER as FINALIZER
from rltui_sandbox.kuberay.pods import TERMINAL as TERMINAL
from rltui_sandbox.kuberay.templates import CLUSTER_LABEL as CLUSTER_LABEL
from rltui_sandbox.kuberay.templates import GROUP_LABEL as GROUP_LABEL
from rltui_sandbox.kuberay.templates import HEAD_GROUP as HEAD_GROUP
from rltui_sandbox.kuberay.templates import HEAD_PORTS as HEAD_PORTS
from rltui_sandbox.kuberay.templates import NODE_TYPE_LABEL as NODE_TYPE_LABEL
from rltui_sandbox.kuberay.volumes import LustreState as LustreState

# The constants above stay importable from here, as from the single module this package was.
__all__ = ["KubeRayController", "add_preempt_route"]
