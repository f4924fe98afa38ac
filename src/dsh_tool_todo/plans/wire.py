"""The plan in each wire format a UI or an agent peer consumes: one pure converter per format.

Every converter takes the plan's source, either a session event (a
``todo/write``, or a ``turn/start``, which clears the plan) or a plan itself
(a list of ``{content, status}``; ``None`` is no plan), and returns a fresh
JSON-serialisable dict in that protocol's own wire form (camelCase keys). Each
write replaces the previous plan on the consumer's side: the objects carry a
stable id derived from the session key (or, for A2A, fixed per task), so the
consumer overwrites instead of appending.

>>> event = {"seq": 4, "type": "todo/write",
...          "data": {"todos": [{"content": "Ship <it>", "status": "pending"}]}}
>>> ai_sdk_data_part("main", event)["data"]
{'todos': [{'content': 'Ship <it>', 'status': 'pending'}]}
>>> ai_sdk_data_part("main", {"seq": 5, "type": "turn/start", "data": {}})
{'type': 'data-plan', 'id': 'plan:main', 'data': {'todos': []}}

With ``requests`` (a list of what was asked, as
:meth:`~dsh_tool_todo.plans._pending.PendingRequests.asked` gives it), the plan
carries it beside ``todos`` under ``requests``; ``None`` (the default) leaves
the key out, so a plan without requests is what it always was:

>>> ai_sdk_data_part("main", None, requests=[])["data"]
{'todos': [], 'requests': []}

Content is passed through as the model wrote it, never escaped: these are
structured data, and the consumer escapes for whatever it renders on.
Nothing here imports a framework; docs/wire-formats.md lists each format,
its cleared form, and the published models the tests validate against.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

from ..core.contract import EVENT_TYPE, TURN_START
from ..core.model import Status
from ..core.projection import check_logged_write
from ..errors import InvalidLog, UsageError
from .acp import PlanEntryPayload, PlanUpdatePayload, plan_update
from .checklist import Todos

__all__ = [
    "a2a_artifact_update",
    "acp_plan",
    "acp_plan_operation",
    "ag_ui_activity_snapshot",
    "ag_ui_state_delta",
    "ag_ui_state_snapshot",
    "ai_sdk_data_part",
    "plan_id",
    "plan_of",
]

PlanSource = Mapping[str, Any] | Todos | None
"""A ``todo/write`` or ``turn/start`` event, or a plan (``None``: no plan)."""

AG_UI_ACTIVITY_TYPE = "PLAN"
STATE_KEY = "todos"
"""The key of the plan in an AG-UI agent state (as in the host's projection)."""
A2A_ARTIFACT_ID = "plan"
"""A2A artifacts belong to one task: the fixed id makes each write replace the last."""
AI_SDK_DATA_TYPE = "data-plan"
REQUESTS_KEY = "requests"
"""The key beside ``todos`` holding what a person asked (docs/requests.md)."""
ACP_REQUESTS_META = "dsh-tool-todo/requests"
"""The key in an ACP update's ``_meta`` holding what a person asked: ACP allows no field of
its own beside ``entries``, and namespaces ``_meta``'s keys."""
_PLAN_ID_PREFIX = "plan:"


class PlanItem(TypedDict):
    content: str
    status: Status


class _PlanTodos(TypedDict):
    todos: list[PlanItem]


class PlanContent(_PlanTodos, total=False):
    requests: list[dict[str, Any]]  # only when asked for: a plan without is as it always was


def plan_id(session_key: str) -> str:
    """The stable id of a session's plan in every format that names it: ``plan:<session key>``."""
    if not isinstance(session_key, str) or not session_key:
        raise UsageError(
            f"session_key must be a non-empty string naming the session, got {session_key!r}"
        )
    return _PLAN_ID_PREFIX + session_key


def plan_of(source: PlanSource) -> list[PlanItem]:
    """The plan ``source`` sets, as fresh ``{content, status}`` dicts; a cleared plan is ``[]``.

    Raises :class:`UsageError` for an event that does not decide the plan
    (anything but ``todo/write`` and ``turn/start``: skip it, the plan is
    unchanged) and for a list the tool could not have recorded, judged by the
    check every reader makes of a logged write (an unknown item key such as
    ``activeForm``, a data key beside ``todos`` and ``callId``, a ``callId``
    that is not a non-empty string, duplicate or blank content, ...).
    """
    if source is None:
        return []
    if isinstance(source, Mapping):
        kind = source.get("type")
        if kind == TURN_START:
            return []
        if kind != EVENT_TYPE:
            raise UsageError(
                f"a {kind!r} event leaves the plan as it is: convert only {EVENT_TYPE!r} "
                f"and {TURN_START!r} events (or a plan)"
            )
        data = source.get("data")
        if not isinstance(data, Mapping) or data.get("todos") is None:
            raise UsageError(f"a {EVENT_TYPE!r} event needs data {{'todos': [...]}}, got {data!r}")
        todos = _as_logged(data["todos"])
        logged = {"type": EVENT_TYPE, "data": {**data, "todos": todos}}
        _check_recordable(logged, f"the {EVENT_TYPE!r} event at seq {source.get('seq', '?')!r}")
    else:
        if isinstance(source, (str, bytes)) or not isinstance(source, Sequence):
            raise UsageError(
                f"todos must be a list of {{content, status}}, not {type(source).__name__}"
            )
        todos = _as_logged(source)
        _check_recordable({"type": EVENT_TYPE, "data": {"todos": todos}}, "the plan")
    return [{"content": item["content"], "status": item["status"]} for item in todos]


def _content(source: PlanSource, requests: Sequence[Mapping[str, Any]] | None) -> PlanContent:
    """``{"todos": [...]}`` of ``source``, and ``requests`` beside it unless ``None``."""
    content: PlanContent = {"todos": plan_of(source)}
    if requests is not None:
        content["requests"] = _requests_of(requests)
    return content


def _requests_of(requests: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Fresh copies of ``requests``: a list of mappings, each a request as it stands."""
    if isinstance(requests, (str, bytes, Mapping)) or not isinstance(requests, Sequence):
        raise UsageError(
            "requests must be a list of requests, as PendingRequests.asked() gives them "
            f"(or None for none shown), not {type(requests).__name__}"
        )
    for request in requests:
        if not isinstance(request, Mapping):
            raise UsageError(f"each request is a mapping, not {type(request).__name__}")
    # a request's fields are JSON scalars: a copy of each mapping shares nothing
    return [dict(request) for request in requests]


def _as_logged(todos: Any) -> Any:
    """``todos`` in the containers a logged write holds: a plan built in Python may be any
    sequence of mappings. Every key is kept, so a key the tool refuses is still seen."""
    if isinstance(todos, (str, bytes)) or not isinstance(todos, Sequence):
        return todos  # judged, and refused, as it is
    return [dict(item) if isinstance(item, Mapping) else item for item in todos]


def _check_recordable(event: Mapping[str, Any], what: str) -> None:
    """Raise :class:`UsageError` unless ``event`` is a write the tool could have recorded,
    by the readers' own check: a converter never carries what no reader would show."""
    position = "?"
    try:
        check_logged_write(event, position)
    except InvalidLog as error:
        reason = str(error).removeprefix(f"event {position}: ").removeprefix("Error: ")
        raise UsageError(
            f"{what}: the tool could not have recorded it ({reason}); every reader refuses "
            "it, so convert only what a session logged"
        ) from None


# --- AG-UI -----------------------------------------------------------------------------------


class _AgUiActivity(TypedDict):
    type: Literal["ACTIVITY_SNAPSHOT"]
    messageId: str
    activityType: str
    content: PlanContent
    replace: bool


class AgUiActivitySnapshot(_AgUiActivity, total=False):
    subagentRunId: str  # only on a sub-agent's plan


class AgUiStateSnapshot(TypedDict):
    type: Literal["STATE_SNAPSHOT"]
    snapshot: PlanContent


class JsonPatchAdd(TypedDict):
    op: Literal["add"]
    path: str
    value: list[PlanItem] | list[dict[str, Any]]


class AgUiStateDelta(TypedDict):
    type: Literal["STATE_DELTA"]
    delta: list[JsonPatchAdd]


def ag_ui_activity_snapshot(
    session_key: str,
    source: PlanSource,
    *,
    subagent_run_id: str | None = None,
    requests: Sequence[Mapping[str, Any]] | None = None,
) -> AgUiActivitySnapshot:
    """An AG-UI ``ACTIVITY_SNAPSHOT`` of ``activityType`` ``PLAN`` that replaces the session's last.

    Its ``messageId`` is :func:`plan_id`, so a consumer keeps one plan
    activity per session; a cleared plan is ``content: {"todos": []}``.
    ``subagent_run_id`` attributes it to the sub-agent invocation a
    ``SUBAGENT_STARTED`` of that id announced (AG-UI 1.0): the plan of a
    sub-agent's own session, beside its lead's (``docs/wire-formats.md``, "Trees").
    """
    snapshot: AgUiActivitySnapshot = {
        "type": "ACTIVITY_SNAPSHOT",
        "messageId": plan_id(session_key),
        "activityType": AG_UI_ACTIVITY_TYPE,
        "content": _content(source, requests),
        "replace": True,
    }
    if subagent_run_id is not None:
        if not isinstance(subagent_run_id, str) or not subagent_run_id:
            raise UsageError(
                "subagent_run_id must be the sub-agent invocation's non-empty id string "
                f"(or None for the lead's own plan), got {subagent_run_id!r}"
            )
        snapshot["subagentRunId"] = subagent_run_id
    return snapshot


def ag_ui_state_snapshot(
    source: PlanSource, *, requests: Sequence[Mapping[str, Any]] | None = None
) -> AgUiStateSnapshot:
    """An AG-UI ``STATE_SNAPSHOT`` whose state is ``{"todos": [...]}`` (and ``requests``).

    A snapshot replaces the agent's whole state: use it for a stream that
    carries only the plan, and :func:`ag_ui_state_delta` where the state
    holds other keys too.
    """
    return {"type": "STATE_SNAPSHOT", "snapshot": _content(source, requests)}


def ag_ui_state_delta(
    source: PlanSource, *, requests: Sequence[Mapping[str, Any]] | None = None
) -> AgUiStateDelta:
    """An AG-UI ``STATE_DELTA`` setting the state's ``todos`` key to the whole new list.

    One RFC 6902 ``add`` at ``/todos``: it replaces the member when it exists
    and creates it when it does not (section 4.1), so it applies to any
    object state and touches no other key; a plan replaces wholesale, so a
    finer patch would only be a longer way to say the same. With ``requests``, a
    second ``add`` sets ``/requests`` the same way.
    """
    delta: list[JsonPatchAdd] = [{"op": "add", "path": "/" + STATE_KEY, "value": plan_of(source)}]
    if requests is not None:
        delta.append({"op": "add", "path": "/" + REQUESTS_KEY, "value": _requests_of(requests)})
    return {"type": "STATE_DELTA", "delta": delta}


# --- A2A -------------------------------------------------------------------------------------


class A2aDataPart(TypedDict):
    data: PlanContent
    mediaType: str


class A2aArtifact(TypedDict):
    artifactId: str
    name: str
    parts: list[A2aDataPart]


class A2aArtifactUpdate(TypedDict):
    taskId: str
    contextId: str
    artifact: A2aArtifact
    append: bool
    lastChunk: bool


def a2a_artifact_update(
    source: PlanSource,
    *,
    task_id: str,
    context_id: str,
    requests: Sequence[Mapping[str, Any]] | None = None,
) -> A2aArtifactUpdate:
    """An A2A ``TaskArtifactUpdateEvent`` (its JSON form) carrying the plan as artifact ``plan``.

    One data part ``{"todos": [...]}``, ``append: false`` and ``lastChunk:
    true``: each write replaces the task's previous plan artifact whole. A
    cleared plan is the artifact with ``{"todos": []}``. With ``requests``, the
    data part is ``{"todos": [...], "requests": [...]}``.
    """
    for name, value in (("task_id", task_id), ("context_id", context_id)):
        if not isinstance(value, str) or not value:
            raise UsageError(f"{name} must be the A2A task's non-empty id string, got {value!r}")
    return {
        "taskId": task_id,
        "contextId": context_id,
        "artifact": {
            "artifactId": A2A_ARTIFACT_ID,
            "name": A2A_ARTIFACT_ID,
            "parts": [{"data": _content(source, requests), "mediaType": "application/json"}],
        },
        "append": False,
        "lastChunk": True,
    }


# --- Vercel AI SDK ---------------------------------------------------------------------------


class AiSdkDataPart(TypedDict):
    type: Literal["data-plan"]
    id: str
    data: PlanContent


def ai_sdk_data_part(
    session_key: str, source: PlanSource, *, requests: Sequence[Mapping[str, Any]] | None = None
) -> AiSdkDataPart:
    """An AI SDK UI message stream chunk ``data-plan``; a chunk with the same ``id`` replaces it.

    The ``id`` is :func:`plan_id`, so the message keeps one plan part per
    session; a cleared plan is ``data: {"todos": []}``. With ``requests``,
    ``data`` carries them beside the plan.
    """
    identifier = plan_id(session_key)
    return {"type": "data-plan", "id": identifier, "data": _content(source, requests)}


# --- ACP -------------------------------------------------------------------------------------


class _AcpMeta(TypedDict, total=False):
    _meta: dict[str, list[dict[str, Any]]]


class AcpPlan(PlanUpdatePayload, _AcpMeta):
    pass


def acp_plan(
    source: PlanSource,
    *,
    priority: str = "medium",
    requests: Sequence[Mapping[str, Any]] | None = None,
) -> AcpPlan:
    """The ACP ``plan`` session update (:func:`dsh_tool_todo.plans.acp.plan_update`) of ``source``.

    A cleared plan is ``entries: []``, which clears the client's plan. With ``requests``,
    the update carries them in its ``_meta``, under :data:`ACP_REQUESTS_META`.
    """
    entries = plan_update(plan_of(source), priority=priority)["entries"]
    plan: AcpPlan = {"sessionUpdate": "plan", "entries": entries}
    if requests is not None:
        plan["_meta"] = _acp_meta(requests)
    return plan


def _acp_meta(requests: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """An ACP update's ``_meta`` saying what was asked."""
    return {ACP_REQUESTS_META: _requests_of(requests)}


class AcpPlanItems(TypedDict):
    type: Literal["items"]
    planId: str
    entries: list[PlanEntryPayload]


class _AcpPlanContent(TypedDict):
    sessionUpdate: Literal["plan_update"]
    plan: AcpPlanItems


class AcpPlanContentUpdate(_AcpPlanContent, _AcpMeta):
    pass


class _AcpPlanRemoved(TypedDict):
    sessionUpdate: Literal["plan_removed"]
    planId: str


class AcpPlanRemoved(_AcpPlanRemoved, _AcpMeta):
    pass


def acp_plan_operation(
    session_key: str,
    source: PlanSource,
    *,
    priority: str = "medium",
    requests: Sequence[Mapping[str, Any]] | None = None,
) -> AcpPlanContentUpdate | AcpPlanRemoved:
    """ACP's plan operations: ``plan_update`` with a ``planId``, ``plan_removed`` when cleared.

    A ``turn/start`` (or ``None``) removes the plan; a written list, even an
    empty one, updates it. ACP marks both updates unstable: send them only to
    a client whose capabilities advertise ``plan``, and :func:`acp_plan` to
    any other. With ``requests``, either carries them in its ``_meta``, under
    :data:`ACP_REQUESTS_META`.

    >>> acp_plan_operation("main", None, requests=[])["_meta"]
    {'dsh-tool-todo/requests': []}
    """
    identifier = plan_id(session_key)
    operation: AcpPlanContentUpdate | AcpPlanRemoved
    if source is None or (isinstance(source, Mapping) and source.get("type") == TURN_START):
        operation = {"sessionUpdate": "plan_removed", "planId": identifier}
    else:
        entries = acp_plan(source, priority=priority)["entries"]
        operation = {
            "sessionUpdate": "plan_update",
            "plan": {"type": "items", "planId": identifier, "entries": entries},
        }
    if requests is not None:
        operation["_meta"] = _acp_meta(requests)
    return operation
