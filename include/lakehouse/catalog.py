"""The table catalog: every table of the lakehouse, declared once, beside the function that computes it.

A table is declared by decorating its transform in ``lakehouse/tables/<task>.py`` (the style of
Spark Declarative Pipelines: the function returns a DataFrame and never writes)::

    @table("gold.ad_type_hourly", upstream=["silver.ad_events"], schema=SCHEMA,
           partition_by=["event_date"], write=Write.REPLACE_HOURS, batch=True)
    def ad_type_hourly(silver: DataFrame) -> DataFrame: ...

Everything else derives from these declarations: the DAG's tasks, their order and Assets, the
job runner, full refresh, the consistency check, the fault harness, the warm-up, the benchmark
and the tests. The module name is the table's task: the Airflow task id, the Spark app name and
the argument of ``jobs/run.py``. A table another table's query writes beside it (silver's
quarantine) is declared with :func:`side_table`.

This module and the table modules import no Spark (the DAG reads the catalog at parse time);
mistakes that would otherwise fail a run late fail the import here, with a message.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import cache

from lakehouse.errors import ConfigError

# Layers in the order data flows through them; ops holds the pipeline's own records.
LAYERS = ("dims", "bronze", "silver", "gold", "ops")
TABLES_PACKAGE = "lakehouse.tables"


class CatalogError(ConfigError):
    """A table declaration is inconsistent; the message names the table and what to fix."""


class Write(str, Enum):  # noqa: UP042 (str() of a member stays its name, as logs print it)
    """How a table's query writes it (each kind has its flow in ``lakehouse.flows``)."""

    OVERWRITE = "overwrite"  # the whole table replaced by each run (a small dimension from a file)
    APPEND = "append"  # new rows appended once per micro-batch (bronze, side outputs)
    # rows with a new key inserted, in the event hours a batch touches
    MERGE_NEW = "insert-only merge"
    # the event hours a batch touches recomputed from upstream and replaced
    REPLACE_HOURS = "replace hours"
    SESSIONS = "sessions"  # a stateful query emits each session once, when the watermark closes it


# The columns each hour-addressed write kind needs: they select and replace whole event hours.
HOUR_LAYOUTS = {
    Write.MERGE_NEW: {"partition_by": ("event_date", "event_hour"), "columns": ("event_time",)},
    Write.REPLACE_HOURS: {"partition_by": ("event_date",), "columns": ("hour_start",)},
}

# DDL type names -> Spark's JSON type names (the types the tables use; extend as needed).
_TYPES = {
    "STRING": "string",
    "BIGINT": "long",
    "INT": "integer",
    "DOUBLE": "double",
    "BOOLEAN": "boolean",
    "DATE": "date",
    "TIMESTAMP": "timestamp",
    "BINARY": "binary",
}


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # DDL, e.g. BIGINT or MAP<STRING, BIGINT>
    nullable: bool = True


def parse_columns(ddl: str) -> tuple[Column, ...]:
    """The columns of a DDL schema (``name TYPE [NOT NULL], ...``), parsed without Spark."""
    parts, depth, current = [], 0, ""
    for char in ddl:
        depth += char in "<(" and 1 or char in ">)" and -1 or 0
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    columns = []
    for part in filter(str.strip, parts):
        match = re.fullmatch(
            r"\s*(\w+)\s+(.+?)(\s+NOT\s+NULL)?\s*", part, flags=re.IGNORECASE | re.DOTALL
        )
        if not match:
            raise CatalogError(
                f"Cannot read column {part.strip()!r} of schema {ddl!r}: expected 'name TYPE [NOT NULL]'"
            )
        columns.append(Column(match[1], re.sub(r"\s+", " ", match[2].upper()), not match[3]))
    return tuple(columns)


def column_names(ddl: str) -> tuple[str, ...]:
    """The column names of a DDL schema, in order."""
    return tuple(column.name for column in parse_columns(ddl))


def _json_type(ddl_type: str):
    map_type = re.fullmatch(r"MAP<\s*(.+?)\s*,\s*(.+?)\s*>", ddl_type)
    if map_type:
        key, value = map_type.groups()
        return {
            "type": "map",
            "keyType": _json_type(key),
            "valueType": _json_type(value),
            "valueContainsNull": True,
        }
    if ddl_type not in _TYPES:
        raise CatalogError(
            f"Unsupported column type {ddl_type!r}; the catalog knows {', '.join(_TYPES)} and MAP<,>"
        )
    return _TYPES[ddl_type]


