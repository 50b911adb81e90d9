"""APPEND: new rows appended once per micro-batch (bronze from its landing folder or topic).

A summary's count is the rows the table gained (``rows_written``), not the source's input rows:
those count every line read, also lines the plan then drops (a gzip payload read as one line)."""

from __future__ import annotations

from lakehouse.write_kinds.base import Flow, Write, count


class Append(Flow):
    """New rows appended once per micro-batch from the table's source (a landing folder, a topic)."""

    kind = Write.APPEND

    def counts(self, spec, summary, batch, sides):
        counts = {}
        count(counts, spec.name, summary.get("rows_written", summary.get("input_rows")))
        return counts, set()
