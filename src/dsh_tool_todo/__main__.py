"""``python -m dsh_tool_todo``: the ``dsh-todo`` command line."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())
