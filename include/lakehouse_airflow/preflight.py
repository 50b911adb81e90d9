"""The DAGs' preflight: everything that would make the Spark tasks fail late, checked before any starts.

Each check returns the problems it found as sentences saying what to fix; the preflight task
raises with all of them at once.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from lakehouse import code_versions, files, metastore, object_storage
from lakehouse.config import Lakehouse, jar_paths
from lakehouse.errors import ConfigError
from lakehouse.kafka_settings import (
    DEFAULT_TOPIC,
    SOURCES,
    resolve_bootstrap_servers,
    validate_topic,
)
from lakehouse.periods import HOUR, parse_instant
from lakehouse_airflow.macros import (
    LONG_INTERVAL,
    SPARK_CONN_ID,
    bootstrap_servers_arg,
    job_path,
    run_interval,
)


def master_problems(conn_master: str | None) -> list[str]:
    """What is wrong with a ``spark`` connection's master (the spark-submit kind of task)."""
    if conn_master == "yarn" or (conn_master or "").startswith("spark://local") or not conn_master:
        return [
            f"Connection {SPARK_CONN_ID!r} resolves to master {conn_master!r}; give the master in the "
            'connection host, e.g. {"conn_type": "spark", "host": "local[2]"} or "spark://HOST:7077".'
        ]
    return []


def preflight(params: dict, run_type: str, logical_date: datetime | None) -> list[str]:
    """Everything that would make the Spark tasks fail late, checked before any of them starts.

    Returns the problems found (empty when the run can go); the DAG's preflight task raises
    with all of them at once, each saying what to fix. The Spark connection is checked by
    :func:`lakehouse_airflow.operators.spark_problems`.
    """
    problems = []
    try:
        lakehouse = Lakehouse.from_env()
        # On object storage: the endpoint answers, the keys are taken, the bucket exists.
        unreachable = files.check_reachable(lakehouse.root)
        if unreachable:
            problems.append(unreachable)
        elif (params or {}).get("source", "files") == "files" and not files.lake_path(
            lakehouse.landing_events
        ).is_dir():
            problems.append(
                f"Landing directory {lakehouse.landing_events} does not exist (generate data first)."
            )
    except ConfigError as error:
        problems.append(str(error))
    try:
        jar_paths()
    except ConfigError as error:
        problems.append(str(error))
    # The drivers' storage settings (what every task's session starts with) commit to S3 through
    # the conditional-put store; each session checks it again when it starts (spark.py). Only the
    # storage part: the metastore's is checked below, as a problem, not an error.
    from lakehouse.spark import DEFAULT_CONF

    storage_conf = {**DEFAULT_CONF, **object_storage.spark_conf()}
    if found := object_storage.commit_store_problem(storage_conf.get(object_storage.LOG_STORE_KEY)):
        problems.append(found)
    try:  # every Spark task's driver (the engine's too) opens the table-name metastore
        if metastore.enabled() and (found := metastore.problem()):
            problems.append(found)
    except ConfigError as error:
        problems.append(str(error))
    problems += interval_problems(params or {}, run_type, logical_date)
    if not glob.glob(job_path("*")):
        problems.append(f"No job files at {job_path('*')}: set LAKEHOUSE_JOBS_DIR.")
    return list(dict.fromkeys(problems))  # each once, in the order found


def interval_problems(
    params: Mapping[str, Any], run_type: str, logical_date: datetime | None
) -> list[str]:
    """What is wrong with the interval a batch run recomputes, each problem one sentence; empty when fine.

    What a per-param schema cannot check, since it sees one param: mode=batch without start or
    end, a reversed or empty range, a date that does not exist. And an interval longer than
    :data:`LONG_INTERVAL` without ``confirm_long_interval``: sized from its two ends, before any
    hour is listed, so that ten years are refused at once, with their hours and runs.
    """
    run_type = getattr(run_type, "value", run_type)
    if (
        run_type != "backfill"
        and params.get("mode") == "batch"
        and not params.get("confirm_long_interval")
    ):
        try:
            start, end = parse_instant(params["start"]), parse_instant(params["end"])
        except (ConfigError, KeyError, AttributeError):  # missing or not a time: said below
            pass
        else:
            if end - start > LONG_INTERVAL:
                return [long_interval_refusal(start, end)]
    try:
        run_interval(run_type, dict(params), logical_date)
    except ConfigError as error:
        given = ", ".join(f"{k}={params.get(k)!r}" for k in ("start", "end") if params.get(k))
        return [
            f"{error}{f' ({given})' if given else ''}. Type whole hours in UTC, e.g. "
            "start=2026-11-20T13:00Z and end=2026-11-20T16:00Z for the hours 13:00 to 15:00."
        ]
    return []


