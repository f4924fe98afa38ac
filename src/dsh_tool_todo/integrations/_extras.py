"""The missing-extra error and its helper, re-exported: both live in :mod:`..errors`."""

from __future__ import annotations

from ..errors import MissingExtra, missing_extra

__all__ = ["MissingExtra", "missing_extra"]
