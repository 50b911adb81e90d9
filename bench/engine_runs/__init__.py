"""The warm engine (issue 17): Airflow DAG runs on Spark Connect vs spark-submit, side by side.

Usage (from the repository, after ``make setup``; ``make bench-engine`` runs it):
    python -m bench.engine_runs [--reps 3] [--out BENCHMARKS.md] [--summary bench/results/summary.json]
    python -m bench.engine_runs --reps 3 --resume ...  # after an interruption: only the runs not finished
    python -m bench.engine_runs --from-results .local/bench/engine/results.json --out BENCHMARKS.md  # save again, render
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

The parts: :mod:`.setup` (the engine, a fresh Airflow home, timing), :mod:`.measure` (the
steps and the run), :mod:`.report` (the section and summary keys), ``__main__`` (the command line).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from lakehouse import catalog

PROJECT_DIR = Path(__file__).resolve().parents[2]
DAG_ID = "ysb_hourly"
START = datetime(2026, 11, 20, 0, tzinfo=UTC)
WORK = PROJECT_DIR / ".local" / "bench" / "engine"
CONNECT, SUBMIT = "connect", "submit"
ENGINE_LABELS = {CONNECT: "Spark Connect (warm engine)", SUBMIT: "spark-submit (`local[2]`)"}
SPARK_TASKS = {t.task for t in catalog.tasks()} | {"full_refresh"}
# bench/results/summary.json: key prefix -> step (connect unsuffixed, spark-submit with `_spark_submit`).
SUMMARY_KEYS = {
    "no_new_data_dag_run": "idle",
    "small_hourly_dag_run": "small",
    "backfill_3h": "backfill",
}
