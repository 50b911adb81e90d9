"""MERGE_NEW tables: classified rows merged in once by key, rejected rows quarantined (silver).

Incremental mode streams the first upstream table's new rows with trigger(availableNow=True).
Each micro-batch is classified by the table's transform against the other upstream tables,
re-read every batch (a stream-static join: a dimension update applies from the next batch; the
lines it quarantined before are classified again by the next run, :func:`replay_quarantine`).
Rows without a ``reason`` are deduplicated on the table's key and MERGEd in (insert-only, so a
copy re-sent within the table's key window is still recognised, whichever hour it carries, and a
late event is never dropped; the copy kept is the first by ``first_by``, in a backfill too); rows with a
reason are appended to the table's quarantine with their raw line; one metrics row per batch
accounts for every line. Batch mode recomputes the event hours of [start, end) from upstream with
the same transform and replaces exactly those partitions.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse import catalog
from lakehouse.catalog import TableSpec
from lakehouse.config import Lakehouse, Table
from lakehouse.faults import fault_point
from lakehouse.flows.containment import PROCESSING_ERROR, contained, is_data_error
from lakehouse.flows.keys import accepted, one_row_per_key
from lakehouse.flows.quarantine_replay import open_quarantined_lines, replay_quarantine
from lakehouse.freshness import delta_source_caught_up, job_input
from lakehouse.periods import Periods
from lakehouse.progress import ProgressLog
from lakehouse.runtime import JobArgs, Written, guarded_batches, log, run_available_now
from lakehouse.sinks import (
    append,
    committed_txns,
    ensure_table,
    mark_resolved,
    merge_figures,
    merge_new_rows,
    replace_periods,
    txn_app_id,
    with_conflict_retries,
)
from lakehouse.sources import batch_input, delta_stream, require_table
from lakehouse.spark import build_spark_session, fit_code_generation, lazy_session

# A quarantine row's resolution, declared last in a quarantine: never set by classification, set by
# a batch recompute that admits the row's line (lakehouse.sinks.mark_resolved).
RESOLUTION_COLUMNS = ("resolved_at", "resolved_by")


def rejected_columns(quarantine: TableSpec) -> list[str]:
    """The quarantine's columns that classification fills (all but the resolution)."""
    return [name for name in quarantine.column_names if name not in RESOLUTION_COLUMNS]


def batch_columns(table: TableSpec, quarantine: TableSpec) -> list[str]:
    """What a micro-batch writes of a classified row: the table's columns, the quarantine's, the reason."""
    return list(dict.fromkeys([*table.column_names, *rejected_columns(quarantine), "reason"]))


def cacheable(classified: DataFrame, table: TableSpec, quarantine: TableSpec) -> DataFrame:
    """The columns a batch writes; a valid row's quarantine-only columns (its raw line) nulled.

    What a micro-batch caches: the raw line is most of a row's bytes and only a rejected row keeps it.
    """
    rejected_only = set(rejected_columns(quarantine)) - set(table.column_names) - {"reason"}
    return classified.select(
        *[
            F.when(F.col("reason").isNotNull(), F.col(c)).alias(c)
            if c in rejected_only
            else F.col(c)
            for c in batch_columns(table, quarantine)
        ]
    )


def failed_lines(
    lines: DataFrame, detail: str, table: TableSpec, quarantine: TableSpec
) -> DataFrame:
    """Upstream lines the transform cannot take, as batch rows of reason ``processing_error``.

    The quarantine's own columns come from the line (raw line, source, ingestion); the table's are null.
    """
    types = {
        field.name: field.dataType
        for field in [*table.spark_schema().fields, *quarantine.spark_schema().fields]
    }
    given = {"reason": F.lit(PROCESSING_ERROR), "reason_detail": F.lit(detail)}
    present = set(lines.columns)
    return lines.select(
        *[
            (
                given[c] if c in given else F.col(c) if c in present else F.lit(None).cast(types[c])
            ).alias(c)
            for c in batch_columns(table, quarantine)
        ]
    )


