"""The `lakehouse` command: look at the Delta tables without Spark or a JVM.

Usage:
    lakehouse query "select * from gold.campaign_hourly order by views desc limit 5" [--json]
    lakehouse status [--from 2026-11-20T00:00Z] [--to 2026-11-20T03:00Z] [--json] [--html status.html]
    lakehouse repair [--from ...] [--to ...] [--dry-run]

Tables are read by delta-rs (the ``deltalake`` package) as Arrow datasets and queried by DuckDB
(its own ``delta`` extension would be downloaded at run time; Arrow needs nothing), under the
names of the catalog (``lakehouse.catalog``): ``gold.campaign_hourly``, ``silver.ad_events``, ...
The lakehouse is ``$LAKEHOUSE_ROOT`` (or ``--lakehouse-root``); ``make venv`` installs the
command as ``.venv/bin/lakehouse``.

``status`` is a grid, one row per hour, and a state per hour (README, "Looking at the tables
without Spark", defines each). Its exit code is 1 when an hour needs action (``missing``,
``stale``, ``mismatch``), 0 otherwise, 2 on a usage error. ``repair`` backfills, through
``airflow backfill create``, the hours that status marks missing or stale.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from lakehouse import catalog
from lakehouse.config import ConfigError, Lakehouse

# The landing zone's layout (lakehouse.sources.LANDING_FILES, which imports pyspark; a unit test
# keeps the two equal): <date>/<producer hour>/<part>.jsonl.
LANDING_FILES = "*/*/*.jsonl"
# The producer hour of a landing file, from its path or its URI in a table's source_file column.
_FOLDER_HOUR = re.compile(r"(\d{4}-\d{2}-\d{2})/(\d{2})/[^/]+$")
# What Spark's line reader splits on.
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
DAG_ID = "ysb_hourly"  # dags/ysb_hourly.py: the DAG whose backfill recomputes event hours
VIEWS_TABLE = "gold.campaign_hourly"  # status --html draws its views per campaign and hour
RESULTS_TABLE = (
    "ops.expectation_results"  # lakehouse.expectations (which imports pyspark) records checks here
)

# States of an hour, most severe first; the first four need action (exit code 1). failed: a data-quality
# rule that gates (lakehouse.expectations) does not hold for the hour.
STATES = ("mismatch", "failed", "missing", "stale", "pending", "complete", "empty")
NEEDS_ACTION = ("mismatch", "failed", "missing", "stale")
REPAIRABLE = (
    "failed",
    "missing",
    "stale",
)  # what a backfill (silver and gold recomputed for the hour) fixes


class UsageError(ConfigError):
    """A bad argument or a lakehouse without tables; the message says what to do."""


# --------------------------------------------------------------------------------------------
# Reading the tables


def _delta(path: str):
    from deltalake import DeltaTable

    return DeltaTable(path) if Path(path, "_delta_log").is_dir() else None


def open_tables(lakehouse: Lakehouse) -> dict:
    """Every catalog table that has been written, as a ``deltalake.DeltaTable``, by name."""
    tables = {}
    for entry in catalog.tables():
        delta = _delta(lakehouse.table(entry.name).path)
        if delta is not None:
            tables[entry.name] = delta
    return tables


def _arrow(delta):
    """The table as Arrow: a lazy dataset (DuckDB pushes filters and projections down), or, for a
    table with deletion vectors or column mapping (which Arrow datasets cannot apply), every row
    read by delta-rs's own scan."""
    from deltalake.exceptions import DeltaProtocolError

    try:
        return delta.to_pyarrow_dataset()
    except DeltaProtocolError:
        import pyarrow as pa

        return pa.table(delta.scan())


def connect(lakehouse: Lakehouse, tables: dict | None = None):
    """A DuckDB connection with a view per written catalog table, named as in the catalog."""
    import duckdb

    tables = open_tables(lakehouse) if tables is None else tables
    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'UTC'")  # the tables' timestamps are UTC instants
    for name, delta in tables.items():
        layer, table = name.split(".")
        arrow_name = f"__delta_{layer}_{table}"
        connection.register(arrow_name, _arrow(delta))
        connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{layer}"')
        connection.execute(f'CREATE VIEW "{layer}"."{table}" AS SELECT * FROM "{arrow_name}"')
    return connection


