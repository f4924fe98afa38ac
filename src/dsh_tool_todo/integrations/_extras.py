"""One error for every adapter whose framework is not installed, naming the extra to install."""

from __future__ import annotations

from ..errors import UsageError

__all__ = ["MissingExtra", "missing_extra"]


class MissingExtra(UsageError, ImportError):
    """An adapter's framework is missing (or shadowed by a module of the same name).

    An ``ImportError`` too, so ``except ImportError`` keeps working. The
    message names the extra: the package installs from its repository, not
    from an index, so it says how to install from a checkout.
    """


def missing_extra(adapter: str, extra: str, cause: BaseException) -> MissingExtra:
    """The error to raise ``from cause`` when ``adapter`` cannot import its framework."""
    return MissingExtra(
        f"{adapter} needs the {extra!r} extra: install dsh-tool-todo[{extra}] "
        f"(from this repository: pip install '.[{extra}]') ({type(cause).__name__}: {cause})"
    )
