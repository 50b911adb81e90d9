"""The status model: one row per hour (and per day, for day tables), counts per table, and a state
per row with its reasons.

``lakehouse status`` grades plain facts about the lakehouse (:class:`Observed`, read by
:mod:`lakehouse_tools.observe`) into a :class:`Grid`, shown as text, JSON or a page
(:mod:`lakehouse_tools.status_page`). Built from plain counts, so its logic is testable without
tables. README, "Looking at the tables without Spark", defines each state.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from lakehouse.landing import Problem
from lakehouse_tools.text_table import table_text

# States of an hour, most severe first; the first four need action (exit code 1). failed: a data-quality
# rule that gates (lakehouse.expectations) does not hold for the hour.
STATES = ("mismatch", "failed", "missing", "stale", "pending", "complete", "empty")
NEEDS_ACTION = ("mismatch", "failed", "missing", "stale")
# What a backfill (silver and gold recomputed for the hour) fixes.
REPAIRABLE = ("failed", "missing", "stale")
# Landing files changed after bronze read them: their new lines are never read by a later run.
CHANGED = (Problem.APPENDED, Problem.REWRITTEN)


@dataclass
class TableWrite:
    """A table's newest commit."""

    version: int
    time: datetime
    operation: str


@dataclass
class HourRow:
    """One hour of the grid: counts per table, its state and why."""

    hour: datetime
    counts: dict[str, int | None] = field(default_factory=dict)
    state: str = "complete"
    reasons: list[str] = field(default_factory=list)

    def flag(self, state: str, reason: str) -> None:
        self.reasons.append(reason)
        if STATES.index(state) < STATES.index(self.state):
            self.state = state


@dataclass
class Grid:
    """What ``lakehouse status`` shows; built from plain counts so its logic is testable without tables."""

    columns: list[str]  # count columns, in order: landed, the arrival tables, the hour tables
    rows: list[HourRow]
    writes: dict[str, TableWrite | None]
    landing_files: list[dict] = field(default_factory=list)
    # Day tables, judged per UTC day against their upstream's hours rolled up to the day.
    day_columns: list[str] = field(default_factory=list)
    day_rows: list[HourRow] = field(default_factory=list)

    @property
    def needs_action(self) -> list[HourRow]:
        return [row for row in (*self.rows, *self.day_rows) if row.state in NEEDS_ACTION]

    @property
    def unread_files(self) -> list[dict]:
        """Landing files whose lines bronze does not read (until someone does what each says)."""
        return [f for f in self.landing_files if not f["read"]]


@dataclass
class Observed:
    """Plain facts about the lakehouse, per hour (naive UTC hours); the input of :func:`grade`.

    * ``landed``: lines per producer hour (landing folder);
    * ``ingested``: rows of the landing-fed table per producer hour of their file;
    * ``classified``: rows of each table fed by the ingested one, per producer hour of their file
      (valid rows, open quarantine rows), by table name;
    * ``newest_ingest``: the newest ``ingested_at`` of the ingested rows, per producer hour;
    * ``hour_counts``: rows per event period of each period-addressed table (silver, gold), by
      name: per hour, or per day (its midnight) for a table of ``grains`` "day";
    * ``hour_writes``: the newest file write covering each event period, per such table;
    * ``upstream``: each hour-addressed table's upstream hour-addressed table (None for the first);
    * ``writes``: each table's newest commit; ``classifier``: the tables the ingesting table feeds;
    * ``recomputed``: per replace-hours table, the newest commit that replaced each event hour
      (its predicate selects the hour), rows or none: an hour with no rows to write (no views in it)
      is recomputed, not missing (read only for hours its upstream holds and it does not);
    * ``failed_rules``: per event hour, the gating rules whose newest check of the hour failed;
    * ``landing_files``: landing files bronze does not read as they are
      (:func:`lakehouse.landing.landing_report`: ignored ones, ones changed after ingestion, then
      copies of ingested ones),
      each with the producer ``hour`` of its folder (None outside the layout).
    """

    landed: dict[datetime, int]
    ingest_table: str
    ingested: dict[datetime, int]
    newest_ingest: dict[datetime, datetime]
    classified: dict[str, dict[datetime, int]]
    hour_counts: dict[str, dict[datetime, int]]
    hour_writes: dict[str, dict[datetime, datetime]]
    upstream: dict[str, str | None]
    writes: dict[str, TableWrite | None]
    recomputed: dict[str, dict[datetime, datetime]] = field(default_factory=dict)
    failed_rules: dict[datetime, list[str]] = field(default_factory=dict)
    landing_files: list[dict] = field(default_factory=list)
    # Each period-addressed table's grain ("hour", "day"); a table missing here is of hours.
    grains: dict[str, str] = field(default_factory=dict)

    def of_grain(self, grain: str) -> list[str]:
        """The period-addressed tables of ``grain``."""
        return [name for name in self.hour_counts if self.grains.get(name, "hour") == grain]


