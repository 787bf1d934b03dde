"""What the pods table shows, for the screens: watch events and one row per pod (k9s's
columns: name, Ray node type, node, status incl. PREEMPTED, restarts, age). The screens take
them from here, never from the cloud adapters; rows are computed next to the watch that
delivers the pods (cloud/kube.py)."""

from __future__ import annotations

from ..cloud.kube import KubeEvent, PodRow, pod_row

__all__ = ["KubeEvent", "PodRow", "pod_row"]
