"""The sandbox's stateful fake Kubernetes API: a store, its aiohttp server, a kubeconfig."""

from rltui_sandbox.kube.api import make_app, start
from rltui_sandbox.kube.errors import KubeError
from rltui_sandbox.kube.kubeconfig import write_kubeconfig
from rltui_sandbox.kube.store import KubeStore
from rltui_sandbox.kube.watch import Watcher

__all__ = ["KubeError", "KubeStore", "Watcher", "make_app", "start", "write_kubeconfig"]
