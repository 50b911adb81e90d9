"""OVERWRITE tables: a small dimension read from a landing file and replaced whole by each run.

The replace is one Delta commit, so readers see the old or the new dimension, never a mix (a
stream joined with it picks the new one up at its next micro-batch). A file that would make the
table ambiguous (the table's ``reject`` rows) is refused before anything is written.
"""

from __future__ import annotations

from pathlib import Path

from lakehouse.catalog import Table
from lakehouse.config import ConfigError
from lakehouse.freshness import file_fingerprint, snapshot_unchanged
from lakehouse.runtime import JobArgs, log
from lakehouse.spark import build_spark_session


def run(table: Table, args: JobArgs) -> dict:
    source = args.lakehouse.landing(table.source)
    if not Path(source).is_file():
        raise ConfigError(f"{table.name}: source file {source} not found: run the generator or copy the file there.")
    target = args.lakehouse.table(table.name)
    fingerprint = file_fingerprint(source)
    why = snapshot_unchanged(target.path, fingerprint)
    if why:
        log.info("%s: nothing new (%s); not reloaded", table.name, why)
        return {"table": table.name, "rows_written": 0, "not_started": why}
    spark = build_spark_session(table.task)

    raw = spark.read.csv(source, header=True, schema=table.spark_schema(), mode="FAILFAST")
    # Not cached: on the shared engine a cached plan outlives the job, and a changed file would be
    # served from it. The file is small; reading it twice costs less than a stale dimension.
    rows = table.transform(raw)
    if table.reject is not None:
        bad = table.reject(rows).limit(5).collect()
        if bad:
            raise ConfigError(f"{source}: rows that make {table.name} ambiguous, e.g. {[tuple(r) for r in bad]}; fix the file.")
    (
        rows.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
        .option("userMetadata", f"source sha256 {fingerprint}")
        .save(target.path)
    )  # fmt: skip
    count = spark.read.format("delta").load(target.path).count()
    log.info("%s: %d row(s) loaded from %s into %s", table.name, count, source, target.path)
    return {"table": table.name, "rows_written": count}
