"""In-memory steps whose "cloud" is a dict of long-running operations: creating an object
records it at once and it becomes ready some milliseconds later, like a real LRO that keeps
going when the client is killed."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

from rltui.plan import Probe, RetryPolicy, RunEvent, Step, StepOutput


@dataclass
class Obj:
    ready_at: float        # loop time at which it is usable


@dataclass
class Cloud:
    objects: dict[str, Obj] = field(default_factory=dict)
    created: Counter = field(default_factory=Counter)
    deleted: Counter = field(default_factory=Counter)
    applies: Counter = field(default_factory=Counter)
    spans: dict[str, tuple[float, float]] = field(default_factory=dict)   # apply/destroy start, end
    failures: dict[str, list[BaseException]] = field(default_factory=dict)

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def create(self, name: str, work_s: float) -> None:
        if name not in self.objects:
            self.objects[name] = Obj(self.now() + work_s)
            self.created[name] += 1

    def is_ready(self, name: str) -> bool:
        return name in self.objects and self.now() >= self.objects[name].ready_at


class FakeStep(Step):
    """A step whose apply starts an operation in the Cloud and waits for it."""

    def __init__(self, name: str, needs: tuple[str, ...] = (), *, work_s: float = 0.02,
                 locks: tuple[str, ...] = (), expected_s: float = 60.0,
                 destroyable: bool = True, destroy_needs: tuple[str, ...] | None = None,
                 title: str | None = None, before: Callable[[Cloud, StepOutput], Any] | None = None
                 ) -> None:
        self.name, self.title = name, title or name.replace("_", " ").capitalize()
        self.needs, self.locks, self.expected_s = needs, locks, expected_s
        self.destroyable, self.destroy_needs = destroyable, destroy_needs
        self.work_s = work_s
        self.before = before

    def command(self) -> str:
        return f"fake create {self.name}"

    def _maybe_fail(self, cloud: Cloud) -> None:
        pending = cloud.failures.get(self.name)
        if pending:
            raise pending.pop(0)

    async def probe(self, cloud: Cloud) -> Probe:
        obj = cloud.objects.get(self.name)
        if obj is None:
            return Probe(exists=False)
        return Probe(exists=True, ready=cloud.is_ready(self.name), detail=f"{self.name} found")

    async def apply(self, cloud: Cloud, out: StepOutput) -> None:
        start = cloud.now()
        cloud.applies[self.name] += 1
        self._maybe_fail(cloud)
        if self.before is not None:
            await self.before(cloud, out)
        cloud.create(self.name, self.work_s)
        out.line(f"creating {self.name}")
        while not cloud.is_ready(self.name):
            await asyncio.sleep(0.005)
        cloud.spans[self.name] = (start, cloud.now())

    async def destroy(self, cloud: Cloud, out: StepOutput) -> None:
        start = cloud.now()
        self._maybe_fail(cloud)
        await asyncio.sleep(self.work_s)
        cloud.objects.pop(self.name, None)
        cloud.deleted[self.name] += 1
        cloud.spans[self.name] = (start, cloud.now())


@pytest.fixture
def cloud() -> Cloud:
    return Cloud()


@pytest.fixture
def fast_retry() -> RetryPolicy:
    import random
    return RetryPolicy(attempts=4, base_s=0.002, cap_s=0.01, rng=random.Random(7))


@pytest.fixture
def events() -> list[RunEvent]:
    return []


@pytest.fixture
def step_cls() -> type[FakeStep]:
    return FakeStep
