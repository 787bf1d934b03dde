"""What the demo's GPUs are doing, for the sandbox's GPU nodes to report to Cloud Monitoring.

NeMo-RL's policy workers hold GPUs on every worker pod the driver placed them on (cluster.py);
they compute in a step's phases (generation, logprobs, training, ...: trainer.run_step, each a
NeMo-RL timer) and wait while the driver saves a checkpoint or prints. The driver records this
as it happens, beside the RayCluster file (`<cluster file>` + SUFFIX), for sandbox/rltui_sandbox/
gpu_meter.py to turn into GKE's accelerator metrics: busy while a phase runs, idle otherwise.

The file: {"format", "pods": [{"pod", "uid", "gpus"}], "busy": bool, "since": epoch seconds of
the last change, "busy_s": busy seconds before `since`, "memory_fraction": the share of each
GPU's memory the job holds, "ended": bool}. Memory: NeMo-RL's colocated vLLM takes
`policy.generation.vllm_cfg.gpu_memory_utilization` of each GPU when it starts (vLLM's
EngineArgs) and keeps it to the end; NeMo-RL's example configs set 0.6, the value used when the
config names none (not verified against a live B200 run).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

SUFFIX = ".activity.json"
FORMAT = "rltui_sandbox/gpu-activity/v1"
DEFAULT_MEMORY_FRACTION = 0.6


def memory_fraction(config: dict[str, Any]) -> float:
    vllm = ((config.get("policy") or {}).get("generation") or {}).get("vllm_cfg") or {}
    return float(vllm.get("gpu_memory_utilization") or DEFAULT_MEMORY_FRACTION)


class Activity:
    """The driver's record of its GPUs: `busy()` / `idle()` at each change, `end()` once."""

    def __init__(self, path: Path, pods: list[dict[str, Any]], fraction: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.path, self.pods, self.fraction, self.clock = path, pods, fraction, clock
        self._busy, self._busy_s, self._since, self._depth = False, 0.0, clock(), 0
        self._write(ended=False)

    def enter(self) -> None:
        """A phase starts (phases nest: busy from the outermost's start to its end)."""
        self._depth += 1
        if self._depth == 1:
            self._set(True)

    def leave(self) -> None:
        self._depth = max(0, self._depth - 1)
        if self._depth == 0:
            self._set(False)

    def end(self) -> None:
        self._depth = 0
        self._set(False, ended=True)

    def _set(self, busy: bool, ended: bool = False) -> None:
        if busy == self._busy and not ended:
            return
        now = self.clock()
        if self._busy:
            self._busy_s += now - self._since
        self._busy, self._since = busy, now
        self._write(ended)

    def _write(self, ended: bool) -> None:
        doc = {"format": FORMAT, "pods": self.pods, "busy": self._busy, "since": self._since,
               "busy_s": self._busy_s, "memory_fraction": self.fraction, "ended": ended}
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            tmp.write_text(json.dumps(doc), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError:  # the cluster's state folder went (a teardown): nothing to report to
            pass


def busy_seconds(doc: dict[str, Any], at: float) -> float:
    """The GPUs' busy seconds from the job's start to `at` (a file read back by the meter)."""
    since = float(doc.get("since") or 0.0)
    return float(doc.get("busy_s") or 0.0) + (max(0.0, at - since) if doc.get("busy") else 0.0)
