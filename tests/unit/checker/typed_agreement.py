"""The history reader's typed decoder (HistoryReader.read_file) reads a history as its handlers do
(HistoryReader.read): every field of what they found, in the same order, or the same refusal."""

from __future__ import annotations

import dataclasses
import io
from typing import Any

import numpy as np
import pyarrow as pa

from kafka_chaos.checker.history_reader import CHUNK_BYTES, HistoryRead, HistoryReader, read_typed
from kafka_chaos.errors import HistoryError

BLOCKS = (1, 97, CHUNK_BYTES)
"""Block sizes the typed pass is run with: one line per block (an op's invoke and completion in different
blocks), a few lines, the whole history."""


def typed_read(data: bytes, block: int = CHUNK_BYTES) -> HistoryRead | None:
    """The typed pass alone, in blocks of about `block` bytes; None when it hands the history to the handlers."""
    return read_typed(io.BytesIO(data), block=block)


def handlers_read(data: bytes) -> HistoryRead | HistoryError:
    try:
        return HistoryReader().read(data.splitlines(keepends=True), source="history.jsonl")
    except HistoryError as err:
        return err


def assert_same_read(typed: HistoryRead, handlers: HistoryRead) -> None:
    for f in dataclasses.fields(handlers):
        ours, theirs = getattr(typed, f.name), getattr(handlers, f.name)
        if isinstance(theirs, np.ndarray):
            assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs), f.name
        elif isinstance(theirs, pa.Table):
            assert ours.schema.equals(theirs.schema) and ours.equals(theirs), f"{f.name}:\n{ours}\n!=\n{theirs}"
        elif isinstance(theirs, dict):  # in the same order too: results.json shows it
            assert list(ours.items()) == list(theirs.items()), f"{f.name}: {ours!r} != {theirs!r}"
        else:
            assert ours == theirs, f"{f.name}: {ours!r} != {theirs!r}"


def assert_typed_agrees(text: str | bytes) -> bool:
    """The typed pass, in blocks of every size, finds what the handlers find, or hands the history to them (and it
    never reads a history they refuse); read_file gives the same result or error. Returns whether the typed pass
    read it itself."""
    data = text.encode() if isinstance(text, str) else text
    handlers = handlers_read(data)
    ran = False
    for block in BLOCKS:
        typed = typed_read(data, block)
        if typed is None:
            continue
        assert not isinstance(handlers, HistoryError), f"the typed pass read a history the handlers refuse: {handlers}"
        assert_same_read(typed, handlers)
        ran = True
    public: Any
    try:
        public = HistoryReader().read_file(io.BytesIO(data), source="history.jsonl")
    except HistoryError as err:
        assert isinstance(handlers, HistoryError) and str(err) == str(handlers)
    else:
        assert not isinstance(handlers, HistoryError), handlers
        assert_same_read(public, handlers)
    return ran
