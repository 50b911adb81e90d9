"""`make demo` runs the DAG by `airflow dags test`, which prints the task logs; the demo writes each
task's part where the UI reads task logs. Here: the split of that output by task."""

from __future__ import annotations

from lakehouse_tools.demo import task_outputs

# The shape of `airflow dags test` output (Airflow 3.3), shortened.
OUTPUT = """\
2026-11-28T02:57:53Z [info     ] Created dag run.
2026-11-28T02:57:54Z [info     ] [DAG TEST] starting task_id=dim_campaigns map_index=-1 [airflow.sdk.definitions.dag]
dim_campaigns: 1,000 row(s) written
2026-11-28T02:58:05Z [info     ] [DAG TEST] end task task_id=dim_campaigns map_index=-1 [airflow.sdk.definitions.dag]
2026-11-28T02:58:05Z [info     ] [DAG TEST] starting task_id=silver_ad_events map_index=-1 [airflow.sdk.definitions.dag]
silver.ad_events: 7,200 row(s) in
2026-11-28T02:58:06Z [info     ] [DAG TEST] end task task_id=silver_ad_events map_index=-1 [airflow.sdk.definitions.dag]
2026-11-28T02:58:06Z [info     ] Marking run successful
"""


def test_each_tasks_lines_from_its_start_to_its_end_and_nothing_between_tasks():
    lines = OUTPUT.splitlines(keepends=True)
    assert task_outputs(OUTPUT) == {
        "dim_campaigns": "".join(lines[1:4]),
        "silver_ad_events": "".join(lines[4:7]),
    }
