"""Every history the checker's unit tests build is also a cross-check: after each test, the checker and the
straight transcription of Jepsen's analysis (jepsen_reference) must agree on every history it wrote
(reference_agreement.assert_agree), and the report must read it the same from the check's ops.parquet as from
history.jsonl (report_agreement.assert_scans_agree), and Spark's per-partition analysis must find what the
checker finds (spark_agreement.assert_spark_agrees), and the tables a run stores as it writes the history must
be what parsing it gives (stored_agreement.assert_stored_agrees), and the cycle search must agree with its
reference graph (cycles_agreement.assert_cycles_agree). Histories the reader refuses (cut or malformed on
purpose) are skipped, except by the reader's typed decoder, which must read every history, refused or not, as its
handlers do (typed_agreement.assert_typed_agrees)."""

from __future__ import annotations

from collections.abc import Iterator

import checker_histories
import pytest
from cycles_agreement import assert_cycles_agree
from reference_agreement import assert_agree
from report_agreement import assert_scans_agree
from spark_agreement import assert_spark_agrees
from stored_agreement import assert_stored_agrees
from typed_agreement import assert_typed_agrees

from kafka_chaos.checker.tables import parse_history
from kafka_chaos.errors import HistoryError


@pytest.fixture(autouse=True)
def jepsen_agrees_on_every_history(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    texts: list[str] = []
    text = checker_histories.History.text

    def recorded(self: checker_histories.History) -> str:
        t = text(self)
        texts.append(t)
        return t

    monkeypatch.setattr(checker_histories.History, "text", recorded)
    yield
    for t in dict.fromkeys(texts):
        assert_typed_agrees(t)
        try:
            parse_history(t.encode())
        except HistoryError:
            continue
        assert_agree(t)
        assert_scans_agree(t)
        assert_spark_agrees(t)
        assert_stored_agrees(t)
        assert_cycles_agree(t)
