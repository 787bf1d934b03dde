"""Headless `down` and `status` list resources in columns sized from their rows (as `kubectl get`
does): a name longer than any fixed width (the blueprint's Cloud NAT, named after its router)
keeps every row's state in one column. `status --json` is unchanged."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from rltui import headless
from rltui.config import parse_config
from rltui.envfile import EnvFile
from rltui.plan import inventory
from rltui.plan.inventory import Resource
from rltui.plan.jobs import Refused

DATA = Path(__file__).parent.parent / "data" / "env"
CFG = parse_config(EnvFile.read(DATA / "devrel-demos.env.sh").values())

RESOURCES = [
    Resource("GKE cluster", "ray-a4-gpu-spot", "RUNNING", owned=True),
    Resource("Cloud NAT", "cloud-nat-us-east1 on ray-a4-gpu-spot-net-0-router", "present", owned=True),
    Resource("PersistentVolumeClaim", "rl-demo-gpu-lustre-pvc", "Bound", owned=False,
             hand_delete="kubectl delete pvc rl-demo-gpu-lustre-pvc"),
    Resource("NAT IP", "ray-a4-gpu-spot-net-0-nat-ip-us-east1-a-very-long-suffix-0", "RESERVED", owned=True,
             leak=True, detail="billed while reserved"),
    Resource("Lustre instance", "rl-demo-gpu-lustre", "absent", owned=False),
]
STATES = {r.name: r.state for r in RESOURCES}


class FakeContext:
    def __init__(self, cfg: Any, endpoints: Any) -> None:
        self.cfg, self.endpoints = cfg, endpoints

    async def close(self) -> None:
        pass


class Endpoints:
    label = "SANDBOX"


@pytest.fixture
def cloud(monkeypatch: pytest.MonkeyPatch) -> None:
    async def collect(ctx: Any) -> list[Resource]:
        return list(RESOURCES)

    async def collect_with_job(ctx: Any, *args: Any) -> tuple[list[Resource], None]:
        return list(RESOURCES), None

    async def prices(ctx: Any) -> Any:
        raise RuntimeError("no catalog in this test")

    async def cost(cfg: Any, price_call: Any, resources: Any) -> dict[str, Any]:
        price_call.cancel()
        return {"per_hour": None, "error": "not asked"}

    monkeypatch.setattr(inventory, "collect", collect)
    monkeypatch.setattr(inventory, "collect_with_job", collect_with_job)
    monkeypatch.setattr(inventory, "prices", prices)
    monkeypatch.setattr(headless, "_cost", cost)
    monkeypatch.setattr(headless, "Context", FakeContext)
    monkeypatch.setattr(headless, "running", lambda ctx: None)


def state_columns(lines: list[str], resources: list[Resource]) -> set[int]:
    """Where each resource's state starts on its line (its name is unique to its line)."""
    at = set()
    for r in resources:
        line = next(line for line in lines if f" {r.name} " in line)
        at.add(line.index(f" {r.state}", line.index(r.name) + len(r.name)) + 1)
    return at


def test_down_lines_up_long_names(cloud: None, monkeypatch: pytest.MonkeyPatch) -> None:
    lines: list[str] = []
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    with pytest.raises(Refused):   # it lists, then asks: no terminal here, so it stops there
        asyncio.run(headless.down(CFG, Endpoints(), yes=False, verbose=False,  # type: ignore[arg-type]
                                  out=lines.append))
    present = [r for r in RESOURCES if r.present]
    assert len(state_columns(lines, present)) == 1, "\n".join(lines)
    assert any(line.endswith("-very-long-suffix-0  RESERVED") for line in lines), lines  # the widest name
    assert any(line.endswith("Bound  (not rltui's: left alone)") for line in lines), lines


def test_status_lines_up_long_names_and_keeps_its_json(cloud: None) -> None:
    lines: list[str] = []
    assert asyncio.run(headless.status(CFG, Endpoints(), as_json=False, out=lines.append)) == 0  # type: ignore[arg-type]
    assert len(state_columns(lines, RESOURCES)) == 1, "\n".join(lines)
    leak = next(line for line in lines if "nat-ip" in line)
    assert leak.rstrip().endswith("RESERVED  LEAK billed while reserved"), leak
    name_at = {line.index(r.name) for r in RESOURCES for line in lines if f" {r.name} " in line}
    assert len(name_at) == 1
    by_hand = next(line for line in lines if "to delete it by hand" in line)
    assert by_hand.index("to delete it by hand") == name_at.pop()   # under the name column

    out: list[str] = []
    asyncio.run(headless.status(CFG, Endpoints(), as_json=True, out=out.append))  # type: ignore[arg-type]
    got = json.loads(out[0])
    assert [r["name"] for r in got["resources"]] == [r.name for r in RESOURCES]
    assert set(got["resources"][0]) == {"kind", "name", "state", "owned", "leak", "detail", "hand_delete"}


def test_status_names_the_epoch_once_the_step_count_has_restarted(cloud: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """NeMo-RL's "Step s/S" restarts each epoch: step 5/10 alone would hide ten steps done."""
    job = {"id": "rltui-grpo-1", "status": "RUNNING", "step": 5, "total_steps": 10, "epoch": 2, "total_epochs": 3,
           "attempts": [{"id": "rltui-grpo-1"}]}

    async def collect_with_job(ctx: Any, *args: Any) -> tuple[list[Resource], dict[str, Any]]:
        return list(RESOURCES), job

    monkeypatch.setattr(inventory, "collect_with_job", collect_with_job)
    lines: list[str] = []
    asyncio.run(headless.status(CFG, Endpoints(), as_json=False, out=lines.append))  # type: ignore[arg-type]
    assert "  job rltui-grpo-1: RUNNING step 5/10 of epoch 2/3" in lines
    job.update(epoch=None, total_epochs=None)  # one epoch: the header's words alone
    lines.clear()
    asyncio.run(headless.status(CFG, Endpoints(), as_json=False, out=lines.append))  # type: ignore[arg-type]
    assert "  job rltui-grpo-1: RUNNING step 5/10" in lines
