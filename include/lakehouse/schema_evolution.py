"""A table whose declaration changed columns: new nullable columns added in place, anything else refused;
one whose declaration changed its partitioning: rewritten in place when nothing reads it as a stream.

Adding a nullable column at the end of a table's schema is safe: the rows already written read it
as null, and every later write fills it. It also changes the table's code (its declaration and
transform), so every period written before is stale (:mod:`lakehouse.code_versions`): the user
chooses between nulls in the old periods and ``lakehouse repair --stale``, which recomputes them
with the column filled. Any other change (a column dropped, renamed, retyped, reordered, or a new
NOT NULL one) would leave rows that contradict the declaration; it is refused before anything is
written, with the full refresh that rebuilds the table in the new shape.

A new partitioning changes no row: a table no other table reads (gold) is rewritten in it, once,
by the first run of the new declaration (:func:`repartition`). A table another one streams from
is refused instead: its reader would see every row as changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lakehouse import catalog, delta_log
from lakehouse.catalog import TableSpec
from lakehouse.columns import Column, json_type
from lakehouse.errors import ConfigError


def added_columns(fields: list[dict], spec: TableSpec) -> tuple[Column, ...]:
    """The declared columns a table with schema ``fields`` (its log's) lacks, when adding them is
    safe; raises ConfigError saying what changed and the fix otherwise."""
    # By name and type: a table a DataFrame created may record a declared NOT NULL as nullable.
    declared = spec.columns
    existing = [(f["name"], f["type"]) for f in fields]
    wanted = [(c.name, json_type(c.type)) for c in declared]
    if wanted == existing:
        return ()
    kept, added = wanted[: len(existing)], declared[len(existing) :]
    if kept == existing and all(column.nullable for column in added):
        return tuple(added)
    changed = [f"{name} {_ddl(kind)}" for name, kind in existing if (name, kind) not in wanted]
    new = [
        f"{c.name} {c.type}{'' if c.nullable else ' NOT NULL'}"
        for c in declared
        if (c.name, json_type(c.type)) not in existing or not c.nullable and c in added
    ]
    raise ConfigError(
        f"{spec.name}: its declared columns changed in a way the table cannot take in place "
        f"(the table has {', '.join(changed) or 'its columns in another order'}; the declaration "
        f"{', '.join(new) or 'the same columns in another order'}). Only new nullable columns at the "
        f"end are added in place. Nothing was written. Rebuild the table in its new shape with a "
        f"full refresh of {spec.layer} (the DAG's full_refresh={spec.layer}, or spark-submit "
        f"jobs/full_refresh.py --layer {spec.layer}), or declare the change as an added column."
    )


def evolve(session: Callable[[], Any], path: str, spec: TableSpec) -> tuple[str, ...]:
    """Add the declared columns the table at ``path`` lacks (see :func:`added_columns`); their names.

    Reads the table's log only; ``session`` (a Spark session's factory) is called when there is a
    column to add.
    """
    fields = delta_log.schema_fields(path)
    added = added_columns(fields, spec) if fields is not None else ()
    if added:
        columns = ", ".join(f"{c.name} {c.type}" for c in added)
        session().sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({columns})")
    return tuple(c.name for c in added)


def repartition(session: Callable[[], Any], path: str, spec: TableSpec) -> tuple[str, ...] | None:
    """Rewrite the table at ``path`` in its declared partitioning when its log records another one;
    the partition columns it had (None: it has the declared ones, or there is no table yet).

    Reads the table's log only, unless there is a table to rewrite. One overwrite of the same rows:
    Delta's transaction ids stay in the table's state, so a replayed micro-batch is still skipped.
    """
    existing = delta_log.partition_columns(path)
    if existing is None or tuple(existing) == spec.partition_by:
        return None
    readers = [reader.name for reader in catalog.downstream(spec.name)]
    if readers:
        raise ConfigError(
            f"{spec.name}: declared partitioned by {list(spec.partition_by)}, the table is partitioned "
            f"by {existing}, and {', '.join(readers)} read(s) it: rewriting it in place would show "
            f"them every row as changed. Nothing was written. Rebuild it in its new layout with a full "
            f"refresh of {spec.layer} (the DAG's full_refresh={spec.layer}, or spark-submit "
            f"jobs/full_refresh.py --layer {spec.layer}), or declare its old partitioning."
        )
    spark = session()
    (
        spark.read.format("delta")
        .load(path)
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .option("userMetadata", f"repartitioned by {', '.join(spec.partition_by)}")
        .partitionBy(*spec.partition_by)
        .save(path)
    )
    return tuple(existing)


def _ddl(json_kind) -> str:
    return json_kind.upper() if isinstance(json_kind, str) else str(json_kind)