def long_interval_refusal(start: datetime, end: datetime) -> str:
    """Why a batch run over [start, end) waits for confirm_long_interval, with what it would make."""
    hours, longest = int((end - start) / HOUR), int(LONG_INTERVAL / HOUR)
    return (
        f"mode=batch from {start:%Y-%m-%dT%H:%MZ} to {end:%Y-%m-%dT%H:%MZ} recomputes {hours:,} "
        f"hours ({(end - start).days:,} days) in 1 run, more than the {longest:,} hours "
        f"({LONG_INTERVAL.days} days) a run recomputes unconfirmed (as a backfill: {hours:,} runs, "
        "one per hour). Set confirm_long_interval=true to run it, or split it into intervals of "
        f"{LONG_INTERVAL.days} days or less."
    )


def run_plan(params: Mapping[str, Any], run_type: str, logical_date: datetime | None) -> str:
    """What a run that passed preflight is about to do, in one sentence for the task's log."""
    hours = run_interval(run_type, dict(params), logical_date)
    if getattr(run_type, "value", run_type) == "backfill" and hours:
        return f"Backfill run: recomputes the hour it owns, {hours} (its params are ignored)."
    if hours:
        confirmed = (
            " (confirmed: confirm_long_interval)" if len(hours) > LONG_INTERVAL / HOUR else ""
        )
        return (
            f"Batch run: recomputes {hours}, end {hours.end:%Y-%m-%dT%H:00Z} exclusive, in this one "
            f"run{confirmed}."
        )
    refresh = params.get("full_refresh") or "none"
    return (
        "Incremental run"
        + (f", after a full refresh of {refresh}" if refresh != "none" else "")
        + "."
    )


def stale_note(lakehouse: Lakehouse | None = None) -> str | None:
    """After a deploy: how many periods older code wrote, and what recomputes them (None: none).

    A note, not a problem: the hourly run goes on and writes new periods with today's code.
    """
    from deltalake.exceptions import DeltaError

    try:
        lakehouse = lakehouse or Lakehouse.from_env()
        found = code_versions.stale(lakehouse)
    except (ConfigError, OSError, DeltaError) as error:  # the run's own tasks say what is wrong
        return f"Could not read which code wrote each period: {error}"
    if not found:
        return None
    periods = sum(len(p) for p in found.values())
    return (
        f"{periods} period(s) of {len(found)} table(s) were written by older code "
        f"({', '.join(f'{name}: {len(p)}' for name, p in found.items())}): `lakehouse repair "
        "--stale`, or a run of the ysb_repair_stale DAG, recomputes them (docs/operations.md, "
        "Deploying a change)."
    )


def source_problems(
    params: Mapping[str, Any] | None, conn: Any, env: Mapping[str, str] = os.environ
) -> list[str]:
    """What is wrong with the bronze source params (for the DAG's preflight); empty when fine.

    ``conn`` is Airflow's template variable of that name. Only configuration is checked (a valid
    topic, bootstrap servers from the connection or the environment); whether the brokers answer
    is checked by the bronze job itself, just before it reads.
    """
    params = params or {}
    source = params.get("source") or "files"
    if source not in SOURCES:
        return [f"Unknown source {source!r}: use one of {', '.join(SOURCES)}."]
    if source != "kafka":
        return []
    problems = []
    for check in (
        lambda: validate_topic(params.get("kafka_topic") or DEFAULT_TOPIC),
        lambda: resolve_bootstrap_servers(bootstrap_servers_arg(params, conn), env),
    ):
        try:
            check()
        except ConfigError as error:
            problems.append(str(error))
    return problems
