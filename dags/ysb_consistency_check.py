"""
### YSB consistency check

Recomputes the event hours `[start, end)` in batch mode into a scratch location (the live tables
are only read) and diffs silver and gold against them, printing per table and hour the rows that
differ. The task fails when anything differs; repair with a backfill of those hours. `table`
checks one table alone (recomputed from its live upstream).
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from lakehouse import catalog
from lakehouse_airflow.macros import MACROS
from lakehouse_airflow.operators import SparkJobOperator

with DAG(
    dag_id="ysb_consistency_check",
    schedule=None,
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    user_defined_macros=MACROS,
    doc_md=__doc__,
    tags=["ysb", "lakehouse", "checks"],
    params={
        "start": Param(
            type="string",
            format="date-time",
            title="Start",
            description="First event hour to check, a whole hour in UTC (ISO-8601), e.g. 2026-11-20T00:00Z.",
        ),
        "end": Param(
            type="string",
            format="date-time",
            title="End",
            description="End of the interval, exclusive, a whole hour in UTC, e.g. 2026-11-20T03:00Z "
            "checks 00:00, 01:00 and 02:00.",
        ),
        "table": Param(
            default="",
            type="string",
            enum=["", *(table.name for table in catalog.batch_tables())],
            values_display={"": "every table"},
            title="Table",
            description="Check this table alone, recomputed from its live upstream; default: every "
            "table with a batch form.",
        ),
    },
):
    SparkJobOperator(
        task_id="consistency_check",
        job="consistency_check",
        application_args=[
            "--lakehouse-root",
            "{{ lakehouse_root() }}",
            "--start",
            "{{ params.start }}",
            "--end",
            "{{ params.end }}",
            "--table",
            "{{ params.table }}",
        ],  # fmt: skip
    )
