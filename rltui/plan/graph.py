"""The step graph's shape: each step's down-mode needs, validation (unknown names, cycles), the
closure of a set of targets, and a stable topological order. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Iterable

from rltui.plan.step import Step


def destroy_needs(step: Step, steps: list[Step]) -> tuple[str, ...]:
    if step.destroy_needs is not None:
        return tuple(step.destroy_needs)
    return tuple(s.name for s in steps if step.name in s.needs)


def validate(steps: list[Step], deps: dict[str, dict[str, tuple[str, ...]]]) -> None:
    names = [s.name for s in steps]
    if any(not n for n in names):
        raise ValueError(f"a step has no name: {[type(s).__name__ for s in steps if not s.name]}")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"duplicate step names: {', '.join(dupes)}")
    for s in steps:
        for field_name, wanted in (("needs", s.needs), ("destroy_needs", s.destroy_needs or ()),
                                   ("destroy_after", s.destroy_after)):
            unknown = [w for w in wanted if w not in deps["up"]]
            if unknown:
                raise ValueError(f"step {s.name} {field_name} unknown step(s): "
                                 f"{', '.join(unknown)}")
    for mode, graph in deps.items():
        cycle = find_cycle(names, graph)
        if cycle:
            raise ValueError(f"the {mode} graph has a cycle: {' -> '.join(cycle)}")


def find_cycle(names: list[str], graph: dict[str, tuple[str, ...]]) -> list[str] | None:
    colour = dict.fromkeys(names, 0)   # 0 new, 1 on the stack, 2 done

    def visit(n: str, stack: list[str]) -> list[str] | None:
        colour[n] = 1
        stack.append(n)
        for d in graph[n]:
            if colour[d] == 1:
                return [*stack[stack.index(d):], d]
            if colour[d] == 0:
                found = visit(d, stack)
                if found:
                    return found
        stack.pop()
        colour[n] = 2
        return None

    for n in names:
        if colour[n] == 0:
            found = visit(n, [])
            if found:
                return found
    return None


def closure(targets: Iterable[str], deps: dict[str, tuple[str, ...]]) -> set[str]:
    seen: set[str] = set()
    stack = list(targets)
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(deps[n])
    return seen


def topo(names: list[str], deps: dict[str, tuple[str, ...]]) -> list[str]:
    """`names` ordered so each comes after its deps (deps outside `names` are ignored)."""
    inside, out, seen = set(names), [], set()

    def visit(n: str) -> None:
        if n in seen:
            return
        seen.add(n)
        for d in deps[n]:
            if d in inside:
                visit(d)
        out.append(n)

    for n in names:
        visit(n)
    return out
