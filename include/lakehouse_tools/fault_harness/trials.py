"""A kill trial: fresh data, every streaming job killed once as planned and rerun until it succeeds.

Each trial builds a fresh lakehouse under the work folder, generates landing data with the
generator's default disorder (duplicates, malformed and late events) and loads dims.campaigns in
this process (a batch overwrite, atomic by itself: not under test). Then, stage by stage in DAG
order, every streaming job is started and killed as its plan says, and run again without the fault
until it exits 0, as an Airflow task retry would; the jobs of one stage (the gold ones) run side by
side, as in the DAG. Last, :func:`~lakehouse_tools.fault_harness.verdict.check_tables` compares
every table with the landing files and the oracle.
"""

from __future__ import annotations

import argparse
import shutil
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from lakehouse import catalog, runner
from lakehouse.config import Lakehouse
from lakehouse_tools.fault_harness.attempt import Attempt, BatchClock, run_attempt
from lakehouse_tools.fault_harness.harness_engine import HarnessEngine
from lakehouse_tools.fault_harness.launch import log_tail
from lakehouse_tools.fault_harness.plan import STAGES, JobPlan, plan_trial
from lakehouse_tools.fault_harness.verdict import PROBLEMS, check_tables, landing_file_lines
from lakehouse_tools.generator import parse_hour, write_campaigns, write_hours


