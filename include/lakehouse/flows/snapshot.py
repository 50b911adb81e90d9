"""OVERWRITE tables: a small dimension read from a landing file and replaced whole by each run.

The replace is one Delta commit, so readers see the old or the new dimension, never a mix (a
stream joined with it picks the new one up at its next micro-batch). A file that would make the
table ambiguous (the table's ``reject`` rows) is refused before anything is written.
"""

from __future__ import annotations

from pathlib import Path

from lakehouse.catalog import Table
from lakehouse.config import ConfigError
from lakehouse.runtime import JobArgs, log
from lakehouse.spark import build_spark_session


def run(table: Table, args: JobArgs) -> dict:
    source = args.lakehouse.landing(table.source)
    if not Path(source).is_file():
        raise ConfigError(f"{table.name}: source file {source} not found: run the generator or copy the file there.")
    spark = build_spark_session(table.task)
    target = args.lakehouse.table(table.name)

    raw = spark.read.csv(source, header=True, schema=table.spark_schema(), mode="FAILFAST")
    rows = table.transform(raw).cache()
    if table.reject is not None:
        bad = table.reject(rows).limit(5).collect()
        if bad:
            raise ConfigError(f"{source}: rows that make {table.name} ambiguous, e.g. {[tuple(r) for r in bad]}; fix the file.")
    rows.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(target.path)
    count = rows.count()
    log.info("%s: %d row(s) loaded from %s into %s", table.name, count, source, target.path)
    return {"table": table.name, "rows_written": count}
