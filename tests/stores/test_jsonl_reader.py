"""The reader contract, run against a directory of JSON Lines logs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

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
    def append_bytes(self, tmp_path: Path) -> Callable[[str, bytes], None]:
        def append(name: str, data: bytes) -> None:
            with (tmp_path / f"{name}.jsonl").open("ab") as log:
                log.write(data)

        return append

    @pytest.fixture
    def write_raw(self, append_bytes: Callable[[str, bytes], None]) -> RawWriter:
        return lambda name, event: append_bytes(name, json.dumps(event).encode() + b"\n")

    @pytest.fixture
    def delete(self, tmp_path: Path) -> Deleter:
        return lambda name: (tmp_path / f"{name}.jsonl").unlink()
