"""Run one table's job: the catalog says what the table is, its write kind which flow writes it.

Usage (``jobs/run.py`` is the spark-submit spec point; the task is the table's module name):
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" jobs/run.py <task> [--lakehouse-root DIR] [--generation N]
    spark-submit ... jobs/run.py <task> --mode batch --start 2026-11-20T00:00Z --end 2026-11-20T03:00Z
    spark-submit ... jobs/run.py bronze_ad_events --source kafka [--kafka-bootstrap-servers HOST:PORT] \\
        [--kafka-topic ysb-ad-events] [--max-offsets-per-trigger N] [--max-files-per-trigger N]

Tasks: every table of the catalog with a query of its own (``python -m lakehouse.catalog``
lists them). Incremental mode runs the table's streaming query with availableNow; batch mode
(tables with a batch form) recomputes the event hours [start, end).
"""

from __future__ import annotations

import importlib

from lakehouse import catalog, expectations, metastore
from lakehouse.catalog import Write
from lakehouse.errors import ConfigError
from lakehouse.runtime import log, parse_job_args
from lakehouse.spark import build_spark_session, release_engine_sessions

FLOWS = {
    Write.OVERWRITE: "lakehouse.flows.snapshot",
    Write.APPEND: "lakehouse.flows.ingest",
    Write.MERGE_NEW: "lakehouse.flows.merge",
    Write.REPLACE_HOURS: "lakehouse.flows.recompute",
    Write.SESSIONS: "lakehouse.flows.sessions",
}


def flow(spec: catalog.TableSpec):
    """The module that writes tables of ``spec``'s write kind (its ``run`` and batch ``recompute``)."""
    return importlib.import_module(FLOWS[spec.write])


def register_names(spec: catalog.TableSpec, lakehouse) -> None:
    """Tables by name: what the job wrote (and any other written table) registered in its
    session's metastore, if that is its lakehouse's (:mod:`lakehouse.metastore`)."""
    added = metastore.register(build_spark_session(spec.task), lakehouse)
    if added:
        log.info("registered in the metastore: %s", ", ".join(added))


def run(task: str, argv: list[str]) -> dict:
    """Run task ``task`` (a table's module name, or the table's name) with job arguments ``argv``."""
    spec = catalog.task(task)
    flow_module = flow(spec)
    description = f"{spec.name}: {flow_module.__doc__.splitlines()[0]}"
    try:
        if spec.write is Write.APPEND:
            source, rest = flow_module.source_options().parse_known_args(argv)
            args = parse_job_args(description, rest, batch=False)
            summary = flow_module.run(spec.at(args.lakehouse), args, source)
            register_names(spec, args.lakehouse)
            return summary
        args = parse_job_args(description, argv, batch=spec.batch)
        table = spec.at(args.lakehouse)
        summary = flow_module.run(table, args)
        hours = args.hours if args.mode == "batch" else expectations.touched_hours(summary)
        if spec.write in catalog.HOUR_LAYOUTS:  # the Airflow task's Asset events carry them
            summary = {**summary, "event_hours": hours.isoformats()}
        checked = expectations.check(args.lakehouse, table, hours, summary)
        register_names(spec, args.lakehouse)
        return {**summary, "expectations": checked} if checked else summary
    finally:
        release_engine_sessions()


def main(argv: list[str]) -> dict:
    if not argv or argv[0].startswith("-"):
        tasks = ", ".join(spec.task for spec in catalog.tasks())
        raise ConfigError(f"usage: jobs/run.py <task> [options]; tasks: {tasks}")
    summary = run(argv[0], argv[1:])
    log.info("%s done: %s", argv[0], summary)
    return summary
