"""OVERWRITE tables: a small dimension read from a landing file and replaced whole by each run.

The replace is one Delta commit, so readers see the old or the new dimension, never a mix (a
stream joined with it picks the new one up at its next micro-batch). A file that would make the
table ambiguous (the table's ``reject`` rows) is refused before anything is written.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from lakehouse.config import Table
from lakehouse.errors import ConfigError
from lakehouse.files import lake_path
from lakehouse.freshness import file_fingerprint, snapshot_unchanged
from lakehouse.runtime import JobArgs, log
from lakehouse.spark import build_spark_session


def check_csv_shape(
    source: str | Path,
    columns: Sequence[str],
    key: str | None = None,
    required: Sequence[str] = (),
) -> int:
    """The file's data rows; a ConfigError saying what to fix unless it is the declared columns' CSV.

    Spark's CSV reader takes the first line for a header without reading it (a swapped header would
    swap the columns) and pads or cuts a row to the schema, so the file's shape is checked here first.
    With a ``key``, two rows of one key that differ are refused with both lines (the same row twice
    is one row); a ``required`` column blank is refused with its line. Values are compared trimmed.
    """
    expected = ",".join(columns)
    data_rows = 0
    first_of: dict[str, tuple[int, list[str]]] = {}  # key -> (its first line, its row)
    try:
        # utf-8-sig: a byte-order mark is not a name
        with lake_path(source).open(newline="", encoding="utf-8-sig") as file:
            rows = csv.reader(file)
            header = next(rows, None)
            if header is None:
                raise ConfigError(
                    f"{source} is empty: it needs the header {expected!r} and a row per key."
                )
            if [name.strip() for name in header] != list(columns):
                raise ConfigError(
                    f"{source}: the header is {','.join(header)!r}, not {expected!r}; fix the file."
                )
            for row in rows:
                if row and len(row) != len(columns):
                    raise ConfigError(
                        f"{source} line {rows.line_num}: {len(row)} field(s) {row!r}, expected {len(columns)} "
                        f"({expected}); fix the file."
                    )
                if not row:
                    continue
                data_rows += 1
                values = [value.strip() for value in row]
                for name, value in zip(columns, values, strict=True):
                    if name in required and not value:
                        raise ConfigError(
                            f"{source} line {rows.line_num}: {name} is blank in {row!r}; fix the file."
                        )
                if key is not None:
                    value = values[list(columns).index(key)]
                    line, seen = first_of.setdefault(value, (rows.line_num, values))
                    if seen != values:
                        raise ConfigError(
                            f"{source} lines {line} and {rows.line_num}: {key} {value!r} has two "
                            f"different rows ({','.join(seen)} and {','.join(values)}); keep one and "
                            "fix the file."
                        )
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{source} is not UTF-8 text (byte {error.start}); fix the file."
        ) from None
    if not data_rows:
        raise ConfigError(
            f"{source} has a header and no rows: every event would be quarantined; fix the file."
        )
    return data_rows


def run(target: Table, args: JobArgs) -> dict:
    table = target.spec
    source = args.lakehouse.landing(table.source)
    if not lake_path(source).is_file():
        raise ConfigError(
            f"{table.name}: source file {source} not found: run the generator or copy the file there."
        )
    required = [column.name for column in table.columns if not column.nullable]
    check_csv_shape(source, table.column_names, table.key, required)
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
            raise ConfigError(
                f"{source}: rows that make {table.name} ambiguous, e.g. {[tuple(r) for r in bad]}; fix the file."
            )
    (
        rows.write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .option("userMetadata", f"source sha256 {fingerprint}")
        .save(target.path)
    )
    count = spark.read.format("delta").load(target.path).count()
    log.info("%s: %d row(s) loaded from %s into %s", table.name, count, source, target.path)
    return {"table": table.name, "rows_written": count}