# The comparisons a rule's measure can be held to.
COMPARISONS = ("<=", ">=", "!=", "=", "<", ">")


@dataclass(frozen=True)
class Expectation:
    """A data-quality rule: ``measure`` (a SQL aggregate) over a table's rows must satisfy ``holds``.

    Measured per event hour (``per="hour"``) over the hours a run wrote, or per micro-batch
    (``per="batch"``, tables with a ``batch_id`` column) over the run's batches. ``on_failure``:
    ``warn`` records and logs; ``fail`` also fails the task, so nothing downstream is computed from
    the hour (see :mod:`lakehouse.expectations`).
    """

    rule: str  # what should hold, in words: the name in results, logs and messages
    measure: str  # e.g. count_if(campaign_id IS NULL)
    holds: str  # e.g. "= 0", "<= 0.05"
    on_failure: str = "fail"
    per: str = "hour"

    @property
    def bound(self) -> tuple[str, float]:
        """The comparison and the number of ``holds``."""
        text = self.holds.strip()
        for op in COMPARISONS:
            if text.startswith(op):
                try:
                    return op, float(text[len(op) :])
                except ValueError:
                    break
        raise CatalogError(
            f"Rule {self.rule!r}: holds={self.holds!r} is not '<op> <number>' with op one of {COMPARISONS}"
        )

    def passes(self, observed: float | None) -> bool:
        """Whether a measured value satisfies the rule (nothing measured, e.g. no lines: it holds)."""
        if observed is None:
            return True
        op, number = self.bound
        return {
            "<=": observed <= number,
            ">=": observed >= number,
            "!=": observed != number,
            "=": observed == number,
            "<": observed < number,
            ">": observed > number,
        }[op]


class ExpectationFailed(RuntimeError):
    """A ``fail`` rule does not hold: the task stops, so nothing downstream is computed from the hour."""


def expect(
    rule: str, measure: str, holds: str, *, on_failure: str = "fail", per: str = "hour"
) -> Expectation:
    """A rule for a declaration's ``expect=[...]``, e.g. ``expect("every event has a campaign", "count_if(campaign_id IS NULL)", "= 0")``."""
    return Expectation(rule, measure, holds, on_failure, per)


@dataclass(frozen=True)
class TableSpec:
    """A table's declaration: what it is computed from and how it is written.

    Where it is stored belongs to a lakehouse: ``spec.at(lakehouse)`` is the live table
    (:class:`lakehouse.config.Table`), its declaration and its paths in one value.
    """

    name: str  # layer.table, e.g. silver.ad_events
    schema: str  # DDL
    write: Write
    task: str  # the job / DAG task that writes it: the module of its transform
    upstream: tuple[str, ...] = ()  # tables the transform reads, in argument order
    # what feeds a table with no upstream table (a landing folder, a topic)
    source: str | None = None
    partition_by: tuple[str, ...] = ()
    batch: bool = False  # has a batch form: a backfill recomputes its event hours [start, end)
    key: str | None = None  # MERGE_NEW: the column that identifies a row
    transform: Callable | None = field(default=None, compare=False)
    written_by: str | None = None  # a side table: the table whose query writes it
    role: str | None = None  # a side table's role in that query (e.g. quarantine)
    # columns that may differ between two correct runs (where a row came from)
    lineage: tuple[str, ...] = ()
    reject: Callable | None = field(
        default=None, compare=False
    )  # OVERWRITE: rows that make the input unusable
    # the column that places a row in event time (default: hour_start or event_time)
    event_time: str | None = None
    # an ops record written by an operation (e.g. maintenance), not by a query
    operation: str | None = None
    # data-quality rules checked after each run that writes it
    expectations: tuple[Expectation, ...] = ()

    def at(self, lakehouse):
        """This table in ``lakehouse`` (a :class:`lakehouse.config.Lakehouse`): the live table."""
        return lakehouse.table(self.name)

    @property
    def layer(self) -> str:
        return self.name.split(".")[0]

    @property
    def columns(self) -> tuple[Column, ...]:
        return parse_columns(self.schema)

    @property
    def column_names(self) -> tuple[str, ...]:
        return column_names(self.schema)

    @property
    def streamed(self) -> bool:
        """Written by a streaming query with a checkpoint (everything but a file snapshot)."""
        if self.operation or self.write is Write.OVERWRITE:
            return False
        return not (self.written_by and get(self.written_by).write is Write.OVERWRITE)

    @property
    def asset_uri(self) -> str:
        """The table's Airflow Asset."""
        return f"delta://{self.name}"

    def spark_schema(self):
        """The schema as a Spark ``StructType`` (imports pyspark: runtime only)."""
        from pyspark.sql.types import StructType

        fields = [
            {"name": c.name, "type": _json_type(c.type), "nullable": c.nullable, "metadata": {}}
            for c in self.columns
        ]
        return StructType.fromJson({"type": "struct", "fields": fields})

    def hours_predicate(self, hours) -> str:
        """The Delta predicate that selects ``hours`` (a :class:`lakehouse.hours.HourRange`) of this table."""
        if self.write is Write.SESSIONS:
            return hours.sessions_predicate()
        if "event_hour" in self.partition_by:
            return hours.silver_predicate()
        return hours.gold_predicate()

    @property
    def hour_sql(self) -> str:
        """SQL for the event hour a row belongs to (reports per hour)."""
        if self.event_time:
            return f"date_trunc('HOUR', {self.event_time})"
        return (
            "hour_start" if "hour_start" in self.column_names else "date_trunc('HOUR', event_time)"
        )


