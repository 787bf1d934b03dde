"""Counts as the screens say them: "1 line", "2 lines", "10,000 lines"."""

from __future__ import annotations


def count(n: int, noun: str, plural: str = "") -> str:
    """`n` and the noun agreeing with it (`plural` when adding "s" is wrong: "matches")."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
