"""Clauses into the one line the model reads, within ``MAX_ERROR_CHARS``.

The separators, the "and N more" clause and the limit are the contract's
(:mod:`.contract`); this module only decides how many whole clauses and names fit.
"""

from __future__ import annotations

from . import contract as text

CLAUSE_BUDGET = 220  # characters one clause may take with its names


def fit_names(shown: list[str], total: int) -> str:
    """As many names as fit one clause, then how many more there are."""
    taken: list[str] = []
    size = 0
    for name in shown:
        if taken and size + len(name) > CLAUSE_BUDGET // 2:
            break
        taken.append(name)
        size += len(name) + len(text.NAME_SEPARATOR)
    joined = text.NAME_SEPARATOR.join(taken)
    if total > len(taken):
        joined += text.MORE_NAMES.format(count=total - len(taken))
    return joined


def assemble(head: str, clauses: list[str], hints: list[str]) -> str:
    """The head and as many whole clauses as fit ``MAX_ERROR_CHARS``; the hints when they fit."""
    for kept in range(len(hints), -1, -1):
        whole = head + text.CLAUSE_SEPARATOR.join([*clauses, *hints[:kept]])
        if len(whole) <= text.MAX_ERROR_CHARS:
            return whole
    return assemble_after(head + clauses[0], clauses[1:])


def assemble_after(start: str, clauses: list[str]) -> str:
    limit = text.MAX_ERROR_CHARS
    if len(start) > limit:
        return start[: limit - 1] + "…"
    result = start
    for number, clause in enumerate(clauses):
        rest = len(clauses) - number - 1
        candidate = result + text.CLAUSE_SEPARATOR + clause
        more = text.CLAUSE_SEPARATOR + text.MORE_PROBLEMS.format(count=rest) if rest else ""
        if len(candidate) + len(more) > limit:
            more = text.CLAUSE_SEPARATOR + text.MORE_PROBLEMS.format(count=rest + 1)
            return result + more if len(result) + len(more) <= limit else result
        result = candidate
    return result
