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
    incremental = operator("gold_aggregates", mode="incremental", start="", end="")
    assert incremental.job_argv() == [
        "gold_aggregates",
        *("--lakehouse-root", "/lake", "--mode", "incremental"),
    ]


def test_a_table_task_is_named_and_wired_by_its_table():
    task = operator("gold_aggregates")
    assert (task.task_id, task.job, task.table.name) == ("gold_aggregates", "run", "gold.ad_hourly")
    assert [a.name for a in task.inlets] == ["silver.ad_events"]
    # one query, five tables: each is an outlet of the task
    assert [a.name for a in task.outlets if a.name.startswith("gold.")] == [
        "gold.ad_hourly",
        "gold.ad_type_hourly",
        "gold.campaign_daily",
        "gold.campaign_hourly",
        "gold.campaign_windows",
    ]
    assert set(TableJobOperator.template_fields) >= {"mode", "start", "end", "lakehouse_root"}


def test_the_job_mains_are_read_from_the_job_files():
    assert job_mains() == {
        "consistency_check": "lakehouse.consistency:main",
        "full_refresh": "lakehouse.refresh:main",
        "maintenance": "lakehouse.maintenance:main",
        "repair_stale": "lakehouse.stale_repair:main",
        "run": "lakehouse.runner:main",
    }


def test_a_spark_submit_driver_starts_fast_for_an_hour_and_compiles_well_for_a_month():
    """An incremental run or a backfill's hour gets the fast-start JVM options; a batch run over
    more than a day the long-run ones. Either way the driver's log carries no time of its own
    (the task's logger stamps each line)."""
    from lakehouse.spark import FAST_START_JAVA_OPTIONS, LONG_RUN_JAVA_OPTIONS
    from lakehouse_airflow.operators import DRIVER_LOG_CONFIG

    hourly = operator("silver_ad_events", mode="incremental", start="", end="")
    backfill = operator("silver_ad_events")  # two hours
    month = operator("silver_ad_events", end="2026-12-20T00:00Z")
    for short in (hourly, backfill):
        assert short.driver_java_options().startswith(" ".join(FAST_START_JAVA_OPTIONS)), short
    assert month.driver_java_options().startswith(LONG_RUN_JAVA_OPTIONS)
    for run in (hourly, month):
        assert run.driver_java_options().endswith(f"-Dlog4j2.configurationFile={DRIVER_LOG_CONFIG}")
    pattern = [
        line for line in open(DRIVER_LOG_CONFIG, encoding="utf-8") if "layout.pattern" in line
    ]
    assert pattern == ["appender.console.layout.pattern = %p %c{1}: %m%n%ex\n"]


def test_a_jobs_log_lines_carry_no_time_when_the_caller_stamps_them(monkeypatch):
    import logging

    from lakehouse.runtime.job_args import configure_logging

    root = logging.getLogger()
    saved = root.handlers[:]
    try:
        for timed, expected in (("1", "%(asctime)s %(levelname)s"), ("0", "%(levelname)s")):
            root.handlers[:] = []
            monkeypatch.setenv("LAKEHOUSE_LOG_TIMES", timed)
            configure_logging()
            assert root.handlers[0].formatter._fmt.startswith(expected)
    finally:
        root.handlers[:] = saved