def grade(observed: Observed, start: datetime | None = None, end: datetime | None = None) -> Grid:
    """The grid: one row per hour in ``[start, end)`` that any table or the landing zone holds."""
    o = observed
    hourly = o.of_grain("hour")
    hours = (
        set(o.landed)
        | set(o.ingested)
        | {h for counts in o.classified.values() for h in counts}
        | {h for name in hourly for h in o.hour_counts[name]}
    )
    if start is not None and end is not None:
        hours |= {
            start + timedelta(hours=i) for i in range(int((end - start) / timedelta(hours=1)))
        }
    hours = sorted(h for h in hours if (start is None or h >= start) and (end is None or h < end))
    classifier_written = [o.writes[name].time for name in o.classified if o.writes.get(name)]
    classified_at = max(classifier_written) if classifier_written else None
    # By producer hour: landed lines, ingested rows, the side tables' rows (the quarantine) and the
    # duplicates (ingested rows neither valid nor quarantined); by event hour: the hour tables.
    side = [name for name in o.classified if name not in o.hour_counts]
    columns = ["landed", o.ingest_table, *side, "duplicates", *hourly]
    rows = []
    for hour in hours:
        row = HourRow(hour)
        row.counts["landed"] = o.landed.get(hour, 0)
        row.counts[o.ingest_table] = ingested = o.ingested.get(hour, 0)
        classified = sum(counts.get(hour, 0) for counts in o.classified.values())
        for name in side:
            row.counts[name] = o.classified[name].get(hour, 0)
        row.counts["duplicates"] = ingested - classified
        for name in hourly:
            row.counts[name] = o.hour_counts[name].get(hour, 0)
        _grade_arrival(row, o, ingested, classified, classified_at)
        _grade_event_hour(row, o, hourly)
        for failure in o.failed_rules.get(hour, []):
            row.flag("failed", failure)
        if not any(row.counts.values()):
            row.state = "empty"
        rows.append(row)
    day_columns, day_rows = _day_grid(o, start, end)
    return Grid(
        columns=columns,
        rows=rows,
        writes=o.writes,
        landing_files=o.landing_files,
        day_columns=day_columns,
        day_rows=day_rows,
    )


def _day_grid(
    o: Observed, start: datetime | None, end: datetime | None
) -> tuple[list[str], list[HourRow]]:
    """The day tables' grid: per UTC day, each day table and its upstream's rows of the day."""
    daily = o.of_grain("day")
    if not daily:
        return [], []
    columns = list(dict.fromkeys(u for name in daily for u in [o.upstream[name], name] if u))

    def rolled(name: str, values: dict[datetime, object], combine) -> dict[datetime, object]:
        if o.grains.get(name, "hour") == "day":
            return values
        days: dict[datetime, object] = {}
        for hour, value in values.items():
            day = hour.replace(hour=0)
            days[day] = combine(days[day], value) if day in days else value
        return days

    counts = {name: rolled(name, o.hour_counts.get(name, {}), int.__add__) for name in columns}
    writes = {name: rolled(name, o.hour_writes.get(name, {}), max) for name in columns}
    by_day = Observed(
        landed={},
        ingest_table=o.ingest_table,
        ingested={},
        newest_ingest={},
        classified={},
        hour_counts=counts,
        hour_writes=writes,
        upstream={name: o.upstream[name] for name in daily},
        writes=o.writes,
        recomputed=o.recomputed,
    )
    days = sorted(
        d
        for d in {d for c in counts.values() for d in c}
        if (start is None or d >= start.replace(hour=0)) and (end is None or d < end)
    )
    rows = []
    for day in days:
        row = HourRow(day, {name: counts[name].get(day, 0) for name in columns})
        _grade_event_hour(row, by_day, daily)
        if not any(row.counts.values()):
            row.state = "empty"
        rows.append(row)
    return columns, rows


def _grade_arrival(
    row: HourRow, o: Observed, ingested: int, classified: int, classified_at: datetime | None
) -> None:
    """The producer hour: landing -> ingested table -> valid rows + quarantine (+ duplicates)."""
    landed = row.counts["landed"]
    changed = [f for f in o.landing_files if f["reason"] in CHANGED and f.get("hour") == row.hour]
    for problem in changed:  # no later run reads these lines: a person moves them (what_to_do)
        row.flag("mismatch", f"{problem['file']}: {problem['detail']}; {problem['what_to_do']}")
    if landed > ingested and not changed:
        row.flag(
            "pending",
            f"{landed - ingested} landed line(s) not in {o.ingest_table} yet (the next run ingests them)",
        )
    elif ingested > landed:
        row.flag(
            "mismatch",
            f"{o.ingest_table} holds {ingested - landed} row(s) more than the landed lines (ingested twice, or landing files removed)",
        )
    if classified > ingested:
        row.flag(
            "mismatch", f"{classified} classified row(s) from {ingested} {o.ingest_table} row(s)"
        )
    newest = o.newest_ingest.get(row.hour)
    if ingested and newest is not None and (classified_at is None or newest > classified_at):
        if classified_at is None:
            row.flag(
                "pending",
                f"{o.ingest_table} rows not classified yet (the next run classifies them)",
            )
        else:
            row.flag(
                "pending",
                f"{o.ingest_table} rows ingested after {', '.join(o.classified)} last wrote (the next run classifies them)",
            )


