"""What ``lakehouse status`` reads: plain facts from the landing zone and the tables' logs and rows.

The facts (:class:`lakehouse_tools.status.Observed`) are counts and times per hour; the status
model grades them. Everything is read by delta-rs and DuckDB (:mod:`lakehouse_tools.storage`).
"""

from __future__ import annotations

import gzip
import json
import re
from datetime import datetime, timedelta

from lakehouse import catalog, delta_log, object_storage
from lakehouse.config import Lakehouse
from lakehouse.files import lake_path
from lakehouse.landing import GZIP_EVENTS_SUFFIX, GZIP_MAGIC, landing_report, readable_files
from lakehouse_tools.status import Observed, TableWrite
from lakehouse_tools.storage import UsageError, connect, open_tables, utc
from lakehouse_tools.text_table import cell

# The landing zone's layout (lakehouse.sources.LANDING_FILES, which imports pyspark; a unit test
# keeps the two equal): <date>/<producer hour>/<part>.jsonl.
LANDING_FILES = "*/*/*.jsonl"
# The producer hour of a landing file, from its path or its URI in a table's source_file column.
_FOLDER_HOUR = re.compile(r"(\d{4}-\d{2}-\d{2})/(\d{2})/[^/]+$")
# What Spark's line reader splits on.
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
# lakehouse.expectations (which imports pyspark) records every check here.
RESULTS_TABLE = "ops.expectation_results"
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


def folder_hour(path: str) -> datetime | None:
    """The producer hour of a landing file (``.../YYYY-MM-DD/HH/part.jsonl``), or None."""
    match = _FOLDER_HOUR.search(path)
    return datetime.fromisoformat(f"{match[1]}T{match[2]}:00") if match else None


def count_lines(data: bytes) -> int:
    """The lines of a file as Spark's line reader gives them (CR, LF, CRLF; a final break ends the last)."""
    lines = _LINE_BREAK.split(data)
    return len(lines) - (lines[-1] == b"")


def landed_lines(landing_root: str, copies: dict[str, str] | None = None) -> dict[datetime, int]:
    """Lines per producer hour in the landing zone (hidden files, still being written, excluded),
    as bronze reads them (:mod:`lakehouse.landing`): a ``.jsonl.gz`` file decompressed, a gzip
    payload under a ``.jsonl`` name as one line. ``copies``: files (under the landing folder) that
    bronze recognised as copies, by their original: counted once, in the original's hour."""
    root = lake_path(landing_root)
    copies = copies or {}
    lines: dict[datetime, int] = {}
    counted = set()
    for path in readable_files(root).values():
        relative = path.relative_to(root).as_posix()
        file = copies.get(relative, relative)
        hour = folder_hour(file)
        if hour is None or file in counted:
            continue
        counted.add(file)
        data = path.read_bytes()
        if path.name.endswith(GZIP_EVENTS_SUFFIX):
            count = count_lines(gzip.decompress(data))
        else:
            count = min(count_lines(data), 1) if data.startswith(GZIP_MAGIC) else count_lines(data)
        lines[hour] = lines.get(hour, 0) + count
    return lines


# Commits that change no row: compaction rewrites files, VACUUM deletes unreferenced ones.
MAINTENANCE_OPERATIONS = delta_log.MAINTENANCE_OPERATIONS
RECENT_COMMITS = 50  # read first for the newest data write: maintenance adds three a day


class HistoryReadOnce:
    """A ``deltalake.DeltaTable`` whose commit history is read once: status looks at it for the
    hours' writes, the hours replaced and the last write, each of which asks for it."""

    def __init__(self, delta) -> None:
        self._delta, self._history, self._limit = delta, None, 0

    def __getattr__(self, name: str):
        return getattr(self._delta, name)

    def history(self, limit: int) -> list[dict]:
        """The newest ``limit`` commits, newest first (read again only for more than was read)."""
        whole = self._history is not None and len(self._history) < self._limit
        if self._history is None or (limit > self._limit and not whole):
            self._history, self._limit = self._delta.history(limit), limit
        return self._history[:limit]


def last_write(delta) -> TableWrite:
    """A table's newest commit that changed data (a maintenance commit is not a write of rows)."""
    for limit in (RECENT_COMMITS, HISTORY_LIMIT):
        history = delta.history(limit)  # newest first
        commit = next(
            (c for c in history if c.get("operation") not in MAINTENANCE_OPERATIONS), None
        )
        if commit is not None or len(history) < limit:
            break
    commit = commit or history[0]  # only maintenance in reach: its newest commit
    return TableWrite(
        version=commit.get("version", delta.version()),
        time=utc(commit["timestamp"]),
        operation=commit.get("operation", ""),
    )


