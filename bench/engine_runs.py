"""The warm engine (issue 17): Airflow DAG runs on Spark Connect vs spark-submit, side by side.

Usage (from the repository, after ``make setup``; ``make bench-engine`` runs it):
    python -m bench.engine_runs [--reps 3] [--out BENCHMARKS.md] [--summary bench/results/summary.json]
    python -m bench.engine_runs --reps 3 --resume ...  # after an interruption: only the runs not finished
    python -m bench.engine_runs --from-results .local/bench/engine/results.json --out BENCHMARKS.md  # re-render
        [--note "what the figures cannot say about this run"]  # a paragraph kept in results.json

One benchmark engine of its own (``LAKEHOUSE_ENGINE_PORT`` 15004, state and log in
``.local/bench/engine/engine``, a token of its own) is started before anything is timed (its start-up
is reported on its own) and stopped at the end, also after an error or Ctrl-C. Each repetition runs
both kinds of Spark, in alternating order (connect, submit, submit, connect, ...), each in a fresh
Airflow home (SQLite, as tests/airflow_env.py builds it) and a fresh lakehouse under
``.local/bench/engine/runs``:

1. 3 producer hours generated (``python -m lakehouse_tools.generator``) and one ``airflow dags test
   ysb_hourly`` that processes them (primes the checkpoints; reported, not the point);
2. (a) ``airflow dags test`` with nothing new (``--idle-runs`` of them);
3. (b) one new hour at ``--events-per-second`` landed, then one ``airflow dags test``;
4. (c) ``airflow backfill create`` of 3 hours, then an api-server, scheduler and dag-processor
   (tests/airflow_env.AirflowServices, the scheduler started once the api-server answers) run it;
   timed from the command until all 3 runs succeeded.
   The scheduler's own schedule is off (``[scheduler] use_job_schedule``), so the latest hourly
   run that ``catchup=False`` would start beside the backfill does not run.

The Airflow connection ``spark_lakehouse`` says which Spark the tasks get: ``spark_connect`` (the
benchmark engine; each Spark task is a client in the task's process) or ``spark`` (``local[2]``,
one spark-submit per Spark task, with the tests' driver JVM options, ``lakehouse.spark.fast_start_java_options``).

CPU seconds are user + system time of every process the step started (the Airflow command or
services, their task processes, spark-submit's JVMs and Python drivers): the children this process
has reaped (``RUSAGE_CHILDREN``; it is a child subreaper, so orphans come back to it) plus the live
descendants read from ``/proc``; for connect, plus the engine's (its server JVM and Python workers,
from ``/proc/<pid>/stat``) over the same interval.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT_DIR / "tests"))  # airflow_env: the tests' isolated Airflow

from airflow_env import AirflowServices, airflow_environment  # noqa: E402

from bench.compare.processes import become_subreaper, children_cpu, reap_all, tree_cpu  # noqa: E402
from bench.sections import markers, publish  # noqa: E402
from lakehouse import catalog  # noqa: E402
from lakehouse.config import Lakehouse  # noqa: E402
from lakehouse.spark import fast_start_java_options  # noqa: E402

DAG_ID = "ysb_hourly"
START = datetime(2026, 11, 20, 0, tzinfo=UTC)
WORK = PROJECT_DIR / ".local" / "bench" / "engine"
CONNECT, SUBMIT = "connect", "submit"
ENGINE_LABELS = {CONNECT: "Spark Connect (warm engine)", SUBMIT: "spark-submit (`local[2]`)"}
SPARK_TASKS = {t.task for t in catalog.tasks()} | {"full_refresh"}
BEGIN, END = markers("bench/engine_runs.py")
# bench/results/summary.json: key prefix -> step (connect unsuffixed, spark-submit with `_spark_submit`).
SUMMARY_KEYS = {
    "no_new_data_dag_run": "idle",
    "small_hourly_dag_run": "small",
    "backfill_3h": "backfill",
}


def log(message: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", flush=True)


# ----------------------------------------------------------------------------------------------
# CPU time from /proc and getrusage


def own_cpu() -> float:
    """CPU of everything this process started: reaped children (getrusage) + live descendants (/proc)."""
    return children_cpu() + tree_cpu(os.getpid(), include_root=False)


# ----------------------------------------------------------------------------------------------
# The benchmark's engine


class Engine:
    """The benchmark's own warm engine, run by ``python -m lakehouse_tools.engine up|down``."""

    def __init__(self, port: int, state_dir: Path):
        self.port, self.state_dir, self.token = port, state_dir, secrets.token_hex(16)
        os.environ.update(
            LAKEHOUSE_ENGINE_PORT=str(port),
            LAKEHOUSE_ENGINE_DIR=str(state_dir),
            LAKEHOUSE_ENGINE_TOKEN=self.token,
        )
        os.environ.pop("LAKEHOUSE_ENGINE_URL", None)
        self.pid: int | None = None
        self.started = False

    def _command(self, verb: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "lakehouse_tools.engine", verb],
            env=os.environ,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def up(self) -> tuple[float, float]:
        """Start it and wait until it answers a query: (wall seconds, the server's CPU seconds)."""
        from lakehouse_tools import engine

        status = self._command("status", 60)
        if status.returncode == 0:
            raise RuntimeError(
                f"something already answers on port {self.port}: {status.stdout.strip()}; stop it first"
            )
        self._command("down", 120)  # a supervisor of an earlier run that no longer answers
        started = time.perf_counter()
        self.started = True
        done = self._command("up", 600)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(
                f"the benchmark engine did not start:\n{done.stdout}{done.stderr[-3000:]}"
            )
        self.pid = engine.server_pid()
        if self.pid is None:
            raise RuntimeError("the benchmark engine answers but its server process was not found")
        return wall, tree_cpu(self.pid)

    def cpu(self) -> float | None:
        """CPU seconds of the server JVM and its Python workers so far (None if it was restarted)."""
        from lakehouse_tools import engine

        if engine.server_pid() != self.pid:
            return None
        return tree_cpu(self.pid)

    def down(self) -> None:
        if self.started:
            done = self._command("down", 180)
            log(f"benchmark engine: {(done.stdout + done.stderr).strip()}")
            self.started = False

    def connection(self) -> str:
        return json.dumps(
            {
                "conn_type": "spark_connect",
                "host": "localhost",
                "port": self.port,
                "password": self.token,
            }
        )


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
    runs_span: float | None = (
        None  # backfill: first run's start to the last run's end (metadata DB)
    )
    commits: int | None = None  # Delta commits the step added, all tables
    preflight: float | None = (
        None  # the preflight task's wall time (metadata DB; summed over a backfill's runs)
    )
    retries: int = (
        0  # task tries beyond the first (Airflow's retries), all tasks of the step's runs
    )
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

    # -- the steps

    def dags_test(self, name: str, logical_date: datetime) -> Step:
        step = Step(name)
        outcome = {}

        def run():
            outcome["code"], outcome["output"] = self.airflow(
                "dags", "test", DAG_ID, logical_date.isoformat(), log_name=name
            )

        self.timed(step, run)
        step.ok = outcome["code"] == 0 and "state=success" in outcome["output"]
        if not step.ok:
            step.anomalies.append(
                f"`airflow dags test` exited {outcome['code']}; log {self.logs / (name + '.log')}"
            )
        self.task_figures(step, lambda logical, _type: logical == logical_date)
        return step

    def reserialize(self) -> None:
        code, output = self.airflow("dags", "reserialize", log_name="reserialize", timeout=600)
        if code != 0:
            raise RuntimeError(f"airflow dags reserialize failed:\n{output[-2000:]}")

    def services(self, name: str) -> AirflowServices:
        """An api-server, scheduler and dag-processor (not started) with the hourly schedule off."""
        return AirflowServices(
            {**self.env, "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False"}, self.logs / name
        )

    def scheduled(self, after: datetime) -> list[Step]:
        """Small hourly runs through a running scheduler, as in production: the services start untimed.

        Each run: one new hour landed, then ``airflow dags trigger`` (the scheduler's own schedule
        is off); timed from the command to the run's end, and its own span from queue to end.
        """
        self.reserialize()
        services = self.services("services-scheduled").start()
        steps = []
        try:
            deadline = time.monotonic() + 180
            while not self.query(
                "SELECT id FROM job WHERE job_type = 'SchedulerJob' AND state = 'running'"
            ):
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the scheduler did not start in 180 s; see {self.logs / 'services-scheduled'}"
                    )
                time.sleep(1)
            time.sleep(5)  # its executor's workers and first loops
            for index in range(self.options.scheduled_runs):
                self.generate(START + timedelta(hours=4 + index), 1)
                steps.append(
                    self.triggered(f"scheduled-{index + 1}", after + timedelta(hours=1 + index))
                )
                report(self, steps[-1], "small hourly DAG run through the scheduler")
        finally:
            services.stop()
            reap_all(timeout=30)
        return steps

    def triggered(self, name: str, logical_date: datetime) -> Step:
        step = Step(name)

        def run():
            code, output = self.airflow(
                "dags",
                "trigger",
                DAG_ID,
                "--logical-date",
                logical_date.isoformat(),
                log_name=f"{name}-trigger",
                timeout=300,
            )
            if code != 0:
                step.ok = False
                step.anomalies.append(f"`airflow dags trigger` exited {code}: {output[-500:]}")
                return None
            deadline = time.monotonic() + 900
            while time.monotonic() < deadline:
                found = self.query(
                    "SELECT state, queued_at, end_date FROM dag_run WHERE dag_id = ? AND run_type = 'manual' "
                    "ORDER BY id DESC LIMIT 1",
                    DAG_ID,
                )
                if found and found[0][0] in ("success", "failed"):
                    state, queued, ended = found[0]
                    step.ok = state == "success"
                    step.runs_span = (_utc(ended) - _utc(queued)).total_seconds()
                    return time.perf_counter()
                time.sleep(0.2)
            step.ok = False
            step.anomalies.append("the run did not finish in 900 s")
            return time.perf_counter()

        self.timed(step, run, leftovers=False)  # the services run on
        self.task_figures(step, lambda logical, _type: logical == logical_date)
        if step.ok and not step.commits:
            step.anomalies.append("no Delta commit: the new hour was not processed")
        return step

    def backfill(self) -> Step:
        step = Step("backfill")
        self.reserialize()
        services = self.services("services")
        first, last = START + timedelta(hours=1), START + timedelta(hours=3)

        def run():
            # Created before the services start: their start-up is part of the step's wall time (above).
            code, output = self.airflow(
                "backfill",
                "create",
                "--dag-id",
                DAG_ID,
                "--from-date",
                first.isoformat(),
                "--to-date",
                last.isoformat(),
                log_name="backfill-create",
                timeout=600,
            )
            if code != 0:
                step.anomalies.append(f"`airflow backfill create` exited {code}: {output[-500:]}")
                step.ok = False
                return None
            services.start()
            deadline = time.monotonic() + self.options.backfill_timeout
            while time.monotonic() < deadline:
                found = self.query(
                    "SELECT state FROM dag_run WHERE dag_id = ? AND run_type = 'backfill'", DAG_ID
                )
                states = [state for (state,) in found]
                if len(states) >= 3 and all(s in ("success", "failed") for s in states):
                    step.ok = all(s == "success" for s in states)
                    if not step.ok:
                        step.anomalies.append(f"backfill runs ended {states}")
                    return time.perf_counter()
                time.sleep(1)
            step.ok = False
            step.anomalies.append(
                f"the backfill did not finish in {self.options.backfill_timeout} s"
            )
            return time.perf_counter()

        try:
            self.timed(step, run, leftovers=False)  # the services run until stopped below
        finally:
            services.stop()
            alive = reap_all(timeout=30)
            if alive:
                step.anomalies.append(f"processes left running after the services stopped: {alive}")
        ((start, end),) = self.query(
            "SELECT MIN(start_date), MAX(end_date) FROM dag_run WHERE dag_id = ? AND run_type = 'backfill'",
            DAG_ID,
        )
        if start and end:
            step.runs_span = (_utc(end) - _utc(start)).total_seconds()
        self.task_figures(step, lambda _logical, run_type: run_type == "backfill")
        return step

    def run_all(self) -> dict[str, Step]:
        steps: dict[str, Step] = {}
        self.generate(START, 3)
        when = START + timedelta(hours=4)
        steps["first"] = self.dags_test("first", when)
        report(self, steps["first"], "first DAG run (3 hours of data)")
        if not steps["first"].ok:
            return steps
        idle = []
        for index in range(self.options.idle_runs):
            when += timedelta(hours=1)
            idle.append(self.dags_test(f"idle-{index + 1}", when))
            report(self, idle[-1], "no-new-data DAG run")
            if idle[-1].commits:
                idle[-1].anomalies.append(
                    f"{idle[-1].commits} Delta commits in a run with nothing new"
                )
        steps["idle"] = idle
        self.generate(START + timedelta(hours=3), 1)
        when += timedelta(hours=1)
        steps["small"] = self.dags_test("small", when)
        if steps["small"].ok and not steps["small"].commits:
            steps["small"].anomalies.append("no Delta commit: the new hour was not processed")
        report(
            self,
            steps["small"],
            f"small hourly DAG run (1 hour at {self.options.events_per_second} events/s)",
        )
        if self.options.scheduled_runs:
            steps["scheduled"] = self.scheduled(when)
        steps["backfill"] = self.backfill()
        report(self, steps["backfill"], "3-hour backfill through the scheduler")
        return steps