def rejected(classified: DataFrame, quarantine: TableSpec) -> DataFrame:
    """The rows that failed a check, with their raw line and reason, in the quarantine's columns."""
    return classified.filter(F.col("reason").isNotNull()).select(*rejected_columns(quarantine))


def batch_metrics(
    generation: int, batch_id: int, by_reason: dict, unique: int | None, inserted: int | None
) -> dict:
    """The stored account of one micro-batch: every line is valid, a duplicate or quarantined.

    ``unique`` (the valid lines less the batch's duplicates) and ``inserted`` are None only when
    the MERGE of a replayed batch is no longer in the table's log.
    """
    valid_lines = by_reason.get(None, 0)
    quarantined = {reason: count for reason, count in by_reason.items() if reason is not None}
    return {
        "generation": generation,
        "batch_id": batch_id,
        "recorded_at": datetime.now(UTC).replace(tzinfo=None),
        "lines": sum(by_reason.values()),
        "valid_lines": valid_lines,
        "duplicates_in_batch": valid_lines - unique if unique is not None else None,
        "duplicates_of_earlier_batches": unique - inserted
        if unique is not None and inserted is not None
        else None,
        "inserted": inserted,
        "quarantined": sum(quarantined.values()),
        "quarantined_by_reason": quarantined,
    }


