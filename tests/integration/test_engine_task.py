"""The Airflow task on the engine (SparkJobOperator.run_on_engine), in this process as a task's process runs it."""

from __future__ import annotations

import gc

import pytest
from airflow_env import spark_connection
from helpers import table

from lakehouse.spark import engine
from lakehouse_airflow.operators import SparkJobOperator
from lakehouse_tools.generator import write_campaigns

pytestmark = pytest.mark.skipif(
    engine() != "connect", reason="runs jobs on the engine (LAKEHOUSE_ENGINE=connect)"
)


def test_a_task_on_the_engine_returns_its_summary_and_leaves_its_objects_out_of_later_collections(
    spark, lakehouse, monkeypatch
):
    write_campaigns(lakehouse, seed=3)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LAKEHOUSE", spark_connection())
    for name in (
        "LAKEHOUSE_ENGINE",
        "LAKEHOUSE_ENGINE_URL",
    ):  # the task sets them: as they were after the test
        monkeypatch.delenv(name, raising=False)
    gc.unfreeze()
    task = SparkJobOperator(
        task_id="dim_campaigns",
        job="run",
        application_args=["dim_campaigns", "--lakehouse-root", lakehouse.root],
    )

    summary = task.run_on_engine()

    assert (
        summary["table"] == "dims.campaigns"
        and summary["rows_written"] == table(spark, lakehouse, "dims.campaigns").count()
    )
    # What the process holds after the job (Airflow's, pyspark's, pandas' objects) is frozen: the
    # cyclic GC's full collections and the interpreter's exit (2 s of a small run) skip it.
    assert gc.get_freeze_count() > 100_000
