"""The checker's one exception.

`checker` sits below `harness` in the dependency order (DESIGN.md §1), so it cannot import the
`KafkaChaosError` root from `harness.errors`; `HistoryError` carries the same `exit_code` convention so the
CLI can treat it alike.
"""

from __future__ import annotations


class HistoryError(Exception):
    """A run's history is missing or unreadable. `str(err)` says what is wrong and what to do."""

    exit_code = 2
