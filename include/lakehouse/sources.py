"""Sources: the landing zone (files) and upstream Delta tables, as streams or as batches."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse.config import ConfigError, TablePaths
from lakehouse.hours import HourRange


def landing_lines_stream(spark: SparkSession, landing_dir: str, max_files_per_trigger: int) -> DataFrame:
    """New landing files as text lines (``value``, ``source_file``, ``ingested_at``).

    The file source remembers every file it has read in its checkpoint, so a rerun reads only
    files that appeared since. Hidden (``.``-prefixed) temporary files are ignored until renamed.
    """
    if not Path(landing_dir).is_dir():
        raise ConfigError(
            f"Landing directory {landing_dir} does not exist: generate data "
            "(python -m lakehouse.generator ...) or fix LAKEHOUSE_ROOT."
        )
    lines = (
        spark.readStream.format("text")
        .option("maxFilesPerTrigger", max_files_per_trigger)
        .load(f"{landing_dir}/*/*/*.jsonl")
    )
    return lines.select(
        "value",
        F.col("_metadata.file_path").alias("source_file"),
        F.current_timestamp().alias("ingested_at"),
    )


def require_table(spark: SparkSession, table: TablePaths) -> None:
    """Fail fast, naming the job to run, when an upstream Delta table does not exist yet."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, table.path):
        raise ConfigError(
            f"Table {table.name} does not exist at {table.path}: run its job first "
            f"(jobs/{table.name.replace('.', '_')}.py, or the DAG task of that name)."
        )


def delta_stream(spark: SparkSession, table: TablePaths) -> DataFrame:
    """New rows appended to a Delta table since the last run.

    Commits that rewrite data (a backfill's ``replaceWhere``) are skipped: the backfill itself
    recomputes everything downstream of the hours it rewrote.
    """
    require_table(spark, table)
    return spark.readStream.format("delta").option("skipChangeCommits", "true").load(table.path)


def delta_hours(spark: SparkSession, table: TablePaths, hours: HourRange) -> DataFrame:
    """A partitioned table's rows for ``hours``, read in batch and pruned to those partitions."""
    require_table(spark, table)
    return spark.read.format("delta").load(table.path).filter(hours.silver_predicate())
