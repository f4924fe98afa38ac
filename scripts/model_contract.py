"""Write the generated parts of docs/model-contract.md from dsh_tool_todo.core.contract, so the page
cannot drift from the texts the model reads.

Run: python scripts/model_contract.py      (tests/core/test_contract.py fails when it is stale)
"""

from __future__ import annotations

import argparse
import json
import re
import string
from pathlib import Path

from dsh_tool_todo.core import contract
from dsh_tool_todo.core._echo import SHOWN
from dsh_tool_todo.core._rejections import CONTENT_SHOWN
from dsh_tool_todo.core._tally import INDEXES_SHOWN
from dsh_tool_todo.core.schema import parameters

PAGE = Path(__file__).resolve().parents[1] / "docs" / "model-contract.md"
MARKERS = {
    "parameters": ("<!-- parameters:start -->", "<!-- parameters:end -->"),
    "errors": ("<!-- errors:start -->", "<!-- errors:end -->"),
}

# When each clause is said: documentation, not model-visible text.
CLAUSE_WHEN = {
    "UNKNOWN_ARGUMENTS": "an argument other than `todos` (`merge`, `command`, ...)",
    "MISSING_TODOS": "no `todos`, and not exactly one argument holding an array",
    "SEND_AS_TODOS": "no `todos`, and one argument holds an array (`plan`, `task_list`, ...)",
    "SEND_PARSED_AS_TODOS": "no `todos`, and one argument holds an array as a JSON string",
    "TODOS_IS_STRING": "`todos` is a JSON string holding an array",
    "TODOS_NOT_ARRAY": "`todos` is anything else that is not an array",
    "ITEM_NOT_OBJECT": "items that are not objects, per JSON type",
    "UNKNOWN_ITEM_KEYS": "keys other than `content` and `status`, grouped by where they occur",
    "RENAME_FIELD": "a missing field, when the item carries a known alias of it",
    "MISSING_FIELD": "a missing field, when it does not",
    "CONTENT_NOT_STRING": "a `content` that is not a string, per JSON type",
    "BAD_STATUS": "every distinct `status` outside the three, grouped by what to use instead",
    "EMPTY_CONTENT_AT": "an empty or whitespace-only `content`",
    "DUPLICATE": "each distinct content that occurs twice or more",
    "TOO_MANY": "more than one `in_progress`, only with `allowParallelInProgress: false`",
    "UNEXPECTED_VALUE": "only when pydantic refuses what no clause explains "
    "(a Python type JSON never holds)",
}


def shown(template: str) -> str:
    """A template as the page shows it: fields as ``<name>``, ``{s}`` as ``(s)``."""
    parts = []
    for literal, field, _spec, _conversion in string.Formatter().parse(template):
        parts.append(literal)
        if field is not None:
            parts.append("(s)" if field == "s" else f"<{field}>")
    return "".join(parts)