_DECLARED: dict[str, TableSpec] = {}


def _declare(spec: TableSpec) -> TableSpec:
    if spec.name in _DECLARED:
        raise CatalogError(
            f"Table {spec.name} is declared twice (in {_DECLARED[spec.name].task} and {spec.task})"
        )
    _DECLARED[spec.name] = spec
    return spec


def table(
    name: str,
    *,
    schema: str,
    write: Write,
    upstream: list[str] | tuple[str, ...] = (),
    source: str | None = None,
    partition_by: list[str] | tuple[str, ...] = (),
    batch: bool = False,
    key: str | None = None,
    lineage: list[str] | tuple[str, ...] = (),
    reject: Callable | None = None,
    event_time: str | None = None,
    expect: list[Expectation] | tuple[Expectation, ...] = (),
) -> Callable:
    """Declare the table that the decorated function computes from its upstream tables (or source)."""

    def register(transform: Callable) -> Callable:
        _declare(
            TableSpec(
                name=name,
                schema=schema,
                write=write,
                task=transform.__module__.rsplit(".", 1)[-1],
                upstream=tuple(upstream),
                source=source,
                partition_by=tuple(partition_by),
                batch=batch,
                key=key,
                transform=transform,
                lineage=tuple(lineage),
                reject=reject,
                event_time=event_time,
                expectations=tuple(expect),
            )
        )
        return transform

    return register


def side_table(
    name: str,
    *,
    written_by: str,
    role: str,
    schema: str,
    partition_by: list[str] | tuple[str, ...] = (),
    write: Write = Write.APPEND,
    expect: list[Expectation] | tuple[Expectation, ...] = (),
) -> TableSpec:
    """Declare a table that ``written_by``'s query writes beside its own (e.g. its quarantine).

    ``write``: APPEND (rows added once per micro-batch) or OVERWRITE (replaced by every run).
    """
    return _declare(
        TableSpec(
            name=name,
            schema=schema,
            write=write,
            task="",
            partition_by=tuple(partition_by),
            written_by=written_by,
            role=role,
            expectations=tuple(expect),
        )
    )


def ops_table(
    name: str, *, operation: str, schema: str, partition_by: list[str] | tuple[str, ...] = ()
) -> TableSpec:
    """Declare an ops table that ``operation`` (a job that is not a table's query) appends its records to."""
    return _declare(
        TableSpec(
            name=name,
            schema=schema,
            write=Write.APPEND,
            task=operation,
            partition_by=tuple(partition_by),
            operation=operation,
        )
    )


# --------------------------------------------------------------------------------------------
# Reading the catalog


