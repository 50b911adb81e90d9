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

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse.catalog import Grain, TableSpec
from lakehouse.config import Table
from lakehouse.faults import fault_point
from lakehouse.freshness import delta_source_caught_up, job_input
from lakehouse.periods import Periods
from lakehouse.progress import ProgressLog
from lakehouse.runtime import JobArgs, Written, guarded_batches, log, run_available_now
from lakehouse.sinks import ensure_table, replace_periods, txn_app_id, with_conflict_retries
from lakehouse.sources import batch_input, delta_stream
from lakehouse.spark import build_spark_session, fit_code_generation, lazy_session


def event_hours(rows: DataFrame, upstream: TableSpec) -> DataFrame:
    """The event hour of each of ``rows`` of ``upstream``: one column, ``hour``."""
    return rows.select(F.expr(upstream.period_sql).alias("hour"))


def touched_periods(hours: DataFrame, grain: Grain) -> Periods:
    """The distinct periods of ``grain`` holding the hours of an :func:`event_hours` frame."""
    return Periods.of((row.hour for row in hours.distinct().collect()), grain)


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


def run(table: Table, args: JobArgs) -> dict:
    # Connected on first use: a run with nothing new (told from files) opens no engine session.
    spark = lazy_session(table.task)
    lakehouse = table.lakehouse
    ensure_table(spark, table)

    def fit_code(checkpoint: str | None = None) -> None:
        input_bytes, new_only = job_input(table, checkpoint)
        log.info("%s: %s", table.name, fit_code_generation(spark, input_bytes, new_only))

    if args.mode == "batch":
        fit_code()
        periods = args.interval.to(table.grain)
        written = recompute(table, periods, spark=spark)
        return {"table": table.name, "mode": "batch", "hours": str(periods), **written}

    generation = args.generation_of(table)
    app_id = txn_app_id(table, generation, "stream")
    streamed = table.upstream_tables()[0]

    # new_rows: the event hour of each new upstream row. Runs where foreachBatch runs (the engine's
    # Python worker): the batch's session, not the job's.
    def on_batch(new_rows: DataFrame, batch_id: int) -> dict:
        periods = touched_periods(new_rows, table.grain)
        fault_point(f"{table.layer}.before_replace", batch_id)
        written = recompute(
            table, periods, spark=new_rows.sparkSession, app_id=app_id, batch_id=batch_id
        )
        fault_point(f"{table.layer}.after_replace", batch_id)
        summary = f"recomputed {periods}: {figures_of(written)}"
        return {
            "batch_id": batch_id,
            "hours": str(periods),
            "periods": periods.isoformats(),
            **written,
            "summary": summary,
        }

    checkpoint = table.checkpoint(generation)

    # The stream carries only each new row's event hour: foreachBatch hands a batch over as an RDD,
    # past column pruning, so without this every batch was read whole (4-5 CPU-s per task at 5M events).
    def writer(lease):
        fit_code(checkpoint)
        rows = event_hours(delta_stream(spark, streamed), streamed.spec)
        return rows.writeStream.foreachBatch(
            guarded_batches(on_batch, checkpoint, lease, table.name)
        )

    return run_available_now(
        writer,
        checkpoint,
        name=table.name,
        writes=[Written(table, app_id)],
        caught_up=lambda: delta_source_caught_up(checkpoint, streamed.path),
        progress_log=ProgressLog(spark, lakehouse),
    )
