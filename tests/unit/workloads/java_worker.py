"""A minimal line-protocol client for the Java worker's tests (the harness's own driver lives in workloads)."""

from __future__ import annotations

import itertools
import json
import queue
import subprocess
import threading
from typing import IO, Any

from kafka_chaos.workloads.drivers.java import java_worker_command

GUARD_S = 120  # only against a hung worker: no assertion depends on how fast it answers


class Worker:
    """One started worker: `call` sends a request and returns its reply; events queue up in `events`."""

    def __init__(self, version: str, stderr: IO[str] | None = None) -> None:
        self.proc = subprocess.Popen(java_worker_command(version), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr or subprocess.DEVNULL, text=True, encoding="utf-8")
        self.replies: dict[int, queue.Queue[dict[str, Any]]] = {}
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()  # everything, in the order written
        self.ids = itertools.count(1)
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        self.ready = self.events.get(timeout=GUARD_S)
        assert self.lines.get_nowait() == self.ready  # `lines` holds what came after it

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            message = json.loads(line)
            self.lines.put(message)
            if "event" in message:
                self.events.put(message)
            else:
                self._reply_queue(message["id"]).put(message)

    def _reply_queue(self, rid: int) -> queue.Queue[dict[str, Any]]:
        with self.lock:
            return self.replies.setdefault(rid, queue.Queue())

    def send(self, op: str, *, ascii_only: bool = True, end: str = "\n", **fields: Any) -> int:
        """`ascii_only=False` writes characters beyond ASCII as UTF-8, as the harness's orjson does, rather than as
        \\u escapes; `end` is the line's ending."""
        rid = next(self.ids)
        self.write(json.dumps({"id": rid, "op": op, **fields}, ensure_ascii=ascii_only) + end)
        return rid

    def write(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text)
        self.proc.stdin.flush()

    def reply(self, rid: int) -> dict[str, Any]:
        return self._reply_queue(rid).get(timeout=GUARD_S)

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        return self.reply(self.send(op, **fields))

    def ok(self, op: str, **fields: Any) -> Any:
        answer = self.call(op, **fields)
        assert "ok" in answer, answer
        return answer["ok"]

    def exit(self) -> int:
        if self.proc.poll() is None:
            assert self.call("exit") == {"id": next(self.ids) - 1, "ok": None}
        return self.proc.wait(timeout=GUARD_S)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
