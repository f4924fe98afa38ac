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


def missing_extra(
    adapter: str, extra: str, cause: ImportError, *, module: str | None = None
) -> MissingExtra:
    """The error to raise ``from cause`` when ``adapter`` cannot import its framework.

    With ``module`` (the framework's top-level name): when that module was
    found but is not the framework (a user's own ``agents.py`` or ``mcp/`` on
    ``sys.path``), the message says so.
    """
    absent = isinstance(cause, ModuleNotFoundError) and module in (None, cause.name)
    hider = "a module of yours of the same name" if module is None else f"your own {module!r}"
    shadowed = "" if absent else f"; if it is installed, {hider} may be hiding it"
    return MissingExtra(
        f"{adapter} needs the {extra!r} extra: install dsh-tool-todo[{extra}] "
        f"(from this repository: pip install '.[{extra}]'){shadowed} ({cause})"
    )