def report(setup: Setup, step: Step, what: str) -> None:
    engine = (
        f", engine {step.engine_cpu:.1f}"
        if setup.kind == CONNECT and step.engine_cpu is not None
        else ""
    )
    cpu = "?" if step.cpu is None else f"{step.cpu:.1f}"
    span = f", runs' span {step.runs_span:.1f} s" if step.runs_span is not None else ""
    state = "" if step.ok else " FAILED"
    log(f"{setup.dir.name}: {what}: {step.wall:.1f} s wall, {cpu} s CPU{engine}{span}{state}")
    for retried in step.retried:
        log(
            f"{setup.dir.name}:   ! {retried['task']} retried {retried['extra']}x; attempt 1: {retried['why']}"
        )
    for anomaly in step.anomalies:
        log(f"{setup.dir.name}:   ! {anomaly}")


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


# ----------------------------------------------------------------------------------------------
# The run


def measure(options) -> dict:
    started_at, load = datetime.now(UTC), os.getloadavg()
    WORK.mkdir(parents=True, exist_ok=True)
    chosen = {
        k: v
        for k, v in vars(options).items()
        if k not in ("out", "summary", "from_results", "resume", "note", "kinds")
    }
    results = {
        "measured_at": started_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "load_at_start": load,
        "options": chosen,
        "cores": os.cpu_count(),
        "machine": platform.machine(),
        "runs": [],
        "notes": options.note,
    }
    if options.resume and (WORK / "results.json").exists():
        # The runs an interrupted benchmark finished are kept; only the missing ones run now.
        results = json.loads((WORK / "results.json").read_text())
        same = ("idle_runs", "scheduled_runs", "events_per_second", "seed", "submit_java_options")
        if any(results["options"].get(key) != chosen[key] for key in same):
            raise SystemExit(f"--resume: the earlier run used other options ({results['options']})")
        results["options"]["reps"] = options.reps
        results["runs"] = [run for run in results["runs"] if not run.get("error")]
        results.setdefault("resumed", []).append(
            {"at": started_at.strftime("%Y-%m-%dT%H:%M:%SZ"), "load": load}
        )
    else:
        shutil.rmtree(WORK / "runs", ignore_errors=True)
    finished = {(run["rep"], run["kind"]) for run in results["runs"]}
    engine = Engine(options.engine_port, WORK / "engine")

    def stop(signum, frame):
        raise SystemExit(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    try:
        log(
            f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; migrating a template Airflow DB ..."
        )
        db = template_db(WORK)
        log(f"starting the benchmark engine on port {options.engine_port} ...")
        wall, cpu = engine.up()
        results["engine_start" if "engine_start" not in results else "engine_restart"] = {
            "wall": wall,
            "cpu": cpu,
        }
        log(f"engine start-up: {wall:.1f} s wall, {cpu:.1f} s CPU (server pid {engine.pid})")
        become_subreaper()  # after `up`: the engine's supervisor is not this process's child
        for rep in range(options.reps):
            for kind in (CONNECT, SUBMIT) if rep % 2 == 0 else (SUBMIT, CONNECT):
                if (rep, kind) in finished or kind not in options.kinds:
                    continue
                setup, commit = Setup(options, kind, rep, engine, db), code_version()
                log(f"rep {rep + 1}/{options.reps}, {kind}: {setup.dir} (code {commit})")
                try:
                    steps = setup.run_all()
                except Exception as error:
                    log(f"rep {rep + 1}/{options.reps}, {kind}: ERROR {error}")
                    results["runs"].append(
                        {
                            "rep": rep,
                            "kind": kind,
                            "commit": commit,
                            "error": str(error)[-2000:],
                            "steps": {},
                        }
                    )
                    continue
                results["runs"].append(
                    {"rep": rep, "kind": kind, "commit": commit, "steps": _plain(steps)}
                )
                (WORK / "results.json").write_text(json.dumps(results, indent=1))
    finally:
        engine.down()
        results["load_at_end"] = os.getloadavg()
        (WORK / "results.json").write_text(json.dumps(results, indent=1))
    return results


def code_version() -> str:
    """The checkout's commit, ``+changes`` when the code the runs load (include/, dags/, jobs/) differs from it.

    Task processes and the engine's Python workers load the project's files when they start, so
    a change during a long benchmark reaches its later runs: each run records the version it started with.
    """

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=PROJECT_DIR, capture_output=True, text=True, check=False
        )
        return done.stdout.strip()

    changed = git("status", "--porcelain", "--", "include", "dags", "jobs")
    return (git("rev-parse", "--short", "HEAD") or "unknown") + ("+changes" if changed else "")


