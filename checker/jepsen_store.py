"""Jepsen's store as input: a Jepsen Kafka (or Redpanda) test's `history.edn` → a kafka-chaos `history.jsonl`
(docs/architecture.md §3), so `kafka-chaos check --from jepsen DIR` re-checks Jepsen's results.

What changes on the way, and why:

- Keywords become strings (`:send` → `"send"`), `nil` → null; everything else is kept, `:error` included; a
  poll's `:rebalance-log` becomes `rebalance_log`, its keys named as below.
- Keys: Jepsen's Kafka workload names each key by an integer, and its Kafka and Redpanda clients write key `k`
  to topic `t<k quot 2>`, partition `k mod 2` (`k->topic-partition`, two partitions per topic); kafka-chaos keys
  are `topic/partition`, so `k` → `"t<k // 2>/<k % 2>"`. A key that is already a `topic/partition` string is
  kept.
- Nemesis ops keep their time and type; Jepsen's combined nemesis names (`jepsen.nemesis.combined`) map
  to kafka-chaos's fault and heal names where they mean the same thing (`:start-partition` → `partition`,
  `:stop-partition` → `heal`, `:kill` → `kill`, `:start` → `restart`, `:pause`/`:resume`); other nemesis fs keep
  their name. Jepsen names nodes (`"n1"`); where a value is a map or list of such names, their numbers become
  the value's `nodes`, as kafka-chaos's own nemesis records them.
- With `config` (a kafka-chaos scenario's configuration, `--config`), a first `harness` `run-start` event carries
  it and says where the history came from (`"source": "jepsen"`), and the reference model's verdicts apply as for
  a run of kafka-chaos; without it they say the configuration is unknown. Jepsen records no marker that its
  final reads caught up, so the converted history has no `drain-complete`: the checker treats it as incomplete.

The reader takes one op per line, as Jepsen's store writes `history.edn`, or one EDN vector of ops; op records
(`#jepsen.history.Op{...}`) read as maps. A cut-off last line is dropped as in a JSONL history; any other line that
is not an op is an error naming the file and line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence, Set
from pathlib import Path
from typing import Any

import edn_format
from edn_format import Keyword

from kafka_chaos.errors import HistoryError
from kafka_chaos.rundir import HISTORY_FILE

JEPSEN_HISTORY = "history.edn"
JEPSEN_PARTITIONS_PER_TOPIC = 2
"""`partition-count` of Jepsen's Kafka/Redpanda clients: key k is partition k mod 2 of topic t(k quot 2)."""
NEMESIS_NAMES = {
    "start-partition": "partition",
    "stop-partition": "heal",
    "kill": "kill",
    "start": "restart",
    "pause": "pause",
    "resume": "resume",
}
"""Jepsen's combined-nemesis fs → kafka-chaos fault/heal names (faults.registry)."""
_NODE_NAME = re.compile(r"^n(\d+)$")

edn_format.add_tag("jepsen.history.Op", lambda fields: fields)


def plain(value: Any) -> Any:
    """An EDN value as JSON-able Python: keywords and symbols by name, sets as sorted lists, maps with string
    keys where EDN used keywords (integer keys stay integers until a caller names them)."""
    if isinstance(value, Keyword | edn_format.Symbol):
        return value.name
    if isinstance(value, Mapping):  # edn_format's ImmutableDict is a Mapping, not a dict
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, Set):
        return sorted((plain(v) for v in value), key=str)
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [plain(v) for v in value]
    return value


def key_name(k: Any) -> str:
    """A Jepsen key as a kafka-chaos `topic/partition` key (see the module docstring)."""
    if isinstance(k, int):
        return f"t{k // JEPSEN_PARTITIONS_PER_TOPIC}/{k % JEPSEN_PARTITIONS_PER_TOPIC}"
    return k if isinstance(k, str) and "/" in k else f"{k}/0"


def _micro_op(mop: Any) -> Any:
    """[:send k v] / [:send k [offset v]] / [:poll {k [[offset v] ...]}] with kafka-chaos keys."""
    if not isinstance(mop, list) or not mop:
        return mop
    if mop[0] == "send" and len(mop) == 3:
        return ["send", key_name(mop[1]), mop[2]]
    if mop[0] == "poll" and len(mop) == 2 and isinstance(mop[1], dict):
        return ["poll", {key_name(k): v for k, v in mop[1].items()}]
    return mop


def _nodes(value: Any) -> list[int]:
    names = value.keys() if isinstance(value, dict) else value if isinstance(value, list) else [value]
    found = (_NODE_NAME.match(n) for n in names if isinstance(n, str))
    return sorted({int(m.group(1)) for m in found if m})


