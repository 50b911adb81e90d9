"""Shared fixtures: one local Spark session for the whole run, a fresh lakehouse per test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakehouse.config import Lakehouse

PROJECT_DIR = Path(__file__).resolve().parents[1]
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

# Test tiers, by folder: `make test-fast` runs the unit tier (a local Spark, no servers);
# `make test` runs every tier. A test folder not listed here is a mistake the collection reports.
TIERS = {
    "unit": "unit",
    "dags": "unit",
    "integration": "integration",
    "fuzz": "integration",
    "s3": "integration",
    "e2e": "e2e",
    "kafka": "e2e",
    "deploy": "e2e",
    "ui": "e2e",
    "faults": "slow",
    "scheduler": "slow",
    "cluster": "slow",
    "bench": "slow",
}
TIER_HELP = {
    "unit": "transforms, the catalog and DAG parsing; no servers (`make test-fast`: one local Spark session)",
    "integration": "jobs run in-process on real Delta tables (incremental twice, batch, bad input, fuzzing)",
    "e2e": "the DAG through a real Airflow, Kafka, deployment files",
    "slow": "real scheduler, Spark cluster, fault injection, benchmark smoke run",
}


def pytest_configure(config):
    for tier, help_text in TIER_HELP.items():
        config.addinivalue_line("markers", f"{tier}: {help_text}")
    config.addinivalue_line(
        "markers",
        "local_driver: runs Spark in the test process (a classic session): the process's tests then read with a local session",
    )
    config.addinivalue_line(
        "markers",
        "long: a many-minute variant of what shorter tests already cover; run by `make test-long`, not `make test`",
    )


# The suite's longest files, longest first (2-9 minutes each in `make test`; the others take
# under 2). `make test`'s workers take whole files in collection order (pytest-xdist's loadfile,
# without its reordering by test count), so these start first and the short ones fill the ends:
# two long files meeting at the end would leave a worker idle for minutes. Ranked by the seconds
# of a CI run's report (.local/test-report.xml), summed per file.
LONGEST_FILES = (
    "integration/test_user_sessions.py",
    "scheduler/test_backfill.py",
    "s3/test_pipeline_on_s3.py",  # and tests/s3's other files after it, on the same worker
    "scheduler/test_hourly_export.py",
    "faults/test_sessions_after_a_kill.py",
    "e2e/test_lineage.py",  # an engine of its own (lineage on)
    "integration/test_landing_contract.py",
    "integration/test_rollback.py",
    "e2e/test_hourly_dag.py",
    "kafka/test_bronze_kafka.py",  # and tests/kafka's other files after it, on the same worker
    "integration/test_bad_input_files.py",
    "scheduler/test_clean_stop.py",
    "integration/test_batch_mode.py",
    "faults/test_engine_faults.py",
    "integration/test_table_names.py",
    "integration/test_incremental_jobs.py",
    "integration/test_catalog_contract.py",
)


def pytest_collection_modifyitems(config, items):
    tests_dir = Path(__file__).parent
    for item in items:
        folder = Path(item.fspath).relative_to(tests_dir).parts[0]
        if folder not in TIERS:
            raise pytest.UsageError(
                f"tests/{folder} has no tier: add it to TIERS in tests/conftest.py"
            )
        item.add_marker(getattr(pytest.mark, TIERS[folder]))
    rank = {name: position for position, name in enumerate(LONGEST_FILES)}
    items.sort(
        key=lambda item: rank.get(Path(item.fspath).relative_to(tests_dir).as_posix(), len(rank))
    )


# Folders whose files share servers of the folder's (tests/s3: the S3 server and an engine started
# for it; tests/kafka: the broker): `make test`'s workers take such a folder as one unit of work,
# its files one after the other on one worker, which then starts those servers once.
SHARED_WORKER_FOLDERS = ("s3", "kafka")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's loadfile, but a folder of SHARED_WORKER_FOLDERS is one unit, not a file each."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LoadFileOrSharedFolderScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]  # tests/<folder>/<file>, from the rootdir
            parts = path.split("/")
            if len(parts) > 2 and parts[0] == "tests" and parts[1] in SHARED_WORKER_FOLDERS:
                return "/".join(parts[:2])
            return path

    return LoadFileOrSharedFolderScheduling(config, log)


TEST_SPARK_CONF = {
    "spark.master": "local[2]",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "2g",
}


def _runs_jobs(session: pytest.Session) -> bool:
    """True when this test session runs jobs on the engine (make's default), i.e. starts one."""
    from lakehouse.spark import engine as engine_kind

    return engine_kind() == "connect" and any(
        item.get_closest_marker("unit") is None for item in session.items
    )


@pytest.fixture(scope="session")
def spark(request):
    """The session the tests read and write tables with.

    Where the jobs run on the engine, a session of that engine that outlives the jobs: its JVM is
    warm, and a second JVM in each test process would cost the suite its start and compilation.
    Else (`make test-fast`, LAKEHOUSE_ENGINE=local) a local session in the test process.
    """
    from lakehouse.spark import build_spark_session

    items = request.session.items
    if _runs_jobs(request.session) and not any(
        item.get_closest_marker("local_driver") for item in items
    ):
        request.getfixturevalue("engine")
        session = build_spark_session(
            "lakehouse-tests", TEST_SPARK_CONF, engine_kind="connect", outlives_jobs=True
        )
        yield session
        session.stop()
        return
    session = build_spark_session("lakehouse-tests", TEST_SPARK_CONF, engine_kind="local")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def engine(tmp_path_factory):
    """The warm engine the jobs run on (make's default, LAKEHOUSE_ENGINE=connect).

    This clone's engine when it already answers (after `make demo` or `make engine-up`); else one
    of the session's own, on a free port, stopped when the session ends (a port held by another
    clone's engine, whose token differs, is never mistaken for ours). A test worker (``make test``'s
    pytest-xdist) always starts its own: the fault tests kill their engine.

    An engine of the session's own takes the metastore of a lakehouse root of the session's own,
    which no test writes but the one that takes it (``engine_lakehouse``): the tables by name are
    then tested on this engine, not on one more (a test's lakehouse elsewhere leaves the metastore
    alone, as a job registers its tables only in its own lakehouse's, lakehouse.metastore).
    """
    from lakehouse.config import engine_settings
    from lakehouse.spark import check_engine

    if (
        "PYTEST_XDIST_WORKER" not in os.environ
        and check_engine(engine_settings().url, timeout_s=5) is None
    ):
        # Restarted by `up` if its jars are not the ones the Makefile has fetched since (Kafka's).
        subprocess.run([sys.executable, "-m", "lakehouse_tools.engine", "up"], check=True)
        yield engine_settings()
        return
    from helpers import private_engine

    root = Lakehouse.from_env(str(tmp_path_factory.mktemp("engine_lakehouse"))).root
    _ENGINE_LAKEHOUSE.append(root)
    with private_engine(tmp_path_factory.mktemp("engine"), os.environ.__setitem__, root):
        yield engine_settings()


# The lakehouse root whose metastore the session's own engine took (none on the clone's engine).
_ENGINE_LAKEHOUSE: list[str] = []


@pytest.fixture(scope="session")
def engine_lakehouse(engine) -> Lakehouse | None:
    """The lakehouse whose metastore the session's engine has, empty, for the one test module that
    writes it (the tables by name); None when the engine is the clone's (its metastore is
    ``$LAKEHOUSE_ROOT``'s, which the tests leave alone): that module then starts one of its own."""
    return Lakehouse(root=_ENGINE_LAKEHOUSE[0]) if _ENGINE_LAKEHOUSE else None


@pytest.fixture(scope="session", autouse=True)
def _engine_for_jobs(request):
    """Tests beyond the unit tier run jobs: on the engine, when that is the configured kind of session.

    A session fixture, so the engine is up before any module fixture runs a job (a test worker may
    start with such a module).
    """
    if _runs_jobs(request.session):
        request.getfixturevalue("engine")


@pytest.fixture
def lakehouse(tmp_path: Path) -> Lakehouse:
    return Lakehouse(root=str(tmp_path / "lakehouse"))


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory) -> Path:
    """A migrated SQLite Airflow metadata DB, shared by the tests that run Airflow commands."""
    from airflow_env import migrate

    home = tmp_path_factory.mktemp("airflow_home")
    migrate(home)
    return home