def _plain(steps: dict) -> dict:
    return {
        name: [vars(s) for s in value] if isinstance(value, list) else vars(value)
        for name, value in steps.items()
    }


# ----------------------------------------------------------------------------------------------
# The report


# Report rows that are a part of a step's runs: the first scheduled run after the services start
# pays their one-time warm-ups (until eea2bdd, the api-server's execution API, built on the first
# task's call), so it is reported apart from the runs after it.
PARTS = {"scheduled_first": ("scheduled", slice(0, 1)), "scheduled": ("scheduled", slice(1, None))}


def samples(results: dict, kind: str, step: str, measure: str) -> list[float]:
    """Every successful step's ``measure`` for ``kind`` (the idle step has several per repetition)."""
    out = []
    step, part = PARTS.get(step, (step, slice(None)))
    for run in results["runs"]:
        if run["kind"] != kind:
            continue
        found = run["steps"].get(step)
        for entry in found[part] if isinstance(found, list) else [found] if found else []:
            if entry["ok"] and entry.get(measure) is not None:
                out.append(entry[measure])
    return out


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def cell(values: list[float], digits: int = 1) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def ratio(results: dict, step: str, measure: str) -> str:
    connect, submit = (
        median(samples(results, CONNECT, step, measure)),
        median(samples(results, SUBMIT, step, measure)),
    )
    if not connect or not submit:
        return "–"
    return f"{submit / connect:.1f}×"


