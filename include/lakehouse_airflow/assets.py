"""Every catalog table as an Airflow Asset, and the asset events a task's run stands for.

A task's outlets are every table its job may write: its own, its side tables, and the ops
records its query appends to (``ops.query_progress`` for a streaming query, ``ops.expectation_results``
for a table with rules). Data tables are in the Asset group ``lakehouse``, ops records in
``lakehouse_ops``.

Airflow emits an event for every outlet of a task that succeeds; an event means "this table
changed". So after the job the operator keeps as outlets only the tables its summary says it
wrote (:func:`written`), and each event's extra says how many rows and which event hours. The
task's outlets are read when it succeeds, not when the DAG was parsed (Airflow 3.3's task runner
builds them from the running task), while the DAG keeps declaring every table for lineage.

Each event hour a run wrote is also a partition of the table's Asset (Airflow's partitioned asset
events): the operator adds one partition key per hour (:func:`partition_keys`), so a DAG scheduled
by ``PartitionedAssetTimetable`` runs once per hour written, a late hour included.

No Spark here: the DAG files import this module at parse time.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow.sdk import Asset

from lakehouse import catalog
from lakehouse.catalog import TableSpec, Write
from lakehouse.hours import HourRange, parse_instant

GROUPS = {"ops": "lakehouse_ops"}  # any other layer: "lakehouse"
# The ops records appended by an operation rather than by one table's query (catalog.ops_table).
# An event hour as a partition key: a naive UTC time, the input format of Airflow's temporal
# partition mappers (StartOfHourMapper, StartOfDayMapper), so a consumer may roll hours up to days.
PARTITION_KEY_FORMAT = "%Y-%m-%dT%H:%M:%S"
STREAMING_QUERIES, EXPECTATIONS, MAINTENANCE = (
    "every streaming query",
    "expectations",
    "maintenance",
)


def asset(table: TableSpec) -> Asset:
    """The table's Asset: named by the table, in its layer's group."""
    return Asset(name=table.name, uri=table.asset_uri, group=GROUPS.get(table.layer, "lakehouse"))


def operation_table(operation: str) -> TableSpec:
    """The ops table that ``operation`` (as its declaration names it) appends its records to."""
    for spec in catalog.tables():
        if spec.operation == operation:
            return spec
    raise catalog.CatalogError(f"No ops table is declared with operation={operation!r}")


def task_tables(table: TableSpec) -> list[TableSpec]:
    """Every table the task of ``table`` may write: its own, its side tables, its ops records."""
    tables = catalog.written_by_task(table)
    if table.streamed:
        tables.append(operation_table(STREAMING_QUERIES))
    if any(spec.expectations for spec in tables):
        tables.append(operation_table(EXPECTATIONS))
    return tables


def _hours_of_args(args: list[str]) -> list[str]:
    """The event hours of a batch job's ``--start``/``--end`` arguments (none if absent or empty)."""
    given = dict(zip(args, args[1:], strict=False))
    if not (given.get("--start") and given.get("--end")):
        return []
    return HourRange.between(
        parse_instant(given["--start"]), parse_instant(given["--end"])
    ).isoformats()


def _sum(notes: list[dict], key: str) -> int:
    return sum(note.get(key) or 0 for note in notes)


