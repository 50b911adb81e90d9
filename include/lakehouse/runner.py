"""Run one task's job: the catalog says what its tables are, their write kind's flow runs it.

Usage (``jobs/run.py`` is the spark-submit entry point; the task is the table's module name, or
the task its tables declare, e.g. ``gold_aggregates``):
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" jobs/run.py <task> [--lakehouse-root DIR] [--generation N]
    spark-submit ... jobs/run.py <task> --mode batch --start 2026-11-20T00:00Z --end 2026-11-20T03:00Z
    spark-submit ... jobs/run.py bronze_ad_events --source kafka [--kafka-bootstrap-servers HOST:PORT] \\
        [--kafka-topic ysb-ad-events] [--max-offsets-per-trigger N] [--max-files-per-trigger N]
    spark-submit ... jobs/run.py gold_aggregates --mode batch --start ... --end ... --tables gold.campaign_hourly

Tasks: one per query of the catalog (``python -m lakehouse.catalog`` lists them with their
tables). Incremental mode runs the task's streaming query with availableNow; batch mode (tables
with a batch form) recomputes the event periods of each table's grain that [start, end) touches:
a day table recomputes each whole day an hour of the interval falls in. A task of several tables
writes all of them, each with its own summary (``tables``), code versions and rules; in batch
mode ``--tables`` picks some.
"""

from __future__ import annotations

import importlib
import time
from datetime import datetime

from lakehouse import catalog, code_versions, expectations, metastore, schema_evolution
from lakehouse.catalog import TableSpec, Write
from lakehouse.config import Table
from lakehouse.errors import ConfigError, disk_full
from lakehouse.periods import Periods
from lakehouse.runtime import airflow_run, log, parse_job_args
from lakehouse.sinks import append_records, ensure_table, with_conflict_retries
from lakehouse.spark import build_spark_session, lazy_session, release_engine_sessions

# Each write kind's Spark code: a module with ``run(table, args)`` and, for a kind with a batch
# form, ``recompute(table, periods, reading)``; a source-fed kind's has ``source_options()``.
# What a kind means (its layout, grains, counts) is its flow, ``spec.flow`` (lakehouse.write_kinds).
# By name, imported when a task of the kind runs: a task process imports its own flow only (the
# sessions' alone, with Arrow and NumPy, cost every task about 0.2 CPU-s of imports).
FLOW_JOBS = {
    Write.OVERWRITE: "lakehouse.flows.snapshot",
    Write.APPEND: "lakehouse.flows.ingest",
    Write.MERGE_NEW: "lakehouse.flows.merge",
    Write.REPLACE_PERIODS: "lakehouse.flows.recompute",
    Write.SESSIONS: "lakehouse.flows.sessions",
}


def flow_job(spec: TableSpec):
    """The module that runs tables of ``spec``'s write kind."""
    return importlib.import_module(FLOW_JOBS[spec.write])


def disk_folders(lakehouse) -> dict[str, str]:
    """Where a job writes, for a full disk's message: the lakehouse and the temp folder (Spark's
    scratch space by default)."""
    import tempfile

    return {"the lakehouse": lakehouse.root, "the temp folder": tempfile.gettempdir()}


def register_names(table: Table) -> None:
    """Tables by name: what the job wrote (and any other written table) registered in its
    session's metastore, if that is its lakehouse's (:mod:`lakehouse.metastore`)."""
    # Connected only if a name is missing: a run with nothing new opens no engine session.
    added = metastore.register(lazy_session(table.task), table.lakehouse)
    if added:
        log.info("registered in the metastore: %s", ", ".join(added))


def touched_periods(summary: dict, table: Table) -> Periods:
    """The periods of ``table`` an incremental run wrote: each micro-batch's note lists its own, a
    quarantine replay (silver, after a dimension change) the hours of the lines it let in."""
    notes = [*summary.get("batches", []), summary.get("quarantine_replay") or {}]
    return Periods.of(
        (datetime.fromisoformat(start) for note in notes for start in note.get("periods", [])),
        table.grain,
    )


