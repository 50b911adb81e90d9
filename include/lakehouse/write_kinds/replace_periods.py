"""REPLACE_PERIODS: the event periods (hours, days) a batch touches recomputed and replaced (gold)."""

from __future__ import annotations

from datetime import UTC, datetime

from lakehouse.periods import Grain
from lakehouse.write_kinds.base import Flow, Layout, Write, count, count_replace, summed


class ReplacePeriods(Flow):
    """Each event period that receives new upstream rows recomputed from upstream and replaced."""

    kind = Write.REPLACE_PERIODS
    periodic = True
    stream_replaces_periods = True
    grains = (Grain.HOUR, Grain.DAY)
    fault_points = ("before_replace", "after_replace")

    def layout(self, grain):
        # A period is a partition (a day, a day's hour): a replace finds its files in the log alone.
        columns = tuple(dict.fromkeys(("event_date", grain.column)))
        return Layout(partition_by=columns, columns=columns)

    def predicate(self, spec, periods):
        periods = periods.to(spec.grain)
        if not periods:
            return "false"
        dates = ", ".join(periods.dates())
        if spec.grain is Grain.DAY:
            return f"event_date IN ({dates})"
        stamps = ", ".join(f"TIMESTAMP'{s:%Y-%m-%d %H:00:00}'" for s in periods)
        return f"event_date IN ({dates}) AND {spec.grain.column} IN ({stamps})"

    def period_of(self, spec, partition):
        value = partition.get(spec.grain.column)
        if value is None:
            return None
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))  # a date, or a timestamp
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)

    def counts(self, spec, summary, batch, sides):
        counts = {}
        if batch:
            count_replace(counts, spec.name, summary)
            return counts, {spec.name}
        count(
            counts,
            spec.name,
            summed(summary, "rows_written"),
            rows_replaced=summed(summary, "rows_deleted"),
        )
        return counts, set()