def hour_writes(delta, spec: catalog.TableSpec) -> dict[datetime, datetime]:
    """The newest write of a live file covering each event hour (partition values, else hour-column stats).

    A file compaction wrote keeps the times of the files it replaced, hour by hour: compaction
    changes no row, so an hour it touched was not written again (else every compacted hour would
    look newer than its downstream's).
    """
    import pyarrow as pa

    carried = _compaction_times(delta, spec)
    newest: dict[datetime, datetime] = {}
    for action in pa.table(delta.get_add_actions(flatten=True)).to_pylist():
        for hour, written in (carried.get(action["path"]) or _file_times(action, spec)).items():
            newest[hour] = max(newest.get(hour, written), written)
    return newest


def _file_hours(action: dict, spec: catalog.TableSpec) -> list[datetime]:
    """The event periods (hours; days of a day table) a data file covers, from its ``add`` action
    (none when unknown)."""
    if spec.grain is catalog.Grain.DAY:
        day = action.get("partition.event_date")
        return [datetime.fromisoformat(f"{day}T00:00")] if day is not None else []
    if "event_hour" in spec.partition_by:
        day, hour = action.get("partition.event_date"), action.get("partition.event_hour")
        if day is None or hour is None:
            return []
        return [datetime.fromisoformat(f"{day}T{int(hour):02d}:00")]
    if action.get("partition.hour_start") is not None:  # a file of one hour's partition
        return [utc(action["partition.hour_start"])]
    column = spec.period_sql if spec.period_sql in spec.column_names else "event_time"
    low, high = utc(action.get(f"min.{column}")), utc(action.get(f"max.{column}"))
    if low is None or high is None:  # no statistics: the file's hours are unknown
        return []
    hour, hours = low.replace(minute=0, second=0, microsecond=0), []
    while hour <= high:
        hours.append(hour)
        hour += timedelta(hours=1)
    return hours


def _file_times(action: dict, spec: catalog.TableSpec) -> dict[datetime, datetime]:
    written = utc(action["modification_time"])
    return dict.fromkeys(_file_hours(action, spec), written)


def _compaction_times(delta, spec: catalog.TableSpec) -> dict[str, dict[datetime, datetime]]:
    """Per file an OPTIMIZE added, the newest write of each of its hours among the files it replaced.

    Read from the table as it was before and after each OPTIMIZE in the history, oldest first (a
    compacted file compacted again keeps its first times). A version gone from the log leaves that
    OPTIMIZE's files with their own write time.
    """
    import pyarrow as pa
    from deltalake.exceptions import DeltaError

    optimized = sorted(
        c["version"]
        for c in delta.history(HISTORY_LIMIT)
        if c.get("operation") == "OPTIMIZE" and "version" in c
    )
    carried: dict[str, dict[datetime, datetime]] = {}

    def files_at(version: int) -> dict[str, dict]:
        old = object_storage.delta_table(delta.table_uri, version=version)
        return {a["path"]: a for a in pa.table(old.get_add_actions(flatten=True)).to_pylist()}

    for version in optimized:
        try:
            before, after = files_at(version - 1), files_at(version)
        except (DeltaError, OSError):
            continue
        times: dict[datetime, datetime] = {}
        for path, action in before.items():
            if path not in after:  # replaced by the compaction
                for hour, written in (carried.get(path) or _file_times(action, spec)).items():
                    times[hour] = max(times.get(hour, written), written)
        for path, action in after.items():
            if path not in before:  # written by the compaction
                own = _file_times(action, spec)
                carried[path] = {hour: times.get(hour, written) for hour, written in own.items()}
    return carried


def replace_predicate(commit: dict) -> str | None:
    """The SQL predicate of a commit that replaced rows (Delta keeps ``replaceWhere`` as text, in a
    JSON list when Spark wrote it), or None."""
    text = (commit.get("operationParameters") or {}).get("predicate")
    if not text:
        return None
    try:
        terms = json.loads(text)
    except ValueError:
        return text
    if isinstance(terms, str):
        return terms
    return " AND ".join(f"({term})" for term in terms) if terms else None


