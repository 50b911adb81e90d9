"""Fault injection: SIGKILL the Spark driver of every layer, rerun it, and prove nothing was lost or doubled.

Usage:
    python -m lakehouse_tools.fault_harness --trials 3 --seed 1 [--hours 2 --events-per-second 0.1] \
        [--workdir DIR] [--report faults.json] [--keep] [--engine spark-submit|connect]
    python -m lakehouse_tools.fault_harness --trials 0 --checkpoint-trials 24 [--in-process] ...

The exit status is 1 when any row was lost, duplicated or wrong, or a job could not be brought to
success, else 0. ``make faults`` (include/make/faults.mk) runs it with a report under .local/faults/.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from lakehouse.config import engine_settings
from lakehouse_tools.fault_harness.attempt import BatchClock
from lakehouse_tools.fault_harness.checkpoint_trials import (
    print_checkpoint_summary,
    run_checkpoint_trials,
    summarise_checkpoint_trials,
)
from lakehouse_tools.fault_harness.harness_engine import (
    HarnessEngine,
    engine_environment,
    local_sessions,
)
from lakehouse_tools.fault_harness.plan import CHECKPOINT_KINDS, ENGINES
from lakehouse_tools.fault_harness.report import (
    earlier_run,
    engine_description,
    print_summary,
    print_trial,
    summarise,
    write_report,
)
from lakehouse_tools.fault_harness.trials import TrialResult, run_trial


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The harness's options, checked (``argv`` None: the command line)."""
    # prog: run as `python -m`, argparse would call it "__main__.py".
    parser = argparse.ArgumentParser(
        prog="python -m lakehouse_tools.fault_harness", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--hours", type=int, default=2, help="producer hours per trial (4 landing files each)"
    )
    parser.add_argument("--events-per-second", type=float, default=0.1)
    parser.add_argument("--start", default="2026-11-20T00:00Z", help="first producer hour")
    parser.add_argument(
        "--workdir", help="where the trials' lakehouses go (default: a new temporary folder)"
    )
    parser.add_argument("--report", help="write the per-trial results and the totals here as JSON")
    parser.add_argument(
        "--keep", action="store_true", help="keep every trial's lakehouse (failed ones are kept)"
    )
    parser.add_argument("--max-attempts", type=int, default=3, help="reruns allowed after a kill")
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds one spark-submit may take"
    )
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="spark-submit",
        help="spark-submit: every job its own driver (kills: fault points and random); connect: every job a client "
        "of the harness's own warm engine (kills: the client or the server, at random)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the trials already in --report (same seed and data options) and run only the rest",
    )
    parser.add_argument(
        "--checkpoint-trials",
        type=int,
        default=0,
        help=f"then this many checkpoint trials (damage: {', '.join(CHECKPOINT_KINDS)}; refusal, recovery, check)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="checkpoint trials: run the jobs in this process, not spark-submit",
    )
    options = parser.parse_args(argv)
    if (
        options.trials < 0
        or options.checkpoint_trials < 0
        or options.trials + options.checkpoint_trials < 1
    ):
        parser.error("--trials and --checkpoint-trials must be >= 0, and one of them >= 1")
    if options.hours < 1 or options.events_per_second <= 0:
        parser.error("--hours must be >= 1, --events-per-second > 0")
    if options.resume and not options.report:
        parser.error("--resume needs --report: the trials run so far are read from it")
    if options.engine == "connect" and options.checkpoint_trials:
        parser.error(
            "--checkpoint-trials run jobs as spark-submits or in this process, not with --engine connect"
        )
    return options


def run(options: argparse.Namespace, spark=None) -> dict:
    """Run the trials; returns the summary (with every trial's details under ``trials``).

    ``spark``: the session that reads the tables for the checks (spark-submit mode: a local one is
    made when None; connect mode: None reads them through the harness's engine).
    """
    options.engine = getattr(options, "engine", "spark-submit")
    workdir = Path(options.workdir or tempfile.mkdtemp(prefix="fault-injection-")).absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    results, learned = earlier_run(options) if options.resume else ([], None)
    clock = BatchClock(learned)
    print(
        f"fault injection: {options.trials} trial(s), seed {options.seed}, work folder {workdir}"
        + (f"; {len(results)} already run (--resume)" if results else "")
    )
    print(f"engine: {engine_description(options.engine)}")
    sys.stdout.flush()
    if options.engine == "connect":
        with engine_environment(workdir):
            engine = HarnessEngine(workdir / "engine")
            try:
                engine.up()
                print(
                    f"engine: up at {engine_settings().display_url} (log {workdir / 'engine' / 'engine.log'})"
                )
                sys.stdout.flush()
                _run_trials(options, results, clock, workdir, spark, engine)
            finally:
                engine.down()
        return _finish(options, results, clock, [])
    if spark is None:
        from lakehouse.spark import build_spark_session

        spark = build_spark_session(
            "fault-injection",
            {
                "spark.master": "local[2]",
                "spark.sql.shuffle.partitions": "2",
                "spark.ui.enabled": "false",
            },
            engine_kind="local",
        )
        spark.sparkContext.setLogLevel("ERROR")
    with local_sessions():  # the dimension's load in this process: no engine in this mode
        _run_trials(options, results, clock, workdir, spark)
    checkpoint_results = []
    if options.checkpoint_trials:
        print(
            f"checkpoint trials: {options.checkpoint_trials}, seed {options.seed}, "
            f"jobs {'in this process' if options.in_process else 'as spark-submits'}"
        )
        checkpoint_results = run_checkpoint_trials(options, spark, workdir)
    return _finish(options, results, clock, checkpoint_results)


def _run_trials(
    options, results: list[TrialResult], clock: BatchClock, workdir: Path, spark, engine=None
) -> None:
    for trial in range(len(results), options.trials):
        result = run_trial(options, trial, spark, clock, workdir, engine)
        results.append(result)
        print_trial(result, options.trials)
        if result.ok and not options.keep:
            shutil.rmtree(result.root, ignore_errors=True)
        if options.report:
            write_report(options, results, clock)


def _finish(options, results: list[TrialResult], clock: BatchClock, checkpoint_results) -> dict:
    summary = summarise(results, clock, options.engine)
    if results:
        print_summary(summary)
    if options.checkpoint_trials:
        summary["checkpoint"] = summarise_checkpoint_trials(checkpoint_results)
        print_checkpoint_summary(summary["checkpoint"], options.checkpoint_trials)
        summary["checkpoint_trials"] = [asdict(r) | {"ok": r.ok} for r in checkpoint_results]
    if options.report:
        write_report(options, results, clock, summary)
    summary["trials"] = [asdict(r) | {"ok": r.ok} for r in results]
    return summary


def _stop_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)  # unwinds through run(): its engine is stopped on the way out


def main(argv: list[str] | None = None) -> int:
    """Run the harness as a command; 1 if anything was lost, doubled or wrong, else 0."""
    options = parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    summary = run(options)
    failed = (
        summary["trials_failed"]
        or summary["lost"]
        or summary["duplicated"]
        or summary["unexpected_or_mismatched"]
    )
    checkpoint = summary.get("checkpoint")
    if checkpoint:
        failed = failed or checkpoint["failed"] or checkpoint["cases"] < options.checkpoint_trials
    return 1 if failed else 0
