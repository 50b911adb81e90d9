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
from lakehouse.catalog import Table
from lakehouse.config import TablePaths
from lakehouse.hours import HourRange

log = logging.getLogger(__name__)
T = TypeVar("T")

_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"


def txn_app_id(table: TablePaths, generation: int, writer: str) -> str:
    """The Delta transaction app id of ``writer`` into ``table`` for a checkpoint generation."""
    return f"{writer}->{table.name}@gen{generation}"


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
    """Append ``df`` once per (app id, batch id)."""
    (
        df.write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", batch_id)
        .partitionBy(*partition_by)
        .save(table.path)
    )


@contextmanager
def _dml_transaction(spark: SparkSession, app_id: str, batch_id: int) -> Iterator[None]:
    """Make the next DML command (MERGE) idempotent: Delta reads the txn id from the session."""
    spark.conf.set(_TXN_APP_ID, app_id)
    spark.conf.set(_TXN_VERSION, str(batch_id))
    try:
        yield
    finally:
        spark.conf.unset(_TXN_APP_ID)
        spark.conf.unset(_TXN_VERSION)


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