def query(lakehouse: Lakehouse, sql: str) -> tuple[list[str], list[tuple]]:
    """(column names, rows) of ``sql`` over the catalog's tables."""
    import duckdb

    tables = open_tables(lakehouse)
    connection = connect(lakehouse, tables)
    try:
        result = connection.execute(sql)
    except duckdb.CatalogException as error:
        unwritten = [t.name for t in catalog.tables() if t.name not in tables]
        hint = (
            f" Not written yet (run their jobs first): {', '.join(unwritten)}." if unwritten else ""
        )
        raise UsageError(
            f"{error}.{hint} Tables: {', '.join(tables) or 'none'} under {lakehouse.root}"
        ) from None
    except duckdb.Error as error:
        raise UsageError(f"The query failed: {error}") from None
    columns = [d[0] for d in result.description]
    return columns, result.fetchall()


# --------------------------------------------------------------------------------------------
# The grid


def folder_hour(path: str) -> datetime | None:
    """The producer hour of a landing file (``.../YYYY-MM-DD/HH/part.jsonl``), or None."""
    match = _FOLDER_HOUR.search(path)
    return datetime.fromisoformat(f"{match[1]}T{match[2]}:00") if match else None


def count_lines(data: bytes) -> int:
    """The lines of a file as Spark's line reader gives them (CR, LF, CRLF; a final break ends the last)."""
    lines = _LINE_BREAK.split(data)
    return len(lines) - (lines[-1] == b"")


def landed_lines(landing_root: str) -> dict[datetime, int]:
    """Lines per producer hour in the landing zone (hidden files, still being written, excluded)."""
    lines: dict[datetime, int] = {}
    for path in Path(landing_root).glob(LANDING_FILES):
        hour = folder_hour(path.as_posix())
        if hour is not None and not path.name.startswith((".", "_")):
            lines[hour] = lines.get(hour, 0) + count_lines(path.read_bytes())
    return lines


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

    @property
    def needs_action(self) -> list[HourRow]:
        return [row for row in self.rows if row.state in NEEDS_ACTION]


