"""Sinks: idempotent Delta writes used by every job's ``foreachBatch`` and by backfills.

Each write carries a Delta transaction id (``txnAppId``, ``txnVersion``): the app id names the
writing query and its checkpoint generation, the version is the micro-batch id. A batch replayed
after a crash (Spark re-runs the last uncommitted batch) is then skipped by Delta instead of being
written twice. A new checkpoint generation must use a new app id, or Delta would skip its writes
as already done (batch ids restart at 0).

The exception: a run's ops records (:func:`append_records`), which nothing replays, go by delta-rs.
"""

from __future__ import annotations

import logging
import random
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from lakehouse import catalog, delta_log, object_storage
from lakehouse.config import Table
from lakehouse.periods import Periods

log = logging.getLogger(__name__)
T = TypeVar("T")

_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
_REPARTITION_BEFORE_MERGE_WRITE = "spark.databricks.delta.merge.repartitionBeforeWrite.enabled"
# How long an ops table keeps a writer's transaction id: far longer than any retry of a write.
OPS_TRANSACTION_RETENTION = "interval 7 days"


def txn_app_id(table: Table, generation: int, writer: str) -> str:
    """The Delta transaction app id of ``writer`` into ``table`` for a checkpoint generation."""
    return f"{writer}->{table.name}@gen{generation}"


def stream_app_id(table: Table, generation: int) -> str:
    """The app id of the streaming query's writes into ``table``: ``stream`` for a table its task's
    query writes alone; the members of a task of several tables (:func:`lakehouse.catalog.task_members`)
    are written by that task's query, ``<task> stream`` (a new id: each once had a query of its own)."""
    shared = len(catalog.task_members(table.spec)) > 1
    return txn_app_id(table, generation, f"{table.task} stream" if shared else "stream")


def committed_txns(spark: SparkSession, table: Table) -> dict[str, int]:
    """The Delta transaction versions ``table`` holds, per app id ({} when the table does not exist).

    Delta's own ``SetTransaction`` state (checkpoints of the log included), read from the log
    (:mod:`lakehouse.delta_log`): the very record by which Delta skips a batch it already holds.
    A streaming Delta sink's app id is its query id; the foreachBatch writers' ids are
    :func:`txn_app_id`'s.
    """
    return delta_log.committed_txns(table.path)


def txn_tag(app_id: str, batch_id: int) -> str:
    """The ``userMetadata`` of a DML commit made under (``app_id``, ``batch_id``): finds it in the history."""
    return f"txn {app_id} {batch_id}"


def merge_figures(table: Table, app_id: str, batch_id: int) -> tuple[int, int] | None:
    """(source rows, rows inserted) of the MERGE committed under (``app_id``, ``batch_id``).

    Read from the commit's own record in the table's log (its ``operationMetrics``), found by its
    :func:`txn_tag`: the same figures whether the MERGE ran now or before a crash (a replayed batch
    whose MERGE Delta skipped). None when the commit is no longer in the log.
    """
    info = delta_log.tagged_commit_info(table.path, txn_tag(app_id, batch_id))
    if info is None:
        return None
    metrics = info.get("operationMetrics") or {}
    return int(metrics.get("numSourceRows", 0)), int(metrics.get("numTargetRowsInserted", 0))


def ensure_table(spark: SparkSession, table: Table) -> None:
    """Create the empty Delta table as the catalog declares it, unless it exists (readers need it from day one).

    Delta's SQL, not its Python API: the same statement works in a local session and over Spark Connect.
    """
    if delta_log.is_delta_table(table.path):
        return
    declared = table.spec
    columns = ", ".join(
        f"{c.name} {c.type}{'' if c.nullable else ' NOT NULL'}" for c in declared.columns
    )
    partitioned = (
        f" PARTITIONED BY ({', '.join(declared.partition_by)})" if declared.partition_by else ""
    )
    # An ops table's delta-rs writes on S3 each carry a transaction id of their process
    # (object_storage.write_delta): kept for good, one per task process, without a retention.
    properties = (
        f" TBLPROPERTIES ('delta.setTransactionRetentionDuration' = '{OPS_TRANSACTION_RETENTION}')"
        if declared.layer == "ops"
        else ""
    )
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS delta.`{table.path}` ({columns}) USING delta{partitioned}{properties}"
    )


def append(
    df: DataFrame, table: Table, app_id: str, batch_id: int, partition_by: Sequence[str] = ()
) -> None:
    """Append ``df`` once per (app id, batch id); columns declared since the table was created are added.

    Delta looks the id up in the table's whole state, rebuilt by two Spark jobs (about 0.4 s on
    the engine) even when the checksum file holds it: records that nothing replays go by
    :func:`append_records` instead.
    """
    writer = df.write.format("delta").mode("append").option("mergeSchema", "true")
    writer.option("txnAppId", app_id).option("txnVersion", batch_id).partitionBy(
        *partition_by
    ).save(table.path)