@cache
def _load() -> dict[str, TableSpec]:
    """Import every table module once, check the declarations, and order tables upstream-first."""
    package = importlib.import_module(TABLES_PACKAGE)
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{TABLES_PACKAGE}.{module.name}")
    _check(_DECLARED)
    # A side table belongs to the task of the table whose query writes it.
    for name, spec in list(_DECLARED.items()):
        if spec.written_by:
            _DECLARED[name] = replace(spec, task=_DECLARED[spec.written_by].task)
    return {name: _DECLARED[name] for name in _topological(_DECLARED)}


def tables() -> list[TableSpec]:
    """Every table, upstream tables first."""
    return list(_load().values())


def get(name: str) -> TableSpec:
    """The table ``name`` (``layer.table``); an unknown name fails with the known ones."""
    catalog = _load()
    if name not in catalog:
        raise ConfigError(f"Unknown table {name!r}; known tables: {', '.join(catalog)}")
    return catalog[name]


def tasks() -> list[TableSpec]:
    """The tables that have a query of their own (one job, one DAG task each), upstream first."""
    return [spec for spec in tables() if spec.written_by is None and spec.operation is None]


def task(name: str) -> TableSpec:
    """The table written by task ``name`` (``silver_ad_events``), or by table name."""
    for spec in tasks():
        if name in (spec.task, spec.name):
            return spec
    raise ConfigError(f"Unknown task {name!r}; known tasks: {', '.join(t.task for t in tasks())}")


def written_by_task(spec: TableSpec) -> list[TableSpec]:
    """The tables a task's query writes: its own, then its side tables."""
    return [spec, *(t for t in tables() if t.written_by == spec.name)]


def side(spec: TableSpec, role: str) -> TableSpec:
    """The side table of ``spec`` with ``role`` (e.g. its quarantine)."""
    for candidate in tables():
        if candidate.written_by == spec.name and candidate.role == role:
            return candidate
    raise CatalogError(f"{spec.name} declares no side table with role {role!r}")


def upstream_tasks(spec: TableSpec) -> list[TableSpec]:
    """The tasks whose tables ``spec`` reads."""
    return [task(get(name).written_by or name) for name in spec.upstream]


def downstream(name: str) -> list[TableSpec]:
    """Every table computed, directly or not, from ``name`` (its side tables included), upstream first."""
    found = {name}
    for spec in tables():
        if spec.written_by in found or found & set(spec.upstream):
            found.add(spec.name)
    return [spec for spec in tables() if spec.name in found and spec.name != name]


def batch_tables() -> list[TableSpec]:
    """The tables a backfill recomputes, upstream first."""
    return [spec for spec in tables() if spec.batch]


def data_tables_of(layer: str) -> list[TableSpec]:
    """A layer's streamed data tables (not the ops records)."""
    return [spec for spec in tables() if spec.layer == layer and spec.streamed]


# --------------------------------------------------------------------------------------------
# Checks at import time


