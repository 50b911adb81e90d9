"""The table catalog: every table of the lakehouse, declared once, beside the function that computes it.

A table is declared by decorating its transform in ``lakehouse/tables/<task>.py`` (the style of
Spark Declarative Pipelines: the function returns a DataFrame and never writes)::

    @table("gold.campaign_daily", upstream=["silver.ad_events"], schema=SCHEMA,
           partition_by=["event_date"], write=Write.REPLACE_PERIODS, grain="day", batch=True)
    def campaign_daily(silver: DataFrame) -> DataFrame: ...

A table with event time has a grain (:class:`lakehouse.periods.Grain`, default hour): the period
its rows are written and replaced by; its write kind (``spec.flow``, :mod:`lakehouse.write_kinds`)
says what its writes mean.

Everything else derives from these declarations: the DAG's tasks, their order and Assets, the
job runner, full refresh, the consistency check, the fault harness, the warm-up, the benchmark
and the tests. The module name is the table's task: the Airflow task id, the Spark app name and
the argument of ``jobs/run.py``. Tables replaced by period from the same upstream table may share
a task (``task="gold_aggregates"``): one query over the upstream's change recomputes each of them,
each in its own module, with its own transform, grain, rules and code version (a task's first
table, upstream first, is its lead: :func:`tasks`). A table another table's query writes beside
it (silver's quarantine) is declared with :func:`side_table`.

This module and the table modules import no Spark (the DAG reads the catalog at parse time);
mistakes that would otherwise fail a run late fail the import here, with a message.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import pkgutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from lakehouse.catalog_checks import check_declarations, upstream_first
from lakehouse.columns import Column, column_names, json_type, parse_columns
from lakehouse.errors import CatalogError, ConfigError
from lakehouse.periods import Grain, Periods
from lakehouse.rules import (
    Expectation,
    ExpectationFailed,
    expect,
    expect_no_nulls,
    expect_not_negative,
)
from lakehouse.write_kinds import LAYERS, Flow, Write, flow_of

# What a table module declares with (table, side_table, ops_table, Write, expect...) and what the
# rest of the project asks the catalog; the schema and rule types live in their own modules.
__all__ = [
    "LAYERS",
    "CatalogError",
    "Column",
    "Expectation",
    "Retention",
    "ExpectationFailed",
    "Grain",
    "TableSpec",
    "Write",
    "batch_tables",
    "code_version",
    "column_names",
    "data_tables_of",
    "describe",
    "downstream",
    "expect",
    "expect_no_nulls",
    "expect_not_negative",
    "get",
    "ops_table",
    "parse_columns",
    "side",
    "side_table",
    "side_tables",
    "table",
    "tables",
    "task",
    "task_members",
    "tasks",
    "upstream_tasks",
    "written_by_task",
]

TABLES_PACKAGE = "lakehouse.tables"


@dataclass(frozen=True)
class Retention:
    """How long maintenance keeps an ops table's rows (and its log), by one timestamp column.

    ``keep``: a SQL condition (window functions allowed) on rows past the retention that stay,
    e.g. the newest failed check of an hour, which still gates it.
    """

    column: str
    days: int
    keep: str | None = None


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
    batch: bool = False  # has a batch form: a backfill recomputes its event periods in [start, end)
    # the period its rows are written and replaced by (None: a table without event time)
    grain: Grain | None = None
    key: str | None = None  # MERGE_NEW: the column that identifies a row
    # MERGE_NEW: of the rows with one key, the one kept is the first in this order (then by its
    # other columns), in a stream and in every backfill alike
    first_by: tuple[str, ...] = ()
    # MERGE_NEW: rows with one key whose event hours are at most this many hours apart are one row
    # (a re-sent event may be re-stamped); further apart they are not compared, so that a batch
    # reads a window of the table, not all of it
    key_window_hours: int = 0
    transform: Callable | None = field(default=None, compare=False)
    written_by: str | None = None  # a side table: the table whose query writes it
    role: str | None = None  # a side table's role in that query (e.g. quarantine)
    # columns that may differ between two correct runs (where a row came from)
    lineage: tuple[str, ...] = ()
    # OVERWRITE: rows that make the input unusable
    reject: Callable | None = field(default=None, compare=False)
    # the column that places a row in event time (default: hour_start or event_time)
    event_time: str | None = None
    # an ops record written by an operation (e.g. maintenance), not by a query
    operation: str | None = None
    # data-quality rules checked after each run that writes it
    expectations: tuple[Expectation, ...] = ()
    # the code version a developer declares in place of its code's hash (lakehouse.code_versions):
    # kept across a refactor that does not change output, bumped to mark its periods stale
    version: str | None = None
    # rows older than this are trimmed by maintenance (ops tables; None: kept)
    retention: Retention | None = None

    def __post_init__(self) -> None:
        # A table addressed by period is of hours unless it says otherwise (a spec built by hand too).
        if self.grain is None and self.flow.periodic:
            object.__setattr__(self, "grain", Grain.HOUR)

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
            {"name": c.name, "type": json_type(c.type), "nullable": c.nullable, "metadata": {}}
            for c in self.columns
        ]
        return StructType.fromJson({"type": "struct", "fields": fields})

    @property
    def flow(self) -> Flow:
        """What this table's writes mean (:mod:`lakehouse.write_kinds`)."""
        return flow_of(self.write)

    def periods_predicate(self, periods: Periods) -> str:
        """The Delta predicate that selects ``periods`` (any grain: widened to this table's) of this table."""
        return self.flow.predicate(self, periods)

    @property
    def period_sql(self) -> str:
        """SQL for the start of the period a row belongs to, as a timestamp (reports per period)."""
        if self.grain is Grain.DAY:
            return "CAST(event_date AS TIMESTAMP)"
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
    first_by: list[str] | tuple[str, ...] = (),
    key_window_hours: int = 0,
    lineage: list[str] | tuple[str, ...] = (),
    reject: Callable | None = None,
    event_time: str | None = None,
    grain: Grain | str | None = None,
    expect: list[Expectation] | tuple[Expectation, ...] = (),
    version: str | None = None,
    task: str | None = None,
) -> Callable:
    """Declare the table that the decorated function computes from its upstream tables (or source).

    ``grain``: ``"hour"`` (the default of a table addressed by event period) or ``"day"``.
    ``version``: a code version declared in place of the hash of the table's code
    (:mod:`lakehouse.code_versions`). ``task``: the task that runs its query with the other
    tables of that task (default: its module's own task).
    """
    try:
        grain = Grain(grain) if grain is not None else None
    except ValueError:
        grains = ", ".join(g.value for g in Grain)
        raise CatalogError(f"{name}: grain {grain!r} is not one of {grains}") from None

    def register(transform: Callable) -> Callable:
        _declare(
            TableSpec(
                name=name,
                schema=schema,
                write=write,
                task=task or transform.__module__.rsplit(".", 1)[-1],
                upstream=tuple(upstream),
                source=source,
                partition_by=tuple(partition_by),
                batch=batch,
                key=key,
                first_by=tuple(first_by),
                key_window_hours=key_window_hours,
                transform=transform,
                lineage=tuple(lineage),
                reject=reject,
                event_time=event_time,
                grain=grain,
                expectations=tuple(expect),
                version=version,
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
    retention: Retention | None = None,
) -> TableSpec:
    """Declare a table that ``written_by``'s query writes beside its own (e.g. its quarantine).

    ``write``: APPEND (rows added once per micro-batch) or OVERWRITE (replaced by every run);
    ``retention``: how long maintenance keeps its rows (a record of each batch, say).
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
            retention=retention,
        )
    )


def ops_table(
    name: str,
    *,
    operation: str,
    schema: str,
    partition_by: list[str] | tuple[str, ...] = (),
    retention: Retention | None = None,
) -> TableSpec:
    """Declare an ops table that ``operation`` (a job that is not a table's query) appends its
    records to; ``retention``: how long maintenance keeps its rows."""
    return _declare(
        TableSpec(
            name=name,
            schema=schema,
            write=Write.APPEND,
            task=operation,
            partition_by=tuple(partition_by),
            operation=operation,
            retention=retention,
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
    check_declarations(_DECLARED)
    # A side table belongs to the task of the table whose query writes it.
    for name, spec in list(_DECLARED.items()):
        if spec.written_by:
            _DECLARED[name] = replace(spec, task=_DECLARED[spec.written_by].task)
    return {name: _DECLARED[name] for name in upstream_first(_DECLARED)}


def tables() -> list[TableSpec]:
    """Every table, upstream tables first."""
    return list(_load().values())


def get(name: str) -> TableSpec:
    """The table ``name`` (``layer.table``); an unknown name fails with the known ones."""
    catalog = _load()
    if name not in catalog:
        raise ConfigError(f"Unknown table {name!r}; known tables: {', '.join(catalog)}")
    return catalog[name]


def _queried() -> list[TableSpec]:
    """The tables computed by a query (not side tables, not ops records), upstream first."""
    return [spec for spec in tables() if spec.written_by is None and spec.operation is None]


def tasks() -> list[TableSpec]:
    """One table per task (one job, one DAG task each), upstream first: the task's lead, its
    first table (a task of several tables: :func:`task_members`)."""
    leads: dict[str, TableSpec] = {}
    for spec in _queried():
        leads.setdefault(spec.task, spec)
    return list(leads.values())


def task(name: str) -> TableSpec:
    """The lead table of task ``name`` (``silver_ad_events``), or of the task that writes table ``name``."""
    for spec in _queried():
        if name in (spec.task, spec.name):
            return next(lead for lead in tasks() if lead.task == spec.task)
    known = f"known tasks: {', '.join(t.task for t in tasks())}"
    for spec in _queried():  # a table's module named, where its task is another's
        if spec.transform and spec.transform.__module__.endswith(f".{name}"):
            raise ConfigError(
                f"Unknown task {name!r}: {spec.name} is written by task {spec.task}; {known}"
            )
    raise ConfigError(f"Unknown task {name!r}; {known}")


def task_members(spec: TableSpec) -> list[TableSpec]:
    """The tables computed by the query of ``spec``'s task, its lead first (most tasks: one)."""
    return [t for t in _queried() if t.task == spec.task]


def written_by_task(spec: TableSpec) -> list[TableSpec]:
    """The tables a task's query writes: its own (each member's), then their side tables."""
    members = task_members(spec)
    return [*members, *(side for member in members for side in side_tables(member))]


def side_tables(spec: TableSpec) -> list[TableSpec]:
    """The tables ``spec``'s query writes beside it (:func:`side_table`)."""
    return [t for t in tables() if t.written_by == spec.name]


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
# Code versions
#
# A table's version is derived from its own code and the versions of the tables it reads, so a
# change to silver's transform changes silver's version and every downstream table's. Its own code
# is its module (its declaration, its transform and whatever else the module holds: the sessions'
# gap and session logic) and, of other project modules, what its module imports from them and
# what that uses in turn (a KPI helper of another gold table, silver's parsing contract), not
# those modules whole: a change to gold.campaign_hourly's transform leaves gold.ad_hourly's
# version as it was although ad_hourly imports a helper from campaign_hourly's module. A comment
# in that code changes the version too: a table that declares ``version="..."`` uses that string
# in place of its own code, so a refactor that does not change output keeps its periods fresh,
# and a bumped string marks them stale. The flows' code (``lakehouse.flows``) is not part of it: a
# change there that alters output is declared by bumping the versions of the tables it writes.
# lakehouse.code_versions keeps which version wrote each period.

VERSION_LENGTH = 12  # hex digits shown and recorded: 48 bits, no collision among a table's versions
_PLAIN = (str, bytes, int, float, bool, type(None), tuple, list, dict)


def _names_used(code) -> set[str]:
    """The global names a code object (and the functions and lambdas within it) refers to."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if hasattr(constant, "co_names"):
            names |= _names_used(constant)
    return names


def _code_of(value, found: dict[str, str]) -> None:
    """Add ``value``'s source (a project function) and what it uses of its module, by qualified name."""
    import inspect

    if not inspect.isfunction(value) or not value.__module__.startswith("lakehouse."):
        return
    name = f"{value.__module__}.{value.__qualname__}"
    if name in found:
        return
    found[name] = inspect.getsource(value)
    module = vars(sys.modules[value.__module__])
    # co_names holds attribute names too: one that is also a global of the module only adds code
    for used in sorted(_names_used(value.__code__) & module.keys()):
        if isinstance(module[used], _PLAIN):
            found.setdefault(f"{value.__module__}.{used}", repr(module[used]))
        else:
            _code_of(module[used], found)


def used_code(spec: TableSpec) -> dict[str, str]:
    """What makes ``spec``'s own code, by name: its module's source, and what the module imports
    from other project modules, with what that uses in turn (a side table: its writer's). The
    declaring machinery (this module's ``table``, ``Write``, ``expect``) is not followed."""
    writer = get(spec.written_by) if spec.written_by else spec
    if writer.transform is None:
        return {}
    module = sys.modules[writer.transform.__module__]
    found = {module.__name__: Path(module.__file__).read_text(encoding="utf-8")}
    for node in ast.parse(found[module.__name__]).body:
        source = node.module if isinstance(node, ast.ImportFrom) else ""
        if not (source or "").startswith("lakehouse.") or source == __name__:
            continue
        for alias in node.names:
            imported = vars(module).get(alias.asname or alias.name)
            if isinstance(imported, _PLAIN):
                found.setdefault(f"{source}.{alias.name}", repr(imported))
            else:
                _code_of(imported, found)
    return found


def own_version(spec: TableSpec) -> str:
    """What ``spec``'s own code contributes: its declared version, else its code's hash."""
    if spec.version is not None:
        return f"declared {spec.version}"
    digest = hashlib.sha256()
    for name, source in sorted(used_code(spec).items()):
        digest.update(f"{name}\0{source}\0".encode())
    return digest.hexdigest()


@cache
def code_version(name: str) -> str:
    """Table ``name``'s code version: its own code and its upstream tables' versions, hashed."""
    spec = get(name)
    if spec.written_by:  # a side table is what its writer's query makes
        return code_version(spec.written_by)
    parts = [own_version(spec), *(f"{up}={code_version(up)}" for up in spec.upstream)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:VERSION_LENGTH]


def describe() -> str:
    """The catalog as a table for people: one line per table."""
    lines = [
        f"{'table':<30} {'task':<24} {'write':<18} {'grain':<6} {'batch':<5} "
        f"{'code version':<{VERSION_LENGTH}} upstream"
    ]
    for spec in tables():
        writer = spec.written_by or spec.operation
        upstream = ", ".join(spec.upstream) or (f"written by {writer}" if writer else spec.source)
        lines.append(
            f"{spec.name:<30} {spec.task:<24} {spec.write.value:<18} "
            f"{spec.grain.value if spec.grain else '':<6} {'yes' if spec.batch else '':<5} "
            f"{'' if spec.operation else code_version(spec.name):<{VERSION_LENGTH}} {upstream}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    from lakehouse import (
        catalog,  # the table modules register in the imported module, not in __main__
    )

    print(catalog.describe())
