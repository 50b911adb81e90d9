"""The table task's operator renders its job's arguments from its own fields, as each table needs.

``TableJobOperator(table=spec)`` holds the declaration; its templated run parameters (mode,
start, end, the source's) become ``jobs/run.py``'s argv when the task runs: the interval only for a
table with a batch form, the source's options only for a source-fed stream, empty values left out.
"""

from __future__ import annotations

from lakehouse import catalog
from lakehouse_airflow.operators import TableJobOperator, job_mains

RUN = {
    "lakehouse_root": "/lake",
    "mode": "batch",
    "start": "2026-11-20T00:00Z",
    "end": "2026-11-20T02:00Z",
    "source": "kafka",
    "kafka_bootstrap_servers": "127.0.0.1:9092",
    "kafka_topic": "ads",
}


def operator(task: str, **fields) -> TableJobOperator:
    return TableJobOperator(table=catalog.task(task), **{**RUN, **fields})


def test_each_table_gets_the_arguments_its_job_takes():
    assert operator("silver_ad_events").job_argv() == [
        "silver_ad_events",
        *("--lakehouse-root", "/lake", "--mode", "batch"),
        *("--start", "2026-11-20T00:00Z", "--end", "2026-11-20T02:00Z"),
    ]
    assert operator("bronze_ad_events").job_argv() == [
        "bronze_ad_events",
        *("--lakehouse-root", "/lake", "--source", "kafka"),
        *("--kafka-bootstrap-servers", "127.0.0.1:9092", "--kafka-topic", "ads"),
    ]
    assert operator("dim_campaigns").job_argv() == ["dim_campaigns", "--lakehouse-root", "/lake"]
    # An incremental run renders empty interval fields: they are left out.
    incremental = operator("gold_campaign_daily", mode="incremental", start="", end="")
    assert incremental.job_argv() == [
        "gold_campaign_daily",
        *("--lakehouse-root", "/lake", "--mode", "incremental"),
    ]


def test_a_table_task_is_named_and_wired_by_its_table():
    task = operator("gold_campaign_daily")
    assert (task.task_id, task.job, task.table.name) == (
        "gold_campaign_daily",
        "run",
        "gold.campaign_daily",
    )
    assert [a.name for a in task.inlets] == ["silver.ad_events"]
    assert "gold.campaign_daily" in [a.name for a in task.outlets]
    assert set(TableJobOperator.template_fields) >= {"mode", "start", "end", "lakehouse_root"}


def test_the_job_mains_are_read_from_the_job_files():
    assert job_mains() == {
        "consistency_check": "lakehouse.consistency:main",
        "full_refresh": "lakehouse.refresh:main",
        "maintenance": "lakehouse.maintenance:main",
        "repair_stale": "lakehouse.stale_repair:main",
        "run": "lakehouse.runner:main",
    }
