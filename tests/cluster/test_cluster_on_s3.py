"""The jobs on a Spark standalone cluster with the lakehouse on S3: storage every machine sees.

The cluster's executors share nothing with the driver but the object store: the package reaches
them by --py-files, the S3 jars and settings by spark-submit, every table and checkpoint is in the
bucket. The DAG builds the same spark-submit lines (tests/cluster/test_cluster_e2e.py).
"""

from __future__ import annotations

import secrets
import subprocess
from collections import Counter
from datetime import datetime

import pytest
from helpers import START, expected_rows, local_files_named_like, oracle, tasks_up_to
from s3_server import BUCKET, running_s3_server, s3_environment

from lakehouse import catalog, object_storage
from lakehouse.config import Lakehouse
from lakehouse_tools.fault_harness.launch import job_environment, spark_submit_command
from lakehouse_tools.generator import write_campaigns, write_hours

# long: four applications on the cluster, each fetching the S3 jars (about 700 MB) into its work
# folder; `make test-long` runs it. The S3 cases of tests/s3 run the same jobs in make test.
pytestmark = [pytest.mark.timeout(1200), pytest.mark.long]
SEED = 41
GOLD = "gold.campaign_hourly"


@pytest.fixture
def s3_lakehouse(tmp_path, monkeypatch) -> Lakehouse:
    with (
        running_s3_server(tmp_path / "s3") as settings,
        s3_environment(settings, monkeypatch.setenv),
    ):
        yield Lakehouse(root=f"s3a://{BUCKET}/cluster-{secrets.token_hex(3)}")


def on_the_cluster(command: list[str], master_url: str, py_files) -> list[str]:
    """A job's spark-submit line, sent to the standalone master with the package zip."""
    local = command.index("--master") + 1
    return [*command[:local], master_url, "--py-files", str(py_files), *command[local + 1 :]]


def rows(lakehouse: Lakehouse, name: str) -> Counter:
    """A table's rows, read by delta-rs from the bucket (no JVM), in declared column order."""
    columns = catalog.get(name).column_names
    found = object_storage.delta_table(lakehouse.table(name).path).to_pyarrow_table().to_pylist()
    naive = lambda v: v.replace(tzinfo=None) if isinstance(v, datetime) else v  # noqa: E731
    return Counter(tuple(naive(row[column]) for column in columns) for row in found)


def test_jobs_on_the_cluster_write_every_table_to_s3_and_equal_the_oracle(
    s3_lakehouse, spark_cluster, py_files, tmp_path
):
    lakehouse = s3_lakehouse
    write_campaigns(lakehouse, SEED)
    write_hours(lakehouse, START, 1, 0.05, SEED)
    apps_before = {app["id"] for app in spark_cluster.master_state()["completedapps"]}

    tasks = [spec.task for spec in tasks_up_to(GOLD)]
    for task in tasks:
        command = on_the_cluster(
            spark_submit_command(task, lakehouse), spark_cluster.master_url, py_files
        )
        done = subprocess.run(
            command,
            env=job_environment(lakehouse),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, f"{task}:\n{(done.stdout + done.stderr)[-4000:]}"

    # Each job was an application of the cluster, its tasks run by the cluster's executor.
    apps = [
        app for app in spark_cluster.master_state()["completedapps"] if app["id"] not in apps_before
    ]
    assert sorted(app["name"] for app in apps) == sorted(tasks)
    for app in apps:
        logs = [
            p.read_text(errors="replace")
            for p in (spark_cluster.work_dir / app["id"]).glob("*/stderr")
        ]
        assert any("Finished task" in log for log in logs), f"{app['name']}: no task on an executor"

    # The tables in the bucket equal the oracle; nothing was written to a local path.
    expected = oracle(lakehouse)
    assert sum(rows(lakehouse, "bronze.ad_events").values()) == expected.lines
    silver = [row[0] for row in rows(lakehouse, "silver.ad_events").elements()]
    assert sorted(silver) == sorted(expected.events)
    assert rows(lakehouse, GOLD) == expected_rows(expected, GOLD)
    assert local_files_named_like(lakehouse.root) == []
