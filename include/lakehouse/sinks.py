"""Sinks: idempotent Delta writes used by every job's ``foreachBatch`` and by backfills.

Each write carries a Delta transaction id (``txnAppId``, ``txnVersion``): the app id names the
writing query and its checkpoint generation, the version is the micro-batch id. A batch replayed
after a crash (Spark re-runs the last uncommitted batch) is then skipped by Delta instead of being
written twice. A new checkpoint generation must use a new app id, or Delta would skip its writes
as already done (batch ids restart at 0).
"""

from __future__ import annotations

import logging
import random
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence, TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from lakehouse.catalog import Table
from lakehouse.config import TablePaths
from lakehouse.hours import HourRange

log = logging.getLogger(__name__)
T = TypeVar("T")

_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


def txn_app_id(table: TablePaths, generation: int, writer: str) -> str:
    """The Delta transaction app id of ``writer`` into ``table`` for a checkpoint generation."""
    return f"{writer}->{table.name}@gen{generation}"


def committed_txns(spark: SparkSession, table: TablePaths) -> dict[str, int]:
    """The Delta transaction versions ``table`` holds, per app id ({} when the table does not exist).

    Read from the table's snapshot (Delta's own ``SetTransaction`` state, checkpoints of the log
    included): the very record by which Delta skips a batch it already holds. A streaming Delta
    sink's app id is its query id; the foreachBatch writers' ids are :func:`txn_app_id`'s.
    """
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, table.path):
        return {}
    # Not in Delta's Python API: the snapshot through the JVM (a classic session, as spark-submit runs).
    delta_log = spark._jvm.org.apache.spark.sql.delta.DeltaLog  # noqa: SLF001
    snapshot = delta_log.forTableWithSnapshot(spark._jsparkSession, table.path)._2()  # noqa: SLF001
    found, txns = {}, snapshot.setTransactions().iterator()
    while txns.hasNext():
        txn = txns.next()
        found[txn.appId()] = txn.version()
    return found


def txn_tag(app_id: str, batch_id: int) -> str:
    """The ``userMetadata`` of a DML commit made under (``app_id``, ``batch_id``): finds it in the history."""
    return f"txn {app_id} {batch_id}"


def committed_merge_inserted(spark: SparkSession, table: TablePaths, app_id: str, batch_id: int) -> int | None:
    """The rows that the MERGE committed under (``app_id``, ``batch_id``) inserted, from the table's history.

    A replayed batch whose MERGE Delta skipped (it was committed before a crash) still needs its
    figures for the batch's metrics row. None when the commit is not in the retained history.
    """
    from delta.tables import DeltaTable

    history = DeltaTable.forPath(spark, table.path)
    for limit in (50, None):  # the commit is recent: the newest ones first, the whole history if not
        rows = (history.history(limit) if limit else history.history()).where(
            F.col("userMetadata") == txn_tag(app_id, batch_id)
        )
        found = rows.select("operationMetrics").collect()
        if found:
            return int(found[0].operationMetrics["numTargetRowsInserted"])
    return None


def ensure_table(spark: SparkSession, table: TablePaths, declared: Table) -> None:
    """Create the empty Delta table as the catalog declares it, unless it exists (readers need it from day one)."""
    from delta.tables import DeltaTable

    (
        DeltaTable.createIfNotExists(spark)
        .location(table.path)
        .addColumns(declared.spark_schema())
        .partitionedBy(*declared.partition_by)
        .execute()
    )


def append(df: DataFrame, table: TablePaths, app_id: str, batch_id: int, partition_by: Sequence[str] = ()) -> None:
    """Append ``df`` once per (app id, batch id); columns declared since the table was created are added."""
    (
        df.write.format("delta")
        .mode("append")
        .option("mergeSchema", "true")
        .option("txnAppId", app_id)
        .option("txnVersion", batch_id)
        .partitionBy(*partition_by)
        .save(table.path)
    )


@contextmanager
def _dml_transaction(spark: SparkSession, app_id: str, batch_id: int) -> Iterator[None]:
    """Make the next DML command (MERGE) idempotent: Delta reads the txn id from the session.

    The commit is tagged with the txn id too (``userMetadata``), so that a replay can find it.
    """
    spark.conf.set(_TXN_APP_ID, app_id)
    spark.conf.set(_TXN_VERSION, str(batch_id))
    spark.conf.set(_USER_METADATA, txn_tag(app_id, batch_id))
    try:
        yield
    finally:
        spark.conf.unset(_TXN_APP_ID)
        spark.conf.unset(_TXN_VERSION)
        spark.conf.unset(_USER_METADATA)


def merge_new_rows(
    spark: SparkSession, rows: DataFrame, table: TablePaths, key: str, hours: HourRange, app_id: str, batch_id: int
) -> int | None:
    """Insert the rows whose ``key`` the table does not hold yet (an insert-only MERGE).

    The match is restricted to ``hours`` so Delta reads only the partitions the batch touches:
    the cost follows the new data, not the size of the table. Insert-only MERGE only adds files,
    so downstream streams read the new rows as plain appends. New columns in ``rows`` are added
    to the table (schema evolution). Returns the number of rows inserted (None when Delta skipped
    the batch as already committed).
    """
    from delta.tables import DeltaTable

    target = DeltaTable.forPath(spark, table.path).alias("t")
    condition = f"t.{key} = s.{key} AND ({_qualify(hours.silver_predicate(), 't')})"
    with _dml_transaction(spark, app_id, batch_id):
        metrics = target.merge(rows.alias("s"), condition).whenNotMatchedInsertAll().withSchemaEvolution().execute()
    first = metrics.first() if metrics is not None else None
    return first["num_inserted_rows"] if first is not None and "num_inserted_rows" in first else None


def replace_hours(
    df: DataFrame, table: TablePaths, declared: Table, hours: HourRange, app_id: str = "", batch_id: int | None = None
) -> None:
    """Overwrite exactly ``hours`` of an hour-addressed table with ``df``; every other hour is untouched.

    Rerunning it with the same input leaves the same content (a backfill is idempotent by
    construction); ``batch_id`` adds Delta's replay protection for streaming micro-batches.
    """
    writer = (
        df.write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", declared.hours_predicate(hours))
        .partitionBy(*declared.partition_by)
    )
    if batch_id is not None:
        writer = writer.option("txnAppId", app_id).option("txnVersion", batch_id)
    writer.save(table.path)


def _qualify(predicate: str, alias: str) -> str:
    """Prefix the partition columns of a predicate with a table alias (for MERGE conditions)."""
    return predicate.replace("event_date", f"{alias}.event_date").replace("event_hour", f"{alias}.event_hour")


def delta_conflict_exceptions() -> tuple[type[Exception], ...]:
    """Every exception by which Delta says "another commit won, try again".

    In delta-spark 4 they are siblings, not subclasses of DeltaConcurrentModificationException
    (``delta.exceptions.captured.ConcurrentAppendException`` derives from pyspark's
    CapturedException and ``delta.exceptions.base.ConcurrentAppendException`` only), so catching
    that one class alone misses the conflicts a backfill beside the hourly run actually raises.
    """
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
    conflicts = delta_conflict_exceptions()
    for attempt in range(1, attempts + 1):
        try:
            return write()
        except conflicts as error:
            if attempt == attempts:
                raise
            pause = random.uniform(0.5, 2.0) * attempt
            log.warning(
                "Delta write conflict on %s (attempt %d/%d, %s); retrying in %.1f s",
                what, attempt, attempts, type(error).__name__, pause,
            )  # fmt: skip
            time.sleep(pause)
    raise AssertionError("unreachable")
