"""MERGE_NEW: classified rows merged in once by key, rejected rows quarantined (silver)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lakehouse.errors import CatalogError
from lakehouse.periods import Grain
from lakehouse.write_kinds.base import (
    Flow,
    Layout,
    Write,
    batch_notes,
    count,
    count_replace,
    summed,
)

# The partitions select an event hour directly: a batch reads and replaces whole hours by them.
LAYOUT = Layout(partition_by=("event_date", "event_hour"), columns=("event_time",))


def hours_predicate(periods) -> str:
    """Selects ``periods`` from a table partitioned by (event_date, event_hour); a whole day by its date."""
    by_date: dict[str, list[int]] = {}
    for hour in periods.hours():
        by_date.setdefault(f"{hour:%Y-%m-%d}", []).append(hour.hour)
    terms = [
        f"(event_date = DATE'{day}')"
        if len(hours) == 24
        else f"(event_date = DATE'{day}' AND event_hour IN ({', '.join(map(str, sorted(hours)))}))"
        for day, hours in sorted(by_date.items())
    ]
    return " OR ".join(terms) if terms else "false"


class MergeNew(Flow):
    """Rows with a new key inserted, rejected rows quarantined; a batch replaces whole event hours."""

    kind = Write.MERGE_NEW
    periodic = True
    grains = (Grain.HOUR,)
    fault_points = ("before_merge", "after_merge", "after_quarantine")

    def layout(self, grain):
        return LAYOUT

    def check(self, spec, where):
        super().check(spec, where)
        if not spec.key:
            raise CatalogError(f"{where}: an {self.kind.value} table needs key=<column>")

    def predicate(self, spec, periods):
        return hours_predicate(periods)

    def period_of(self, spec, partition):
        day, hour = partition.get("event_date"), partition.get("event_hour")
        if day is None or hour is None:
            return None
        return datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(hours=int(hour))

    def counts(self, spec, summary, batch, sides):
        quarantine = sides["quarantine"]
        counts = {}
        if batch:
            count_replace(counts, spec.name, summary)
            # lines quarantined earlier that the recompute accepted: their rows marked resolved
            count(counts, quarantine, 0, rows_updated=summary.get("quarantine_resolved"))
            return counts, {spec.name}
        replay = summary.get("quarantine_replay") or {}  # lines a dimension change let in
        accepted = replay.get("lines") or 0
        count(counts, spec.name, summed(summary, "inserted") + accepted)
        count(counts, quarantine, summed(summary, "quarantined"), rows_updated=accepted)
        count(counts, sides["metrics"], sum("lines" in note for note in batch_notes(summary)))
        return counts, set()
