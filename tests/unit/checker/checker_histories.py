"""Hand-written histories for the checker's tests: a tiny builder of history.jsonl (docs/architecture.md §3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

K = "chaos/0"
K1 = "chaos/1"


class History:
    """Appends events with dense indexes and times 1 µs apart; methods return the history indexes."""

    def __init__(self, *, run_start: dict[str, Any] | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.time = 0
        if run_start is not None:
            self.event("harness", "info", "run-start", run_start)

    def event(self, process: Any, type_: str, f: str, value: Any, **extra: Any) -> int:
        self.time += 1000
        index = len(self.events)
        event = {"index": index, "time": self.time, "process": process, "type": type_, "f": f, "value": value}
        self.events.append({**event, **extra})
        return index

    def send(self, p: int, key: str, value: int, offset: int | None = None, type_: str = "ok") -> int:
        """A one-record send; returns the invoke's index (the op's index in the sends table)."""
        return self.sends(p, [(key, value, offset)], type_)

    def sends(self, p: int, records: list[tuple[str, int, int | None]], type_: str = "ok") -> int:
        i = self.event(p, "invoke", "send", [["send", k, v] for k, v, _ in records])
        if type_ == "ok":
            self.event(p, "ok", "send", [["send", k, [o, v]] for k, v, o in records])
        else:
            self.event(p, type_, "send", [["send", k, v] for k, v, _ in records], error="boom")
        return i

    def poll(self, p: int, records: dict[str, list[tuple[int | None, int]]], type_: str = "ok", *,
             returned: bool = False, **extra: Any) -> int:
        """A poll; returns the completion's index (the op's index in the polls table). A fail or info poll
        returns nothing unless `returned` (then it keeps `records`); `extra`: more fields of the completion
        (e.g. `rebalance_log`)."""
        self.event(p, "invoke", "poll", [["poll"]])
        if type_ != "ok" and not returned:
            return self.event(p, type_, "poll", [["poll"]], **extra)
        result = {k: [list(r) for r in rs] for k, rs in records.items()}
        return self.event(p, type_, "poll", [["poll", result]], **extra)

    def assign(self, p: int, value: Any, f: str = "assign", type_: str = "ok") -> int:
        """An assign (or, with `f`, a subscribe); returns the completion's index."""
        self.event(p, "invoke", f, value)
        return self.event(p, type_, f, value)

    def txn(self, p: int, invoke: list[Any], complete: list[Any]) -> tuple[int, int]:
        return self.event(p, "invoke", "txn", invoke), self.event(p, "ok", "txn", complete)

    def nemesis(self, f: str, value: Any) -> tuple[int, int]:
        return self.event("nemesis", "invoke", f, value), self.event("nemesis", "info", f, value)

    def drain(self, ok: bool = True) -> int:
        return self.event("harness", "info", "drain-complete", ok)

    def text(self) -> str:
        return "".join(json.dumps(e) + "\n" for e in self.events)

    def write(self, run_dir: Path, *, cut: int | None = None) -> Path:
        """Write history.jsonl into run_dir; with `cut`, drop the last `cut` characters (a cut line)."""
        run_dir.mkdir(parents=True, exist_ok=True)
        text = self.text()
        if cut:
            text = text[:-cut]
        (run_dir / "history.jsonl").write_text(text)
        return run_dir