def record_code_versions(written: dict[Table, Periods], batch: bool) -> None:
    """Keep which code version wrote each table's periods (:mod:`lakehouse.code_versions`), in
    one append for all the tables of a task.

    After the write: a run that dies between the two leaves its periods recorded as the older
    version's, which status shows stale and repair recomputes, never the other way round.
    """
    run_id = airflow_run()[0]
    records = [
        record
        for table, periods in written.items()
        for record in code_versions.records(table.spec, periods, batch=batch, run=run_id)
    ]
    if not records:
        return
    some = next(iter(written))
    target = some.lakehouse.table(code_versions.RECORDS)
    spark = build_spark_session(some.task)
    # Tasks that start at once may race to create it.
    with_conflict_retries(lambda: ensure_table(spark, target), f"{target.name} creation")
    append_records(records, target)


def run(task: str, argv: list[str]) -> dict:
    """Run task ``task`` (its name, or the name of a table it writes) with job arguments ``argv``."""
    spec = catalog.task(task)
    job = flow_job(spec)
    members = [member.name for member in catalog.task_members(spec)]
    description = f"{', '.join(members)}: {spec.flow.description}"
    source = None
    if hasattr(job, "source_options"):  # a source-fed table's options (bronze's --source ...)
        source, argv = job.source_options().parse_known_args(argv)
    args = parse_job_args(description, argv, batch=spec.batch, source=source, tables=tuple(members))
    table = args.lakehouse.table(spec.name)
    try:
        for name in members:
            evolve_schema(args.lakehouse.table(name))
        try:
            summary = job.run(table, args)
        except Exception as error:
            # A full disk surfaces as a Spark or Hadoop trace of a hundred lines: say it in one.
            full = disk_full(error, spec.name, disk_folders(args.lakehouse))
            if full is None:
                raise
            raise full from None
        # a query of several tables gives each one's own summary
        owns = summary["tables"] if "tables" in summary else {table.name: summary}
        owns = after_writes({args.lakehouse.table(name): own for name, own in owns.items()}, args)
        summary = {**summary, "tables": owns} if "tables" in summary else owns[table.name]
        register_names(table)
        return summary
    finally:
        release_engine_sessions()


def evolve_schema(table: Table) -> None:
    """Before any write: a declaration with new nullable columns widens the table, one with a new
    partitioning rewrites a table nothing reads in it, another change stops here."""

    def session():  # connected only when there is something to change
        return build_spark_session(table.task)

    started = time.monotonic()
    was = schema_evolution.repartition(session, table.path, table.spec)
    if was is not None:
        log.info(
            "%s: rewritten partitioned by %s (was by %s, declared since the table was written) in %.1f s",
            table.name,
            ", ".join(table.spec.partition_by),
            ", ".join(was) or "nothing",
            time.monotonic() - started,
        )
    added = schema_evolution.evolve(session, table.path, table.spec)
    if added:
        log.info(
            "%s: column(s) %s added (declared since the table was written); the periods written "
            "before hold nulls in them until recomputed (lakehouse repair --stale)",
            table.name,
            ", ".join(added),
        )


def after_writes(summaries: dict[Table, dict], args) -> dict[str, dict]:
    """What follows a task's writes: the periods each table got and their code version recorded,
    then each table's rules checked; each table's summary (by name) with both added."""
    # The periods written: the Airflow task's asset events carry them, the rules measure them.
    periods = {
        table: args.interval.to(table.grain)
        if args.mode == "batch"
        else touched_periods(summary, table)
        for table, summary in summaries.items()
        if table.spec.flow.periodic
    }
    summaries = {
        table: {**summary, "grain": table.grain.value, "periods": periods[table].isoformats()}
        if table in periods
        else summary
        for table, summary in summaries.items()
    }
    record_code_versions(periods, batch=args.mode == "batch")
    checked = expectations.check(
        {table: (periods.get(table, Periods()), summary) for table, summary in summaries.items()}
    )
    return {
        table.name: {**summary, "expectations": checked[table.name]}
        if checked[table.name]
        else summary
        for table, summary in summaries.items()
    }


def main(argv: list[str]) -> dict:
    if not argv or argv[0].startswith("-"):
        tasks = ", ".join(spec.task for spec in catalog.tasks())
        raise ConfigError(f"usage: jobs/run.py <task> [options]; tasks: {tasks}")
    summary = run(argv[0], argv[1:])
    log.info("%s done: %s", argv[0], summary)
    return summary
