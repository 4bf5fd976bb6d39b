"""The one exception spark/ raises on purpose.

`str(err)` is a one-paragraph message for a person: what went wrong and what to do. No Java stack trace ever
reaches it; the JVM's own first line is kept only where it says something useful (a file name, a column).
"""

from __future__ import annotations


class SparkReconcileError(Exception):
    """Spark reconciliation could not run: no Java, a bad master URL, a missing or malformed table.

    `exit_code` follows the project's convention (2: the tool could not do its job). The CLI turns this into a
    message and that exit code, like every other kafka-chaos error.
    """

    exit_code = 2
