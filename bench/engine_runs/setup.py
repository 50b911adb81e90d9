"""A fresh Airflow home and lakehouse per (repetition, kind of Spark), the benchmark's engine, and
the plumbing a timed step needs: commands in their own process group, the metadata DB, CPU figures.

The benchmark's Airflow homes are the tests' (``tests/airflow_env.py``): ``make bench-engine`` puts
``tests/`` on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from airflow_env import AirflowServices, airflow_environment

from bench.engine_runs import CONNECT, DAG_ID, SPARK_TASKS, WORK
from bench.harness import Engine, own_cpu, reap_all
from lakehouse import catalog
from lakehouse.config import Lakehouse

# ----------------------------------------------------------------------------------------------
# One Airflow + lakehouse per (repetition, kind of Spark)


@dataclass
class Step:
    name: str
    ok: bool = True
    wall: float | None = None
    cpu: float | None = None  # Airflow's processes (+ the engine's for connect)
    engine_cpu: float | None = None
    spark_tasks: float | None = None  # sum of the Spark tasks' wall time (metadata DB)
    # backfill: first run's start to the last run's end (metadata DB)
    runs_span: float | None = None
    commits: int | None = None  # Delta commits the step added, all tables
    # the preflight task's wall time (metadata DB; summed over a backfill's runs)
    preflight: float | None = None
    # task tries beyond the first (Airflow's retries), all tasks of the step's runs
    retries: int = 0
    retried: list[dict] = field(
        default_factory=list
    )  # each retried task: task, extra tries, first failure
    anomalies: list[str] = field(default_factory=list)


class Setup:
    """A fresh Airflow home and lakehouse, and how to run timed steps in them."""

    def __init__(self, options, kind: str, rep: int, engine: Engine, template_db: Path):
        self.options, self.kind, self.engine = options, kind, engine
        self.dir = WORK / "runs" / f"rep{rep + 1}-{kind}"
        shutil.rmtree(self.dir, ignore_errors=True)
        self.home = self.dir / "airflow_home"
        self.home.mkdir(parents=True)
        shutil.copy(template_db, self.home / "airflow.db")
        self.lakehouse = Lakehouse(str(self.dir / "lakehouse"))
        connection = (
            engine.connection()
            if kind == CONNECT
            else json.dumps({"conn_type": "spark", "host": "local[2]"})
        )
        self.env = airflow_environment(
            self.home,
            self.lakehouse,
            AIRFLOW_CONN_SPARK_LAKEHOUSE=connection,
            SPARK_SUBMIT_OPTS=options.submit_java_options,
            LAKEHOUSE_ENGINE=CONNECT if kind == CONNECT else "local",
        )
        self.env.pop("LAKEHOUSE_ENGINE_URL", None)
        self.logs = self.dir / "logs"
        self.logs.mkdir()
        self.db = self.home / "airflow.db"

    # -- plumbing

    def command(self, args: list[str], log_name: str, timeout: float) -> tuple[int, str]:
        """Run a command in its own process group (killed whole on timeout); (exit code, output tail)."""
        path = self.logs / f"{log_name}.log"
        with open(path, "w") as out:
            process = subprocess.Popen(
                args, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
            try:
                code = process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                code = -9
        return code, path.read_text(errors="replace")

    def airflow(self, *args: str, log_name: str, timeout: float = 1800) -> tuple[int, str]:
        return self.command(
            [str(Path(sys.executable).parent / "airflow"), *args], log_name, timeout
        )

    def generate(self, start: datetime, hours: int) -> None:
        code, output = self.command(
            [
                sys.executable,
                "-m",
                "lakehouse_tools.generator",
                "--lakehouse-root",
                self.lakehouse.root,
                "--start",
                start.isoformat(),
                "--hours",
                str(hours),
                "--events-per-second",
                str(self.options.events_per_second),
                "--seed",
                str(self.options.seed),
            ],
            f"generate-{start:%H}",
            300,
        )
        if code != 0:
            raise RuntimeError(f"the generator failed:\n{output[-2000:]}")

    def delta_commits(self) -> int:
        return sum(
            len(list(Path(self.lakehouse.table(t.name).path, "_delta_log").glob("*.json")))
            for t in catalog.tables()
        )

    def query(self, sql: str, *params) -> list[tuple]:
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=60) as conn:
            return conn.execute(sql, params).fetchall()

    def task_figures(self, step: Step, runs) -> None:
        """The Spark tasks' summed wall time and the tasks that failed or were retried, from the DB.

        ``runs`` picks the DAG runs by (logical date in UTC, run type).
        """
        rows = self.query(
            "SELECT dr.run_id, dr.logical_date, dr.run_type, ti.task_id, ti.state, ti.try_number, ti.start_date, "
            "ti.end_date FROM task_instance ti JOIN dag_run dr ON dr.dag_id = ti.dag_id AND dr.run_id = ti.run_id "
            "WHERE ti.dag_id = ?",
            DAG_ID,
        )
        spent, preflight = 0.0, 0.0
        for run_id, logical, run_type, task_id, state, tries, start, end in rows:
            if not runs(_utc(logical) if logical else None, run_type):
                continue
            seconds = (
                (_utc(end) - _utc(start)).total_seconds()
                if state == "success" and start and end
                else 0.0
            )
            spent += seconds if task_id in SPARK_TASKS else 0.0
            preflight += seconds if task_id == "preflight" else 0.0
            extra = max(0, (tries or 1) - 1) if state in ("success", "failed") else 0
            step.retries += extra
            if extra:
                step.retried.append(
                    {"task": task_id, "extra": extra, "why": self.failure(run_id, task_id)}
                )
            if state not in ("success", "skipped"):
                step.anomalies.append(f"{run_id} {task_id}: {state} after {tries} tries")
        step.spark_tasks, step.preflight = spent, preflight

    def failure(self, run_id: str, task_id: str) -> str:
        """Why a task's first attempt failed: the first error in its log."""
        path = (
            self.home
            / "logs"
            / f"dag_id={DAG_ID}"
            / f"run_id={run_id}"
            / f"task_id={task_id}"
            / "attempt=1.log"
        )
        try:
            for line in path.read_text(errors="replace").splitlines():
                entry = json.loads(line) if line.startswith("{") else {}
                for detail in entry.get("error_detail") or []:
                    value = str(detail.get("exc_value")).splitlines()[0]
                    value = value[value.find("[") if "[" in value else 0 :]
                    return f"{detail.get('exc_type')}: {value.split('. ')[0][:120]}"
        except (OSError, ValueError):
            pass
        return "failed before the task ran (the scheduler's log says why)"

    def timed(self, step: Step, action, leftovers: bool = True) -> None:
        """Run ``action`` (which returns its own end time, or None for now) and fill in wall and CPU."""
        commits = self.delta_commits()
        engine_before = self.engine.cpu() if self.engine.pid else None
        cpu_before, started = own_cpu(), time.perf_counter()
        ended = action() or time.perf_counter()
        step.wall = ended - started
        step.cpu = own_cpu() - cpu_before
        engine_after = self.engine.cpu() if self.engine.pid else None
        if engine_before is not None and engine_after is not None:
            step.engine_cpu = engine_after - engine_before
        elif self.engine.pid:
            step.anomalies.append(
                "the engine's server was restarted during the step: its CPU is unknown"
            )
        if self.kind == CONNECT:
            step.cpu = None if step.engine_cpu is None else step.cpu + step.engine_cpu
        step.commits = self.delta_commits() - commits
        alive = reap_all(timeout=5) if leftovers else []
        if alive:
            step.anomalies.append(f"processes left running after the step: {alive}")

    def services(self, name: str) -> AirflowServices:
        """An api-server, scheduler and dag-processor (not started) with the hourly schedule off."""
        return AirflowServices(
            {**self.env, "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False"}, self.logs / name
        )


def _utc(value: str) -> datetime:
    parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def template_db(env_dir: Path) -> Path:
    """One migrated metadata DB, copied into each fresh Airflow home (a migration is ~30 s of CPU)."""
    home = env_dir / "template_home"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    env = airflow_environment(home, Lakehouse(str(home / "unused")))
    done = subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), "db", "migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"airflow db migrate failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return home / "airflow.db"