def code(text: str) -> str:
    """An inline code span that may itself hold backticks."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def parameters_block() -> str:
    pretty = json.dumps(parameters(), indent=2, ensure_ascii=False)
    return f"```json\n{pretty}\n```\n"


def errors_block() -> str:
    rows = [
        "| clause | when | text |",
        "| --- | --- | --- |",
    ]
    names = (*contract.SCHEMA_CLAUSES, *contract.LIST_CLAUSES, "UNEXPECTED_VALUE")
    for name in names:
        template = getattr(contract, name)
        rows.append(f"| `{name}` | {CLAUSE_WHEN[name]} | {code(shown(template))} |")
    statuses = [
        "| sent (any case, `-` or space for `_`) | the text says |",
        "| --- | --- |",
    ]
    for sent, use in contract.STATUS_MAPPING.items():
        said = shown(contract.STATUS_USE).replace("<values>", "…").replace("<status>", use or "")
        if use is None:
            said = shown(contract.STATUS_DROP).replace("<values>", "…")
        statuses.append(f"| `{sent}` | {code(said)} |")
    aliases = "; ".join(
        f"for `{field}`: " + ", ".join(f"`{alias}`" for alias in names)
        for field, names in contract.FIELD_ALIASES.items()
    )
    seed_head = contract.EMPTY_CONTENT.removesuffix(contract.EMPTY_CONTENT_AT.format(where=""))
    heads = ", ".join(
        code(shown(head)) for head in (contract.CALL_HEAD, contract.ITEM_HEAD, seed_head)
    )
    return "\n".join(
        [
            "The texts that stand alone (nothing else can be checked):",
            "",
            "| when | text |",
            "| --- | --- |",
            f"| arguments that are not JSON | {code(shown(contract.NOT_JSON))} |",
            f"| arguments that are not an object | {code(shown(contract.ARGS_NOT_OBJECT))} |",
            "",
            "Every other refusal is one line made of a head and clauses. The heads: "
            f"{heads}. The clauses, in the order a text names them:",
            "",
            *rows,
            "",
            "How they combine:",
            "",
            "1. When the schema refuses the call, the text starts with "
            f"{code(contract.CALL_HEAD)}, or with {code(shown(contract.ITEM_HEAD))} when every "
            "problem lies in that one item "
            "(its clauses then name no place). It names each distinct schema problem in the "
            "order above, then the item and list problems already visible in the same call "
            "(`EMPTY_CONTENT_AT`, `DUPLICATE`, `TOO_MANY`, counted on what the other clauses "
            "say to send), then the hints that apply: "
            f"{code(contract.ARGUMENTS_HINT)} (unknown arguments), "
            f"{code(shown(contract.ITEMS_HINT))} (item shape problems).",
            "2. When the schema accepts it, the text is the specification's text of the first "
            "failing check (empty content, then duplicate, then the `in_progress` count), "
            "byte for byte, followed by a clause for each other problem.",
            f"3. Clauses are joined by {code(contract.CLAUSE_SEPARATOR)}. A text is at most "
            f"{contract.MAX_ERROR_CHARS} characters: whole clauses while they fit (hints first "
            f"to go), then {code(shown(contract.MORE_PROBLEMS))}; within a clause, names while "
            f"they fit, then {code(shown(contract.MORE_NAMES))}.",
            "4. `<where>` is "
            + ", ".join(
                code(shown(where))
                for where in (contract.WHERE_EVERY, contract.WHERE_INDEXES, contract.WHERE_COUNT)
            )
            + f" (at most {INDEXES_SHOWN} indexes are listed). In `BAD_STATUS`, `<values>` "
            "lists each distinct value (a string names its own items; other types add "
            "`<where>`), grouped "
            f"by what to use: {code(shown(contract.STATUS_USE))}, "
            f"{code(shown(contract.STATUS_DROP))}, or the values alone when there is no "
            "counterpart to suggest; groups are joined by "
            f"{code(contract.STATUS_GROUP_SEPARATOR)}.",
            f"5. Echoed keys and values are cut to {SHOWN} characters and a duplicate content "
            f"to {CONTENT_SHOWN} (then `…`), with control characters (C0, DEL, C1), U+2028, "
            "U+2029 and lone surrogates escaped as `\\uXXXX`; a string key or value is quoted "
            "as JSON unless it is a plain key, shown in backticks. So any content of at most "
            f"{CONTENT_SHOWN} characters without those characters is echoed exactly as sent.",
            f"6. Keys an item may carry instead of a missing field ({aliases}): the first one "
            "holding a non-empty string is named in `RENAME_FIELD`.",
            "",
            "Foreign status values and what the text suggests:",
            "",
            *statuses,
            "",
        ]
    )


BLOCKS = {"parameters": parameters_block, "errors": errors_block}


def updated(page: str) -> str:
    for name, (start, end) in MARKERS.items():
        block = f"{start}\n{BLOCKS[name]()}{end}"
        pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
        page = pattern.sub(block.replace("\\", "\\\\"), page)
    return page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="example: python scripts/model_contract.py   (then review git diff "
        "docs/model-contract.md)",
    )
    parser.parse_args(argv)
    PAGE.write_text(updated(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
