"""A private Airflow for tests: its own AIRFLOW_HOME and SQLite DB, the project's DAGs, a lakehouse."""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from datetime import datetime
from pathlib import Path

from lakehouse.config import Lakehouse, engine_settings
from lakehouse.spark import engine

PROJECT_DIR = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


def spark_connection() -> str:
    """The Spark connection of the tests' Airflow: the warm engine when jobs run there (make's default)."""
    if engine() == "connect":
        settings = engine_settings()
        return json.dumps(
            {
                "conn_type": "spark_connect",
                "host": "localhost",
                "port": settings.port,
                "password": settings.token,
            }
        )
    return json.dumps({"conn_type": "spark", "host": "local[2]"})


def airflow_environment(airflow_home: Path, lakehouse: Lakehouse, **extra: str) -> dict[str, str]:
    """The environment every Airflow command of a test runs with (never the developer's own)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(airflow_home),
        AIRFLOW__CORE__DAGS_FOLDER=str(PROJECT_DIR / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__EXECUTOR="LocalExecutor",
        AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="False",
        AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME="0.2",  # as the Makefile sets it (why: there)
        AIRFLOW__LOGGING__LOGGING_LEVEL="INFO",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS="lakehouse_tools.airflow_sqlite.CONNECT_ARGS",
        AIRFLOW_CONN_SPARK_LAKEHOUSE=spark_connection(),
        LAKEHOUSE_ROOT=lakehouse.root,
        LAKEHOUSE_JARS_DIR=os.environ.get("LAKEHOUSE_JARS_DIR", str(PROJECT_DIR / ".jars")),
        PYTHONPATH=os.pathsep.join(
            [str(PROJECT_DIR / "include"), env.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep),
        PATH=os.pathsep.join([str(VENV_BIN), env.get("PATH", "")]),
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        # No SPARK_SUBMIT_OPTS: the operator gives spark-submit drivers their JVM options, as users get them.
    )
    env.update(extra)
    return env


def airflow(env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run an ``airflow`` CLI command; output is captured for the assertion message."""
    return subprocess.run(
        [str(VENV_BIN / "airflow"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def create_backfill(env: dict[str, str], first: datetime, last: datetime) -> None:
    """``airflow backfill create`` of ysb_hourly's runs at logical dates ``first`` to ``last``.

    Created while the scheduler runs, as an operator would: SQLite (the embedded default DB) makes
    concurrent writers wait (lakehouse_tools.airflow_sqlite), it does not fail them.
    """
    result = airflow(
        env,
        "backfill",
        "create",
        "--dag-id",
        "ysb_hourly",
        "--from-date",
        first.isoformat(),
        "--to-date",
        last.isoformat(),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


AIRFLOW_COMMANDS = """\
import json, sys
from airflow.__main__ import main
for argv in json.loads(sys.argv[1]):
    sys.argv = ["airflow", *argv]
    main()
"""


def airflow_commands(env: dict[str, str], *commands: list[str]) -> subprocess.CompletedProcess:
    """Run several ``airflow`` CLI commands in order, in one process: each is what ``airflow ARGS``
    runs (airflow.__main__.main), but Python and Airflow's imports start once (~3 CPU-s a start)."""
    return subprocess.run(
        [sys.executable, "-c", AIRFLOW_COMMANDS, json.dumps(commands)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def _pause_args(dag_ids: tuple[str, ...]) -> list[str]:
    pattern = "^(" + "|".join(re.escape(dag_id) for dag_id in dag_ids) + ")$"
    return ["dags", "pause", "--treat-dag-id-as-regex", "--yes", pattern]


def reserialize_and_pause(env: dict[str, str], *dag_ids: str) -> None:
    """``airflow dags reserialize``, then ``dags pause`` of ``dag_ids``, in one CLI process."""
    result = airflow_commands(env, ["dags", "reserialize"], _pause_args(dag_ids))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    _assert_paused(env, dag_ids, result)


def pause(env: dict[str, str], *dag_ids: str) -> None:
    """Pause ``dag_ids`` with one ``airflow dags pause`` (each CLI call is seconds of CPU)."""
    result = airflow(env, *_pause_args(dag_ids))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    _assert_paused(env, dag_ids, result)


def _assert_paused(env: dict[str, str], dag_ids: tuple[str, ...], result) -> None:
    paused = metadata_query(
        env["AIRFLOW_HOME"],
        f"SELECT dag_id FROM dag WHERE is_paused AND dag_id IN ({', '.join('?' * len(dag_ids))})",
        *dag_ids,
    )
    assert sorted(row[0] for row in paused) == sorted(dag_ids), (paused, result.stdout[-3000:])


def airflow_python(env: dict[str, str], code: str):
    """Run ``code`` with the test's Airflow environment (its metadata DB); the JSON it printed last, if any."""
    found = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert found.returncode == 0, found.stderr[-3000:]
    lines = found.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else None


def task_states(env: dict[str, str], dag_id: str) -> dict[str, list]:
    """Every task instance of ``dag_id`` in the test's metadata DB: task id -> [state, try number]."""
    return airflow_python(
        env,
        "import json\n"
        "from airflow.models.taskinstance import TaskInstance\n"
        "from airflow.utils.session import create_session\n"
        "with create_session() as session:\n"
        f"    rows = session.query(TaskInstance).filter(TaskInstance.dag_id == {dag_id!r}).all()\n"
        "    print(json.dumps({ti.task_id: [str(ti.state), ti.try_number] for ti in rows}))\n",
    )


RETRY_POLICY = """\
# Written by tests/airflow_env.py: a cluster policy of this test's Airflow home only.
from datetime import timedelta


def task_policy(task):
    if task.retry_delay > timedelta(seconds={seconds}):
        task.retry_delay = timedelta(seconds={seconds})
"""


def short_retry_delay(airflow_home: Path, seconds: int = 20) -> None:
    """Tasks of this Airflow home wait at most ``seconds`` before a retry, not their DAG's delay.

    ysb_hourly retries after 1 minute (a production delay: a retry refused by a lease still held
    waits for it). A test waiting on a scheduler would sit idle for that minute after each failed
    try. The DAG files stay as deployed: a cluster policy (``task_policy`` in
    ``$AIRFLOW_HOME/config/airflow_local_settings.py``, which every Airflow process of this home
    imports) shortens the delay as the DAG is parsed, so the scheduler reads it from the
    serialized DAG. Airflow's ``[core] default_task_retry_delay`` cannot: the DAG sets its own.
    The number of retries is the DAG's.
    """
    config = airflow_home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "airflow_local_settings.py").write_text(RETRY_POLICY.format(seconds=seconds))


_migrated_template: Path | None = None


def migrate(airflow_home: Path) -> None:
    """A migrated metadata DB in ``airflow_home``: the first in a process by ``airflow db migrate``,
    the others copies of it (a migration costs ~10 s of CPU, and a dozen tests start from one)."""
    global _migrated_template
    if _migrated_template is None or not _migrated_template.is_file():
        template_home = Path(tempfile.mkdtemp(prefix="airflow-migrated-"))
        atexit.register(shutil.rmtree, template_home, ignore_errors=True)
        env = airflow_environment(template_home, Lakehouse(str(template_home / "unused")))
        result = airflow(env, "db", "migrate", timeout=300)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        _migrated_template = template_home / "airflow.db"
    airflow_home.mkdir(parents=True, exist_ok=True)
    # SQLite's backup API: a consistent copy, whatever the template's journal holds.
    with (
        closing(sqlite3.connect(_migrated_template)) as source,
        closing(sqlite3.connect(airflow_home / "airflow.db")) as copy,
    ):
        source.backup(copy)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AirflowServices:
    """A real api-server (with the execution API), scheduler and dag-processor on 127.0.0.1.

    Each runs in its own process group; ``stop`` sends SIGTERM, waits a bounded time, then
    SIGKILLs the group (a LocalExecutor scheduler has been seen to hang on SIGTERM alone).
    """

    def __init__(self, env: dict[str, str], log_dir: Path):
        port = free_port()
        self.base_url = f"http://127.0.0.1:{port}"
        self.env = {
            # As make airflow-ui sets it (include/scripts/airflow_ui.sh): Airflow's default of 32
            # task slots ran a backfill's and an hourly run's ~20 Spark tasks at once on the
            # 2-core engine, each waiting on the others (and retrying their write conflicts).
            "AIRFLOW__CORE__PARALLELISM": "4",
            **env,
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__BASE_URL": self.base_url,
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            # Each file is parsed once at the start, not again every 30 s (Airflow's default): the
            # DAG files do not change during a test, and each re-parse of the 4 files is a process
            # per file (~2 CPU-s in all) and a write of the serialized DAGs, taking the scheduler's
            # SQLite lock, ~7 times in a 3-minute test.
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600",
        }
        self.log_dir = log_dir
        self.processes: list[subprocess.Popen] = []
        self.port = port

    def start(
        self, services: tuple[str, ...] = ("api-server", "scheduler", "dag-processor")
    ) -> AirflowServices:
        """Start ``services``: the api-server first, the others once it answers (as make airflow-ui does).

        A scheduler started beside the api-server launches tasks at once (the latest hourly run, a
        task it resets after a restart) that fail their try on "Connection refused".
        """
        import urllib.request

        self.log_dir.mkdir(parents=True, exist_ok=True)
        commands = {
            "api-server": ["api-server", "--host", "127.0.0.1", "--port", str(self.port)],
            # No log server (it binds every interface on 8793, and two test workers' collide): the
            # api-server reads the task logs from AIRFLOW_HOME, as under make airflow-ui.
            "scheduler": ["scheduler", "--skip-serve-logs"],
            "dag-processor": ["dag-processor"],
        }

        def launch(name: str) -> None:
            log = open(self.log_dir / f"{name}.log", "w")
            self.processes.append(
                subprocess.Popen(
                    [str(VENV_BIN / "airflow"), *commands[name]],
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

        launch("api-server")
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{self.base_url}/api/v2/monitor/health", timeout=2)
                break
            except OSError:
                if self.processes[0].poll() is not None:
                    deadline = 0
                time.sleep(0.2)  # a refused connection: cheap to try again
        else:
            self.stop()
            raise RuntimeError(
                f"the Airflow api-server did not come up; see the logs in {self.log_dir}"
            )
        # Its execution API is built on the first request to it (as include/scripts/airflow_ui.sh
        # does), 3-10 s of CPU: built while the scheduler and dag-processor import Airflow (as long
        # again), before the first task reaches it. start() returns once it is built.
        with ThreadPoolExecutor(1) as pool:
            warm_up = pool.submit(
                urllib.request.urlopen, f"{self.base_url}/execution/health", timeout=120
            )
            for name in ("scheduler", "dag-processor"):
                if name in services:
                    launch(name)
            try:
                warm_up.result()
            except OSError:
                self.stop()
                raise
        return self

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM each service's process group, wait up to ``timeout`` s, then SIGKILL those groups
        and the groups of the task runners they started.

        Airflow 3's supervisor puts each task runner in a process group of its own (its PID), so
        killing the scheduler's group does not reach it: a task "killed" with its scheduler ran on
        (its job holding the checkpoint lock, so that the next start's try was refused and waited
        for the DAG's retry delay). Its group, and its spark-submits with it, are found as the
        services' descendants before the first signal.
        """
        import signal

        own_group = os.getpgrp()
        task_groups = set()
        for process in self.processes:
            for pid in _descendants(process.pid):
                try:
                    task_groups.add(os.getpgid(pid))
                except ProcessLookupError:
                    pass
        task_groups -= {process.pid for process in self.processes} | {own_group}
        for process in self.processes:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        for process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for group in [process.pid for process in self.processes] + sorted(task_groups):
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for process in self.processes:
            process.wait(timeout=10)


def _descendants(pid: int) -> list[int]:
    """The live descendants of ``pid``, read from /proc (children before grandchildren)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # exited meanwhile
            continue
        # Field 4 is the parent's PID; the command (field 2) may hold spaces and parentheses.
        parent = int(text[text.rindex(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(0), []):
            found.append(child)
            todo.append(child)
    return found


@contextmanager
def airflow_services(env: dict[str, str], log_dir: Path):
    """Scheduler, api-server and dag-processor; always stopped (their process groups killed)."""
    running = AirflowServices(env, log_dir).start()
    try:
        yield running
    finally:
        running.stop()


TERMINAL = {"success", "failed"}


def metadata_query(airflow_home: Path | str, sql: str, *params) -> list[tuple]:
    """Rows of ``sql`` over the test Airflow's metadata DB, opened read-only.

    For polling beside a scheduler: an `airflow` CLI call costs ~3 CPU-s on this 2-core machine,
    and its transactions take SQLite's write lock (lakehouse_tools.airflow_sqlite).
    """
    with closing(
        sqlite3.connect(f"file:{Path(airflow_home, 'airflow.db')}?mode=ro", uri=True, timeout=60)
    ) as db:
        return db.execute(sql, params).fetchall()


def dag_runs(env: dict[str, str], dag_id: str = "ysb_hourly") -> list[dict]:
    """The DAG's runs, oldest first: ``run_id`` and ``state`` of each."""
    rows = metadata_query(
        env["AIRFLOW_HOME"],
        "SELECT run_id, state FROM dag_run WHERE dag_id = ? ORDER BY id",
        dag_id,
    )
    return [{"run_id": run_id, "state": state} for run_id, state in rows]


def wait_for_runs(
    env: dict[str, str], count: int, log_dir: Path, timeout: float = 1800
) -> list[dict]:
    """Wait until at least ``count`` runs of ysb_hourly exist and every run has finished."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = dag_runs(env)
        if len(runs) >= count and all(run["state"] in TERMINAL for run in runs):
            return runs
        # A read-only query of the metadata DB (~1 ms): a short period, so that the test's next
        # step does not sit idle for up to a second after the runs' end.
        time.sleep(0.25)
    raise AssertionError(
        f"DAG runs did not finish in {timeout} s: {dag_runs(env)}; logs in {log_dir}"
    )


def describe_failures(env: dict[str, str], runs: list[dict]) -> str:
    """Task states of every run that did not succeed, and the tail of their failed tasks' logs."""
    report = []
    for run in runs:
        if run["state"] == "success":
            continue
        states = airflow(env, "tasks", "states-for-dag-run", "ysb_hourly", run["run_id"])
        report.append(f"{run['run_id']}: {run['state']}\n{states.stdout[-2000:]}")
    logs = sorted(Path(env["AIRFLOW_HOME"], "logs").rglob("*.log"), key=lambda p: p.stat().st_mtime)
    failed = [p for p in logs if "Task failed" in p.read_text(errors="replace")]
    for path in failed[-2:]:
        report.append(
            f"--- {path}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-40:])
        )
    return "\n".join(report)