def anomalies(results: dict) -> list[str]:
    """What did not go as expected: errors, failed steps, and the retried tasks (summed per step and kind)."""
    out, retried = [], {}
    for run in results["runs"]:
        where = f"rep {run['rep'] + 1}, {run['kind']}"
        if run.get("error"):
            out.append(f"{where}: {run['error'].strip().splitlines()[0][:300]}")
        for value in run["steps"].values():
            for entry in value if isinstance(value, list) else [value]:
                out += [f"{where}, {entry['name']}: {a}" for a in entry["anomalies"]]
                for task in entry.get("retried", []):
                    key = (entry["name"].split("-")[0], run["kind"], task["task"])
                    counts = retried.setdefault(key, {"extra": 0, "why": set()})
                    counts["extra"] += task["extra"]
                    counts["why"].add(task["why"])
    steps = {
        "first": "first run",
        "idle": "no-new-data run",
        "small": "small hourly run",
        "scheduled": "small hourly run through a scheduler",
        "backfill": "backfill",
    }
    for (step, kind, task), counts in sorted(retried.items()):
        out.append(
            f"{steps.get(step, step)}, {kind}: `{task}` retried {counts['extra']}× in all; first attempt: "
            + "; ".join(f"`{why}`" for why in sorted(counts["why"]))
        )
    return out


