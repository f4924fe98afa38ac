"""Every string the model sees. Each one is a contract, tested byte for byte.

A changed byte here changes the model's prompt and breaks its prefix cache.
docs/model-contract.md is generated from this module (scripts/model_contract.py).
"""

from __future__ import annotations

__all__ = [
    "CALL_ID_KEY",
    "DESCRIPTION_PARALLEL",
    "DESCRIPTION_SINGLE",
    "EVENT_TYPE",
    "LINK_EVENT_TYPE",
    "NOT_RECORDED",
    "NO_OWNER",
    "SESSION_END_EVENT_TYPE",
    "STATUSES",
    "SUCCESS_TEXT",
    "TOOL_NAME",
    "TURN_START",
]

TOOL_NAME = "todo_write"
EVENT_TYPE = "todo/write"
CALL_ID_KEY = "callId"
"""The optional key beside ``todos`` in a ``todo/write`` event's data: the framework's
tool-call id. Not model-visible; readers and the ``todos`` projection ignore it."""
TURN_START = "turn/start"
LINK_EVENT_TYPE = (
    "session/link"  # host metadata at the head of a sub-agent's log; never shown to the model
)
SESSION_END_EVENT_TYPE = (
    "session/end"  # host metadata: a delegated run's session ended; never shown to the model
)
# A person's requests against a plan (core/requests.py), recorded by the plan's own writer:
# host metadata, never shown to the model as events (the notice below is what it reads).
REQUEST_TAKEN = "request/taken"
REQUEST_WITHDRAWN = "request/withdrawn"
REQUEST_NOTIFIED = "request/notified"
REQUEST_EVENT_TYPES = (REQUEST_TAKEN, REQUEST_WITHDRAWN, REQUEST_NOTIFIED)
STATUSES = ("pending", "in_progress", "completed")

_DESCRIPTION_HEAD = (
    "Record and update a structured task list for the current work. "
    "Send the ENTIRE list every call — it REPLACES the previous list "
    "(there are no partial updates, no per-item edits). "
    "Use it to plan multi-step work and show progress: "
    "add one todo per concrete step before you start. "
)
_DESCRIPTION_TAIL = (
    "Mark a todo `completed` the moment it is done (do not batch completions), "
    "and allow no `in_progress` item only once all work is complete. "
    "Skip the list for trivial single-step tasks. "
    "Statuses: `pending` (not started), `in_progress` (being worked on now), "
    "`completed` (finished)."
)
_SINGLE_ACTIVE = (
    "Keep AT MOST ONE todo `in_progress` at a time; "
    "while work remains, exactly one active task should be `in_progress`. "
)
_PARALLEL_ACTIVE = (
    "Mark EVERY todo you are actively advancing `in_progress` (several when work runs "
    "in parallel); while work remains, keep at least one. "
)

DESCRIPTION_SINGLE = _DESCRIPTION_HEAD + _SINGLE_ACTIVE + _DESCRIPTION_TAIL
DESCRIPTION_PARALLEL = _DESCRIPTION_HEAD + _PARALLEL_ACTIVE + _DESCRIPTION_TAIL

TODOS_DESCRIPTION = "The COMPLETE task list, replacing any previous list."
CONTENT_DESCRIPTION = "What the task is — a short imperative line."
STATUS_DESCRIPTION = "pending (not started) | in_progress (now) | completed (done)."

# Its fields are the canonical result's ``counts`` keys, as the seeds write them.
SUCCESS_TEXT = (
    "Updated todo list: {pending} pending, {inProgress} in progress, {completed} completed."
)

# The seed's four failure texts. EMPTY_CONTENT is "Error: invalid todo: " + EMPTY_CONTENT_AT
# at no place; the other two are CALL_HEAD + DUPLICATE and CALL_HEAD + TOO_MANY.
NO_OWNER = "Error: todo_write requires an owning agent session"
EMPTY_CONTENT = "Error: invalid todo: `content` must be a non-empty string"
DUPLICATE_CONTENT = 'Error: invalid todos: duplicate content "{content}"'
TOO_MANY_IN_PROGRESS = "Error: invalid todos: at most one task may be in_progress (got {count})"

# What adapters answer when a valid call could not be recorded (ToolFailure): the
# cause (a full disk, a refused writer, a store outage) is logged for the host.
NOT_RECORDED = "Error: todo_write could not record the plan; it is unchanged. Try again."

# --- Refusals: a head, then clauses ------------------------------------------------------
# A refused call gets ONE line that names every distinct problem the checks can see, so one
# retry can repair the call. Its shape (_rejections.py builds it; docs/model-contract.md is
# generated from these constants):
#   * ownership, not JSON, not an object: the whole text below, alone;
#   * schema problems: CALL_HEAD (or ITEM_HEAD when they all lie in one item), then one
#     clause per distinct problem in the order of SCHEMA_CLAUSES, then the item and list
#     problems already visible (LIST_CLAUSES), then the hints, joined by CLAUSE_SEPARATOR;
#   * item and list problems only: the seed's text of the first failing check, then a
#     clause for each other problem;
#   * at most MAX_ERROR_CHARS characters: whole clauses while they fit, then MORE_PROBLEMS.
# Fields: {where} is "" under ITEM_HEAD, else one of the WHERE_ texts; {names} and {values}
# are echoed keys and values, cut and escaped; {s} makes a noun plural. A bad status value
# that is a string names itself, so BAD_STATUS gives places only for values of other types.
NOT_JSON = "Error: invalid todos: the arguments are not valid JSON ({reason})"
ARGS_NOT_OBJECT = "Error: invalid todos: the arguments must be an object {{todos: [...]}}"
CALL_HEAD = "Error: invalid todos: "
ITEM_HEAD = "Error: invalid todo at index {index}: "
CLAUSE_SEPARATOR = "; "
MAX_ERROR_CHARS = 400
MORE_PROBLEMS = "and {count} more problems"
MORE_NAMES = " and {count} more"

