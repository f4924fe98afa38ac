"""The chat middleware of the Agent Framework provider: error results marked, the plan reminded,
a person's requests told."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from agent_framework import ChatContext, ChatMiddleware, Message, included_messages

from ...core.contract import TOOL_NAME
from .._binding import OwnerRegistry
from .._notice import atold
from .._reminder import aplan_of, reminder_due

if TYPE_CHECKING:
    from . import OwnerOf

# The marker on the text item of an error result, read by MarkRefusals. It stays on the
# item in the history (the providers send a text item's text, not its properties).
_ERROR: Final = "dsh_todo_error"


class MarkRefusals(ChatMiddleware):
    """Sets ``exception`` on each ``todo_write`` error result before a model request.

    A function's return value becomes a result without an ``exception``; the
    framework sets one only when a tool raises, and then the model reads
    ``Error: Function failed.`` rather than the tool's text. This middleware
    gives a refusal both: the tool's text as the result, and as its exception.
    """

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        mark(context.messages)
        await call_next()


def mark(messages: Sequence[Any]) -> None:
    """Mark the error results among ``messages`` (each a framework ``Message``)."""
    for message in messages:
        for content in message.contents:
            if content.type != "function_result" or content.exception is not None:
                continue
            items = content.items or []
            if len(items) == 1 and items[0].additional_properties.get(_ERROR):
                content.exception = items[0].text


class RemindAfterCompaction(ChatMiddleware):
    """Re-surfaces the plan after a compaction: ``TodoWriteProvider(remind_after_compaction=True)``.

    Before each model request it wraps the request's compaction strategy (the one
    passed for the call, else the client's ``compaction_strategy``, else none): after
    that strategy ran, when the session's plan is not empty and no ``todo_write``
    call (nor an earlier reminder) among the messages the model will read shows it,
    :func:`~dsh_tool_todo.plans.reminder.plan_reminder` is appended as a user message.
    """

    def __init__(self, owners: OwnerRegistry, owner_of: OwnerOf) -> None:
        self.owners = owners
        self.owner_of = owner_of

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        key = None if context.session is None else self.owner_of(context.session)
        if key is not None:
            inner = _strategy_of(context)
            context.kwargs["compaction_strategy"] = _Reminding(inner, self.owners, key)
        await call_next()


class _AfterInner:
    """A compaction strategy: the inner one (when there is one), then a user message of its
    own with the text :meth:`_text` finds, when it finds one."""

    def __init__(self, inner: Any, owners: OwnerRegistry, key: str) -> None:
        self.inner = inner
        self.owners = owners
        self.key = key
        # what the framework reads of a strategy: a wrapper must not hide that the inner one
        # needs the history on the client (the client refuses a service-kept one then)
        self.tokenizer = getattr(inner, "tokenizer", None)
        self.requires_client_managed_history = _client_history(inner)

    async def __call__(self, messages: list[Message]) -> bool:
        changed = False if self.inner is None else bool(await self.inner(messages))
        text = await self._text(messages)
        if text is None:
            return changed
        messages.append(Message(role="user", contents=[text]))
        return True

    async def _text(self, messages: list[Message]) -> str | None:
        raise NotImplementedError


class _Reminding(_AfterInner):
    """The inner strategy, then the reminder when it is due."""

    async def _text(self, messages: list[Message]) -> str | None:
        todos = await aplan_of(self.owners, self.key)
        shown, written = _shown_and_written(included_messages(messages))
        return reminder_due(todos, written, shown)


class TellRequests(ChatMiddleware):
    """Tells the model what a person asked since its last request (docs/requests.md).

    Before each model request, when the owner's inbox holds requests, the request
    notice is appended as a user message after the newest message, once. With a
    compaction strategy for the request it is appended after that strategy ran (as the
    compaction reminder is, and after it), so no strategy drops or summarises it.
    """

    def __init__(self, owners: OwnerRegistry, owner_of: OwnerOf, fixed: str | None) -> None:
        self.owners = owners
        self.owner_of = owner_of
        self.fixed = fixed  # a fixed owner key: a request without a session has it too

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        key = self.fixed
        if key is None and context.session is not None:
            key = self.owner_of(context.session)
        if key is not None:
            inner = _strategy_of(context)
            if inner is not None:
                context.kwargs["compaction_strategy"] = _Telling(inner, self.owners, key)
            else:
                text = await atold(self.owners, key)
                if text is not None:  # a new list: the caller's messages stay as they were
                    context.messages = [*context.messages, Message(role="user", contents=[text])]
        await call_next()


class _Telling(_AfterInner):
    """The inner strategy, then the request notice when there is one."""

    async def _text(self, messages: list[Message]) -> str | None:
        return await atold(self.owners, self.key)


def _strategy_of(context: ChatContext) -> Any:
    """The request's compaction strategy: the one passed for the call, else the client's."""
    inner = context.kwargs.get("compaction_strategy")
    if inner is None:
        inner = getattr(context.client, "compaction_strategy", None)
    return inner


def _client_history(strategy: object) -> bool:
    return getattr(strategy, "requires_client_managed_history", False) is True


def _shown_and_written(messages: Sequence[Message]) -> tuple[list[str], list[object]]:
    shown: list[str] = []
    written: list[object] = []
    for message in messages:
        for content in message.contents:
            if content.type == "text" and message.role == "user" and content.text:
                shown.append(content.text)
            elif content.type == "function_call" and content.name == TOOL_NAME:
                try:
                    written.append((content.parse_arguments() or {}).get("todos"))
                except (TypeError, ValueError):  # arguments that are not JSON show no plan
                    continue
    return shown, written