def written(table: TableSpec, summary: Any, args: list[str] = ()) -> dict[str, dict]:
    """The tables the run of ``table``'s task wrote, each with its asset event's extra.

    ``summary``: the job's return value (``lakehouse.runner``); ``args``: its rendered arguments
    (a batch run's ``--start``/``--end``). The extra: ``rows`` written (added; a replace's removed
    rows in ``rows_replaced``, rows marked resolved or reconciled in ``rows_updated``), the ``event_hours`` the run wrote (ISO-8601 hours; none for a table
    without event time, such as bronze or the dimension) and the run's ``mode``. A table the run
    did not change is left out: it gets no event.
    """
    if not isinstance(summary, dict):
        return {}
    mode = summary.get("mode", "incremental")
    notes = [note for note in summary.get("batches") or [] if isinstance(note, dict)]
    replay = summary.get("quarantine_replay") or {}  # lines a dimension change let in
    hours = summary.get("event_hours") or (
        _hours_of_args(list(args))
        if mode == "batch"
        else sorted(
            {h for note in notes for h in note.get("event_hours") or []}
            | set(replay.get("event_hours") or [])
        )
    )
    counts: dict[str, dict[str, int]] = {}  # table -> rows written, and rows replaced or updated
    rewritten: set[str] = set()  # tables replaced whole, whatever their rows

    def count(name: str, rows: int, **changed: int) -> None:
        counts[name] = {"rows": rows or 0, **{k: v for k, v in changed.items() if v}}

    def side(role: str) -> str:
        return catalog.side(table, role).name

    batch = mode == "batch"
    if table.write is Write.OVERWRITE:
        count(table.name, summary.get("rows_written"))
    elif table.write is Write.APPEND:
        count(table.name, summary.get("input_rows"))
    elif table.write in (Write.MERGE_NEW, Write.REPLACE_HOURS) and batch:
        count(table.name, summary.get("rows_written"), rows_replaced=summary.get("rows_deleted"))
        rewritten.add(table.name)  # its hours replaced, even by nothing
        if "rows_written" not in summary:  # a job that does not count them: no figure, not 0
            del counts[table.name]["rows"]
        if table.write is Write.MERGE_NEW:
            # lines quarantined earlier that the recompute accepted: their rows marked resolved
            count(side("quarantine"), 0, rows_updated=summary.get("quarantine_resolved"))
    elif table.write is Write.MERGE_NEW:
        accepted = replay.get("lines") or 0
        count(table.name, _sum(notes, "inserted") + accepted)
        count(side("quarantine"), _sum(notes, "quarantined"), rows_updated=accepted)
        count(side("metrics"), sum("lines" in note for note in notes))  # a row per batch
    elif table.write is Write.REPLACE_HOURS:
        count(table.name, _sum(notes, "rows_written"), rows_replaced=_sum(notes, "rows_deleted"))
    elif table.write is Write.SESSIONS and batch:
        count(table.name, summary.get("sessions"))
        rewritten.add(table.name)  # the sessions of its hours replaced, even by nothing
    elif table.write is Write.SESSIONS:
        count(table.name, _sum(notes, "sessions"))
        count(side("late"), _sum(notes, "late"), rows_updated=summary.get("late_reconciled"))
        if summary.get("open_sessions") is not None:
            # rewritten whole: changed even when no session is open any more
            count(side("open"), summary["open_sessions"])
            rewritten.add(side("open"))
    if table.streamed and not batch:
        # one progress report per micro-batch that ran (lakehouse.progress)
        count(
            operation_table(STREAMING_QUERIES).name,
            max(summary.get("micro_batches") or 0, len(notes)),
        )
    checked = summary.get("expectations")
    if isinstance(checked, dict):
        count(operation_table(EXPECTATIONS).name, checked.get("checked"))

    # The run's event hours go on every table it wrote; bronze and the dimension have no event hours.
    return {
        name: {**changed, "event_hours": list(hours) if table.batch else [], "mode": mode}
        for name, changed in counts.items()
        if name in rewritten or changed.get("rows") or len(changed) > 1
    }


def maintenance_written(records: Any) -> dict[str, dict]:
    """The maintenance job's records (one per OPTIMIZE or VACUUM) as the event of ``ops.table_maintenance``."""
    if not records:
        return {}
    return {operation_table(MAINTENANCE).name: {"rows": len(records), "event_hours": []}}


def hour_strings(hours: list[str]) -> str:
    """Event hours for people: ``2026-11-20T00:00Z..02:00Z (3 hours)``, or ``none``."""
    if not hours:
        return "none"
    first, last = (datetime.fromisoformat(h) for h in (hours[0], hours[-1]))
    if len(hours) == 1:
        return f"{first:%Y-%m-%dT%H:00Z}"
    return f"{first:%Y-%m-%dT%H:00Z}..{last:%H:00Z} ({len(hours)} hours)"


def partition_keys(event_hours: list[str]) -> list[str]:
    """The event hours (ISO-8601) as Airflow partition keys, sorted: ``2026-11-20T02:00:00`` (UTC)."""
    return sorted(
        {_utc(datetime.fromisoformat(h)).strftime(PARTITION_KEY_FORMAT) for h in event_hours}
    )


def _utc(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive one is taken as UTC already (the jobs' hours are UTC)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
