"""
### YSB table maintenance

Daily, for every table of the catalog: **OPTIMIZE** (compacts the small files that each
micro-batch adds) and then **VACUUM** (deletes the files no version within the retention needs).
The retention is `retain_hours` (Delta's default, 7 days), raised for any table whose streaming
reader still needs older files: a downstream query that has not run for a while reads from the
version its checkpoint reached, and VACUUM must not delete the files it will read
(delta-io/delta#577). An ops table is first trimmed to the retention its declaration states
(rows past it deleted, but the newest failed check of an hour, which still gates it), and last
its log is checkpointed and its commits past that retention deleted. Each operation's files and
bytes (or rows) before and after, the retention used and the reader that set it go to
`ops.table_maintenance`; each task's last log line says the bytes it freed.

One task per table, one at a time (the tables share the engine with the hourly runs); a task that
fails leaves the others to run.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, CronTriggerTimetable, Param

from lakehouse import catalog
from lakehouse.maintenance import DEFAULT_RETAIN_HOURS
from lakehouse_airflow.assets import MAINTENANCE, asset, operation_table
from lakehouse_airflow.macros import MACROS
from lakehouse_airflow.operators import SparkJobOperator

with DAG(
    dag_id="ysb_maintenance",
    # Daily at 00:00 UTC, first at the next midnight after the DAG is first seen. No start_date: with
    # one, Airflow 3 schedules the latest midnight already past as soon as the scheduler starts
    # (`make airflow-ui` ran OPTIMIZE + VACUUM of every table at once). Nor "@daily": its
    # run_immediately=False still runs the past midnight when the DAG is first seen within a tenth
    # of a day after it (CronTriggerTimetable._calc_first_run treats False as "within 10%"); a
    # buffer of zero waits for the next midnight.
    schedule=CronTriggerTimetable("0 0 * * *", timezone="UTC", run_immediately=timedelta(0)),
    catchup=False,
    max_active_runs=1,
    max_active_tasks=1,
    default_args={"retries": 1, "retry_delay": pendulum.duration(minutes=5)},
    user_defined_macros=MACROS,
    doc_md=__doc__,
    tags=["ysb", "lakehouse", "maintenance"],
    params={
        "retain_hours": Param(
            DEFAULT_RETAIN_HOURS,
            type="integer",
            minimum=0,
            description="keep removed files at least this long (raised for a table whose streaming reader lags)",
        ),
    },
):
    for table in catalog.tables():
        SparkJobOperator(
            task_id=f"maintain_{table.name.replace('.', '_')}",
            job="maintenance",
            application_args=[
                "--lakehouse-root",
                "{{ lakehouse_root() }}",
                "--table",
                table.name,
                "--retain-hours",
                "{{ params.retain_hours }}",
            ],  # fmt: skip
            outlets=[asset(operation_table(MAINTENANCE))],
        )
