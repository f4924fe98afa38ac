"""Explain a refused call in the one line the model reads: every distinct problem, once.

pydantic (strict mode) decides whether the schema refuses a call; this module only explains
the refusal, after the fact, so the accepted path pays nothing for it. A model that is told
every problem at once (each unknown key, each missing field and the key it sent instead,
each foreign status value and what to use) repairs any call in one retry; told only the
first, it needs one retry per problem.

The explanation is one linear walk over the decoded arguments that keeps a bounded summary
per distinct problem (a count and the first few indexes), never one object per bad item, so
refusing any input costs time linear in its size and memory bounded by it (the summaries:
:mod:`._tally`). How a key or value is echoed is :mod:`._echo`'s; how the clauses fit one
line, :mod:`._assembly`'s. The clause templates, their order and the rule that combines them
live in :mod:`.contract`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import compress, repeat
from typing import Any

from pydantic import ValidationError

from ..errors import ToolCallRejected
from . import contract as text
from ._assembly import CLAUSE_BUDGET, assemble, assemble_after, fit_names
from ._echo import describe, describe_type, echo, key_name, type_name
from ._tally import DISTINCT, INDEXES_SHOWN, Distinct, Where

CONTENT_SHOWN = 200  # characters of an echoed duplicate content (real ones: p99 126)
_ITEM_KEYS = ("content", "status")
_MISSING = object()


# --- the walk ----------------------------------------------------------------------------------


def _parsed_array(value: object) -> list[Any] | None:
    """The array a JSON string holds, if it holds one (a list sent as a string)."""
    if not isinstance(value, str) or not value[:64].lstrip().startswith("["):
        return None
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, list) else None


def _normalized(status: str) -> str:
    return status.strip().lower().replace("-", "_").replace(" ", "_")


class Findings:
    """Every distinct problem of one call, found in one walk over its decoded arguments."""

    def __init__(self, *, allow_parallel: bool) -> None:
        self.allow_parallel = allow_parallel
        self.unknown_arguments: list[object] = []
        self.more_arguments = 0
        self.todos_clause = ""  # a rendered top-level clause about `todos`, if any
        self.total = 0  # items in the array the item clauses speak of
        self.not_object = Distinct()  # JSON type -> where
        self.unknown_keys = Distinct()  # key -> where
        self.missing = Distinct()  # (field, key carried instead or None) -> where
        self.content_type = Distinct()  # JSON type -> where
        self.bad_status = Distinct()  # value (or its JSON type) -> where
        self.status_shown: dict[Any, str] = {}
        self.suggestions: dict[Any, object] = {}
        self.empty = Where()
        self.seen: set[str] = set()
        self.duplicates: list[str] = []
        self.more_duplicates = 0
        self.in_progress = 0

    # the arguments ------------------------------------------------------------------------

    def walk(self, args: object) -> None:
        if not isinstance(args, dict):
            raise ToolCallRejected(text.ARGS_NOT_OBJECT.format())
        items: list[Any] | None = None
        candidate: object = _MISSING
        if "todos" in args:
            todos = args["todos"]
            if isinstance(todos, list):
                items = todos
            elif (parsed := _parsed_array(todos)) is not None:
                self.todos_clause, items = text.TODOS_IS_STRING, parsed
            else:
                self.todos_clause = text.TODOS_NOT_ARRAY.format(got=describe(todos))
        else:
            candidate, items = self._misnamed(args)
        for key in args:
            if key != "todos" and key is not candidate:
                self._unknown_argument(key)
        if items is not None:
            self.total = len(items)
            self._walk_items(items)

    def _misnamed(self, args: dict[Any, Any]) -> tuple[object, list[Any] | None]:
        """The one argument holding an array, when `todos` is missing: send it as `todos`."""
        found: list[tuple[object, list[Any], bool]] = []
        for key, value in args.items():
            if isinstance(value, list):
                found.append((key, value, False))
            elif (parsed := _parsed_array(value)) is not None:
                found.append((key, parsed, True))
            if len(found) > 1:
                break
        if len(found) != 1:
            self.todos_clause = text.MISSING_TODOS
            return _MISSING, None
        ((key, items, parsed_from_string),) = found
        template = text.SEND_PARSED_AS_TODOS if parsed_from_string else text.SEND_AS_TODOS
        self.todos_clause = template.format(name=key_name(key))
        return key, items

    def _unknown_argument(self, key: object) -> None:
        if len(self.unknown_arguments) < DISTINCT:
            self.unknown_arguments.append(key)
        else:
            self.more_arguments += 1

    # the items -----------------------------------------------------------------------------

    def _walk_items(self, items: list[Any]) -> None:
        objects: Iterable[tuple[int, Any]] = enumerate(items)
        types = list(map(type, items))  # the per-item work stays in C until an object
        kinds = Counter(types)
        if kinds[dict] != len(types):
            self._not_objects(types, kinds)
            objects = compress(enumerate(items), map(issubclass, types, repeat(dict)))
        for index, item in objects:
            if len(item) == 2 and "content" in item and "status" in item:
                self._content(item["content"], index)
                self._status(item["status"], index)
                continue
            carried: dict[str, str] = {}
            for field in _ITEM_KEYS:
                if field not in item:
                    alias = _alias(item, field)
                    self.missing.add((field, alias), index)
                    if alias is not None:
                        carried[alias] = field
            for key in item:
                if key not in _ITEM_KEYS and key not in carried:
                    self.unknown_keys.add(key, index)
            content = item.get("content", _MISSING)
            if content is _MISSING:
                content = _carried(item, carried, "content")
            if content is not _MISSING:
                self._content(content, index)
            status = item.get("status", _MISSING)
            if status is _MISSING:
                status = _carried(item, carried, "status")
            if status is not _MISSING:
                self._status(status, index)

    def _not_objects(self, types: list[type], kinds: Counter[type]) -> None:
        """Count the items that are not objects per JSON type, with their first indexes."""
        for kind, count in kinds.items():
            if issubclass(kind, dict):
                continue
            where = Where()
            where.count = count
            start = 0
            while len(where.first) < INDEXES_SHOWN and start < len(types):
                try:
                    start = types.index(kind, start) + 1
                except ValueError:
                    break
                where.first.append(start - 1)
            got = type_name(kind)
            known = self.not_object.kept.get(got)
            if known is None and len(self.not_object.kept) < DISTINCT:
                self.not_object.kept[got] = where
            elif known is not None:  # int and float are both numbers
                known.count += where.count
                known.first = sorted(known.first + where.first)[:INDEXES_SHOWN]

    def _content(self, content: object, index: int) -> None:
        if not isinstance(content, str):
            self.content_type.add(describe_type(content), index)
        elif not content or content.isspace():
            self.empty.add(index)
        elif content in self.seen:
            if content not in self.duplicates:
                if len(self.duplicates) < DISTINCT:
                    self.duplicates.append(content)
                else:
                    self.more_duplicates += 1
        else:
            self.seen.add(content)

    def _status(self, status: object, index: int) -> None:
        if isinstance(status, str) and status in text.STATUSES:
            self.in_progress += status == "in_progress"
            return
        key: Any = status if isinstance(status, str) else (describe_type(status),)
        suggestion = self.suggestions.get(key, _MISSING)
        if suggestion is _MISSING:
            suggestion = _suggested(status) if isinstance(status, str) else ""
            if len(self.suggestions) < DISTINCT:
                self.suggestions[key] = suggestion
                self.status_shown[key] = describe(status)
        self.bad_status.add(key, index)
        self.in_progress += suggestion == "in_progress"

    # the text --------------------------------------------------------------------------------

    def has_schema_problem(self) -> bool:
        return bool(
            self.unknown_arguments
            or self.todos_clause
            or self.not_object
            or self.unknown_keys
            or self.missing
            or self.content_type
            or self.bad_status
        )

    def _single_index(self) -> int | None:
        """The one item every problem lies in, if there is one and nothing else is wrong."""
        if self.unknown_arguments or self.todos_clause or self.duplicates or self._too_many():
            return None
        places = [
            *self.not_object.places(),
            *self.unknown_keys.places(),
            *self.missing.places(),
            *self.content_type.places(),
            *self.bad_status.places(),
        ]
        if self.empty.count:
            places.append(self.empty)
        indexes = {index for where in places for index in where.first}
        if len(indexes) != 1 or any(where.count != 1 for where in places):
            return None
        return indexes.pop()

    def _too_many(self) -> bool:
        return self.in_progress > 1 and not self.allow_parallel

    def schema_text(self) -> str:
        index = self._single_index()
        single = index is not None
        total = self.total

        def where(place: Where) -> str:
            return place.render(total, single)

        clauses: list[str] = []
        if self.unknown_arguments:
            names = [key_name(key) for key in self.unknown_arguments]
            shown = fit_names(names, len(names) + self.more_arguments)
            plural = "s" if len(names) + self.more_arguments > 1 else ""
            clauses.append(text.UNKNOWN_ARGUMENTS.format(s=plural, names=shown))
        if self.todos_clause:
            clauses.append(self.todos_clause)
        for got, place in self.not_object.kept.items():
            clauses.append(text.ITEM_NOT_OBJECT.format(where=where(place), got=got))
        clauses.extend(self._unknown_key_clauses(where))
        for (field, alias), place in sorted(
            self.missing.kept.items(), key=lambda entry: entry[0][1] is None
        ):
            if alias is None:
                expected = text.MISSING_FIELD_EXPECTS[field]
                clauses.append(
                    text.MISSING_FIELD.format(field=field, where=where(place), expected=expected)
                )
            else:
                clauses.append(
                    text.RENAME_FIELD.format(field=field, where=where(place), name=key_name(alias))
                )
        for got, place in self.content_type.kept.items():
            clauses.append(text.CONTENT_NOT_STRING.format(where=where(place), got=got))
        if self.bad_status:
            clauses.append(text.BAD_STATUS.format(values=self._status_values(where)))
        clauses.extend(self._list_clauses(where))
        hints = []
        if self.unknown_arguments and not self.todos_clause.startswith("missing `todos`:"):
            hints.append(text.ARGUMENTS_HINT)
        if (
            self.not_object
            or self.unknown_keys
            or (self.todos_clause and not self.todos_clause.startswith("missing `todos`:"))
        ):
            hints.append(text.ITEMS_HINT.format())
        head = text.CALL_HEAD if index is None else text.ITEM_HEAD.format(index=index)
        return assemble(head, clauses, hints)

    def _unknown_key_clauses(self, where: Any) -> Iterator[str]:
        groups: dict[tuple[int, tuple[int, ...]], list[str]] = {}
        places: dict[tuple[int, tuple[int, ...]], Where] = {}
        for key, place in self.unknown_keys.kept.items():
            groups.setdefault(place.key(), []).append(key_name(key))
            places[place.key()] = place
        more = len(self.unknown_keys.others)
        for number, (group, names) in enumerate(groups.items()):
            extra = more if number == len(groups) - 1 else 0
            shown = fit_names(names, len(names) + extra)
            plural = "s" if len(names) + extra > 1 else ""
            yield text.UNKNOWN_ITEM_KEYS.format(s=plural, names=shown, where=where(places[group]))

    def _status_values(self, where: Any) -> str:
        """Each distinct bad value with its places, grouped by what to use instead."""
        groups: dict[str | None, list[str]] = {}
        size = shown = 0
        for value, place in self.bad_status.kept.items():
            entry = self.status_shown[value]
            if not isinstance(value, str):  # a string names its items itself
                entry += where(place)
            if shown and size + len(entry) > CLAUSE_BUDGET // 2:
                break
            suggestion = _suggested(value) if isinstance(value, str) else ""
            groups.setdefault(suggestion, []).append(entry)
            size += len(entry)
            shown += 1
        rendered = []
        for suggestion, entries in groups.items():
            joined = text.NAME_SEPARATOR.join(entries)
            if suggestion is None:
                rendered.append(text.STATUS_DROP.format(values=joined))
            elif suggestion:
                rendered.append(text.STATUS_USE.format(values=joined, status=suggestion))
            else:
                rendered.append(joined)
        result = text.STATUS_GROUP_SEPARATOR.join(rendered)
        distinct = len(self.bad_status.kept) + len(self.bad_status.others)
        if distinct > shown:
            result += text.MORE_NAMES.format(count=distinct - shown)
        return result

    def _list_clauses(self, where: Any) -> Iterator[str]:
        if self.empty.count:
            yield text.EMPTY_CONTENT_AT.format(where=where(self.empty))
        yield from self._duplicate_and_count_clauses()

    def _duplicate_and_count_clauses(self) -> Iterator[str]:
        for content in self.duplicates:
            yield text.DUPLICATE.format(content=echo(content, CONTENT_SHOWN))
        if self.more_duplicates:
            yield text.MORE_PROBLEMS.format(count=self.more_duplicates)
        if self._too_many():
            yield text.TOO_MANY.format(count=self.in_progress)

    def list_text(self) -> str:
        """The text of a call the schema accepts: the seed's text of the first failing
        check, then a clause for each other problem."""
        clauses = list(self._duplicate_and_count_clauses())
        head = text.EMPTY_CONTENT if self.empty.count else text.CALL_HEAD + clauses.pop(0)
        return assemble_after(head, clauses)


def _alias(item: dict[Any, Any], field: str) -> str | None:
    """The key an item carries instead of a missing field (``title`` for ``content``)."""
    for alias in text.FIELD_ALIASES[field]:
        value = item.get(alias)
        if isinstance(value, str) and value.strip():
            return alias
    return None


def _carried(item: dict[Any, Any], carried: dict[str, str], field: str) -> object:
    for alias, target in carried.items():
        if target == field:
            return item[alias]
    return _MISSING


def _suggested(status: str) -> str | None:
    """The status to use instead of a foreign one: a name, None to drop, "" when unknown."""
    return text.STATUS_MAPPING.get(_normalized(status), "")


# --- entry points ----------------------------------------------------------------------------


def refusal(args: object, *, allow_parallel: bool, error: ValidationError) -> str:
    """The text for arguments the schema refused (``error``: pydantic's verdict)."""
    findings = Findings(allow_parallel=allow_parallel)
    try:
        findings.walk(args)
    except ToolCallRejected as rejected:
        return rejected.model_text
    if findings.has_schema_problem():
        return findings.schema_text()
    return _unexplained(error)


def list_refusal(todos: Iterable[Any], *, allow_parallel: bool) -> str:
    """The text for a list the schema accepted but the item or list rules refuse."""
    findings = Findings(allow_parallel=allow_parallel)
    for index, item in enumerate(todos):
        findings._content(item["content"], index)
        findings._status(item["status"], index)
    return findings.list_text()


def _unexplained(error: ValidationError) -> str:
    """A refusal the walk cannot explain (a type pydantic refuses and JSON never holds):
    name where pydantic's first error lies. Its error list is only read when short."""
    if error.error_count() > DISTINCT:
        loc: tuple[int | str, ...] = ("todos",)
    else:
        loc = error.errors(include_url=False, include_context=False, include_input=False)[0]["loc"]
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)
    return text.CALL_HEAD + text.UNEXPECTED_VALUE.format(path=echo(path.lstrip(".") or "."))


def not_json(reason: str) -> str:
    return text.NOT_JSON.format(reason=echo(reason, text.MAX_ERROR_CHARS // 2))