@dataclass
class Observed:
    """Plain facts about the lakehouse, per hour (naive UTC hours); the input of :func:`grade`.

    * ``landed``: lines per producer hour (landing folder);
    * ``ingested``: rows of the landing-fed table per producer hour of their file;
    * ``classified``: rows of each table fed by the ingested one, per producer hour of their file
      (valid rows, open quarantine rows), by table name;
    * ``newest_ingest``: the newest ``ingested_at`` of the ingested rows, per producer hour;
    * ``hour_counts``: rows per event hour of each hour-addressed table (silver, gold), by name;
    * ``hour_writes``: the newest file write covering each event hour, per hour-addressed table;
    * ``upstream``: each hour-addressed table's upstream hour-addressed table (None for the first);
    * ``writes``: each table's newest commit; ``classifier``: the tables the ingesting table feeds;
    * ``recomputed``: per replace-hours table, the newest commit that replaced each event hour
      (its predicate names the hour), rows or none: an hour with no rows to write (no views in it) is
      recomputed, not missing;
    * ``failed_rules``: per event hour, the gating rules whose newest check of the hour failed.
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


def grade(observed: Observed, start: datetime | None = None, end: datetime | None = None) -> Grid:
    """The grid: one row per hour in ``[start, end)`` that any table or the landing zone holds."""
    o = observed
    hours = (
        set(o.landed)
        | set(o.ingested)
        | {h for counts in (*o.classified.values(), *o.hour_counts.values()) for h in counts}
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
    columns = ["landed", o.ingest_table, *side, "duplicates", *o.hour_counts]
    rows = []
    for hour in hours:
        row = HourRow(hour)
        row.counts["landed"] = o.landed.get(hour, 0)
        row.counts[o.ingest_table] = ingested = o.ingested.get(hour, 0)
        classified = sum(counts.get(hour, 0) for counts in o.classified.values())
        for name in side:
            row.counts[name] = o.classified[name].get(hour, 0)
        row.counts["duplicates"] = ingested - classified
        for name, counts in o.hour_counts.items():
            row.counts[name] = counts.get(hour, 0)
        _grade_arrival(row, o, ingested, classified, classified_at)
        _grade_event_hour(row, o)
        for failure in o.failed_rules.get(hour, []):
            row.flag("failed", failure)
        if not any(row.counts.values()):
            row.state = "empty"
        rows.append(row)
    return Grid(columns=columns, rows=rows, writes=o.writes)


def _grade_arrival(
    row: HourRow, o: Observed, ingested: int, classified: int, classified_at: datetime | None
) -> None:
    """The producer hour: landing -> ingested table -> valid rows + quarantine (+ duplicates)."""
    landed = row.counts["landed"]
    if landed > ingested:
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


def _grade_event_hour(row: HourRow, o: Observed) -> None:
    """The event hour: each hour-addressed table against its upstream hour-addressed table."""
    for name, upstream in o.upstream.items():
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


def _utc(moment) -> datetime | None:
    if moment is None:
        return None
    if isinstance(moment, (int, float)):  # epoch milliseconds
        return datetime.fromtimestamp(moment / 1000, tz=UTC).replace(tzinfo=None)
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


def _last_write(delta) -> TableWrite:
    commit = delta.history(1)[0]
    return TableWrite(
        version=delta.version(),
        time=_utc(commit["timestamp"]),
        operation=commit.get("operation", ""),
    )


def _hour_writes(delta, entry: catalog.Table) -> dict[datetime, datetime]:
    """The newest write of a live file covering each event hour (partition values, else hour-column stats)."""
    import pyarrow as pa

    actions = pa.table(delta.get_add_actions(flatten=True)).to_pylist()
    newest: dict[datetime, datetime] = {}
    column = entry.hour_sql if entry.hour_sql in entry.column_names else "event_time"
    for action in actions:
        written = _utc(action["modification_time"])
        if "event_hour" in entry.partition_by:
            day, hour = action.get("partition.event_date"), action.get("partition.event_hour")
            if day is None or hour is None:
                continue
            low = high = datetime.fromisoformat(f"{day}T{int(hour):02d}:00")
        else:
            low, high = _utc(action.get(f"min.{column}")), _utc(action.get(f"max.{column}"))
            if low is None or high is None:  # no statistics: the file's hours are unknown
                continue
            low, high = (
                low.replace(minute=0, second=0, microsecond=0),
                high.replace(minute=0, second=0, microsecond=0),
            )
        hour = low
        while hour <= high:
            newest[hour] = max(newest.get(hour, written), written)
            hour += timedelta(hours=1)
    return newest


_REPLACED_HOUR = re.compile(r"hour_start IN \(([^)]*)\)")
_HOUR_STAMP = re.compile(r"TIMESTAMP'(\d{4}-\d{2}-\d{2} \d{2}):00:00'")
HISTORY_LIMIT = 2000  # commits read for the hours each replaced (a few weeks of hourly runs)


# Commits that never take rows out of an hour behind a replace's back.
_KEEPS_HOURS = {
    "WRITE",
    "STREAMING UPDATE",
    "OPTIMIZE",
    "VACUUM START",
    "VACUUM END",
    "CREATE TABLE",
}


def _hours_replaced(delta) -> dict[datetime, datetime]:
    """The newest commit that replaced each event hour (``replaceWhere ... hour_start IN (...)``).

    Only replaces newer than any commit that may have deleted rows (a DELETE, a MERGE, a RESTORE):
    after one, an hour without rows may have lost them.
    """
    newest: dict[datetime, datetime] = {}
    for commit in delta.history(HISTORY_LIMIT):  # newest first
        if commit.get("operation") not in _KEEPS_HOURS:
            break
        predicate = str((commit.get("operationParameters") or {}).get("predicate") or "")
        when = _utc(commit.get("timestamp"))
        for stamps in _REPLACED_HOUR.findall(predicate):
            for stamp in _HOUR_STAMP.findall(stamps):
                hour = datetime.fromisoformat(f"{stamp}:00")
                newest[hour] = max(newest.get(hour, when), when)
    return newest


def _count_by_folder(
    connection, name: str, extra: str = ""
) -> tuple[dict[datetime, int], dict[datetime, datetime]]:
    """Rows of a table per producer hour of their source file, and their newest ``ingested_at``."""
    where = f"WHERE {extra}" if extra else ""
    layer, table = name.split(".")
    rows = connection.execute(
        f"""SELECT regexp_extract(source_file, '(\\d{{4}}-\\d{{2}}-\\d{{2}}/\\d{{2}})/[^/]+$', 1) AS folder,
                   count(*), max(ingested_at)
            FROM "{layer}"."{table}" {where} GROUP BY folder"""
    ).fetchall()
    counts, newest = {}, {}
    for folder, count, ingested_at in rows:
        hour = folder_hour(f"{folder}/x") if folder else None
        if hour is not None:
            counts[hour] = count
            newest[hour] = _utc(ingested_at)
    return counts, newest


def observe(lakehouse: Lakehouse) -> Observed:
    """Read the facts the grid needs from the landing zone and the tables' Delta logs and data."""
    tables = open_tables(lakehouse)
    if not tables:
        raise UsageError(
            f"No Delta tables under {lakehouse.root}/tables: run the pipeline first (e.g. `make demo`)."
        )
    connection = connect(lakehouse, tables)
    ingest = next(
        t for t in catalog.tasks() if t.source and t.streamed
    )  # the landing-fed table (bronze)
    ingested, newest = (
        _count_by_folder(connection, ingest.name) if ingest.name in tables else ({}, {})
    )
    # The tables the ingested lines end in (valid rows, open quarantine rows): fed by it, with a source_file.
    fed = [
        t
        for t in catalog.tables()
        if ingest.name in t.upstream
        or (t.written_by and ingest.name in catalog.get(t.written_by).upstream)
    ]
    classified = {}
    for entry in fed:
        if "source_file" in entry.column_names and entry.name in tables:
            open_only = "resolved_at IS NULL" if "resolved_at" in entry.column_names else ""
            classified[entry.name] = _count_by_folder(connection, entry.name, open_only)[0]
    hour_counts, hour_writes, upstream, recomputed = {}, {}, {}, {}
    hour_tables = [
        t for t in catalog.batch_tables() if t.write in catalog.HOUR_LAYOUTS
    ]  # sessions span hours
    for entry in hour_tables:
        upstream[entry.name] = next(
            (u for u in entry.upstream if u in {t.name for t in hour_tables}), None
        )
        if entry.name not in tables:
            hour_counts[entry.name] = {}
            continue
        layer, table = entry.name.split(".")
        rows = connection.execute(
            f'SELECT date_trunc(\'hour\', {entry.hour_sql}) AS hour, count(*) FROM "{layer}"."{table}" GROUP BY hour'
        ).fetchall()
        hour_counts[entry.name] = {_utc(hour): count for hour, count in rows if hour is not None}
        hour_writes[entry.name] = _hour_writes(tables[entry.name], entry)
        if entry.write is catalog.Write.REPLACE_HOURS:
            recomputed[entry.name] = _hours_replaced(tables[entry.name])
    writes = {
        t.name: (_last_write(tables[t.name]) if t.name in tables else None)
        for t in catalog.tables()
    }
    return Observed(
        landed=landed_lines(lakehouse.landing(ingest.source)),
        ingest_table=ingest.name,
        ingested=ingested,
        newest_ingest=newest,
        classified=classified,
        hour_counts=hour_counts,
        hour_writes=hour_writes,
        upstream=upstream,
        writes=writes,
        recomputed=recomputed,
        failed_rules=_failed_rules(connection) if RESULTS_TABLE in tables else {},
    )


