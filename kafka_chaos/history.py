"""The run's history (docs/architecture.md §3): append-only JSONL, written as events happen, flushed as it goes.

Thread-safe: workloads, the nemesis and the harness record from their own threads; one lock assigns the dense
`index` and writes the line, so file order is event order. Lines are flushed by a background thread every
`flush_interval_s` (and on every nemesis or harness event), so a run killed at any moment leaves a readable
prefix (at worst its last line is cut, which the checker ignores) without a syscall per record on the hot path.
A run also hands each line to the checker's table builder (`on_line`), so checking it need not parse the file.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import orjson

Process = int | str


class History:
    def __init__(self, path: Path, flush_interval_s: float = 0.2,
                 on_line: Callable[[bytes], None] | None = None) -> None:
        """`on_line` is given each line as it is written (the run's table builder, checker.stored_tables)."""
        self.path = path
        self._on_line = on_line
        self._file = path.open("ab", buffering=1 << 20)
        self._lock = threading.Lock()
        self._index = itertools.count()
        self._t0 = time.monotonic_ns()
        self._processes = itertools.count()
        self._closed = threading.Event()
        self._flusher = threading.Thread(target=self._flush_loop, args=(flush_interval_s,), daemon=True,
                                         name="history-flush")
        self._flusher.start()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def now(self) -> int:
        """Nanoseconds since the run started (monotonic)."""
        return time.monotonic_ns() - self._t0

    def new_process(self) -> int:
        """A fresh client process number (Jepsen: a process that got `info` never runs again)."""
        return next(self._processes)

    def record(self, process: Process, type_: str, f: str, value: Any, error: Any = None,
               extra: Mapping[str, Any] | None = None) -> int:
        """Append one event; returns its index. `extra`: fields a workload adds beside Jepsen's (the txn
        workload's `end_txn` timing, docs/architecture.md §3); they never replace the event's own."""
        with self._lock:
            if self._closed.is_set():
                return -1
            index = next(self._index)
            event: dict[str, Any] = {"index": index, "time": self.now(), "process": process, "type": type_,
                                     "f": f, "value": value}
            if error is not None:
                event["error"] = error
            if extra:
                event.update({k: v for k, v in extra.items() if k not in event})
            # non-str keys: values such as a reassignment's {partition: replicas} are written as JSON does
            line = orjson.dumps(event, option=orjson.OPT_NON_STR_KEYS) + b"\n"
            self._file.write(line)
            if self._on_line is not None:
                self._on_line(line)
            if not isinstance(process, int):
                self._file.flush()
            return index

    def _flush_loop(self, interval: float) -> None:
        while not self._closed.wait(interval):
            with self._lock:
                if not self._file.closed:
                    self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
            self._file.flush()
            self._file.close()