def render(results: dict) -> str:
    o = results["options"]
    load, end_load = results["load_at_start"], results.get("load_at_end")
    starts = engine_starts(results)
    rows = [
        (
            "first",
            "First DAG run: 3 hours (primes every checkpoint)",
            ("wall", "cpu", "engine_cpu"),
        ),
        (
            "idle",
            "**(a) DAG run with no new data**",
            ("wall", "cpu", "engine_cpu", "spark_tasks", "preflight"),
        ),
        (
            "small",
            f"**(b) small hourly DAG run** (1 new hour at {o['events_per_second']} events/s)",
            ("wall", "cpu", "engine_cpu", "spark_tasks", "preflight"),
        ),
        (
            "scheduled_first",
            "(b′) the same through a running scheduler, its first run after the services start "
            "(1 new hour, `airflow dags trigger` → the run's end)",
            ("wall", "runs_span", "cpu", "engine_cpu"),
        ),
        (
            "scheduled",
            "**(b″) the same through a running scheduler, the runs after it**",
            ("wall", "runs_span", "cpu", "engine_cpu", "spark_tasks"),
        ),
        (
            "backfill",
            "**(c) 3-hour backfill** through a scheduler (command → all 3 runs succeeded)",
            ("wall", "cpu", "engine_cpu", "runs_span", "spark_tasks", "retries"),
        ),
    ]
    names = {
        "wall": "wall s",
        "cpu": "CPU s (all processes, engine included)",
        "engine_cpu": "— of which the engine's CPU s",
        "spark_tasks": "— Spark tasks' wall s, summed",
        "runs_span": "— the runs' own span s (first start → last end, metadata DB)",
        "preflight": "— the preflight task's wall s (checks the Spark connection)",
        "retries": "— task retries (Airflow's, 1 min apart)",
    }
    labels = {
        (step, "runs_span"): "— the run's own span s (queued → end, metadata DB)" for step in PARTS
    }
    table = [
        f"| DAG run | {ENGINE_LABELS[CONNECT]} | {ENGINE_LABELS[SUBMIT]} | spark-submit / connect |",
        "| --- | ---: | ---: | ---: |",
    ]
    for step, title, measures in rows:
        for index, measure in enumerate(measures):
            label = (
                f"{title}, {names[measure]}"
                if index == 0
                else labels.get((step, measure), names[measure])
            )
            submit = (
                "–" if measure == "engine_cpu" else cell(samples(results, SUBMIT, step, measure))
            )
            factor = (
                ratio(results, step, measure) if measure in ("wall", "cpu", "runs_span") else ""
            )
            if measure == "retries":
                submit = cell(samples(results, SUBMIT, step, measure), 0)
            connect = cell(
                samples(results, CONNECT, step, measure), 0 if measure == "retries" else 1
            )
            table.append(f"| {label} | {connect} | {submit} | {factor} |")
    reps = o["reps"]
    command = (
        f"python -m bench.engine_runs --reps {reps}"
        + (f" --idle-runs {o['idle_runs']}" if o["idle_runs"] != 1 else "")
        + (
            f" --scheduled-runs {o.get('scheduled_runs', 0)}"
            if o.get("scheduled_runs", 0) != 2
            else ""
        )
    )
    out = [
        BEGIN,
        "## 11. The warm engine: DAG runs on Spark Connect vs spark-submit",
        "",
        f"* **Command:** `make bench-engine` (`{command} --out BENCHMARKS.md --summary bench/results/summary.json`)",
        f"* **Date:** {results['measured_at']}; load average at the start {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}"
        + (
            f" (at the end {end_load[0]:.1f}, {end_load[1]:.1f}, {end_load[2]:.1f})"
            if end_load
            else ""
        )
        + "".join(
            f"; interrupted, resumed at {r['at']} (load {r['load'][0]:.1f}, {r['load'][1]:.1f}, {r['load'][2]:.1f}) "
            "for the runs it had not finished"
            for r in results.get("resumed", [])
        )
        + f"; {results['cores']} cores, {results['machine']}",
        f"* **Work:** {reps} repetition(s), each kind of Spark in a fresh Airflow home (SQLite, LocalExecutor) and "
        "lakehouse, the kinds in alternating order (connect, submit, submit, connect, ...): 3 generated hours "
        f"at {o['events_per_second']} events/s processed by a first `airflow dags test ysb_hourly`, then "
        f"{o['idle_runs']} run(s) with nothing new (a), one new hour then one run (b), "
        f"{o.get('scheduled_runs', 0)} more new hour(s) each triggered on an api-server, scheduler and dag-processor "
        "started beforehand, untimed, as in production (b′ the first run after their start, b″ the others), "
        "and `airflow backfill create` "
        "of event hours 00:00–02:00 executed by an api-server, scheduler and dag-processor started after the "
        "command (c; their start-up is in the wall time, the runs' own span is the row below it; the "
        "scheduler's own hourly schedule off, so only the 3 backfill runs execute, up to 3 at once).",
        f"* **Spark:** connect = the Airflow connection `spark_lakehouse` of type `spark_connect`, every Spark task "
        f"a client in its task's process of one engine (`local[2]`, port {o['engine_port']}) started before "
        "anything is timed: start-up "
        + (f"{starts[0][0]:.1f} s wall, {starts[0][1]:.1f} s CPU" if starts else "not measured")
        + "".join(
            f" (restarted for the resumed runs: {wall:.1f} s, {cpu:.1f} s CPU)"
            for wall, cpu in starts[1:]
        )
        + ", i.e. `python -m lakehouse_tools.engine up` until the server answers a query, once per benchmark. "
        'submit = `{"conn_type": "spark", "host": "local[2]"}`, one spark-submit per Spark task, driver '
        f"JVM options `{o['submit_java_options'] or '(none)'}` (the tests' fast start).",
        *code_line(results),
        "* **CPU** = user + system seconds of every process of the step (the Airflow command or services, task "
        "processes, spark-submit JVMs and Python drivers) plus, for connect, the engine's server JVM and its "
        "Python workers over the same interval. Median (min–max) over the repetitions.",
        "",
        *table,
        "",
        interpretation(results),
        *[f"\n{note}" for note in results.get("notes", [])],
    ]
    found = anomalies(results)
    if found:
        out += ["", "Not as expected in this run:", ""] + [f"* {a}" for a in found]
    out.append(END)
    return "\n".join(out) + "\n"