class MergeBatch:
    """What one micro-batch of a MERGE_NEW table does: classify, merge, quarantine, account.

    Called by foreachBatch, possibly in the engine's Python worker (so it holds no session: it
    uses the batch's), it returns the batch's metrics row as its note, None for a batch it skipped.
    """

    def __init__(self, table: Table, generation: int) -> None:
        self.table, self.generation = table, generation
        self.quarantine = table.side("quarantine")
        self.metrics = table.side("metrics")
        self.app_ids = {
            table.name: txn_app_id(table, generation, "stream"),
            self.quarantine.name: txn_app_id(self.quarantine, generation, "stream"),
            self.metrics.name: txn_app_id(self.metrics, generation, f"{table.layer}-stream"),
        }

    def static_inputs(self, spark: SparkSession) -> list[DataFrame]:
        """The upstream tables after the streamed one, read afresh for every micro-batch."""
        return [
            spark.read.format("delta").load(upstream.path)
            for upstream in self.table.upstream_tables()[1:]
        ]

    def classified(self, rows: DataFrame) -> tuple[DataFrame, list]:
        """The batch classified and cached, and its lines per (reason, event hour of a valid line).

        Counting is the pass that computes and caches the batch, so a line that makes the transform
        fail fails it; those lines are then found and quarantined (lakehouse.flows.containment).
        """
        static = self.static_inputs(rows.sparkSession)

        def classify(lines: DataFrame) -> DataFrame:
            return cacheable(
                self.table.spec.transform(lines, *static), self.table.spec, self.quarantine.spec
            )

        def counted(classified: DataFrame) -> list:
            hour = F.when(F.col("reason").isNull(), F.date_trunc("hour", "event_time")).alias(
                "hour"
            )
            return classified.groupBy("reason", hour).count().collect()

        classified = classify(rows)
        try:
            # Inside the try: persisting plans the batch, and a batch of literal rows (Spark
            # Connect's createDataFrame) is computed while it is planned.
            classified = classified.persist()
            return classified, counted(classified)
        except Exception as error:
            classified.unpersist()
            if not is_data_error(error):
                raise
            log.warning(
                "%s: the batch failed on its data (%s); finding the lines", self.table.name, error
            )
        classified = contained(
            rows,
            classify,
            lambda lines, detail: failed_lines(
                lines, detail, self.table.spec, self.quarantine.spec
            ),
        ).persist()
        return classified, counted(classified)

    def __call__(self, rows: DataFrame, batch_id: int) -> dict | None:
        table, layer, spark = self.table, self.table.layer, rows.sparkSession
        classified, counts = self.classified(rows)
        try:
            # One pass over the cached batch counted the lines per reason and the valid ones' event hours.
            by_reason: dict = {}
            touched = set()
            for row in counts:
                by_reason[row.reason] = by_reason.get(row.reason, 0) + row["count"]
                if row.hour is not None:
                    touched.add(row.hour)
            hours = Periods.of(touched)
            fault_point(f"{layer}.before_merge", batch_id)
            merged = False
            if hours:
                merged = with_conflict_retries(
                    lambda: merge_new_rows(
                        spark,
                        accepted(classified, table.spec),
                        self.table,
                        table.spec.key,
                        hours.widened(table.spec.key_window_hours),
                        self.app_ids[table.name],
                        batch_id,
                    ),
                    f"{table.name} batch {batch_id}",
                )
            fault_point(f"{layer}.after_merge", batch_id)
            append(
                rejected(classified, self.quarantine.spec),
                self.quarantine,
                self.app_ids[self.quarantine.name],
                batch_id,
                self.quarantine.spec.partition_by,
            )
            fault_point(f"{layer}.after_quarantine", batch_id)
        finally:
            classified.unpersist()
        # The MERGE's own record says how many rows it merged (the batch's unique valid rows) and inserted.
        figures = merge_figures(self.table, self.app_ids[table.name], batch_id) if hours else (0, 0)
        unique, inserted = figures if figures is not None else (None, None)
        # Delta skipped the MERGE: this batch's data was committed before a crash.
        if hours and not merged:
            metrics_table = self.metrics
            if (
                committed_txns(spark, metrics_table).get(self.app_ids[self.metrics.name], -1)
                >= batch_id
            ):
                log.info(
                    "%s batch %d: already committed before a restart; skipped", table.name, batch_id
                )
                return None
            # The driver died between the MERGE and the metrics append: the row is written now, with
            # the MERGE's own figures (its metrics append carries a txn id too: never written twice).
            log.info(
                "%s batch %d: data committed before a restart, not its metrics row: writing it",
                table.name,
                batch_id,
            )
        metrics = batch_metrics(self.generation, batch_id, by_reason, unique, inserted)
        append(
            spark.createDataFrame([metrics], self.metrics.spec.spark_schema()),
            self.metrics,
            self.app_ids[self.metrics.name],
            batch_id,
        )
        summary = (
            f"{metrics['lines']} line(s): {metrics['valid_lines']} valid, {metrics['duplicates_in_batch']} duplicate(s) "
            f"in the batch, {metrics['duplicates_of_earlier_batches']} of earlier batches, {inserted} inserted; "
            f"{metrics['quarantined']} quarantined {metrics['quarantined_by_reason']}; {hours}"
        )
        log.info("%s batch %d: %s", table.name, batch_id, summary)
        return {**metrics, "periods": hours.isoformats(), "summary": summary}


