"""The ``with`` block every store object shares: leaving it calls ``close()``."""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

_Closing = TypeVar("_Closing", bound="ClosedOnExit")


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
