"""
### YSB repair of stale periods

After a deploy that changed a table's code, recomputes the periods the older code wrote (and the
periods computed from them), table by table in dependency order, by each table's batch form: the
same as `lakehouse repair --stale`. No other table is written, and the hourly runs go on beside
it. `lakehouse status` lists what is stale first; `dry_run` logs the plan and changes nothing.
See docs/operations.md, "Deploying a change".
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from lakehouse_airflow.macros import MACROS
from lakehouse_airflow.operators import SparkJobOperator

with DAG(
    dag_id="ysb_repair_stale",
    schedule=None,
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    user_defined_macros=MACROS,
    doc_md=__doc__,
    tags=["ysb", "lakehouse", "repair"],
    params={
        "dry_run": Param(
            False,
            type="boolean",
            title="Dry run",
            description="Log the stale periods and the batch runs that would recompute them; change nothing.",
        ),
    },
):
    SparkJobOperator(
        task_id="repair_stale",
        job="repair_stale",
        application_args=[
            "--lakehouse-root",
            "{{ lakehouse_root() }}",
            "--dry-run",
            "{{ params.dry_run | string | lower }}",
        ],  # fmt: skip
    )