def code_line(results: dict) -> list[str]:
    """The project's version the runs started with (a list item), when they recorded it."""
    versions = {}
    for run in results["runs"]:
        if run.get("commit"):
            versions.setdefault(run["commit"], []).append(f"rep {run['rep'] + 1} {run['kind']}")
    if not versions:
        return []
    if len(versions) == 1:
        return [f"* **Code:** {next(iter(versions))}"]
    return [
        "* **Code:** it changed during the run: "
        + "; ".join(f"{v} ({', '.join(r)})" for v, r in versions.items())
    ]


def interpretation(results: dict) -> str:
    """A paragraph reading the figures (each sentence only when its figures exist)."""

    def m(kind, step, measure="wall"):
        return median(samples(results, kind, step, measure))

    parts, spark_tasks = [], len(catalog.tasks())
    idle_c, idle_s = m(CONNECT, "idle"), m(SUBMIT, "idle")
    if idle_c and idle_s:
        cpu_c, cpu_s = m(CONNECT, "idle", "cpu"), m(SUBMIT, "idle", "cpu")
        tasks_c, preflight_c = m(CONNECT, "idle", "spark_tasks"), m(CONNECT, "idle", "preflight")
        preflight_s = m(SUBMIT, "idle", "preflight")
        parts.append(
            f"With nothing new, a DAG run on the warm engine takes {idle_c:.0f} s instead of {idle_s:.0f} s"
            + (f", {cpu_c:.0f} s of CPU instead of {cpu_s:.0f} s" if cpu_c and cpu_s else "")
            + f": by spark-submit each of the {spark_tasks} Spark tasks starts a JVM and builds a Delta session "
            "(§4, §10) only to find nothing new; on the engine each is a client whose freshness check reads a "
            "few files and starts no query"
            + (f" (all {spark_tasks} together {tasks_c:.1f} s)" if tasks_c is not None else "")
            + ". What is left is Airflow's own cost: parsing, task start-up, the metadata DB and the other tasks"
            + (
                f" (the preflight task, the first, takes {preflight_c:.0f} s on the engine and {preflight_s:.0f} s by "
                "spark-submit: most of it is `airflow dags test` building its in-process execution API on the "
                "first task's start; the preflight's own check of the engine is one gRPC call)"
                if preflight_c and preflight_s
                else ""
            )
            + "."
        )
    small_c, small_s = m(CONNECT, "small"), m(SUBMIT, "small")
    if small_c and small_s:
        cpu_c, cpu_s = m(CONNECT, "small", "cpu"), m(SUBMIT, "small", "cpu")
        engine_c = m(CONNECT, "small", "engine_cpu")
        parts.append(
            f"With one new hour the engine takes {small_c:.0f} s vs {small_s:.0f} s"
            + (f" ({cpu_c:.0f} s vs {cpu_s:.0f} s of CPU)" if cpu_c and cpu_s else "")
            + (
                f"; here the engine's own CPU ({engine_c:.0f} s) is the queries' work, a JVM that is already "
                "compiled rather than one per task"
                if engine_c
                else ""
            )
            + "."
        )
    sched_c, sched_s = m(CONNECT, "scheduled", "runs_span"), m(SUBMIT, "scheduled", "runs_span")
    first_c = m(CONNECT, "scheduled_first", "runs_span")
    if sched_c and sched_s:
        parts.append(
            f"Through a running scheduler, as the hourly schedule runs it, the same small hour takes {sched_c:.1f} s "
            f"from queue to end on the engine and {sched_s:.0f} s by spark-submit: no `dags test` start-up and no "
            "in-process execution API, each task a process of its own, the four tasks after silver side by side"
            + (
                f"; the first run after the services start took {first_c:.1f} s (the services' one-time warm-ups)"
                if first_c
                else ""
            )
            + "."
        )
    back_c, back_s = m(CONNECT, "backfill"), m(SUBMIT, "backfill")
    if back_c and back_s:
        span_c, span_s = m(CONNECT, "backfill", "runs_span"), m(SUBMIT, "backfill", "runs_span")
        retried = [r for r in samples(results, CONNECT, "backfill", "retries") if r]
        retries_s = max(samples(results, SUBMIT, "backfill", "retries") or [0])
        cpu_c, cpu_s = m(CONNECT, "backfill", "cpu"), m(SUBMIT, "backfill", "cpu")
        parts.append(
            f"The 3-hour backfill through the scheduler takes {back_c:.0f} s vs {back_s:.0f} s"
            + (
                f" (the runs themselves {span_c:.0f} s vs {span_s:.0f} s)"
                if span_c and span_s
                else ""
            )
            + (f" and {cpu_c:.0f} s vs {cpu_s:.0f} s of CPU" if cpu_c and cpu_s else "")
            + "; its 3 runs run at once, so by spark-submit several drivers at a time share the 2 cores, on the engine "
            "their clients share one JVM."
        )
        if retried and not retries_s:
            reps = len(samples(results, CONNECT, "backfill", "retries"))
            parts.append(
                f"In {len(retried)} of {reps} repetitions the engine's backfill paid Airflow retries (a minute "
                f"apart; {', '.join(f'{r:.0f}' for r in retried)}) of gold tasks whose replace-hours write lost a "
                "Delta conflict to a concurrent run (`DELTA_CONCURRENT_APPEND`, listed below): "
                "`lakehouse.sinks.with_conflict_retries` retries such a conflict within the job, "
                "and did by spark-submit, but these arrived over Spark Connect as pyspark's `UnknownException`, "
                "which it did not recognise as a conflict."
            )
    if not parts:
        return "Too few successful runs to compare."
    parts.append(
        "CPU is the figure to trust on a shared machine: the wall times move with the load (above)."
    )
    return " ".join(parts)


