"""What an owner registry does with a person's requests: its owners' writers take them."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import TYPE_CHECKING

from ._inbox import atake_requests, take_requests

if TYPE_CHECKING:
    from ..core.requests import Request
    from ..protocols import StoreSession

__all__: list[str] = []


class OwnerRequests:
    """:class:`~dsh_tool_todo.stores.owners.OwnerRegistry`'s requests (docs/requests.md)."""

    def locked(self, owner: str) -> AbstractContextManager[StoreSession]:
        raise NotImplementedError

    def alocked(self, owner: str) -> AbstractAsyncContextManager[StoreSession]:
        raise NotImplementedError

    def take_requests(self, owner: str) -> list[Request]:
        """Take what waits in ``owner``'s inbox into its log, under the owner's lock: the
        requests to tell the model now (``plans.reminder.request_notice`` words them)."""
        with self.locked(owner) as session:
            return take_requests(session)

    async def atake_requests(self, owner: str) -> list[Request]:
        """:meth:`take_requests` for asyncio callers (any session, sync or async)."""
        async with self.alocked(owner) as session:
            return await atake_requests(session)
