"""Large synthetic `sends` / `polls` histories, written straight to Parquet with numpy and pyarrow, with a
chosen number of anomalies of each kind seeded at random places and a manifest of exactly what was seeded.

Usage: `python -m spark.synthetic OUT_DIR --records 100000000 --keys 64 --lost-write 10 --unseen 5 …`

The clean history: value v (0 ≤ v < records) goes to key `chaos/(v mod keys)` at position i = v div keys,
offset 2·i (the odd offsets stay free, like transaction markers, so positions are dense indexes over sparse
offsets). Every record is sent ok and read once by an ok poll of its key's consumer, in order, 16 records
per poll op; a few percent are read again by other consumers (same offset: not a duplicate). Background
noise that is *not* an anomaly: info sends with no offset, read or never read; failed sends never read; ok
sends whose offset is unknown, read.

Seeded anomalies, chosen so that none arises by accident:
- `unseen`: the last 1–5 values of a chosen key are sent ok and never read (nothing after them is read, so
  they are unseen and not lost). One instance per key.
- `lost-write`: a value before the key's *anchor* — the last read position before any unseen tail, always a
  clean read — is sent ok and never read. Every lost write is also an unseen value of its key.
- `duplicate`: a value is read at its offset and again at the free odd offset after it.
- `inconsistent-offsets`: a fresh value (ids from `records` up) is sent ok to the offset of an existing read
  value and read there, so that offset holds two values.
- `G1a`: a value whose send failed (no offset) is read by an ok poll.
Noise, anchors and unseen tails never overlap a seeded value; seeded values are distinct. The full checker
also reports what follows from them: the key's consumer skipped each lost write (`int-poll-skip` or
`poll-skip`), and read each duplicate twice in one poll (`int-nonmonotonic-poll`, `int-poll-skip`).

Chunks of `chunk_rows` produced records are generated and written as one row group each (or one file each,
with `split=True`), so memory stays bounded whatever `records` is.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from kafka_chaos.checker.schema import POLLS_SCHEMA, SENDS_SCHEMA

__all__ = ["SEEDED_KINDS", "SyntheticSpec", "generate"]

SEEDED_KINDS = ("lost-write", "unseen", "duplicate", "inconsistent-offsets", "G1a")
"""The anomalies seeded, which the manifest counts; the order anomalies that follow from them (see above) are
not in it."""

MANIFEST = "manifest.json"
_I64 = npt.NDArray[np.int64]
_BOOL = npt.NDArray[np.bool_]

# Noise thresholds on a per-value uniform number u: [0, a) info read, [a, b) info never read,
# [b, c) failed never read, [c, d) ok with unknown offset, read.
_NOISE = (0.004, 0.008, 0.012, 0.016)
_REREAD = 0.03
_TYPES = pa.array(["ok", "info", "fail"])
_OK, _INFO, _FAIL = 0, 1, 2
# Integer columns are near-arithmetic sequences: delta encoding makes them small and fast to write; strings
# are dictionary-encoded. Spark, pyarrow and pandas all read these encodings.
_PARQUET: dict[str, Any] = {
    "compression": "snappy",
    "use_dictionary": ["key", "type"],
    "column_encoding": {
        name: "DELTA_BINARY_PACKED"
        for name in ("value", "offset", "process", "op_index", "invoke_time", "complete_time", "time")
    },
}


@dataclass(frozen=True)
class SyntheticSpec:
    """What to generate. Anomaly counts are instances: `unseen` counts keys with an unseen tail."""

    records: int
    keys: int = 64
    seed: int = 1
    lost_write: int = 0
    unseen: int = 0
    duplicate: int = 0
    inconsistent_offsets: int = 0
    g1a: int = 0
    topic: str = "chaos"
    chunk_rows: int = 4_000_000
    split: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _uniform(v: _I64, seed: int, salt: int) -> npt.NDArray[np.float64]:
    """A fixed pseudo-random number in [0, 1) per value (splitmix64), the same in every chunk."""
    with np.errstate(over="ignore"):
        x = v.astype(np.uint64) + np.uint64((seed * 0x9E3779B97F4A7C15 + salt * 0xBF58476D1CE4E5B9) % 2**64)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) / float(2**53)


class _Plan:
    """Where the seeded anomalies go; derived from the spec alone."""

    def __init__(self, spec: SyntheticSpec) -> None:
        n, k = spec.records, spec.keys
        if k < 1 or n < 20 * k:
            raise ValueError("need keys ≥ 1 and records ≥ 20 × keys")
        self.spec = spec
        rng = np.random.default_rng(spec.seed)
        self.per_key = (n - np.arange(k) + k - 1) // k  # positions per key
        if spec.unseen > k:
            raise ValueError(f"unseen instances are keys with an unseen tail: at most {k}")
        self.tail = np.zeros(k, dtype=np.int64)
        tail_keys = rng.choice(k, size=spec.unseen, replace=False)
        self.tail[tail_keys] = rng.integers(1, 6, size=spec.unseen)
        self.anchor = self.per_key - 1 - self.tail  # last clean read position of each key
        wanted = {
            "lost-write": spec.lost_write,
            "duplicate": spec.duplicate,
            "inconsistent-offsets": spec.inconsistent_offsets,
            "G1a": spec.g1a,
        }
        total = sum(wanted.values())
        if total > n // 10:
            raise ValueError("too many seeded anomalies for this many records (at most records / 10)")
        chosen: list[int] = []
        taken: set[int] = set()
        while len(chosen) < total:
            cand = rng.integers(0, n, size=2 * (total - len(chosen)) + 16, dtype=np.int64)
            ok = ~self.noise_any(cand) & (cand // k < self.anchor[cand % k])
            for v in cand[ok].tolist():
                if v not in taken and len(chosen) < total:
                    taken.add(v)
                    chosen.append(v)
        self.picks: dict[str, _I64] = {}
        start = 0
        for kind, count in wanted.items():
            self.picks[kind] = np.sort(np.array(chosen[start : start + count], dtype=np.int64))
            start += count

    def noise(self, v: _I64) -> tuple[_BOOL, _BOOL, _BOOL, _BOOL]:
        u = _uniform(v, self.spec.seed, 1)
        a, b, c, d = _NOISE
        return (u < a), (u >= a) & (u < b), (u >= b) & (u < c), (u >= c) & (u < d)

    def noise_any(self, v: _I64) -> _BOOL:
        return _uniform(v, self.spec.seed, 1) < _NOISE[-1]

    def key_name(self, k: int) -> str:
        return f"{self.spec.topic}/{k}"


def _strings(names: list[str], codes: _I64) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), pa.array(names)).cast(pa.string())


def _chunk(plan: _Plan, lo: int, hi: int, key_names: list[str]) -> tuple[pa.Table, pa.Table]:
    spec = plan.spec
    v = np.arange(lo, hi, dtype=np.int64)
    k = v % spec.keys
    idx = v // spec.keys
    offset = 2 * idx
    in_tail = idx > plan.anchor[k]
    clean = in_tail | (idx == plan.anchor[k])
    info_read, info_unread, fail_unread, ok_nooff = (m & ~clean for m in plan.noise(v))
    lost = np.isin(v, plan.picks["lost-write"], assume_unique=True)
    dup = np.isin(v, plan.picks["duplicate"], assume_unique=True)
    g1a = np.isin(v, plan.picks["G1a"], assume_unique=True)

    send_type = np.full(len(v), _OK, dtype=np.int64)
    send_type[info_read | info_unread] = _INFO
    send_type[fail_unread | g1a] = _FAIL
    send_off_null = info_read | info_unread | fail_unread | ok_nooff | g1a
    complete_null = info_read | info_unread
    sends = pa.table(
        {
            "value": v,
            "key": _strings(key_names, k),
            "offset": pa.array(offset, mask=send_off_null),
            "process": v % 8,
            "op_index": 3 * v,
            "type": _strings(["ok", "info", "fail"], send_type),
            "invoke_time": v * 1000,
            "complete_time": pa.array(v * 1000 + 500, mask=complete_null),
        },
        schema=SENDS_SCHEMA,
    )

    read = ~(info_unread | fail_unread | lost | in_tail)
    # The key's consumer (process 1000 + key) reads it in order, 16 positions per poll op; a duplicate's
    # second copy comes right after the first, at the next (odd) offset, in the same op.
    copies = 1 + dup[read].astype(np.int64)
    pv = np.repeat(v[read], copies)
    second = np.zeros(len(pv), dtype=bool)
    second[np.cumsum(copies)[copies == 2] - 1] = True
    pk = pv % spec.keys
    batch = pk + spec.keys * 16 * ((pv // spec.keys) // 16)  # first value of the op's range
    main = _polls(pv, 2 * (pv // spec.keys) + second, pk, key_names,
                  process=1000 + pk, op=3 * batch + 2, time=(batch + spec.keys * 15) * 1000 + 800)
    # A few records are read again, each by a consumer of its own (so no poll order is implied).
    rv = v[read & ~(dup | g1a) & (_uniform(v, spec.seed, 2) < _REREAD)]
    again = _polls(rv, 2 * (rv // spec.keys), rv % spec.keys, key_names,
                   process=1_000_000_000 + rv, op=3 * rv + 1, time=rv * 1000 + 900)
    return sends, pa.concat_tables([main, again])


def _polls(
    pv: _I64, poff: _I64, pk: _I64, key_names: list[str], *, process: _I64, op: _I64, time: _I64
) -> pa.Table:
    return pa.table(
        {
            "value": pv,
            "key": _strings(key_names, pk),
            "offset": poff,
            "process": process,
            "op_index": op,
            "type": _strings(["ok"], np.zeros(len(pv), dtype=np.int64)),
            "time": time,
        },
        schema=POLLS_SCHEMA,
    )


def _inconsistent_rows(plan: _Plan, key_names: list[str]) -> tuple[pa.Table, pa.Table, list[dict[str, Any]]]:
    """Fresh values sent ok to, and read at, the offsets of the chosen existing values."""
    spec = plan.spec
    base = plan.picks["inconsistent-offsets"]
    fresh = spec.records + np.arange(len(base), dtype=np.int64)
    k = base % spec.keys
    offset = 2 * (base // spec.keys)
    sends = pa.table(
        {
            "value": fresh,
            "key": _strings(key_names, k),
            "offset": offset,
            "process": fresh % 8,
            "op_index": 3 * fresh,
            "type": _strings(["ok"], np.zeros(len(fresh), dtype=np.int64)),
            "invoke_time": fresh * 1000,
            "complete_time": fresh * 1000 + 500,
        },
        schema=SENDS_SCHEMA,
    )
    polls = _polls(fresh, offset, k, key_names, process=2_000_000_000 + fresh, op=3 * fresh + 2,
                   time=fresh * 1000 + 800)
    seeded = [
        {"key": key_names[int(kk)], "offset": int(o), "values": sorted([int(b), int(f)])}
        for b, f, kk, o in zip(base, fresh, k, offset, strict=True)
    ]
    return sends, polls, seeded


class _Sink:
    """One Parquet file with a row group per chunk, or a directory with a file per chunk."""

    def __init__(self, path: Path, schema: pa.Schema, split: bool) -> None:
        self.path, self.schema, self.split = path, schema, split
        self.parts = 0
        self.writer: pq.ParquetWriter | None = None
        if split:
            path.mkdir(parents=True, exist_ok=True)
        else:
            self.writer = pq.ParquetWriter(path, schema, **_PARQUET)

    def write(self, table: pa.Table) -> None:
        if self.writer is not None:
            self.writer.write_table(table, row_group_size=max(1, table.num_rows))
        else:
            pq.write_table(table, self.path / f"part-{self.parts:05d}.parquet", **_PARQUET)
        self.parts += 1

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def generate(out_dir: str | Path, spec: SyntheticSpec) -> dict[str, Any]:
    """Write `out_dir/sends.parquet`, `out_dir/polls.parquet` (files, or directories of part files with
    `spec.split`) and `out_dir/manifest.json`; return the manifest.

    The manifest holds the spec, row counts, and `expected`: the anomalies the checker and the Spark job
    must report — `anomaly_counts` and, per anomaly, the instances' identifying fields (key and value, or key
    and offset and values; for `unseen`, key, count and values, which include the lost writes).
    """
    started = time.monotonic()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plan = _Plan(spec)
    key_names = [plan.key_name(k) for k in range(spec.keys)]
    sends_sink = _Sink(out / "sends.parquet", SENDS_SCHEMA, spec.split)
    polls_sink = _Sink(out / "polls.parquet", POLLS_SCHEMA, spec.split)
    n_sends = n_polls = 0
    try:
        for lo in range(0, spec.records, spec.chunk_rows):
            sends, polls = _chunk(plan, lo, min(lo + spec.chunk_rows, spec.records), key_names)
            sends_sink.write(sends)
            polls_sink.write(polls)
            n_sends += sends.num_rows
            n_polls += polls.num_rows
        inc_sends, inc_polls, inconsistent = _inconsistent_rows(plan, key_names)
        if inc_sends.num_rows:
            sends_sink.write(inc_sends)
            polls_sink.write(inc_polls)
            n_sends += inc_sends.num_rows
            n_polls += inc_polls.num_rows
    finally:
        sends_sink.close()
        polls_sink.close()

    manifest = {
        "spec": asdict(spec),
        "rows": {"sends": n_sends, "polls": n_polls},
        "seconds": round(time.monotonic() - started, 3),
        "expected": _expected(plan, key_names, inconsistent),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def _expected(plan: _Plan, key_names: list[str], inconsistent: list[dict[str, Any]]) -> dict[str, Any]:
    spec = plan.spec
    keys = spec.keys

    def by_value(values: _I64) -> list[dict[str, Any]]:
        return sorted(
            ({"key": key_names[int(v % keys)], "value": int(v)} for v in values),
            key=lambda d: (d["key"], d["value"]),
        )

    lost = by_value(plan.picks["lost-write"])
    for item in lost:
        item["offset"] = 2 * (item["value"] // keys)
    duplicate = by_value(plan.picks["duplicate"])
    for item in duplicate:
        o = 2 * (item["value"] // keys)
        item["offsets"] = [o, o + 1]
    g1a = by_value(plan.picks["G1a"])

    unseen_values: dict[int, list[int]] = {}
    for k in np.flatnonzero(plan.tail).tolist():
        first = int(plan.anchor[k]) + 1
        unseen_values[k] = [k + keys * i for i in range(first, int(plan.per_key[k]))]
    for v in plan.picks["lost-write"].tolist():
        unseen_values.setdefault(v % keys, []).append(v)
    unseen: list[dict[str, Any]] = [
        {"key": key_names[k], "count": len(vs), "values": sorted(vs)}
        for k, vs in sorted(unseen_values.items(), key=lambda kv: key_names[kv[0]])
    ]
    anomalies = {
        "lost-write": lost,
        "unseen": unseen,
        "duplicate": duplicate,
        "inconsistent-offsets": sorted(inconsistent, key=lambda d: (d["key"], d["offset"])),
        "G1a": g1a,
    }
    return {
        "anomaly_counts": {kind: len(found) for kind, found in anomalies.items() if found},
        "unseen_values": sum(len(vs) for vs in unseen_values.values()),
        "anomalies": anomalies,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark.synthetic", description=__doc__.split("\n")[0])
    parser.add_argument("out", help="directory to write sends.parquet, polls.parquet, manifest.json")
    parser.add_argument("--records", type=int, required=True, help="produced records (sends)")
    parser.add_argument("--keys", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    for name in ("lost-write", "unseen", "duplicate", "inconsistent-offsets", "g1a"):
        parser.add_argument(f"--{name}", type=int, default=0, help=f"seeded {name} instances")
    parser.add_argument("--chunk-rows", type=int, default=4_000_000)
    parser.add_argument("--split", action="store_true", help="a directory of part files per table")
    args = parser.parse_args(argv)
    spec = SyntheticSpec(
        records=args.records,
        keys=args.keys,
        seed=args.seed,
        lost_write=args.lost_write,
        unseen=args.unseen,
        duplicate=args.duplicate,
        inconsistent_offsets=args.inconsistent_offsets,
        g1a=args.g1a,
        chunk_rows=args.chunk_rows,
        split=args.split,
    )
    manifest = generate(args.out, spec)
    print(json.dumps({k: manifest[k] for k in ("rows", "seconds")} | {
        "anomaly_counts": manifest["expected"]["anomaly_counts"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