def summary_figures(results: dict) -> dict:
    """The medians bench/results/summary.json holds (connect unsuffixed, spark-submit ``_spark_submit``)."""
    out: dict = {}
    for key, step in SUMMARY_KEYS.items():
        for kind, suffix in ((CONNECT, ""), (SUBMIT, "_spark_submit")):
            out[f"{key}{suffix}_s"] = _round(median(samples(results, kind, step, "wall")))
            out[f"{key}{suffix}_cpu_s"] = _round(median(samples(results, kind, step, "cpu")))
        out[f"{key}_engine_cpu_s"] = _round(median(samples(results, CONNECT, step, "engine_cpu")))
    for kind, suffix in ((CONNECT, ""), (SUBMIT, "_spark_submit")):
        for step in PARTS:
            out[f"small_hourly_{step}_run{suffix}_s"] = _round(
                median(samples(results, kind, step, "runs_span"))
            )
            out[f"small_hourly_{step}_run{suffix}_cpu_s"] = _round(
                median(samples(results, kind, step, "cpu"))
            )
    out["backfill_3h_runs_span_s"] = _round(
        median(samples(results, CONNECT, "backfill", "runs_span"))
    )
    out["backfill_3h_runs_span_spark_submit_s"] = _round(
        median(samples(results, SUBMIT, "backfill", "runs_span"))
    )
    starts = engine_starts(results)
    out["engine_start_s"] = _round(median([wall for wall, _ in starts]))
    out["engine_start_cpu_s"] = _round(median([cpu for _, cpu in starts]))
    out["engine_bench_reps"] = results["options"]["reps"]
    out["measured_at"] = results["measured_at"]
    return out


