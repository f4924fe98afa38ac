"""docs/web.md's Python examples run with what `pip install '.[web]'` installs, and nothing else."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)

# Imports of any module whose distribution the web extra does not pull in fail, as they would in
# a fresh environment: the closure of dsh-tool-todo[web]'s requirements, walked with the
# installed metadata (markers evaluated for this interpreter).
ONLY_THE_WEB_EXTRA = """
import importlib.abc, importlib.metadata as metadata, sys
from packaging.requirements import Requirement

def closure(name, extras=()):
    seen, todo = set(), [(name, tuple(extras))]
    while todo:
        name, extras = todo.pop()
        key = name.lower().replace("_", "-")
        if (key, extras) in seen:
            continue
        seen.add((key, extras))
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            environments = [{"extra": extra} for extra in extras] or [{"extra": ""}]
            if requirement.marker is None or any(
                requirement.marker.evaluate(environment) for environment in environments
            ):
                todo.append((requirement.name, tuple(requirement.extras)))
    return {key for key, _ in seen}

allowed = closure("dsh-tool-todo", ["web"])
owners = metadata.packages_distributions()

class OnlyTheWebExtra(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        top = fullname.partition(".")[0]
        dists = {d.lower().replace("_", "-") for d in owners.get(top, [])}
        if dists and not dists & allowed:
            raise ModuleNotFoundError(f"No module named {fullname!r} (not in .[web])", name=top)
        return None

sys.meta_path.insert(0, OnlyTheWebExtra())
"""


def test_the_python_examples_need_only_the_web_extra(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "web.md").read_text(encoding="utf-8")
    script = tmp_path / "example.py"
    script.write_text(ONLY_THE_WEB_EXTRA + "\n".join(PYTHON_BLOCK.findall(page)), encoding="utf-8")

    run = subprocess.run(
        [sys.executable, "-W", "error", str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert run.returncode == 0, run.stderr
