"""Where the problems of one call lie, kept bounded: a count and the first few indexes.

A refusal keeps one summary per distinct problem, never one object per bad item, so
explaining any input costs memory bounded by what the text can show.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import contract as text

DISTINCT = 16  # distinct problems of one kind kept in detail; further ones are counted
INDEXES_SHOWN = 4  # indexes listed per problem


class Where:
    """How many items have a problem, and the first few of their indexes."""

    __slots__ = ("count", "first")

    def __init__(self) -> None:
        self.count = 0
        self.first: list[int] = []

    def add(self, index: int) -> None:
        self.count += 1
        if len(self.first) < INDEXES_SHOWN:
            self.first.append(index)

    def key(self) -> tuple[int, tuple[int, ...]]:
        return self.count, tuple(self.first)

    def render(self, total: int, single: bool) -> str:
        if single:
            return ""
        if self.count == total and total > 1:
            return text.WHERE_EVERY
        if self.count <= INDEXES_SHOWN:
            return text.WHERE_INDEXES.format(indexes=", ".join(map(str, self.first)))
        return text.WHERE_COUNT.format(count=self.count)


class Distinct:
    """Up to ``DISTINCT`` distinct problems with their places; how many more were seen."""

    __slots__ = ("kept", "others")

    def __init__(self) -> None:
        self.kept: dict[Any, Where] = {}
        self.others: set[Any] = set()

    def add(self, key: Any, index: int) -> None:
        where = self.kept.get(key)
        if where is None:
            if len(self.kept) >= DISTINCT:
                self.others.add(key)
                return
            where = self.kept[key] = Where()
        where.add(index)

    def __bool__(self) -> bool:
        return bool(self.kept)

    def places(self) -> Iterator[Where]:
        return iter(self.kept.values())
