"""The missing-extra error and its helpers, re-exported: all live in :mod:`..errors`."""

from __future__ import annotations

from ..errors import MissingExtra, missing_extra, needs_extra

__all__ = ["MissingExtra", "missing_extra", "needs_extra"]
