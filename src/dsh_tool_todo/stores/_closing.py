"""The ``with`` and ``async with`` blocks store objects share: leaving one closes the object."""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

_Closing = TypeVar("_Closing", bound="ClosedOnExit")
_AsyncClosing = TypeVar("_AsyncClosing", bound="ClosedOnAsyncExit")


class ClosedOnExit:
    """A context manager whose exit is ``self.close()``; subclasses define ``close``."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Closing) -> _Closing:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


# The async twin of ClosedOnExit, written out: one awaits where the other calls.
class ClosedOnAsyncExit:
    """An async context manager whose exit is ``await self.aclose()``; subclasses define
    ``aclose`` (and may enter by more than returning themselves)."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self: _AsyncClosing) -> _AsyncClosing:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