def engine_starts(results: dict) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of each start of the benchmark engine: the first, then one per resumption."""
    return [
        (start["wall"], start["cpu"])
        for key in ("engine_start", "engine_restart")
        if (start := results.get(key))
    ]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--idle-runs", type=int, default=1, help="runs with nothing new per repetition"
    )
    parser.add_argument(
        "--scheduled-runs",
        type=int,
        default=2,
        help="small hourly runs through a scheduler per repetition",
    )
    parser.add_argument("--events-per-second", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--engine-port", type=int, default=15004)
    parser.add_argument("--backfill-timeout", type=float, default=2400)
    parser.add_argument(
        "--kinds",
        nargs="+",
        choices=(CONNECT, SUBMIT),
        default=[CONNECT, SUBMIT],
        help="measure only these kinds of Spark (a quick look at one; the section compares both)",
    )
    parser.add_argument(
        "--submit-java-options",
        default=fast_start_java_options(),
        help="spark-submit's driver JVM options (SPARK_SUBMIT_OPTS); default: the tests' fast start",
    )
    parser.add_argument("--out", help="replace this benchmark's section in that Markdown file")
    parser.add_argument("--summary", help="update this benchmark's keys in that JSON file")
    parser.add_argument(
        "--from-results", help="render an earlier run's results.json instead of measuring"
    )
    parser.add_argument(
        "--resume", action="store_true", help="keep the runs an interrupted benchmark finished"
    )
    parser.add_argument(
        "--note",
        action="append",
        default=[],
        help="a paragraph about this run for the section (kept in its results.json); repeatable",
    )
    options = parser.parse_args(argv)
    if options.from_results:
        results = json.loads(Path(options.from_results).read_text())
        if options.note:
            results["notes"] = options.note
            Path(options.from_results).write_text(json.dumps(results, indent=1))
    else:
        results = measure(options)
    publish(render(results), options.out, options.summary, summary_figures(results))


if __name__ == "__main__":
    main()