def _failed_rules(connection) -> dict[datetime, list[str]]:
    """Per event hour, the gating rules (still declared) whose newest check of the hour failed."""
    gating = {
        (t.name, e.rule) for t in catalog.tables() for e in t.expectations if e.on_failure == "fail"
    }
    layer, table = RESULTS_TABLE.split(".")
    rows = connection.execute(
        f"""SELECT hour_start, table_name, rule, observed FROM (
                SELECT *, row_number() OVER (PARTITION BY table_name, rule, hour_start ORDER BY checked_at DESC) AS newest
                FROM "{layer}"."{table}" WHERE hour_start IS NOT NULL AND on_failure = 'fail')
            WHERE newest = 1 AND NOT passed ORDER BY hour_start, table_name, rule"""
    ).fetchall()
    failed: dict[datetime, list[str]] = {}
    for hour, name, rule, value in rows:
        if (name, rule) in gating:
            failed.setdefault(_utc(hour), []).append(
                f"{name}: rule {rule!r} failed (measured {_cell(value)})"
            )
    return failed


# --------------------------------------------------------------------------------------------
# Printing


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return (
            value.strftime("%Y-%m-%d %H:%M:%S")
            if value.second or value.microsecond
            else value.strftime("%Y-%m-%d %H:%M")
        )
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def render(columns: list[str], rows: list[tuple]) -> str:
    """Rows as an aligned text table (numbers right-aligned)."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    numeric = [
        all(isinstance(row[i], (int, float, Decimal)) or row[i] is None for row in rows) and rows
        for i in range(len(columns))
    ]

    def line(values):
        return "  ".join(
            v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, numeric)
        ).rstrip()

    return "\n".join([line(columns), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def _json_value(value):
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


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
        "needs_action": [row.hour.strftime("%Y-%m-%dT%H:00:00Z") for row in grid.needs_action],
    }


def grid_text(grid: Grid) -> str:
    """The grid for people: hours, then each table's last write, then what needs action and why."""
    out = []
    if not grid.rows:
        out.append("No hour in this range holds data (landing zone or tables).")
    else:
        rows = [(row.hour, *(row.counts[c] for c in grid.columns), row.state) for row in grid.rows]
        out.append(render(["hour (UTC)", *grid.columns, "state"], rows))
    out.append("")
    writes = [
        (name, w.version, w.time, w.operation) if w else (name, None, None, "not written")
        for name, w in grid.writes.items()
    ]
    out.append(render(["table", "version", "last write (UTC)", "operation"], writes))
    flagged = [row for row in grid.rows if row.state not in ("complete", "empty")]
    if flagged:
        out.append("")
        for row in flagged:
            out.append(f"{row.hour:%Y-%m-%d %H:00} {row.state}: " + "; ".join(row.reasons))
    return "\n".join(out)