def append_records(rows: list[dict], table: Table) -> None:
    """Append ``rows`` (a dict per row, by column) from this process, by delta-rs, not by Spark.

    For the ops tables' records of what a run did (progress reports, check results): each is
    appended once and never replayed, so it needs no transaction id. Through Spark a few rows cost
    a job and a Delta commit on the engine (about 0.3 s and 0.45 engine CPU-s; BENCHMARKS.md
    section 15), by delta-rs under 25 ms. Tasks appending at once are fine: delta-rs retries a
    lost race for the next version, and blind appends do not conflict. The table must exist
    (:func:`ensure_table`); columns declared since it was created are added.
    """
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    # A naive datetime (what PySpark's collect returns) is local time to PySpark; pyarrow would read it as UTC.
    rows = [
        {k: v.astimezone(UTC) if isinstance(v, datetime) else v for k, v in row.items()}
        for row in rows
    ]
    schema = to_arrow_schema(table.spec.spark_schema(), timezone="UTC")
    object_storage.write_delta(
        table.path, pa.Table.from_pylist(rows, schema=schema), mode="append", schema_mode="merge"
    )


@contextmanager
def _dml_transaction(
    spark: SparkSession, app_id: str | None, batch_id: int | None, settings: dict | None = None
) -> Iterator[None]:
    """Make the next DML command (MERGE) idempotent: Delta reads the txn id from the session
    (``app_id`` None: no txn id, only the ``settings``).

    The commit is tagged with the txn id too (``userMetadata``), so that a replay can find it.
    ``settings`` are session settings for this command alone.
    """
    scoped = {
        **(
            {
                _TXN_APP_ID: app_id,
                _TXN_VERSION: str(batch_id),
                _USER_METADATA: txn_tag(app_id, batch_id),
            }
            if app_id is not None
            else {}
        ),
        **(settings or {}),
    }
    for name, value in scoped.items():
        spark.conf.set(name, value)
    try:
        yield
    finally:
        for name in scoped:
            spark.conf.unset(name)


def merge_new_rows(
    spark: SparkSession,
    rows: DataFrame,
    table: Table,
    key: str,
    hours: Periods,
    app_id: str | None,
    batch_id: int | None,
) -> bool:
    """Insert the rows whose ``key`` the table does not hold yet (an insert-only MERGE).

    The match is restricted to ``hours`` (the table's predicate for them) so Delta reads only the
    files of those hours, by partition or by their statistics: the cost follows the new data, not
    the size of the table. Insert-only MERGE only adds files,
    so downstream streams read the new rows as plain appends. New columns in ``rows`` are added
    to the table (schema evolution). False when Delta skipped the batch as already committed
    (:func:`merge_figures` has what it did either way). ``app_id`` None: no txn id (rerunning
    inserts nothing twice anyway: the rows' keys are then in the table).
    """
    predicate = table.spec.periods_predicate(hours)
    condition = f"t.{key} = s.{key} AND ({_qualify(predicate, 't', table.spec.column_names)})"
    # Delta would shuffle every row by partition before writing (one file per hour); coalescing to
    # as many tasks as a shuffle has writes at most that many files per hour without moving a row.
    writers = int(spark.conf.get("spark.sql.shuffle.partitions"))
    with _dml_transaction(spark, app_id, batch_id, {_REPARTITION_BEFORE_MERGE_WRITE: "false"}):
        metrics = spark.sql(
            f"MERGE WITH SCHEMA EVOLUTION INTO delta.`{table.path}` AS t USING {{rows}} AS s ON {condition} "
            "WHEN NOT MATCHED THEN INSERT *",
            rows=rows.coalesce(writers),
        ).collect()
    return bool(metrics) and "num_inserted_rows" in metrics[0]


def replace_where(df: DataFrame, table: Table, predicate: str) -> None:
    """Replace the rows matching ``predicate`` with ``df`` (whose rows must all match it) in one commit."""
    df.write.format("delta").mode("overwrite").option("replaceWhere", predicate).partitionBy(
        *table.spec.partition_by
    ).save(table.path)


def mark_resolved(
    spark: SparkSession, admitted: DataFrame, quarantine: Table, resolved_by: str
) -> int:
    """Mark the quarantine's unresolved rows whose line is in ``admitted`` as resolved; the rows marked.

    ``admitted`` holds the (``ingest_date``, ``source_file``, ``raw_line``) of lines a recompute
    has just accepted (a line quarantined for an unknown ad, before the dimension had it). The row
    stays, with ``resolved_at``/``resolved_by``: the quarantine keeps the history of what was
    rejected, and its unresolved rows are what still needs a person. Rerunning marks nothing more.
    """
    columns = {
        field.name for field in spark.read.format("delta").load(quarantine.path).schema.fields
    }
    if "resolved_at" not in columns:  # a quarantine created before lines could be resolved
        spark.sql(
            f"ALTER TABLE delta.`{quarantine.path}` ADD COLUMNS (resolved_at TIMESTAMP, resolved_by STRING)"
        )
    metrics = spark.sql(
        f"MERGE INTO delta.`{quarantine.path}` AS q USING {{admitted}} AS a "
        "ON q.ingest_date = a.ingest_date AND q.source_file = a.source_file AND q.raw_line = a.raw_line "
        "AND q.resolved_at IS NULL "
        "WHEN MATCHED THEN UPDATE SET q.resolved_at = current_timestamp(), q.resolved_by = a.resolved_by",
        admitted=admitted.select("ingest_date", "source_file", "raw_line")
        .dropDuplicates()
        .withColumn("resolved_by", F.lit(resolved_by)),
    ).collect()
    return int(metrics[0]["num_updated_rows"]) if metrics else 0