def to_event(op: dict[str, Any]) -> dict[str, Any]:
    """One Jepsen op (already `plain`) as a kafka-chaos history event."""
    process, f, value = op.get("process"), op.get("f"), op.get("value")
    event: dict[str, Any] = {"index": op.get("index"), "time": op.get("time"), "process": process,
                             "type": op.get("type"), "f": f}
    if isinstance(process, int):
        if f in ("send", "poll", "txn") and isinstance(value, list):
            value = [_micro_op(m) for m in value]
        elif f in ("assign", "subscribe") and isinstance(value, list):
            value = [key_name(k) for k in value]
        log = op.get("rebalance-log")
        if isinstance(log, list):  # a poll's rebalances: `int-poll-skip` exempts their keys
            event["rebalance_log"] = [
                {**r, "keys": [key_name(k) for k in r.get("keys") or ()]} if isinstance(r, dict) else r for r in log
            ]
    elif process == "nemesis":
        event["f"] = NEMESIS_NAMES.get(str(f), f)
        nodes = _nodes(value)
        value = {"nodes": nodes, "jepsen": value} if nodes else value
    event["value"] = value
    if "error" in op:
        event["error"] = op["error"]
    return event


def read_ops(path: Path) -> Iterator[dict[str, Any]]:
    """Jepsen's ops in `path` as plain dicts, in order; HistoryError names the line of one that is not an op."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise HistoryError(f"no Jepsen history at {path}: pass a Jepsen store folder "
                           f"(store/<test>/<time>/) that holds {JEPSEN_HISTORY}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise HistoryError(f"cannot read {path}: {e}; check the path and permissions") from None
    if text.lstrip().startswith("["):  # one vector of ops
        try:
            ops = edn_format.loads(text)
        except Exception as e:
            raise HistoryError(f"{path}: not an EDN vector of ops ({e}); check the file is Jepsen's "
                               f"{JEPSEN_HISTORY}") from None
        for i, op in enumerate(ops, 1):
            yield _op(op, path, f"op {i}")
        return
    lines = text.split("\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            op = edn_format.loads(line)
        except Exception as e:
            if i == last and not text.endswith("\n"):
                return  # the last line, cut mid-way (an interrupted test): dropped, as in a JSONL history
            raise HistoryError(f"{path}, line {i + 1}: not an EDN op ({e}). Only the last line of an "
                               "interrupted test may be incomplete; fix or remove that line.") from None
        yield _op(op, path, f"line {i + 1}")


def _op(op: Any, path: Path, where: str) -> dict[str, Any]:
    op = plain(op)
    if not isinstance(op, dict) or not {"type", "f", "process"} <= op.keys():
        raise HistoryError(f"{path}, {where}: not a Jepsen op (a map with :type, :f, :process, :time): "
                           f"{str(op)[:80]}")
    return op


def import_jepsen(store_dir: Path, out_dir: Path, *, config: dict[str, Any] | None = None) -> Path:
    """Write `out_dir/history.jsonl` from the Jepsen history in `store_dir` (a store folder or the
    history.edn itself); returns out_dir, a run folder `kafka-chaos check` reads. Events are renumbered in
    file order (the report cites an event by its index); each op keeps Jepsen's index as `jepsen_index`."""
    store_dir = Path(store_dir)
    source = store_dir / JEPSEN_HISTORY if store_dir.is_dir() else store_dir
    if not source.is_file():  # before anything is written next to it
        raise HistoryError(f"no Jepsen history at {source}: pass a Jepsen store folder "
                           f"(store/<test>/<time>/) that holds {JEPSEN_HISTORY}")
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / (HISTORY_FILE + ".tmp")
    try:
        with tmp.open("w") as fh:
            first = 0
            if config is not None:  # only a known configuration: without one, the verdicts say it is unknown
                start = {**config, "source": "jepsen", "jepsen_history": str(source)}
                fh.write(json.dumps({"index": 0, "time": 0, "process": "harness", "type": "info",
                                     "f": "run-start", "value": start}) + "\n")
                first = 1
            for index, op in enumerate(read_ops(source), first):
                event = {**to_event(op), "index": index}
                if op.get("index") is not None:
                    event["jepsen_index"] = op["index"]
                fh.write(json.dumps(event, separators=(",", ":")) + "\n")
        tmp.replace(out_dir / HISTORY_FILE)
    finally:
        tmp.unlink(missing_ok=True)
    return out_dir