WHERE_EVERY = " in every item"
WHERE_INDEXES = " at index {indexes}"
WHERE_COUNT = " at {count} indexes"

_STATUS_CHOICES = "one of pending, in_progress, completed"
UNKNOWN_ARGUMENTS = "unknown argument{s} {names}"
MISSING_TODOS = "missing `todos`, the array of every todo"
SEND_AS_TODOS = "missing `todos`: send the array {name} as `todos`, each todo {{content, status}}"
SEND_PARSED_AS_TODOS = (
    "missing `todos`: {name} is a JSON string; send its array as `todos`, "
    "each todo {{content, status}}"
)
TODOS_IS_STRING = "`todos` is a JSON string; send the array itself"
TODOS_NOT_ARRAY = "`todos` must be an array (got {got})"
ITEM_NOT_OBJECT = "expected an object{where} (got {got})"
UNKNOWN_ITEM_KEYS = "unknown key{s} {names}{where}"
MISSING_FIELD = "missing `{field}`{where} ({expected})"
RENAME_FIELD = "missing `{field}`{where}: rename {name} to `{field}`"
CONTENT_NOT_STRING = "`content` must be a string{where} (got {got})"
BAD_STATUS = f"`status` must be {_STATUS_CHOICES} (got {{values}})"
STATUS_USE = "{values}: use {status}"
STATUS_DROP = "{values}: drop the item, or keep it pending and say why in its content"
STATUS_GROUP_SEPARATOR = "; "
NAME_SEPARATOR = ", "

# Only when pydantic refuses what no clause above explains (a Python type JSON never holds).
UNEXPECTED_VALUE = "unexpected value at `{path}`"

EMPTY_CONTENT_AT = "`content` must be a non-empty string{where}"
DUPLICATE = 'duplicate content "{content}"'
TOO_MANY = "at most one task may be in_progress (got {count})"

ARGUMENTS_HINT = "todo_write takes only `todos`"
ITEMS_HINT = "each todo is {{content, status}}, with no other keys"

# The clauses in the order a text names them.
SCHEMA_CLAUSES = (
    "UNKNOWN_ARGUMENTS",
    "MISSING_TODOS",
    "SEND_AS_TODOS",
    "SEND_PARSED_AS_TODOS",
    "TODOS_IS_STRING",
    "TODOS_NOT_ARRAY",
    "ITEM_NOT_OBJECT",
    "UNKNOWN_ITEM_KEYS",
    "RENAME_FIELD",
    "MISSING_FIELD",
    "CONTENT_NOT_STRING",
    "BAD_STATUS",
)
LIST_CLAUSES = ("EMPTY_CONTENT_AT", "DUPLICATE", "TOO_MANY")
HINTS = ("ARGUMENTS_HINT", "ITEMS_HINT")

MISSING_FIELD_EXPECTS = {
    "content": "a short imperative line",
    "status": _STATUS_CHOICES,
}

# Status values models bring from other harnesses, matched after lower-casing and turning
# spaces and hyphens into underscores. None: there is no counterpart (STATUS_DROP).
STATUS_MAPPING: dict[str, str | None] = {
    "done": "completed",
    "complete": "completed",
    "finished": "completed",
    "todo": "pending",
    "to_do": "pending",
    "not_started": "pending",
    "pending": "pending",
    "open": "pending",
    "in_progress": "in_progress",
    "inprogress": "in_progress",
    "doing": "in_progress",
    "active": "in_progress",
    "completed": "completed",
    "cancelled": None,
    "canceled": None,
    "failed": None,
    "blocked": None,
    "skipped": None,
}

# Keys an item carries instead of a missing field, in order of preference.
FIELD_ALIASES = {
    "content": ("title", "task", "step", "description", "text", "name", "todo", "summary"),
    "status": ("state",),
}

# The compaction reminder (reminder.py), also model-visible: it sits in the prompt, and a
# changed byte breaks the prefix cache of every conversation that carries it.
REMINDER_HEADER = (
    "Your current todo_write plan, carried over from before the conversation was compacted:"
)
REMINDER_ITEM = "- [{status}] {content}"
REMINDER_LEFT_OUT = "- … {count:,} more todos not shown"
REMINDER_FOOTER = (
    "To change the plan, call todo_write with the ENTIRE list, every todo with its status: "
    "each call replaces the previous list."
)

# The request notice (core/requests.py): what a person watching asked, put once after the
# newest message of the next model request (the reminder's placement), or after a tool
# result where there is no such hook (MCP). Request contents are escaped and cut as the
# reminder's are. A one-item notice costs under 40 tokens (tests/core/test_tokens.py).
REQUEST_NOTICE_HEADER = "The user watching your todo list asks:"
REQUEST_NOTICE_ITEMS = {
    "done": '- mark "{content}" completed',
    "reopen": '- reopen "{content}"',
    "remove": '- remove "{content}"',
    "add": '- add "{content}"',
    "note": "- note: {content}",
}
REQUEST_NOTICE_FOOTER = "Answer with todo_write (the ENTIRE list) or say why not."