def _check(declared: dict[str, TableSpec]) -> None:
    for spec in declared.values():
        where = f"{spec.name} (lakehouse/tables/{spec.task or declared.get(spec.written_by, spec).task}.py)"
        if spec.layer not in LAYERS or not re.fullmatch(r"[a-z]+\.[a-z_]+", spec.name):
            raise CatalogError(
                f"{where}: a table name is <layer>.<table> with layer one of {', '.join(LAYERS)}"
            )
        names = spec.column_names
        for column in spec.columns:
            _json_type(column.type)
        declared_columns = (
            *spec.partition_by,
            *spec.lineage,
            *(c for c in (spec.key, spec.event_time) if c),
        )
        missing = [c for c in declared_columns if c not in names]
        if missing:
            raise CatalogError(
                f"{where}: partition, key or lineage column(s) {missing} are not in its schema"
            )
        for name in spec.upstream:
            if name not in declared:
                raise CatalogError(
                    f"{where}: upstream table {name!r} is not declared; known: {', '.join(declared)}"
                )
        if spec.written_by is not None:
            writer = declared.get(spec.written_by)
            if writer is None or writer.written_by is not None:
                raise CatalogError(
                    f"{where}: written_by {spec.written_by!r} is not a table with a query of its own"
                )
        elif not spec.upstream and not spec.source and not spec.operation:
            raise CatalogError(f"{where}: a table needs upstream tables or a source")
        layout = HOUR_LAYOUTS.get(spec.write)
        if layout:
            needed = [c for c in (*layout["partition_by"], *layout["columns"]) if c not in names]
            if needed or spec.partition_by != layout["partition_by"]:
                raise CatalogError(
                    f"{where}: a {spec.write.value} table must be partitioned by {list(layout['partition_by'])} "
                    f"and have the column(s) {list(layout['columns'])} that select whole event hours "
                    f"(missing: {needed or 'the partitioning'})"
                )
        if spec.write is Write.MERGE_NEW and not spec.key:
            raise CatalogError(f"{where}: an {spec.write.value} table needs key=<column>")
        if spec.write is Write.SESSIONS and not (spec.key and spec.event_time in names):
            raise CatalogError(
                f"{where}: a {spec.write.value} table needs key=<session id column> and event_time=<its start>"
            )
        if spec.batch and not (layout or spec.write is Write.SESSIONS):
            kinds = ", ".join(w.value for w in (*HOUR_LAYOUTS, Write.SESSIONS))
            raise CatalogError(
                f"{where}: only hour-addressed tables and sessions ({kinds}) have a batch form"
            )
        _check_expectations(spec, where, layout)
    tasks_seen: dict[str, str] = {}
    for spec in declared.values():
        if spec.written_by is None and spec.operation is None:
            if spec.task in tasks_seen:
                raise CatalogError(
                    f"Module {spec.task} declares two tables with queries ({tasks_seen[spec.task]}, {spec.name})"
                )
            tasks_seen[spec.task] = spec.name


def _check_expectations(spec: TableSpec, where: str, layout: dict | None) -> None:
    rules = [e.rule for e in spec.expectations]
    for rule in spec.expectations:
        rule.bound  # noqa: B018 - raises on a holds= that is not '<op> <number>'
        if rule.on_failure not in ("warn", "fail"):
            raise CatalogError(
                f"{where}: rule {rule.rule!r}: on_failure is 'warn' or 'fail', not {rule.on_failure!r}"
            )
        if rule.per not in ("hour", "batch"):
            raise CatalogError(
                f"{where}: rule {rule.rule!r}: per is 'hour' or 'batch', not {rule.per!r}"
            )
        if rule.per == "hour" and not layout:
            raise CatalogError(
                f"{where}: rule {rule.rule!r} is per hour, but only hour-addressed tables are written by the hour"
            )
        if rule.per == "batch" and (
            "batch_id" not in spec.column_names or rule.on_failure != "warn"
        ):
            # A batch is checked once, when it is written; a failure a retry cannot see again cannot gate.
            raise CatalogError(
                f"{where}: rule {rule.rule!r} is per batch: its table needs a batch_id column and it can only warn"
            )
        if rules.count(rule.rule) > 1:
            raise CatalogError(f"{where}: two rules are named {rule.rule!r}")


def _topological(declared: dict[str, TableSpec]) -> list[str]:
    """Names ordered so every table comes after its upstream tables and its writer; fails on a cycle."""
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(name: str, path: tuple[str, ...]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            raise CatalogError(
                f"Tables depend on each other in a cycle: {' -> '.join((*path, name))}"
            )
        state[name] = "visiting"
        spec = declared[name]
        for before in (*spec.upstream, *([spec.written_by] if spec.written_by else [])):
            visit(before, (*path, name))
        state[name] = "done"
        order.append(name)

    for name in sorted(
        declared,
        key=lambda n: (LAYERS.index(n.split(".")[0]) if n.split(".")[0] in LAYERS else 99, n),
    ):
        visit(name, ())
    return order


def describe() -> str:
    """The catalog as a table for people: one line per table."""
    lines = [f"{'table':<30} {'task':<24} {'write':<18} {'batch':<5} upstream"]
    for spec in tables():
        writer = spec.written_by or spec.operation
        upstream = ", ".join(spec.upstream) or (f"written by {writer}" if writer else spec.source)
        lines.append(
            f"{spec.name:<30} {spec.task:<24} {spec.write.value:<18} {'yes' if spec.batch else '':<5} {upstream}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    from lakehouse import (
        catalog,  # the table modules register in the imported module, not in __main__
    )

    print(catalog.describe())


# The declaration's former name, kept while modules move to ``TableSpec``.
Table = TableSpec