def write_status_page(lakehouse: Lakehouse, grid: Grid, path: str) -> None:
    """``status --html``: the grid and gold.campaign_hourly's views per campaign and hour, as one page."""
    from lakehouse_tools.status_page import status_page

    views: dict[str, dict[datetime, int]] = {}
    if grid.writes.get(VIEWS_TABLE):
        hours = [row.hour for row in grid.rows]
        bounds = f"where hour_start between '{min(hours)}' and '{max(hours)}'" if hours else ""
        for campaign, hour, count in query(
            lakehouse, f"select campaign_id, hour_start, views from {VIEWS_TABLE} {bounds}"
        )[1]:
            views.setdefault(campaign, {})[_utc(hour)] = count
    Path(path).write_text(status_page(grid, views, datetime.now(UTC)), encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# Repair


def hour_ranges(hours: list[datetime]) -> list[tuple[datetime, datetime]]:
    """Contiguous runs of hours as [start, end) ranges."""
    ranges: list[tuple[datetime, datetime]] = []
    for hour in sorted(hours):
        if ranges and ranges[-1][1] == hour:
            ranges[-1] = (ranges[-1][0], hour + timedelta(hours=1))
        else:
            ranges.append((hour, hour + timedelta(hours=1)))
    return ranges


def backfill_commands(hours: list[datetime], dag_id: str = DAG_ID) -> list[list[str]]:
    """The ``airflow backfill create`` commands that recompute ``hours`` (a run at H owns [H-1h, H))."""
    commands = []
    for start, end in hour_ranges(hours):
        first, last = (
            start + timedelta(hours=1),
            end,
        )  # logical dates of the runs owning start .. end-1h
        commands.append(
            [
                "airflow",
                "backfill",
                "create",
                "--dag-id",
                dag_id,
                "--reprocess-behavior",
                "completed",
                "--from-date",
                f"{first:%Y-%m-%dT%H:%M:%S}+00:00",
                "--to-date",
                f"{last:%Y-%m-%dT%H:%M:%S}+00:00",
            ]
        )
    return commands


# --------------------------------------------------------------------------------------------
# The command


def _hour_argument(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an ISO hour: {value!r} (e.g. 2026-11-20T00:00Z)"
        ) from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed.replace(minute=0, second=0, microsecond=0)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lakehouse", description=__doc__.split("\n\n")[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--lakehouse-root", help="default: $LAKEHOUSE_ROOT")
    commands = parser.add_subparsers(dest="command", required=True)
    q = commands.add_parser(
        "query",
        parents=[common],
        help="SQL (DuckDB) over every catalog table, e.g. gold.campaign_hourly",
    )
    q.add_argument("sql")
    q.add_argument("--json", action="store_true", help="rows as a JSON array of objects")
    for name, text in (
        ("status", "one row per hour: counts per table and a state"),
        ("repair", "backfill the hours status marks missing or stale"),
    ):
        sub = commands.add_parser(name, parents=[common], help=text)
        sub.add_argument(
            "--from",
            dest="start",
            type=_hour_argument,
            help="first hour (UTC), e.g. 2026-11-20T00:00Z",
        )
        sub.add_argument("--to", dest="end", type=_hour_argument, help="end hour, exclusive")
        if name == "status":
            sub.add_argument("--json", action="store_true")
            sub.add_argument(
                "--html",
                metavar="FILE",
                help="also write the grid and gold's views per campaign as a page",
            )
        else:
            sub.add_argument(
                "--dry-run", action="store_true", help="print the backfill commands, run nothing"
            )
            sub.add_argument("--dag-id", default=DAG_ID)
    back = commands.add_parser(
        "rollback", parents=[common], help="undo what the runs since a moment wrote (silver, gold)"
    )
    back.add_argument(
        "--to",
        dest="to",
        required=True,
        help="an Airflow dag run id (undo it and later runs) or a UTC time",
    )
    back.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        lakehouse = Lakehouse.from_env(args.lakehouse_root)
        if args.command == "query":
            columns, rows = query(lakehouse, args.sql)
            if args.json:
                print(
                    json.dumps(
                        [{c: _json_value(v) for c, v in zip(columns, row)} for row in rows],
                        indent=1,
                    )
                )
            else:
                print(render(columns, rows))
                print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
            return 0
        if args.command == "rollback":
            return _rollback(lakehouse, args.to, args.dry_run)
        if args.start and args.end and args.start >= args.end:
            raise UsageError(
                f"--from {args.start:%Y-%m-%dT%H:00Z} is not before --to {args.end:%Y-%m-%dT%H:00Z}"
            )
        grid = grade(observe(lakehouse), args.start, args.end)
        if args.command == "status":
            print(json.dumps(grid_json(grid), indent=1) if args.json else grid_text(grid))
            if args.html:
                write_status_page(lakehouse, grid, args.html)
            return 1 if grid.needs_action else 0
        return _repair(grid, args.dag_id, args.dry_run)
    except ConfigError as error:
        print(f"lakehouse: {error}", file=sys.stderr)
        return 2


