"""REPLACE_HOURS tables: every event hour that receives new upstream rows is recomputed and replaced (gold).

Incremental mode streams the first upstream table's new rows (availableNow) and, per micro-batch,
recomputes the event hours they touch from upstream (in batch) and replaces exactly those hours
with Delta replaceWhere (a transaction id per batch). Batch mode does the same for [start, end).
One code path, so stream and backfill cannot differ, and a late event simply makes its own hour
be recomputed. Why not a streaming aggregation with a watermark in append mode: rows behind the
watermark would be dropped, and under availableNow the last windows would wait in the state
store until the next run.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse.catalog import TableSpec
from lakehouse.config import Lakehouse, Table
from lakehouse.faults import fault_point
from lakehouse.freshness import delta_source_caught_up, job_input_bytes
from lakehouse.hours import HourRange
from lakehouse.progress import ProgressLog
from lakehouse.runtime import JobArgs, Written, guarded_batches, log, run_available_now
from lakehouse.sinks import ensure_table, replace_hours, txn_app_id, with_conflict_retries
from lakehouse.sources import batch_input, delta_stream
from lakehouse.spark import build_spark_session, fit_code_generation

# Where the fault harness may kill this flow's driver (lakehouse.faults; prefixed with the layer).
FAULT_POINTS = ("before_replace", "after_replace")


def event_hours(rows: DataFrame, upstream: TableSpec) -> DataFrame:
    """The event hour of each of ``rows`` of ``upstream``: one column, ``hour``."""
    return rows.select(F.expr(upstream.hour_sql).alias("hour"))


def touched_hours(hours: DataFrame) -> HourRange:
    """The distinct hours of an :func:`event_hours` frame."""
    return HourRange.of(row.hour for row in hours.distinct().collect())


def recompute(
    spark: SparkSession,
    lakehouse: Lakehouse,
    table: TableSpec,
    hours: HourRange,
    target: Table | None = None,
    upstream: dict[str, Table] | None = None,
    app_id: str = "",
    batch_id: int | None = None,
) -> dict:
    """Replace ``hours`` of ``table`` (or ``target``) with the transform of its upstream rows of those hours.

    ``upstream`` maps upstream table names to where to read them (default: the live tables; the
    consistency check passes its scratch copies). Returns the commit's version and rows written.
    """
    if not hours:
        return {"version": None, "rows_written": 0, "rows_deleted": 0}
    target = target or table.at(lakehouse)
    where = {name: lakehouse.table(name) for name in table.upstream} | (upstream or {})
    inputs = [batch_input(spark, where[name], hours) for name in table.upstream]
    written = with_conflict_retries(
        lambda: replace_hours(table.transform(*inputs), target, table, hours, app_id, batch_id),
        f"{table.name} {hours}",
    )
    log.info(
        "%s: recomputed %s: %s row(s) written, %s replaced, version %s",
        table.name,
        hours,
        written["rows_written"],
        written["rows_deleted"],
        written["version"],
    )
    return written


def run(table: Table, args: JobArgs) -> dict:
    spark = build_spark_session(table.task)
    lakehouse = table.lakehouse
    ensure_table(spark, table)
    log.info("%s: %s", table.name, fit_code_generation(spark, job_input_bytes(lakehouse, table)))

    if args.mode == "batch":
        written = recompute(spark, lakehouse, table, args.hours)
        return {"table": table.name, "mode": "batch", "hours": str(args.hours), **written}

    generation = args.generation_of(table)
    app_id = txn_app_id(table, generation, "stream")
    streamed = table.upstream_tables()[0]

    # new_rows: the event hour of each new upstream row. Runs where foreachBatch runs (the engine's
    # Python worker): the batch's session, not the job's.
    def on_batch(new_rows: DataFrame, batch_id: int) -> dict:
        hours = touched_hours(new_rows)
        fault_point(f"{table.layer}.before_replace", batch_id)
        written = recompute(
            new_rows.sparkSession, lakehouse, table, hours, app_id=app_id, batch_id=batch_id
        )
        fault_point(f"{table.layer}.after_replace", batch_id)
        figures = [  # a figure the commit no longer records is left out, not shown as None
            text.format(written[key])
            for key, text in (
                ("rows_written", "{} row(s) written"),
                ("rows_deleted", "{} replaced"),
                ("version", "version {}"),
            )
            if written.get(key) is not None
        ]
        summary = f"recomputed {hours}: " + ", ".join(figures)
        return {
            "batch_id": batch_id,
            "hours": str(hours),
            "event_hours": hours.isoformats(),
            **written,
            "summary": summary,
        }

    checkpoint = table.checkpoint(generation)
    # The stream carries only each new row's event hour: foreachBatch hands a batch over as an RDD,
    # past column pruning, so without this every batch was read whole (4-5 CPU-s per task at 5M events).
    rows = event_hours(delta_stream(spark, streamed), streamed)
    return run_available_now(
        lambda lease: rows.writeStream.foreachBatch(
            guarded_batches(on_batch, checkpoint, lease, table.name)
        ),
        checkpoint,
        name=table.name,
        writes=[Written(table, app_id)],
        caught_up=lambda: delta_source_caught_up(checkpoint, streamed.path),
        progress_log=ProgressLog(spark, lakehouse),
    )
