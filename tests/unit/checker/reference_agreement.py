"""Run the checker and the Jepsen transcription (jepsen_reference) on one history.jsonl and compare.

Both must find the same anomalies: the same instances, counted as multisets (an instance reported twice is a
difference), named by what identifies them (key, values, ops as history indexes, deltas, skipped values), or
both must refuse the history (a value nobody sent where Jepsen's `lost-write-cases` needs its writer).
`G0` / `G1c` are Elle's cycle search, checked elsewhere (test_cycles.py).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import jepsen_reference as ref

from kafka_chaos.checker.analysis import find_anomalies
from kafka_chaos.checker.tables import parse_history
from kafka_chaos.errors import HistoryError

COMPARED = (
    "lost-write", "unseen", "duplicate", "inconsistent-offsets", "int-poll-skip", "int-nonmonotonic-poll",
    "int-send-skip", "int-nonmonotonic-send", "poll-skip", "nonmonotonic-poll", "nonmonotonic-send", "G1a",
    "precommitted-read",
)


def _bag(items: Any) -> list[Any]:
    return sorted(Counter(items).items(), key=repr)


def _skipped(i: dict[str, Any]) -> tuple[int, ...] | None:
    return tuple(i["skipped"]) if "skipped" in i else None


def from_checker(found: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The checker's instances, by what identifies them."""
    out: dict[str, Any] = {
        "lost-write": _bag((i["key"], i["value"]) for i in found["lost-write"]),
        "unseen": {i["key"]: tuple(i["values"]) for i in found["unseen"]},
        "duplicate": _bag((i["key"], i["value"], i["count"], tuple(i["offsets"])) for i in found["duplicate"]),
        "inconsistent-offsets": _bag(
            (i["key"], i["offset"], i["index"], tuple(i["values"])) for i in found["inconsistent-offsets"]),
        "G1a": _bag((i["key"], i["value"], i["ops"][1]) for i in found["G1a"]),
        "precommitted-read": _bag((i["ops"][1], i["key"], i["value"]) for i in found["precommitted-read"]),
    }
    for name in ("int-poll-skip", "int-nonmonotonic-poll", "int-send-skip", "int-nonmonotonic-send"):
        out[name] = _bag((i["key"], i["ops"][0], tuple(i["values"]), i["delta"], _skipped(i)) for i in found[name])
    for name in ("poll-skip", "nonmonotonic-poll", "nonmonotonic-send"):
        out[name] = _bag(
            (i["key"], tuple(i["ops"]), tuple(i["values"]), i["delta"], _skipped(i)) for i in found[name])
    return out


def from_reference(found: dict[str, Any], checker_precommitted: list[dict[str, Any]],
                   read: dict[str, set[int]]) -> dict[str, Any]:
    """The transcription's instances, in `from_checker`'s terms (completion indexes for polls, invoke indexes
    for sends, as the checker's tables name ops). Jepsen's `precommitted-read` names `(first bad)` of a set:
    any of `bad` is Jepsen's, so the checker's choice is taken when it is one of them. `read`: the values ok
    polls read, per key (Jepsen's `(:ok reads-by-type)`)."""
    chosen = {(i["ops"][1], i["key"]): i["value"] for i in checker_precommitted}

    def pick(e: dict[str, Any]) -> int:
        v = chosen.get((e["op"]["index"], e["key"]))
        return v if v is not None and v in e["bad"] else min(e["bad"])

    out: dict[str, Any] = {
        "lost-write": _bag((e["key"], e["value"]) for e in found["lost-write"]),
        # Jepsen's `unseen` can show values ok polls read (jepsen_reference.unseen): not compared.
        "unseen": {k: tuple(sorted(vs - read.get(k, set()))) for k, vs in found["unseen"].items()
                   if vs - read.get(k, set())},
        "duplicate": _bag((e["key"], e["value"], e["count"], tuple(e["offsets"])) for e in found["duplicate"]),
        "inconsistent-offsets": _bag(
            (e["key"], e["offset"], e["index"], tuple(e["values"])) for e in found["inconsistent-offsets"]),
        "G1a": _bag((e["key"], e["value"], e["reader"]["index"]) for e in found["G1a"]),
        "precommitted-read": _bag((e["op"]["index"], e["key"], pick(e)) for e in found["precommitted-read"]),
    }

    def skipped(e: dict[str, Any]) -> tuple[int, ...] | None:
        return tuple(e["skipped"]) if "skipped" in e else None

    for name in ("int-poll-skip", "int-nonmonotonic-poll"):
        out[name] = _bag((e["key"], e["op"]["index"], tuple(e["values"]), e["delta"], skipped(e))
                         for e in found[name])
    for name in ("int-send-skip", "int-nonmonotonic-send"):
        out[name] = _bag((e["key"], e["op"]["invoke-index"], tuple(e["values"]), e["delta"], skipped(e))
                         for e in found[name])
    for name in ("poll-skip", "nonmonotonic-poll"):
        out[name] = _bag((e["key"], (e["ops"][0]["index"], e["ops"][1]["index"]), tuple(e["values"]), e["delta"],
                          skipped(e)) for e in found[name])
    out["nonmonotonic-send"] = _bag(
        (e["key"], (e["ops"][0]["invoke-index"], e["ops"][1]["invoke-index"]), tuple(e["values"]), e["delta"], None)
        for e in found["nonmonotonic-send"])
    return out


def both(text: str) -> tuple[dict[str, Any] | str, dict[str, Any] | str]:
    """(checker, reference) on one history: each its instances (`from_checker` terms), or "no-writer-of" when it
    refused the history for a value nobody sent."""
    tables = parse_history(text.encode())
    try:
        found, _ = find_anomalies(tables.sends, tables.polls, subscribe_processes=tables.meta.subscribe_processes,
                                  extras=tables.extras)
        got: dict[str, Any] | str = from_checker(found)
    except HistoryError as e:
        if "no op sent it" not in str(e):
            raise
        found, got = {"precommitted-read": []}, "no-writer-of"
    try:
        history = ref.read_history(text)
        want: dict[str, Any] | str = from_reference(ref.analysis(history), found["precommitted-read"],
                                                    ref.reads_by_type(history).get("ok", {}))
    except ref.NoWriterOf:
        want = "no-writer-of"
    return got, want


def assert_agree(text: str) -> dict[str, Any] | str:
    """The checker and the transcription agree on this history; returns what they found."""
    got, want = both(text)
    if isinstance(got, str) or isinstance(want, str):
        assert got == want, f"checker {got if isinstance(got, str) else 'analysed'}, Jepsen {want}\n{text}"
        return got
    diff = {name: {"checker": got[name], "jepsen": want[name]} for name in COMPARED if got[name] != want[name]}
    assert not diff, f"checker and Jepsen differ: {diff}\n{text}"
    return got