def recompute(
    target: Table,
    hours: Periods,
    reading: dict[str, Table] | None = None,
    spark: SparkSession | None = None,
) -> int:
    """The batch form: the table's hours recomputed from upstream and replaced; the quarantined lines it admitted.

    ``target`` is where to write and ``reading`` where to read (default: the live tables; for the
    live target, its quarantine rows for the lines now accepted are marked resolved; the
    consistency check passes scratch copies and leaves the quarantine alone).
    """
    spark = spark or build_spark_session(target.task)
    table, lakehouse = target.spec, target.lakehouse
    hours = hours.hours()
    live = target == lakehouse.table(table.name)
    where = {upstream.name: upstream for upstream in target.upstream_tables()} | (reading or {})
    inputs = [batch_input(spark, where[name], hours) for name in table.upstream]

    def valid(lines: DataFrame) -> DataFrame:
        return (
            table.transform(lines, *inputs[1:])
            .filter(table.periods_predicate(hours))
            .filter(F.col("reason").isNull())
        )

    # Classified once for the dedup's three reads, in the table's columns: with the raw lines (most of
    # a row's bytes) a 3-hour backfill of 5M events filled a 2 GB heap and spent its time in full GCs.
    rows = valid(inputs[0]).select(*table.column_names).persist()
    try:
        # Not accepted(rows): its filter on `reason`, a column the cached plan lacks, would bypass the cache.
        once = without_keys_kept_nearby(
            spark, one_row_per_key(rows, table.key, table.first_by), lakehouse, table, hours
        )
        with_conflict_retries(lambda: replace_periods(once, target, hours), f"{table.name} {hours}")
    finally:
        rows.unpersist()
    if not live:
        return 0
    # Lines quarantined earlier that this recompute accepts (the dimension has their ad now, a
    # classification bug was fixed) would otherwise be in both tables. Only the input's lines that
    # are in the quarantine are classified again: a few, found by their raw line.
    quarantine = lakehouse.table(catalog.side(table, "quarantine").name)
    quarantined = open_quarantined_lines(spark, inputs[0], quarantine)
    if quarantined is None:
        return 0
    return with_conflict_retries(
        lambda: mark_resolved(spark, valid(quarantined), quarantine, f"recompute of {hours}"),
        f"{quarantine.name} {hours}",
    )


def without_keys_kept_nearby(
    spark: SparkSession, rows: DataFrame, lakehouse: Lakehouse, table: TableSpec, hours: Periods
) -> DataFrame:
    """``rows`` (of ``hours``) less the keys the live table holds within its key window outside ``hours``.

    That copy was admitted first (the stream inserts a key once, in whichever hour its copy fell),
    so a backfill of the later copy's hours alone keeps the row where it is.
    """
    around = hours.widened(table.key_window_hours).without(hours)
    if not around:
        return rows
    kept = (
        spark.read.format("delta")
        .load(lakehouse.table(table.name).path)
        .filter(table.periods_predicate(around))
        .select(table.key)
    )
    return rows.join(kept, table.key, "left_anti")


def run(table: Table, args: JobArgs) -> dict:
    # Connected on first use: a run with nothing new (told from files) opens no engine session.
    spark = lazy_session(table.task)
    streamed, *static = table.upstream_tables()
    for upstream in static:
        require_table(spark, upstream)
    for written in table.written_by_its_task():
        ensure_table(spark, written)

    def fit_code(checkpoint: str | None = None) -> None:
        input_bytes, new_only = job_input(table, checkpoint)
        log.info("%s: %s", table.name, fit_code_generation(spark, input_bytes, new_only))

    if args.mode == "batch":
        fit_code()
        resolved = recompute(table, args.interval, spark=spark)
        log.info(
            "%s: recomputed %s from upstream; %d quarantined line(s) now accepted, marked resolved",
            table.name,
            args.interval,
            resolved,
        )
        return {
            "table": table.name,
            "mode": "batch",
            "hours": str(args.interval),
            "quarantine_resolved": resolved,
        }

    generation = args.generation_of(table)
    on_batch = MergeBatch(table, generation)
    checkpoint = table.checkpoint(generation)

    def writer(lease):
        fit_code(checkpoint)
        return delta_stream(spark, streamed).writeStream.foreachBatch(
            guarded_batches(on_batch, checkpoint, lease, table.name)
        )

    return run_available_now(
        writer,
        checkpoint,
        name=table.name,
        writes=[
            Written(written, on_batch.app_ids[written.name])
            for written in (table, on_batch.quarantine, on_batch.metrics)
        ],
        caught_up=lambda: delta_source_caught_up(checkpoint, streamed.path),
        progress_log=ProgressLog(spark, table.lakehouse),
        then=lambda: replay_quarantine(spark, table, generation),
    )
