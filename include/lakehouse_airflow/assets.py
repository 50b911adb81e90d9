"""Every catalog table as an Airflow Asset, and the asset events a task's run stands for.

A task's outlets are every table its job may write: its own, its side tables, and the ops
records its query appends to (``ops.query_progress`` for a streaming query, ``ops.expectation_results``
for a table with rules). Data tables are in the Asset group ``lakehouse``, ops records in
``lakehouse_ops``.

Airflow emits an event for every outlet of a task that succeeds; an event means "this table
changed". So after the job the operator keeps as outlets only the tables its summary says it
wrote (:func:`written`), and each event's extra says how many rows and which event periods. The
task's outlets are read when it succeeds, not when the DAG was parsed (Airflow 3.3's task runner
builds them from the running task), while the DAG keeps declaring every table for lineage.

A run publishes one event per table it wrote, its periods in the extra. A table that a DAG
schedules on by its partitions (:data:`PARTITION_CONSUMERS`: the export DAGs) gets instead one event
per period written (Airflow's partitioned asset events carry one key each): the operator adds a
partition key per period of the table's grain (:func:`partition_keys`: an hour of an hour table, a
day of a day table), so a DAG scheduled by ``PartitionedAssetTimetable`` runs once per period
written, a late one included. Keys on every table would only multiply the events (a run touching
four hours made four per table, its side tables and ops records included) for no consumer, and
hide them from a plain asset-scheduled DAG, which Airflow does not queue for an event with a key.

No Spark here: the DAG files import this module at parse time.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow.sdk import Asset

from lakehouse import catalog
from lakehouse.catalog import TableSpec
from lakehouse.periods import Grain

GROUPS = {"ops": "lakehouse_ops"}  # any other layer: "lakehouse"
# The ops records appended by an operation rather than by one table's query (catalog.ops_table).
# An event hour as a partition key: a naive UTC time, the input format of Airflow's temporal
# partition mappers (StartOfHourMapper, StartOfDayMapper), so a consumer may roll hours up to days.
PARTITION_KEY_FORMAT = "%Y-%m-%dT%H:%M:%S"
# A day table's periods as partition keys: what StartOfDayMapper makes of an hour's key.
DAY_KEY_FORMAT = "%Y-%m-%d"
# The DAGs scheduled by a table's partitions, and the table: the only tables whose events carry
# partition keys. A DAG of your own scheduled by a table's partitions is declared here too.
PARTITION_CONSUMERS = {
    "ysb_hourly_export": "gold.campaign_hourly",
    "ysb_daily_export": "gold.campaign_daily",
}
STREAMING_QUERIES, EXPECTATIONS, MAINTENANCE, PERIOD_WRITES = (
    "every streaming query",
    "expectations",
    "maintenance",
    "period-writing runs",  # ops.code_versions: which code version wrote each period
)


def asset(table: TableSpec) -> Asset:
    """The table's Asset: named by the table, in its layer's group."""
    return Asset(name=table.name, uri=table.asset_uri, group=GROUPS.get(table.layer, "lakehouse"))


def partitioned(table_name: str) -> bool:
    """Whether a DAG is scheduled by the partitions of ``table_name`` (its events carry keys)."""
    return table_name in PARTITION_CONSUMERS.values()


def operation_table(operation: str) -> TableSpec:
    """The ops table that ``operation`` (as its declaration names it) appends its records to."""
    for spec in catalog.tables():
        if spec.operation == operation:
            return spec
    raise catalog.CatalogError(f"No ops table is declared with operation={operation!r}")


def task_tables(table: TableSpec) -> list[TableSpec]:
    """Every table the task of ``table`` may write: its own, its side tables, its ops records."""
    tables = catalog.written_by_task(table)
    if table.streamed:
        tables.append(operation_table(STREAMING_QUERIES))
    if any(spec.expectations for spec in tables):
        tables.append(operation_table(EXPECTATIONS))
    if table.flow.periodic:
        tables.append(operation_table(PERIOD_WRITES))
    return tables


def written(table: TableSpec, summary: Any) -> dict[str, dict]:
    """The tables the run of ``table``'s task wrote, each with its asset event's extra.

    ``summary``: the job's return value (``lakehouse.runner``). Its write kind's flow says what the
    summary counts (``table.flow.counts``); the extra: ``rows`` written (added; a replace's removed
    rows in ``rows_replaced``, rows marked resolved or reconciled in ``rows_updated``), the
    ``periods`` the run wrote (ISO-8601 starts of the table's ``grain``: hours, or days of a day
    table; none for a table without event time, such as bronze or the dimension) and the run's
    ``mode``. A table the run did not change is left out: it gets no event.
    """
    if not isinstance(summary, dict):
        return {}
    if isinstance(summary.get("tables"), dict):  # a query of several tables: each one's own
        return _merged(
            written(catalog.get(name), {"mode": summary.get("mode"), **own})
            for name, own in summary["tables"].items()
        )
    mode = summary.get("mode", "incremental")
    batch = mode == "batch"
    sides = {t.role: t.name for t in catalog.written_by_task(table) if t.role}
    counts, rewritten = table.flow.counts(table, summary, batch, sides)
    if table.streamed and not batch:
        # one progress report per micro-batch that ran (lakehouse.progress)
        notes = summary.get("batches") or []
        counts[operation_table(STREAMING_QUERIES).name] = {
            "rows": max(summary.get("micro_batches") or 0, len(notes))
        }
    checked = summary.get("expectations")
    if isinstance(checked, dict):
        counts[operation_table(EXPECTATIONS).name] = {"rows": checked.get("checked") or 0}
    # The run's periods go on every period-addressed table it wrote (a side table's rows fall in them too).
    periods = list(summary.get("periods") or []) if table.grain else []
    if table.flow.periodic and periods:  # a row per period written (lakehouse.code_versions)
        counts[operation_table(PERIOD_WRITES).name] = {"rows": len(periods)}
    return {
        name: {
            **changed,
            "grain": table.grain.value if table.grain else None,
            "periods": periods,
            "mode": mode,
        }
        for name, changed in counts.items()
        if name in rewritten or changed.get("rows") or len(changed) > 1
    }


def _merged(events) -> dict[str, dict]:
    """The events of several tables' runs by one query as one: an ops table they all append to
    (query progress, rule results, code versions) gets its rows summed, its periods joined."""
    merged: dict[str, dict] = {}
    for event in events:
        for name, extra in event.items():
            if name not in merged:
                merged[name] = dict(extra)
                continue
            kept = merged[name]
            if name != operation_table(STREAMING_QUERIES).name:  # one query: its batches once
                kept["rows"] = (kept.get("rows") or 0) + (extra.get("rows") or 0)
            if kept.get("grain") == extra.get("grain"):
                kept["periods"] = sorted({*kept.get("periods", []), *extra.get("periods", [])})
    return merged


def maintenance_written(records: Any) -> dict[str, dict]:
    """The maintenance job's records (one per OPTIMIZE or VACUUM) as the event of ``ops.table_maintenance``."""
    if not records:
        return {}
    return {operation_table(MAINTENANCE).name: {"rows": len(records), "periods": []}}


def period_strings(periods: list[str], grain: str | None) -> str:
    """Periods for people: ``2026-11-20T00:00Z..02:00Z (3 hours)``, ``2026-11-20 (1 day)``, or ``none``."""
    if not periods:
        return "none"
    grain = Grain(grain or "hour")
    first, last = (datetime.fromisoformat(p) for p in (periods[0], periods[-1]))
    if len(periods) == 1:
        return grain.label(first)
    end = (
        f"{last:%H:00Z}"
        if grain is Grain.HOUR and first.date() == last.date()
        else grain.label(last)
    )
    return f"{grain.label(first)}..{end} ({len(periods)} {grain.value}s)"


def partition_keys(periods: list[str], grain: str | None = "hour") -> list[str]:
    """The periods (ISO-8601 starts) as Airflow partition keys, sorted: an hour as
    ``2026-11-20T02:00:00`` (the temporal mappers' input format), a day as ``2026-11-20``."""
    key_format = DAY_KEY_FORMAT if grain == Grain.DAY.value else PARTITION_KEY_FORMAT
    return sorted({_utc(datetime.fromisoformat(p)).strftime(key_format) for p in periods})


def _utc(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive one is taken as UTC already (the jobs' hours are UTC)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
