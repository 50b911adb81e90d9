"""The timed steps of one repetition (a DAG run with nothing new, a small hour, runs through a
scheduler, a 3-hour backfill) and the whole run: every repetition, both kinds of Spark, alternating.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import time
from datetime import UTC, datetime, timedelta

from bench.engine_runs import CONNECT, DAG_ID, PROJECT_DIR, START, SUBMIT, WORK
from bench.engine_runs.setup import Engine, Setup, Step, _utc, template_db
from bench.harness import alternating, become_subreaper, declared_tables, log, reap_all
from lakehouse import catalog


class Runs(Setup):
    """The steps a repetition times, in one fresh Airflow home and lakehouse."""

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


def report(setup: Runs, step: Step, what: str) -> None:
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
        # What today's report compares with: the tables and Spark tasks the DAG ran then.
        "catalog": declared_tables(),
        "spark_tasks": len(catalog.tasks()),
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
    engine = Engine(WORK / "engine", options.engine_port)
    results["options"]["engine_port"] = engine.port  # a free one unless given

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
            for kind in alternating([CONNECT, SUBMIT], rep):
                if (rep, kind) in finished or kind not in options.kinds:
                    continue
                setup, commit = Runs(options, kind, rep, engine, db), code_version()
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