def _repair(grid: Grid, dag_id: str, dry_run: bool) -> int:
    hours = [row.hour for row in grid.rows if row.state in REPAIRABLE]
    for row in grid.rows:
        if row.state == "mismatch":
            print(
                f"{row.hour:%Y-%m-%d %H:00} mismatch (a backfill does not fix it; look at it): "
                + "; ".join(row.reasons)
            )
    if not hours:
        print("Nothing to repair: no hour is missing or stale.")
        return 0
    status = 0
    for command in backfill_commands(hours, dag_id):
        print(("would run: " if dry_run else "running: ") + shlex.join(command))
        if not dry_run:
            status = status or subprocess.run(command).returncode
    return status


def _rollback(lakehouse: Lakehouse, to: str, dry_run: bool) -> int:
    from lakehouse_tools import rollback

    try:
        moment = datetime.fromisoformat(to.replace("Z", "+00:00"))
    except ValueError:
        moment = rollback.moment_of_run(lakehouse, to)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    plans = rollback.plan(lakehouse, moment)
    print(
        f"Rolling back to before {moment.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z"
        + (" (dry run)" if dry_run else "")
    )
    for line in rollback.describe(plans) if dry_run else rollback.execute(plans):
        print(("would: " if dry_run else "done: ") + line)
    return 0


def entry_point() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry_point()
