"""Fixtures of the cluster tests: a Spark standalone cluster, a PostgreSQL server, Airflow on it.

Both servers are private to the session (free ports of 127.0.0.1, state in temporary folders) and
always stopped at its end. They run the code behind ``make cluster-start`` and ``make
postgres-start`` (include/cluster/). A missing PostgreSQL fails these tests, saying what to run
(``make postgres-install``, part of ``make test``): they never skip.
"""

from __future__ import annotations

import atexit
import shutil
import socket
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "include" / "cluster"))

from airflow_env import airflow, airflow_environment  # noqa: E402
from local_postgres import LocalPostgres, PostgresError, find_bindir  # noqa: E402
from pyfiles import build_zip  # noqa: E402
from spark_standalone import ClusterError, SparkCluster  # noqa: E402

from lakehouse.config import Lakehouse  # noqa: E402

AIRFLOW_DB = "airflow_cluster_e2e"
# A throwaway server: durability buys nothing here, and costs seconds per Airflow commit.
TEST_POSTGRES_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports of 127.0.0.1 free right now (another process may take one later)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> SparkCluster:
    """One master and one worker (2 cores, 3g) for the session, on ports no developer's cluster uses."""
    for attempt in range(3):
        master_port, master_webui_port, worker_webui_port = free_ports(3)
        cluster = SparkCluster(
            state_dir=tmp_path_factory.mktemp("spark-cluster"),
            master_port=master_port,
            master_webui_port=master_webui_port,
            worker_webui_port=worker_webui_port,
            worker_cores=2,
            worker_memory="3g",
        )
        try:
            cluster.start()
            break
        except ClusterError as error:
            # A free port may be taken before the daemon binds it: retry with new ones.
            if not error.port_taken or attempt == 2:
                pytest.fail(f"The Spark standalone cluster did not start: {error}", pytrace=False)
    atexit.register(cluster.stop, 10)  # a safety net should the session die before its teardown
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def postgres() -> LocalPostgres:
    """A fresh PostgreSQL server (initdb'd for this session) with a role for Airflow."""
    if find_bindir() is None:
        pytest.fail(
            "No PostgreSQL server found (no /usr/lib/postgresql/*/bin/postgres): run `make postgres-install` "
            "(`make test` does: apt-get install postgresql, as root) or set POSTGRES_BINDIR.",
            pytrace=False,
        )
    # Not under pytest's temporary folder: that is private to this user (mode 0700), and a session
    # run by root runs the server as `postgres`, who must reach its data folder.
    folder = Path(tempfile.mkdtemp(prefix="ysb-postgres-"))
    folder.chmod(0o711)  # searchable: each try's folder below is the server's own (mode 0700)
    try:
        for attempt in range(3):
            server = LocalPostgres(
                dir=folder / f"try-{attempt}",
                port=free_ports(1)[0],
                settings=TEST_POSTGRES_SETTINGS,
            )
            try:
                server.start()
                break
            except PostgresError as error:
                taken = "is taken" in str(error) or "Address already in use" in str(error)
                if not taken or attempt == 2:
                    pytest.fail(f"PostgreSQL did not start: {error}", pytrace=False)
        atexit.register(server.stop, 10)
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class AirflowOnPostgres:
    """A private AIRFLOW_HOME whose metadata DB is a migrated PostgreSQL database."""

    home: Path
    db_url: str

    def environment(self, lakehouse: Lakehouse, **extra: str) -> dict[str, str]:
        """tests/airflow_env.py's environment, with the metadata DB in PostgreSQL."""
        env = airflow_environment(
            self.home, lakehouse, AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=self.db_url, **extra
        )
        # SQLite's connect args (a lock timeout), should the environment set them: psycopg2 rejects them.
        env.pop("AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS", None)
        return env


@pytest.fixture(scope="session")
def airflow_on_postgres(
    postgres: LocalPostgres, tmp_path_factory: pytest.TempPathFactory
) -> AirflowOnPostgres:
    """Airflow on a fresh database of the session's server, set up by ``airflow db migrate``."""
    postgres.ensure_database(AIRFLOW_DB)
    airflow_pg = AirflowOnPostgres(
        tmp_path_factory.mktemp("airflow_home_postgres"), postgres.url(AIRFLOW_DB)
    )
    result = airflow(
        airflow_pg.environment(Lakehouse(str(airflow_pg.home / "unused"))),
        "db",
        "migrate",
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return airflow_pg


@pytest.fixture(scope="session")
def py_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lakehouse package zipped as ``make pyfiles`` does, from the sources as they are now."""
    return build_zip(tmp_path_factory.mktemp("pyfiles") / "lakehouse.zip")
