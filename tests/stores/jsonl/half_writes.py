"""Code for a child process whose JSONL session writes slowly, as a kernel may under pressure.

``HALF_WRITES`` defines ``HalfWrites(pause)``: the ``os`` module, but each ``write(2)`` hands
the kernel half of what is left, then pauses ``pause`` seconds, so a kill mostly lands
inside a line. A child puts it in place with ``<session module>.os = HalfWrites(pause)``.
"""

HALF_WRITES = r"""
import os, time

class HalfWrites:
    def __init__(self, pause):
        self.pause = pause

    def __getattr__(self, name):
        return getattr(os, name)

    def write(self, fd, data):
        written = os.write(fd, data[: max(1, len(data) // 2)])
        time.sleep(self.pause)
        return written
"""
