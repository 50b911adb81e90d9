"""`make demo` runs the DAG by `airflow dags test`, which prints the task logs; the demo writes each
task's part where the UI reads task logs. Here: the split of that output by task."""

from __future__ import annotations

from lakehouse_tools.demo import TASK_DONE, row_counts, task_outputs

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


def test_a_task_line_gives_its_row_counts_and_a_query_of_several_tables_each_table_s():
    gold = (
        "2026-12-07T04:52:41Z [info     ] gold_aggregates done: {'table': 'gold.ad_hourly', "
        "'micro_batches': 1, 'input_rows': 21502, 'batches': [{'batch_id': 0, 'tables': {}}], "
        "'tables': {'gold.ad_hourly': {'batches': [{'batch_id': 0, 'rows_written': 3104}]}, "
        "'gold.campaign_daily': {'batches': [{'batch_id': 0, 'rows_written': 169}]}, "
        "'gold.ad_type_hourly': {'batches': []}}} "
        "[lakehouse] loc=runner.py:180"
    )
    done = TASK_DONE.search(gold)
    assert (done["task"], row_counts(done["summary"])) == (
        "gold_aggregates",
        "input_rows=21502, gold.ad_hourly=3104, gold.campaign_daily=169",
    )
    silver = (
        "silver_ad_events done: {'table': 'silver.ad_events', 'input_rows': 10, "
        "'batches': [{'inserted': 8, 'quarantined': 2}]} [lakehouse] loc=runner.py:180"
    )
    assert (
        row_counts(TASK_DONE.search(silver)["summary"])
        == "input_rows=10, inserted=8, quarantined=2"
    )
