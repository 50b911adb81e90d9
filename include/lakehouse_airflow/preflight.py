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

from lakehouse import files, metastore, object_storage
from lakehouse.config import Lakehouse, jar_paths
from lakehouse.errors import ConfigError
from lakehouse.kafka_settings import (
    DEFAULT_TOPIC,
    SOURCES,
    resolve_bootstrap_servers,
    validate_topic,
)
from lakehouse_airflow.macros import SPARK_CONN_ID, bootstrap_servers_arg, job_path, run_interval


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
    try:
        run_interval(run_type, params, logical_date)
    except ConfigError as error:
        given = ", ".join(f"{k}={params.get(k)!r}" for k in ("start", "end") if params.get(k))
        problems.append(
            f"{error}{f' ({given})' if given else ''}. Type whole hours in UTC, e.g. "
            "start=2026-11-20T13:00Z and end=2026-11-20T16:00Z for the hours 13:00 to 15:00."
        )
    if not glob.glob(job_path("*")):
        problems.append(f"No job files at {job_path('*')}: set LAKEHOUSE_JOBS_DIR.")
    return problems


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
