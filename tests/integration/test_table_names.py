"""Tables by name: after an hourly run, `silver.ad_events` and the gold tables answer by name over the
engine, in a local driver and in `lakehouse query`, and keep answering after a full refresh.

The lakehouse is the one whose metastore the test session's engine took when it started
(conftest's ``engine_lakehouse``; every other test lakehouse leaves it untouched). On the clone's
engine (its metastore is ``$LAKEHOUSE_ROOT``'s) the lakehouse gets an engine of its own, started
with its root.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import ExitStack

import pytest
from helpers import START, oracle, private_engine, run_job, run_pipeline

from lakehouse import catalog, delta_log, metastore
from lakehouse.config import Lakehouse, engine_settings
from lakehouse_tools import cli
from lakehouse_tools.generator import write_campaigns, write_hours

# A driver of its own, as spark-submit starts one: it prints what each query of its arguments answers.
# A short run: its JVM starts as a short task's spark-submit driver does (lakehouse.spark).
LOCAL_DRIVER = """
import json, sys
from lakehouse.spark import build_spark_session, fast_start_java_options
conf = {"spark.master": "local[1]", "spark.ui.enabled": "false"}
conf["spark.driver.extraJavaOptions"] = fast_start_java_options()
spark = build_spark_session("table-names-local", conf, engine_kind="local")
print(json.dumps([spark.sql(query).collect()[0][0] for query in sys.argv[1:]]))
"""


@pytest.fixture(scope="module")
def named(engine_lakehouse, tmp_path_factory):
    """(lakehouse, a session of its engine) after one hourly run on that engine."""
    from pyspark.sql import SparkSession

    folder = tmp_path_factory.mktemp("table_names")
    lakehouse = engine_lakehouse or Lakehouse(root=str(folder / "lakehouse"))
    write_campaigns(lakehouse, seed=38)
    write_hours(lakehouse, START, 1, events_per_second=0.05, seed=38)
    with pytest.MonkeyPatch.context() as env, ExitStack() as engine:
        env.setenv("LAKEHOUSE_ROOT", lakehouse.root)
        env.setenv("LAKEHOUSE_ENGINE", "connect")
        env.delenv("LAKEHOUSE_ENGINE_URL", raising=False)
        env.delenv("SPARK_CONNECT_MODE_ENABLED", raising=False)  # put back as it was at the end
        if engine_lakehouse is None:
            env.setenv("LAKEHOUSE_ENGINE_MEMORY", "1500m")
            engine.enter_context(private_engine(folder / "engine", env.setenv))
        run_pipeline(lakehouse)
        reader = SparkSession.builder.remote(engine_settings().url).create()
        try:
            yield lakehouse, reader
        finally:
            reader.stop()


def by_name_and_by_path(spark, lakehouse: Lakehouse, name: str) -> tuple[int, int]:
    by_name = spark.sql(f"SELECT count(*) FROM {name}").collect()[0][0]
    return by_name, spark.read.format("delta").load(lakehouse.table(name).path).count()


def test_every_written_table_answers_by_name_on_the_engine(named):
    lakehouse, spark = named
    expected = oracle(lakehouse)
    assert by_name_and_by_path(spark, lakehouse, "silver.ad_events") == (len(expected.events),) * 2
    written = {
        spec.name
        for spec in catalog.tables()
        if delta_log.is_delta_table(lakehouse.table(spec.name).path)
    }
    assert {
        "dims.campaigns",
        "bronze.ad_events",
        "silver.ad_events",
        "gold.campaign_hourly",
    } <= written
    for layer in {name.split(".")[0] for name in written}:
        shown = {
            f"{layer}.{row.tableName}" for row in spark.sql(f"SHOW TABLES IN {layer}").collect()
        }
        assert shown == {name for name in written if name.startswith(f"{layer}.")}
    for name in sorted(written):
        by_name, by_path = by_name_and_by_path(spark, lakehouse, name)
        assert by_name == by_path, name
    views = spark.sql("SELECT sum(views) FROM gold.campaign_hourly").collect()[0][0]
    assert views == sum(row["views"] for row in expected.rows("gold.campaign_hourly"))
    # An external table at the path: the registration (after the job's first write) wrote no commit.
    history = spark.sql("DESCRIBE HISTORY silver.ad_events").collect()
    assert [row.version for row in history if row.operation == "CREATE TABLE"] == [0]
    location = spark.sql("DESCRIBE DETAIL silver.ad_events").collect()[0].location
    assert location.removeprefix("file:") == lakehouse.table("silver.ad_events").path


def test_a_local_driver_and_the_lakehouse_command_answer_by_name(named, capsys):
    lakehouse, spark = named
    events, _ = by_name_and_by_path(spark, lakehouse, "silver.ad_events")
    campaigns, _ = by_name_and_by_path(spark, lakehouse, "gold.campaign_hourly")
    env = {
        name: value for name, value in os.environ.items() if name != "SPARK_CONNECT_MODE_ENABLED"
    }
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            LOCAL_DRIVER,
            "SELECT count(*) FROM silver.ad_events",
            "SELECT count(*) FROM gold.campaign_hourly",
        ],
        env={**env, "LAKEHOUSE_ROOT": lakehouse.root, "LAKEHOUSE_ENGINE": "local"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [events, campaigns]

    query = "SELECT count(*) AS n FROM silver.ad_events"
    assert cli.main(["query", query, "--json", "--lakehouse-root", lakehouse.root]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": events}]


def test_a_job_of_another_lakehouse_leaves_the_names_alone(named, tmp_path):
    lakehouse, spark = named
    other = Lakehouse(root=str(tmp_path / "other"))
    write_campaigns(other, seed=39)
    run_job(catalog.get("dims.campaigns").task, other)
    location = spark.sql("DESCRIBE DETAIL dims.campaigns").collect()[0].location
    assert location.removeprefix("file:") == lakehouse.table("dims.campaigns").path


def test_a_full_refresh_keeps_the_names(named):
    lakehouse, spark = named
    events = len(oracle(lakehouse).events)
    run_job("full_refresh", lakehouse, "--layer", "silver")
    assert by_name_and_by_path(spark, lakehouse, "silver.ad_events") == (0, 0)
    # Only the tasks of the two tables read below: the other gold tables' reruns cost a minute.
    run_pipeline(lakehouse, up_to="gold.campaign_hourly")
    assert by_name_and_by_path(spark, lakehouse, "silver.ad_events") == (events, events)
    gold, by_path = by_name_and_by_path(spark, lakehouse, "gold.campaign_hourly")
    assert gold == by_path > 0


def test_noted_names_are_not_looked_up_again_and_a_dropped_one_comes_back_with_the_note(named):
    lakehouse, spark = named
    noted = metastore.registered_file(lakehouse.root)
    in_metastore = {
        f"{layer}.{row.tableName}"
        for layer in ("dims", "bronze", "silver", "gold", "ops")
        if spark.catalog.databaseExists(layer)
        for row in spark.sql(f"SHOW TABLES IN {layer}").collect()
    }
    assert set(noted.read_text().split()) == in_metastore

    spark.sql("DROP TABLE gold.campaign_windows")  # external: its files stay
    run_job("gold_aggregates", lakehouse)
    assert not spark.catalog.tableExists("gold.campaign_windows"), "the note spares the lookup"
    noted.unlink()
    run_job("gold_aggregates", lakehouse)
    assert by_name_and_by_path(spark, lakehouse, "gold.campaign_windows")[0] > 0
    assert set(noted.read_text().split()) == in_metastore