def hours_replaced(delta, hours: set[datetime]) -> dict[datetime, datetime]:
    """The newest commit that replaced each of ``hours`` (naive UTC): a commit replaced an hour when
    its ``replaceWhere`` predicate selects the hour (DuckDB evaluates it on one row per hour).

    Only replaces newer than any commit that may have deleted rows (a DELETE, a MERGE, a RESTORE):
    after one, an hour without rows may have lost them.
    """
    import duckdb
    import pyarrow as pa

    if not hours:
        return {}
    ordered = sorted(hours)
    candidates = pa.table(
        {
            "hour_start": ordered,
            "event_date": [h.date() for h in ordered],
            "event_hour": [h.hour for h in ordered],
        }
    )
    # The predicate is a table's own log text; even so it gets no file or network access.
    connection = duckdb.connect(config={"enable_external_access": False})
    connection.register("candidate_hours", candidates)
    newest: dict[datetime, datetime] = {}
    for commit in delta.history(HISTORY_LIMIT):  # newest first
        if commit.get("operation") not in _KEEPS_HOURS:
            break
        predicate = replace_predicate(commit)
        if predicate is None:
            continue
        try:
            selected = connection.execute(
                f"SELECT hour_start FROM candidate_hours WHERE {predicate}"
            ).fetchall()
        except duckdb.Error:
            continue  # a predicate on other columns, or SQL DuckDB does not read: no hour known
        when = utc(commit.get("timestamp"))
        for (hour,) in selected:
            newest.setdefault(hour, when)  # the history is newest first
        if len(newest) == len(hours):
            break
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
            newest[hour] = utc(ingested_at)
    return counts, newest


def observe(lakehouse: Lakehouse) -> Observed:
    """Read the facts the grid needs from the landing zone and the tables' Delta logs and data."""
    tables = {name: HistoryReadOnce(delta) for name, delta in open_tables(lakehouse).items()}
    if not tables:
        raise UsageError(
            f"No Delta tables under {lakehouse.root}/tables: run the pipeline first (e.g. `make demo`)."
        )
    connection = connect(lakehouse, tables)
    # The landing-fed table (bronze).
    ingest = next(t for t in catalog.tasks() if t.source and t.streamed)
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
    for spec in fed:
        if "source_file" in spec.column_names and spec.name in tables:
            open_only = "resolved_at IS NULL" if "resolved_at" in spec.column_names else ""
            classified[spec.name] = _count_by_folder(connection, spec.name, open_only)[0]
    hour_counts, writes_by_hour, upstream = {}, {}, {}
    # Tables replaced by event period (sessions span hours): hour tables on the hour grid, day
    # tables on the day grid, each against its upstream's periods rolled up to its grain.
    period_tables = [t for t in catalog.batch_tables() if t.flow.layout(t.grain)]
    for spec in period_tables:
        upstream[spec.name] = next(
            (u for u in spec.upstream if u in {t.name for t in period_tables}), None
        )
        if spec.name not in tables:
            hour_counts[spec.name] = {}
            continue
        layer, table = spec.name.split(".")
        rows = connection.execute(
            f'SELECT date_trunc(\'{spec.grain.value}\', {spec.period_sql}) AS period, count(*) FROM "{layer}"."{table}" GROUP BY period'
        ).fetchall()
        hour_counts[spec.name] = {utc(start): count for start, count in rows if start is not None}
        writes_by_hour[spec.name] = hour_writes(tables[spec.name], spec)
    # Whether a replace covered a period matters only for a period the upstream holds and the
    # table does not: its history is read for those alone (usually none).
    recomputed = {}
    for spec in period_tables:
        if spec.write is catalog.Write.REPLACE_PERIODS and spec.name in tables:
            source = _rolled_up(hour_counts.get(upstream[spec.name]) or {}, spec.grain)
            without_rows = {start for start in source if not hour_counts[spec.name].get(start)}
            recomputed[spec.name] = hours_replaced(tables[spec.name], without_rows)
    writes = {
        t.name: (last_write(tables[t.name]) if t.name in tables else None) for t in catalog.tables()
    }
    landing = lakehouse.landing(ingest.source)
    report = landing_report(lakehouse, ingest.source)
    copies = {problem["file"]: problem["copy_of"] for problem in report["copies"]}
    grains = {spec.name: spec.grain.value for spec in period_tables}
    return Observed(
        grains=grains,
        landed=landed_lines(landing, copies),
        ingest_table=ingest.name,
        ingested=ingested,
        newest_ingest=newest,
        classified=classified,
        hour_counts=hour_counts,
        hour_writes=writes_by_hour,
        upstream=upstream,
        writes=writes,
        recomputed=recomputed,
        failed_rules=_failed_rules(connection) if RESULTS_TABLE in tables else {},
        landing_files=[
            {**problem, "hour": folder_hour(problem["file"])}
            for problem in (*report["ignored"], *report["changed"], *report["copies"])
        ],
    )


def _rolled_up(counts: dict[datetime, int], grain) -> dict[datetime, int]:
    """Counts per hour as counts per period of ``grain`` (a day's are its hours' sum)."""
    rolled: dict[datetime, int] = {}
    for hour, count in counts.items():
        start = grain.floor(hour).replace(tzinfo=None)
        rolled[start] = rolled.get(start, 0) + count
    return rolled


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
            failed.setdefault(utc(hour), []).append(
                f"{name}: rule {rule!r} failed (measured {cell(value)})"
            )
    return failed
