"""The reader contract, run against a directory of JSON Lines logs."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_tool_todo.errors import SessionNotFound
from dsh_tool_todo.protocols import LogReader
from dsh_tool_todo.stores.jsonl import JsonlReader, JsonlSession

from .reader_contract import Deleter, FileReaderContract, RawWriter, Writer


class TestJsonlReader(FileReaderContract):
    @pytest.fixture
    def reader(self, tmp_path: Path) -> LogReader:
        return JsonlReader(tmp_path, poll_interval=0.005)

    @pytest.fixture
    def open_writer(self, tmp_path: Path) -> Writer:
        return lambda name: JsonlSession(tmp_path / f"{name}.jsonl")

    @pytest.fixture
    def log_path(self, tmp_path: Path) -> Callable[[str], Path]:
        return lambda name: tmp_path / f"{name}.jsonl"

    @pytest.fixture
    def write_raw(self, append_bytes: Callable[[str, bytes], None]) -> RawWriter:
        return lambda name, event: append_bytes(name, json.dumps(event).encode() + b"\n")

    @pytest.fixture
    def delete(self, tmp_path: Path) -> Deleter:
        return lambda name: (tmp_path / f"{name}.jsonl").unlink()


def test_a4_a_file_name_that_is_not_utf8_is_skipped_not_listed(tmp_path: Path) -> None:
    """A4: such a name reached the page as a lone surrogate and blanked its session list."""
    with JsonlSession(tmp_path / "good.jsonl") as session:
        session.append("turn/start", {})
    with open(os.fsencode(tmp_path) + b"/bad\xff.jsonl", "wb") as log:
        log.write(b'{"seq":0,"type":"turn/start","data":{}}\n')
    reader = JsonlReader(tmp_path)

    rows, total = asyncio.run(reader.sessions("", 10))

    assert ([row.name for row in rows], total) == (["good"], 1)
    with pytest.raises(SessionNotFound, match="bad"):
        asyncio.run(reader.snapshot("bad\udcff"))
