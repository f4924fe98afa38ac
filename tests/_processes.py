"""Child processes the tests start: how each is stopped, whatever state it is left in."""

from __future__ import annotations

import subprocess
from typing import Any


def stop_process(process: subprocess.Popen[Any], *, timeout: float = 10) -> None:
    """Kill ``process`` unless it has ended, reap it and close its pipes."""
    if process.poll() is None:
        process.kill()
    process.wait(timeout=timeout)
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()
