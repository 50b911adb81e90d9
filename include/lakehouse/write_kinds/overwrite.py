"""OVERWRITE: a small dimension read from a landing file and replaced whole by each run."""

from __future__ import annotations

from lakehouse.write_kinds.base import Flow, Write, count


class Overwrite(Flow):
    """The whole table replaced by each run from its source file (a dimension)."""

    kind = Write.OVERWRITE

    def counts(self, spec, summary, batch, sides):
        counts = {}
        count(counts, spec.name, summary.get("rows_written"))
        return counts, set()
