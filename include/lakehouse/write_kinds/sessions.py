"""SESSIONS: a stateful query emits each user session once, when the watermark closes it."""

from __future__ import annotations

from lakehouse.errors import CatalogError
from lakehouse.periods import Grain
from lakehouse.write_kinds.base import Flow, Write, count, summed


class Sessions(Flow):
    """Sessions emitted once closed; a batch replaces the sessions that overlap its hours."""

    kind = Write.SESSIONS
    periodic = True
    grains = (Grain.HOUR,)
    fault_points = ("before_sessions_write", "after_sessions_write", "before_open_sessions")

    def check(self, spec, where):
        super().check(spec, where)
        if not (spec.key and spec.event_time in spec.column_names):
            raise CatalogError(
                f"{where}: a {self.kind.value} table needs key=<session id column> and event_time=<its start>"
            )

    def predicate(self, spec, periods):
        """The sessions that overlap ``periods`` (first to last)."""
        if not periods:
            return "false"
        return (
            f"session_end >= TIMESTAMP'{periods.first:%Y-%m-%d %H:%M:%S}' "
            f"AND session_start < TIMESTAMP'{periods.end:%Y-%m-%d %H:%M:%S}'"
        )

    def counts(self, spec, summary, batch, sides):
        counts = {}
        if batch:
            count(counts, spec.name, summary.get("sessions"))
            return counts, {spec.name}  # the sessions of its hours replaced, even by nothing
        count(counts, spec.name, summed(summary, "sessions"))
        count(
            counts,
            sides["late"],
            summed(summary, "late"),
            rows_updated=summary.get("late_reconciled"),
        )
        rewritten = set()
        if summary.get("open_sessions") is not None:
            # rewritten whole: changed even when no session is open any more
            open_sessions = sides["open"]
            count(counts, open_sessions, summary["open_sessions"])
            rewritten.add(open_sessions)
        return counts, rewritten
