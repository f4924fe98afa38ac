"""Doctest collection: the adapter modules whose frameworks `dev` installs on Python 3.11+ only,
and CrewAI's, which dev does not install (.ci/run tests it in an environment of its own)."""

import sys
from importlib.util import find_spec

collect_ignore: list[str] = []
if sys.version_info < (3, 11):  # google-adk 2.x needs 3.11; pyproject's dev says why for the rest
    collect_ignore += [
        f"src/dsh_tool_todo/integrations/{name}.py"
        for name in ("claude_agent_sdk", "google_adk", "llama_index", "strands")
    ]
if find_spec("crewai") is None:  # a path given on the command line is still collected
    collect_ignore += [
        "src/dsh_tool_todo/integrations/crewai.py",
        "tests/integrations/test_crewai.py",
    ]
