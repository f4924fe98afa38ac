"""Every string the model sees. Each one is a contract, tested byte for byte.

A changed byte here changes the model's prompt and breaks its prefix cache.
"""

from __future__ import annotations

TOOL_NAME = "todo_write"
EVENT_TYPE = "todo/write"
TURN_START = "turn/start"
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

NO_OWNER = "Error: todo_write requires an owning agent session"
EMPTY_CONTENT = "Error: invalid todo: `content` must be a non-empty string"
DUPLICATE_CONTENT = 'Error: invalid todos: duplicate content "{content}"'
TOO_MANY_IN_PROGRESS = "Error: invalid todos: at most one task may be in_progress (got {count})"

# What adapters answer when a valid call could not be recorded (ToolFailure): the
# cause (a full disk, a refused writer, a store outage) is logged for the host.
NOT_RECORDED = "Error: todo_write could not record the plan; it is unchanged. Try again."

# The texts below name what the seeds leave open (the schema's own checks).
# Each names the index, the key and what to send instead. All are str.format templates.
_ITEM_SHAPE = "each todo is {{content, status}}"  # a template: braces doubled
_STATUS_CHOICES = "one of pending, in_progress, completed"
NOT_JSON = "Error: invalid todos: the arguments are not valid JSON ({reason})"
ARGS_NOT_OBJECT = "Error: invalid todos: the arguments must be an object {{todos: [...]}}"
MISSING_TODOS = f"Error: invalid todos: missing `todos`, the array of every todo ({_ITEM_SHAPE})"
UNKNOWN_ARGUMENT = "Error: invalid todos: unknown argument {key}; todo_write takes only `todos`"
TODOS_NOT_ARRAY = f"Error: invalid todos: `todos` must be an array ({_ITEM_SHAPE})"
ITEM_NOT_OBJECT = f"Error: invalid todo at index {{index}}: expected an object ({_ITEM_SHAPE})"
UNKNOWN_ITEM_KEY = (
    "Error: invalid todo at index {index}: unknown key {key}; "
    f"{_ITEM_SHAPE}, with no other keys"
)
MISSING_FIELD = "Error: invalid todo at index {index}: missing `{field}` ({expected})"
CONTENT_NOT_STRING = "Error: invalid todo at index {index}: `content` must be a string (got {got})"
BAD_STATUS = (
    f"Error: invalid todo at index {{index}}: `status` must be {_STATUS_CHOICES} (got {{got}})"
)

MISSING_FIELD_EXPECTS = {
    "content": "a short imperative line",
    "status": _STATUS_CHOICES,
}