def _grade_event_hour(row: HourRow, o: Observed, names: list[str]) -> None:
    """The event period: each of ``names`` (period-addressed tables) against its upstream one."""
    for name in names:
        upstream = o.upstream.get(name)
        if upstream is None:
            continue
        have, source = row.counts[name], row.counts[upstream]
        source_written = o.hour_writes.get(upstream, {}).get(row.hour)
        written = o.hour_writes.get(name, {}).get(row.hour)
        last_commit = o.writes[name].time if o.writes.get(name) else None
        ran_since = last_commit is not None and (
            source_written is None or last_commit >= source_written
        )
        recomputed = o.recomputed.get(name, {}).get(row.hour)
        if (
            source
            and not have
            and recomputed is not None
            and (source_written is None or recomputed >= source_written)
        ):
            continue  # recomputed from what the upstream holds: nothing in it for this table
        if source and not have:
            if ran_since:
                row.flag(
                    "missing",
                    f"{name} has no row for an hour {upstream} holds, though it wrote since",
                )
            else:
                row.flag("pending", f"{name} has not run since {upstream} wrote this hour")
        elif have and not source:
            row.flag("stale", f"{name} holds an hour {upstream} does not")
        elif (
            have and source_written is not None and written is not None and written < source_written
        ):
            if ran_since:
                row.flag("stale", f"{name} was not recomputed after {upstream} changed this hour")
            else:
                row.flag(
                    "pending", f"late data: {upstream} changed this hour after {name} last ran"
                )


# --------------------------------------------------------------------------------------------
# Shown as text and as JSON


def grid_json(grid: Grid) -> dict:
    """The grid as JSON-ready data: hours (counts, state, reasons), tables' last writes, hours needing action."""
    return {
        "hours": [
            {
                "hour": row.hour.strftime("%Y-%m-%dT%H:00:00Z"),
                "state": row.state,
                "counts": row.counts,
                "reasons": row.reasons,
            }
            for row in grid.rows
        ],
        "tables": {
            name: ({**asdict(w), "time": w.time.isoformat() + "Z"} if w else None)
            for name, w in grid.writes.items()
        },
        "days": [
            {
                "day": row.hour.strftime("%Y-%m-%d"),
                "state": row.state,
                "counts": row.counts,
                "reasons": row.reasons,
            }
            for row in grid.day_rows
        ],
        "needs_action": [
            row.hour.strftime("%Y-%m-%dT%H:00:00Z")
            for row in grid.needs_action
            if row not in grid.day_rows
        ],
        "days_needing_action": [
            row.hour.strftime("%Y-%m-%d") for row in grid.day_rows if row.state in NEEDS_ACTION
        ],
        "landing_files": [
            {**f, "hour": f["hour"].strftime("%Y-%m-%dT%H:00:00Z") if f.get("hour") else None}
            for f in grid.landing_files
        ],
    }


def grid_text(grid: Grid) -> str:
    """The grid for people: hours, then each table's last write, then what needs action and why."""
    out = []
    if not grid.rows:
        out.append("No hour in this range holds data (landing zone or tables).")
    else:
        rows = [(row.hour, *(row.counts[c] for c in grid.columns), row.state) for row in grid.rows]
        out.append(table_text(["hour (UTC)", *grid.columns, "state"], rows))
    if grid.day_rows:
        out.append("")
        rows = [(f"{row.hour:%Y-%m-%d}", *row.counts.values(), row.state) for row in grid.day_rows]
        out.append(table_text(["day (UTC)", *grid.day_columns, "state"], rows))
    out.append("")
    writes = [
        (name, w.version, w.time, w.operation) if w else (name, None, None, "not written")
        for name, w in grid.writes.items()
    ]
    out.append(table_text(["table", "version", "last write (UTC)", "operation"], writes))
    flagged = [row for row in grid.rows if row.state not in ("complete", "empty")]
    flagged_days = [row for row in grid.day_rows if row.state not in ("complete", "empty")]
    if flagged or flagged_days:
        out.append("")
        for row in flagged:
            out.append(f"{row.hour:%Y-%m-%d %H:00} {row.state}: " + "; ".join(row.reasons))
        for row in flagged_days:
            out.append(f"{row.hour:%Y-%m-%d} {row.state}: " + "; ".join(row.reasons))
    if grid.landing_files:
        out.append("")
        out.append("Landing files bronze does not read as they are:")
        for f in grid.landing_files:
            read = "read" if f["read"] else "NOT read"
            out.append(f"  {f['file']} ({f['reason']}, {read}): {f['detail']}. {f['what_to_do']}")
    return "\n".join(out)
