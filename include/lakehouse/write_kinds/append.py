"""APPEND: new rows appended once per micro-batch (bronze from its landing folder or topic)."""

from __future__ import annotations

from lakehouse.write_kinds.base import Flow, Write, count


class Append(Flow):
    """New rows appended once per micro-batch from the table's source (a landing folder, a topic)."""

    kind = Write.APPEND

    def counts(self, spec, summary, batch, sides):
        counts = {}
        count(counts, spec.name, summary.get("input_rows"))
        return counts, set()