@dataclass
class TrialResult:
    """One kill trial: its data, every attempt of every job, the tables' figures and any error."""

    trial: int
    data_seed: int
    root: str
    landing_files: int = 0
    landing_lines: int = 0
    attempts: list[Attempt] = field(default_factory=list)
    tables: dict[str, dict[str, int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def kills(self) -> list[Attempt]:
        return [a for a in self.attempts if a.killed]

    @property
    def ok(self) -> bool:
        return not self.errors and all(
            figures.get(k, 0) == 0 for figures in self.tables.values() for k in PROBLEMS
        )


def run_trial(
    options: argparse.Namespace,
    trial: int,
    spark,
    clock: BatchClock,
    workdir: Path,
    engine: HarnessEngine | None = None,
) -> TrialResult:
    """Generate data, run the pipeline with one kill per streaming job and reruns, check the tables.

    With ``engine`` (connect mode) the jobs are its clients, and so are the dimension's load and,
    when ``spark`` is None, the checks (a session of this process, released after them).
    """
    files_per_hour = 4
    data_seed, plans = plan_trial(
        options.seed, trial, options.hours * files_per_hour, options.engine
    )
    root = workdir / f"trial-{trial:03d}"
    shutil.rmtree(root, ignore_errors=True)
    lakehouse = Lakehouse(root=str(root))
    result = TrialResult(trial=trial, data_seed=data_seed, root=str(root))
    started = time.monotonic()

    try:
        write_campaigns(lakehouse, data_seed)
        write_hours(
            lakehouse,
            parse_hour(options.start),
            options.hours,
            options.events_per_second,
            data_seed,
        )
        landing = sorted(Path(lakehouse.landing_events).rglob("*.jsonl"))
        result.landing_files = len(landing)
        result.landing_lines = sum(len(landing_file_lines(p)) for p in landing)
        if engine is not None:
            engine.wait_ready()
        # What is not streamed (the dimension) is loaded here, not under test.
        for table in catalog.tasks():
            if not table.streamed:
                runner.run(table.task, ["--lakehouse-root", lakehouse.root])

        by_job = {plan.job: plan for plan in plans}
        for stage in STAGES:
            threads = [
                threading.Thread(  # daemons: a stopped harness (SIGTERM) does not wait for its jobs
                    target=_kill_then_retry,
                    args=(by_job[job], lakehouse, clock, options, result, engine),
                    daemon=True,
                )
                for job in stage
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if result.errors:
                break
        if not result.errors:
            if spark is None:  # connect mode: the checks read through the harness's engine
                from lakehouse.spark import build_spark_session, release_engine_sessions

                engine.wait_ready()
                try:
                    result.tables = check_tables(
                        build_spark_session("fault-injection-check"), lakehouse
                    )
                finally:
                    release_engine_sessions()
            else:
                result.tables = check_tables(spark, lakehouse)
    except Exception:  # a broken trial is reported, and the next one still runs
        result.errors.append(traceback.format_exc())
    result.seconds = round(time.monotonic() - started, 1)
    return result


def _kill_then_retry(
    plan: JobPlan,
    lakehouse: Lakehouse,
    clock: BatchClock,
    options,
    result: TrialResult,
    engine=None,
) -> None:
    """One run killed as planned, then reruns without faults until one exits 0 (bounded)."""
    try:
        _kill_then_rerun(plan, lakehouse, clock, options, result, engine)
    except Exception:  # in a thread: record it, or the trial would go on as if the job had run
        result.errors.append(f"{plan.job}: {traceback.format_exc()}")


# Connect mode: attempts that failed only because another job's plan killed the engine under them,
# or because of one of ENGINE_FAILURES, are run again and not counted against --max-attempts, up to
# this many per job (three gold jobs share a stage).
MAX_ENGINE_RERUNS = 10
ENGINE_RETRY_DELAY_S = 20.0  # times the number of engine failures of the job so far, at most 120 s


def _after_engine_failure(engine: HarnessEngine, failures: int) -> None:
    """The delay of a retry after the engine failed a query (longer each time), then the engine up."""
    time.sleep(min(ENGINE_RETRY_DELAY_S * failures, 120.0))
    engine.wait_ready()


def _kill_then_rerun(
    plan: JobPlan,
    lakehouse: Lakehouse,
    clock: BatchClock,
    options,
    result: TrialResult,
    engine=None,
) -> None:
    logs = Path(lakehouse.root) / "logs"
    number = 0
    engine_failures = 0
    # The planned kill; again after a failure of the engine's own (the plan still to carry out).
    while True:
        number += 1
        first = Attempt(plan.job, number, plan.mode, batch=plan.batch)
        if engine_failures:
            _after_engine_failure(engine, engine_failures)
        run_attempt(
            first,
            lakehouse,
            logs / f"{plan.job}.{number}.log",
            clock,
            plan.fraction,
            options.timeout,
            engine,
            gated=engine_failures > 0,
        )
        result.attempts.append(first)
        if not first.engine_failure or engine_failures >= MAX_ENGINE_RERUNS:
            break
        engine_failures += 1
    if first.returncode == 0:
        return  # the kill came too late (the job had finished): nothing to resume
    if not first.killed and not first.collateral:
        result.errors.append(
            f"{plan.job} attempt {number} ended with {first.returncode} {first.phase}: {log_tail(first.log)}"
        )
        return
    failed, collateral = 0, engine_failures
    last_failed_with_the_engine = False
    while failed < options.max_attempts and collateral <= MAX_ENGINE_RERUNS:
        number += 1
        log = logs / f"{plan.job}.{number}.log"
        waited_from = time.monotonic()
        if last_failed_with_the_engine:
            _after_engine_failure(engine, collateral)
        elif engine is not None:
            engine.wait_ready()  # as a retry would find it: the supervisor restarts a killed server
        rerun = run_attempt(
            Attempt(plan.job, number, None),
            lakehouse,
            log,
            clock,
            timeout_s=options.timeout,
            engine=engine,
            gated=last_failed_with_the_engine,
        )
        if engine is not None and rerun.returncode != 0 and not rerun.collateral:
            others = engine.killed_between(waited_from, time.monotonic())
            if others:
                rerun.collateral = f"the engine was killed under it ({', '.join(others)}'s plan)"
        result.attempts.append(rerun)
        if rerun.returncode == 0:
            return
        last_failed_with_the_engine = bool(rerun.engine_failure)
        if rerun.collateral or rerun.engine_failure:
            collateral += 1
        else:
            failed += 1
    last = result.attempts[-1].log
    result.errors.append(
        f"{plan.job}: no success in {failed + collateral} run(s) ({collateral} failed with the engine): "
        f"{log_tail(last)}"
    )
