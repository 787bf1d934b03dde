"""NeMo-RL's checkpoint layout and rotation, with real bytes so Lustre charts see each save.

<checkpoint_dir>/tmp_step_N/{training_info.json, config.yaml, policy/weights/, policy/optimizer/,
train_dataloader.pt} is written first, then renamed to step_N/ in one atomic step; afterwards the
checkpoints outside the top k are removed (by metric, or the k newest when metric_name is null;
the newest is never removed).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import yaml

MIB = 1 << 20
CHUNK = MIB
SHARD = 16 * MIB
_STEP_DIR = re.compile(r"step_(\d+)")


Tick = Callable[[], None]


def _nothing() -> None:
    pass


def _write_synced(path: Path, data: bytes | memoryview, tick: Tick = _nothing) -> None:
    """Write in 1 MiB chunks, each pushed to the device, like a sharded checkpoint writer;
    `tick()` runs before each chunk (an exception from it leaves the save unfinished)."""
    view = memoryview(data)
    with open(path, "wb") as f:
        for start in range(0, len(view), CHUNK):
            tick()
            f.write(view[start:start + CHUNK])
            f.flush()
            os.fsync(f.fileno())


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _write_padding(folder: Path, nbytes: int, tick: Tick = _nothing) -> None:
    """Shards of incompressible bytes standing in for the rest of a large model's weights."""
    block = np.random.default_rng(0).bytes(CHUNK)
    index = 0
    while nbytes > 0:
        size = min(SHARD, nbytes)
        with open(folder / f"__{index}_0.distcp", "wb") as f:
            left = size
            while left > 0:
                n = min(CHUNK, left)
                tick()
                f.write(block[:n])
                f.flush()
                os.fsync(f.fileno())
                left -= n
        nbytes -= size
        index += 1


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CheckpointManager:
    def __init__(self, checkpoint_dir: str | Path, keep_top_k: int | None,
                 metric_name: str | None, higher_is_better: bool = True) -> None:
        self.checkpoint_dir = Path(checkpoint_dir)
        self.keep_top_k = keep_top_k
        self.metric_name = metric_name
        self.higher_is_better = higher_is_better

    def step_dirs(self) -> list[tuple[int, Path]]:
        if not self.checkpoint_dir.is_dir():
            return []
        found = []
        for child in self.checkpoint_dir.iterdir():
            m = _STEP_DIR.fullmatch(child.name)
            if m and child.is_dir():
                found.append((int(m.group(1)), child))
        return sorted(found)

    def latest(self) -> Path | None:
        dirs = self.step_dirs()
        return dirs[-1][1] if dirs else None

    def remove_incomplete(self) -> None:
        """tmp_step_* dirs are saves that never finished (the run died mid-write)."""
        if self.checkpoint_dir.is_dir():
            for child in self.checkpoint_dir.glob("tmp_step_*"):
                shutil.rmtree(child, ignore_errors=True)

    def save(self, step: int, training_info: dict[str, Any], config: dict[str, Any],
             weights: dict[str, np.ndarray], optimizer: dict[str, np.ndarray],
             dataloader_state: dict[str, Any], target_bytes: int, tick: Tick = _nothing) -> Path:
        """Write tmp_step_N, rename it to step_N, prune; returns the final path. `tick()` runs
        between chunks: should it raise (a node of the job died), tmp_step_N stays unfinished,
        as a killed NeMo-RL save leaves it, and the step_N before it stays intact."""
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.checkpoint_dir / f"tmp_step_{step}"
        if tmp.exists():
            shutil.rmtree(tmp)
        weights_dir = tmp / "policy" / "weights"
        optim_dir = tmp / "policy" / "optimizer"
        weights_dir.mkdir(parents=True)
        optim_dir.mkdir(parents=True)
        files = {
            tmp / "training_info.json": json.dumps(training_info, indent=2).encode(),
            tmp / "config.yaml": yaml.safe_dump(config, sort_keys=False).encode(),
            weights_dir / "model.npz": _npz_bytes(weights),
            optim_dir / "optimizer.npz": _npz_bytes(optimizer),
            tmp / "train_dataloader.pt": json.dumps(dataloader_state).encode(),
        }
        for path, data in files.items():
            _write_synced(path, data, tick)
        _write_padding(weights_dir, target_bytes - sum(len(d) for d in files.values()), tick)
        final = self.checkpoint_dir / f"step_{step}"
        if final.exists():
            shutil.rmtree(final)
        os.rename(tmp, final)
        _fsync_dir(self.checkpoint_dir)
        self.remove_old_checkpoints()
        return final

    def load(self, path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, np.ndarray]]:
        info = json.loads((path / "training_info.json").read_text())
        with np.load(path / "policy" / "weights" / "model.npz") as w:
            weights = {k: w[k] for k in w.files}
        with np.load(path / "policy" / "optimizer" / "optimizer.npz") as o:
            optimizer = {k: o[k] for k in o.files}
        return info, weights, optimizer

    def remove_old_checkpoints(self) -> None:
        if self.keep_top_k is None:
            return
        history = [(step, path, json.loads((path / "training_info.json").read_text()))
                   for step, path in self.step_dirs()]
        if not history:
            return
        latest_step = max(step for step, _, _ in history)
        ranked = sorted(history, key=lambda h: h[0], reverse=True)
        if self.metric_name is not None:
            if all(self.metric_name in info for _, _, info in history):
                if self.higher_is_better:
                    ranked = sorted(history, key=lambda h: (h[2][self.metric_name], h[0]), reverse=True)
                else:
                    ranked = sorted(history, key=lambda h: (h[2][self.metric_name], -h[0]))
            else:
                print(f"WARNING: Metric {self.metric_name} not found in checkpoint history. "
                      "Keeping most recent k checkpoints.", file=sys.stderr, flush=True)
                self.metric_name = None
        for step, path, _ in ranked[self.keep_top_k:]:
            if step == latest_step:
                continue
            print(f"Removing checkpoint {path} due to being outside top-{self.keep_top_k}", flush=True)
            shutil.rmtree(path)
