"""The pluggy markers of the dsh plugin protocol, built from one project name."""

from __future__ import annotations

import pluggy

PROJECT_NAME = "dsh"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
