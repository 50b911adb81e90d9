"""REPLACE_PERIODS tables: every event period (hour, day) that receives new upstream rows is recomputed and replaced (gold).

Incremental mode streams the first upstream table's new rows (availableNow) and, per micro-batch,
recomputes the periods of the table's grain they touch from upstream (in batch) and replaces
exactly those periods with Delta replaceWhere (a transaction id per batch): a late event in a day
table makes its whole day be recomputed, never a partial day. Batch mode does the same for the
periods [start, end) touches. One code path, so stream and backfill cannot differ. Why not a
streaming aggregation with a watermark in append mode: rows behind the watermark would be dropped,
and under availableNow the last windows would wait in the state store until the next run.
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse import catalog
from lakehouse.catalog import TableSpec
from lakehouse.config import Table
from lakehouse.faults import fault_point
from lakehouse.freshness import delta_source_caught_up, job_input
from lakehouse.periods import Periods
from lakehouse.progress import ProgressLog
from lakehouse.runtime import JobArgs, Written, guarded_batches, log, run_available_now
from lakehouse.sinks import ensure_table, replace_periods, stream_app_id, with_conflict_retries
from lakehouse.sources import batch_input, delta_stream
from lakehouse.spark import build_spark_session, fit_code_generation, lazy_session


def event_hours(rows: DataFrame, upstream: TableSpec) -> DataFrame:
    """The event hour of each of ``rows`` of ``upstream``: one column, ``hour``."""
    return rows.select(F.expr(upstream.period_sql).alias("hour"))


def new_hours(hours: DataFrame) -> list[datetime]:
    """The distinct hours of an :func:`event_hours` frame."""
    return [row.hour for row in hours.distinct().collect()]


def recompute(
    table: Table,
    periods: Periods,
    reading: dict[str, Table] | None = None,
    spark: SparkSession | None = None,
    app_id: str = "",
    batch_id: int | None = None,
) -> dict:
    """Replace ``periods`` (widened to whole periods of the table's grain) of ``table`` with its
    transform of the upstream rows of those periods.

    ``table`` is where to write (the live table, or the consistency check's scratch copy) and
    ``reading`` maps upstream table names to where to read them (default: the live tables).
    Returns the commit's version and rows written.
    """
    periods = periods.to(table.grain)
    if not periods:
        return {"version": None, "rows_written": 0, "rows_deleted": 0}
    spark = spark or build_spark_session(table.task)
    where = {upstream.name: upstream for upstream in table.upstream_tables()} | (reading or {})
    inputs = [batch_input(spark, where[name], periods) for name in table.spec.upstream]
    written = with_conflict_retries(
        lambda: replace_periods(table.spec.transform(*inputs), table, periods, app_id, batch_id),
        f"{table.name} {periods}",
    )
    log.info("%s: recomputed %s: %s", table.name, periods, figures_of(written))
    return written


def figures_of(written: dict) -> str:
    """A replace's figures for people; one the commit does not record is left out, never "None"."""
    figures = [
        text.format(written[key])
        for key, text in (
            ("rows_written", "{} row(s) written"),
            ("rows_deleted", "{} replaced"),
            ("version", "version {}"),
        )
        if written.get(key) is not None
    ]
    return ", ".join(figures) or "no figure recorded"


def members_of(table: Table) -> list[Table]:
    """The tables the query of ``table``'s task recomputes, its lead first (most tasks: one)."""
    return [table.lakehouse.table(spec.name) for spec in catalog.task_members(table.spec)]


def run(table: Table, args: JobArgs) -> dict:
    """Run the query of ``table``'s task (``table``: its lead) for every table of the task: the
    summary's ``tables`` holds each table's own (its batches' notes, or its batch recompute)."""
    # Connected on first use: a run with nothing new (told from files) opens no engine session.
    spark = lazy_session(table.task)
    lakehouse = table.lakehouse
    members = members_of(table)
    for member in members:
        ensure_table(spark, member)

    def fit_code(checkpoint: str | None = None) -> None:
        input_bytes, new_only = job_input(table, checkpoint)
        log.info("%s: %s", table.name, fit_code_generation(spark, input_bytes, new_only))

    if args.mode == "batch":
        fit_code()
        tables = {}
        for member in (m for m in members if not args.tables or m.name in args.tables):
            periods = args.interval.to(member.grain)
            written = recompute(member, periods, spark=spark)
            tables[member.name] = {
                "table": member.name,
                "mode": "batch",
                "hours": str(periods),
                **written,
            }
        return {"table": table.name, "mode": "batch", "hours": str(args.interval), "tables": tables}

    # The task's query, under its lead's checkpoint; each table's writes carry its own app id.
    generation = args.generation_of(table)
    app_ids = {member.name: stream_app_id(member, generation) for member in members}
    streamed = table.upstream_tables()[0]

    # new_rows: the event hour of each new upstream row. Runs where foreachBatch runs (the engine's
    # Python worker): the batch's session, not the job's. The hours are read once; each table
    # recomputes the periods of its grain that hold them, under its own Delta transaction, so a
    # replayed batch skips the tables it already wrote.
    def on_batch(new_rows: DataFrame, batch_id: int) -> dict:
        hours = new_hours(new_rows)
        notes = {}
        for member in members:
            periods = Periods.of(hours, member.grain)
            fault_point(f"{member.layer}.before_replace", batch_id)
            written = recompute(
                member,
                periods,
                spark=new_rows.sparkSession,
                app_id=app_ids[member.name],
                batch_id=batch_id,
            )
            fault_point(f"{member.layer}.after_replace", batch_id)
            notes[member.name] = {
                "hours": str(periods),
                "periods": periods.isoformats(),
                **written,
                "summary": f"recomputed {periods}: {figures_of(written)}",
            }
        return {
            "batch_id": batch_id,
            "tables": notes,
            "summary": "; ".join(f"{name} {note['summary']}" for name, note in notes.items()),
        }

    checkpoint = table.checkpoint(generation)

    # The stream carries only each new row's event hour: foreachBatch hands a batch over as an RDD,
    # past column pruning, so without this every batch was read whole (4-5 CPU-s per task at 5M events).
    def writer(lease):
        fit_code(checkpoint)
        rows = event_hours(delta_stream(spark, streamed), streamed.spec)
        return rows.writeStream.foreachBatch(
            guarded_batches(on_batch, checkpoint, lease, table.task)
        )

    summary = run_available_now(
        writer,
        checkpoint,
        name=table.name,
        writes=[Written(member, app_ids[member.name]) for member in members],
        caught_up=lambda: delta_source_caught_up(checkpoint, streamed.path),
        progress_log=ProgressLog(spark, lakehouse),
    )
    return {**summary, "tables": {member.name: of_table(summary, member) for member in members}}


def of_table(summary: dict, member: Table) -> dict:
    """The part of the query's summary that is ``member``'s: its own note of each batch."""
    notes = [
        {"batch_id": note.get("batch_id"), **note["tables"][member.name]}
        for note in summary.get("batches", [])
        if member.name in note.get("tables", {})
    ]
    return {
        "table": member.name,
        "micro_batches": summary.get("micro_batches", 0),
        "input_rows": summary.get("input_rows", 0),
        "batches": notes,
        **({"not_started": summary["not_started"]} if "not_started" in summary else {}),
    }