def replace_periods(
    df: DataFrame,
    table: Table,
    periods: Periods,
    app_id: str = "",
    batch_id: int | None = None,
) -> dict:
    """Overwrite exactly ``periods`` of a period-addressed table with ``df``; every other period is untouched.

    Rerunning it with the same input leaves the same content (a backfill is idempotent by
    construction); ``batch_id`` adds Delta's replay protection for streaming micro-batches.
    Returns what the commit records of itself: ``{"version", "rows_written", "rows_deleted"}`` (a
    replayed batch that Delta skipped: its earlier commit's; None values once the commit has left
    the log). Rows of other hours that shared a rewritten file are copied, not written.
    """
    # The tag finds the commit in the log: a micro-batch's is its txn id, so a skipped replay finds the first.
    tag = (
        txn_tag(app_id, batch_id)
        if batch_id is not None
        else f"replace {periods} {uuid.uuid4().hex}"
    )
    writer = (
        df.write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", table.spec.periods_predicate(periods))
        .option("userMetadata", tag)
        .partitionBy(*table.spec.partition_by)
    )
    if batch_id is not None:
        writer = writer.option("txnAppId", app_id).option("txnVersion", batch_id)
    writer.save(table.path)
    info = delta_log.tagged_commit_info(table.path, tag) or {}
    metrics = {name: int(value) for name, value in (info.get("operationMetrics") or {}).items()}
    written = (
        metrics["numOutputRows"] - metrics.get("numCopiedRows", 0)
        if "numOutputRows" in metrics
        else None
    )
    return {
        "version": info.get("version"),
        "rows_written": written,
        "rows_deleted": metrics.get("numDeletedRows"),
    }


def _qualify(predicate: str, alias: str, columns: Sequence[str]) -> str:
    """Prefix the ``columns`` a predicate names with a table alias (for MERGE conditions)."""
    names = "|".join(re.escape(name) for name in sorted(columns, key=len, reverse=True))
    return re.sub(rf"(?<![\w.])({names})\b", rf"{alias}.\1", predicate)


def delta_conflict_exceptions() -> tuple[type[Exception], ...]:
    """Every exception by which Delta says "another commit won, try again".

    In delta-spark 4 they are siblings, not subclasses of DeltaConcurrentModificationException
    (``delta.exceptions.captured.ConcurrentAppendException`` derives from pyspark's
    CapturedException and ``delta.exceptions.base.ConcurrentAppendException`` only), so catching
    that one class alone misses the conflicts a backfill beside the hourly run actually raises.
    Over Spark Connect the same conflicts arrive as Connect errors: importing
    ``delta.connect.exceptions`` makes pyspark raise them as subclasses of these base classes.
    """
    import delta.connect.exceptions  # noqa: F401 - registers Delta's conflicts with pyspark's Connect errors
    from delta.exceptions import base

    return (
        base.DeltaConcurrentModificationException,
        base.ConcurrentWriteException,
        base.MetadataChangedException,
        base.ProtocolChangedException,
        base.ConcurrentAppendException,
        base.ConcurrentDeleteReadException,
        base.ConcurrentDeleteDeleteException,
        base.ConcurrentTransactionException,
    )


def with_conflict_retries(write: Callable[[], T], what: str, attempts: int = 6) -> T:
    """Run a Delta write, retrying when a concurrent writer (a backfill beside the hourly run) won.

    Delta's optimistic concurrency rejects a commit that read data another commit has since
    changed; every write here is idempotent, so trying again after a short random pause is safe.
    """

    def pause(state) -> float:  # longer after each conflict, randomized so writers fall apart
        return random.uniform(0.5, 2.0) * state.attempt_number

    def log_retry(state) -> None:
        log.warning(
            "Delta write conflict on %s (attempt %d/%d, %s); retrying in %.1f s",
            what,
            state.attempt_number,
            attempts,
            type(state.outcome.exception()).__name__,
            state.next_action.sleep,
        )

    retrying = Retrying(
        retry=retry_if_exception_type(delta_conflict_exceptions()),
        stop=stop_after_attempt(attempts),
        wait=pause,
        sleep=time.sleep,
        before_sleep=log_retry,
        reraise=True,
    )
    return retrying(write)
