"""One row per key: which copy of a re-sent event a MERGE_NEW table keeps, in a stream and in
every backfill alike."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from lakehouse.catalog import TableSpec


def accepted(classified: DataFrame, table: TableSpec) -> DataFrame:
    """The rows that passed every check, one per key, in the table's column order."""
    return one_row_per_key(
        classified.filter(F.col("reason").isNull()).select(*table.column_names),
        table.key,
        table.first_by,
    )


def one_row_per_key(rows: DataFrame, key: str, first_by: tuple[str, ...] = ()) -> DataFrame:
    """``rows`` with one row per ``key``: of several, the first by ``first_by`` and then by their
    other columns, so a stream and every backfill keep the same copy (a table's ``first_by``).

    Only the keys are shuffled, to find the repeated ones (an at-least-once producer's re-sends: a
    few per cent); they are broadcast, rows whose key is not among them pass as they are, and only
    the rows of repeated keys are ranked. Ranking every row would shuffle and sort whole rows,
    spilling at millions of events. ``rows`` is read three times: pass a cached frame.
    """
    repeated = F.broadcast(
        rows.groupBy(key).count().filter("count > 1").select(F.col(key).alias("_repeated"))
    )
    same_key = F.col(key).eqNullSafe(F.col("_repeated"))
    once = rows.join(repeated, same_key, "left_anti")
    order = [*first_by, *(c for c in rows.columns if c not in (key, *first_by))]
    first = F.row_number().over(Window.partitionBy(key).orderBy(*order))
    several = (
        rows.join(repeated, same_key, "left_semi")
        .withColumn("_rank", first)
        .filter("_rank = 1")
        .drop("_rank")
    )
    return once.unionByName(several)
