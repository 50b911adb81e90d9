"""What the kill trials found: totals, the printed trial lines, and the JSON report (``--report``).

Every trial and the totals are printed (kills per layer and per fault point, where the kills
landed, rows lost and duplicated per table). The report is rewritten after every trial, so a long
run stopped midway can be continued (``--resume``: :func:`earlier_run`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from lakehouse_tools.fault_harness.attempt import Attempt, BatchClock
from lakehouse_tools.fault_harness.plan import ENGINE, LAYER, RANDOM
from lakehouse_tools.fault_harness.trials import TrialResult
from lakehouse_tools.fault_harness.verdict import CHECKED_TABLES, PROBLEMS


def _mode_label(attempt_or_plan) -> str:
    """A kill mode as the totals count it: a fault point, or 'random (layer)' / 'engine (layer)'."""
    mode = attempt_or_plan.mode
    return f"{mode} ({LAYER[attempt_or_plan.job]})" if mode in (RANDOM, ENGINE) else mode


def summarise(results: list[TrialResult], clock: BatchClock, engine: str = "spark-submit") -> dict:
    """Totals over the trials: kills per layer and fault point, where kills landed, rows lost or doubled."""
    kills_per_layer: Counter = Counter()
    kills_per_mode: Counter = Counter()
    phases: Counter = Counter()
    missed: Counter = Counter()
    collateral: Counter = Counter()
    engine_failures: Counter = Counter()
    reruns = 0
    tables: dict[str, Counter] = {name: Counter() for name in CHECKED_TABLES}
    for result in results:
        for attempt in result.attempts:
            if attempt.collateral:
                collateral[
                    f"{attempt.job} ({'rerun' if attempt.mode is None else attempt.mode + ' planned'})"
                ] += 1
            if attempt.engine_failure:
                engine_failures[f"{attempt.job}: {attempt.engine_failure}"] += 1
                continue  # run again: neither a kill nor a rerun
            if attempt.mode is None:
                reruns += 1
            elif attempt.killed:
                kills_per_layer[LAYER[attempt.job]] += 1
                kills_per_mode[_mode_label(attempt)] += 1
                phases[f"{attempt.job}: {_phase_kind(attempt.phase)}"] += 1
            elif attempt.returncode == 0:
                missed[f"{attempt.job} {attempt.mode}"] += 1  # the job finished before the kill
        for name, figures in result.tables.items():
            tables[name].update(
                {k: v for k, v in figures.items() if k != "expected" and k != "rows"}
            )
    failed = [r.trial for r in results if not r.ok]
    return {
        "engine": engine,
        "trials_run": len(results),
        "trials_failed": failed,
        "kills_per_layer": {
            layer: kills_per_layer[layer] for layer in ("bronze", "silver", "gold")
        },
        "kills_per_fault_point": dict(sorted(kills_per_mode.items())),
        "kills_landed": dict(sorted(phases.items())),
        "not_killed_job_finished_first": dict(sorted(missed.items())),
        "reruns": reruns,
        "engine_kills": sum(
            1 for r in results for a in r.attempts if a.mode == ENGINE and a.killed
        ),
        "failed_with_a_killed_engine": dict(sorted(collateral.items())),
        "engine_failures_run_again": dict(sorted(engine_failures.items())),
        "rows": {name: {k: counts[k] for k in PROBLEMS} for name, counts in tables.items()},
        "lost": sum(c["lost"] for c in tables.values()),
        "duplicated": sum(c["duplicated"] for c in tables.values()),
        "unexpected_or_mismatched": sum(c["unexpected"] + c["mismatched"] for c in tables.values()),
        "learned_batch_seconds": {k: round(v, 1) for k, v in clock.seconds.items()},
    }


def _phase_kind(phase: str) -> str:
    """A phase without its batch number, e.g. 'silver.ad_events committed, checkpoint not'."""
    if phase.startswith("engine killed: "):
        return "engine killed: " + _phase_kind(phase.removeprefix("engine killed: "))
    return (
        phase.split(": ", 1)[1]
        if phase.startswith("batch ") and ": " in phase
        else ("between batches (previous one checkpointed)" if "checkpointed" in phase else phase)
    )


def print_trial(result: TrialResult, total: int) -> None:
    """One trial: its kills and where they landed, the reruns, each table's figures, any error."""
    kills = "; ".join(
        f"{a.job} {a.mode}"
        + (f"@batch {a.batch}+{a.delay_s}s" if a.mode in (RANDOM, ENGINE) else "")
        + f" -> {a.phase}"
        for a in result.kills
    )
    reruns = sum(1 for a in result.attempts if a.mode is None)
    verdict = "OK" if result.ok else "FAILED"
    print(
        f"trial {result.trial + 1}/{total} (data seed {result.data_seed}): {verdict} in {result.seconds:.0f} s; "
        f"{result.landing_files} files, {result.landing_lines} lines; {len(result.kills)} kill(s), {reruns} rerun(s)"
    )
    print(f"  kills: {kills or 'none'}")
    missed = [a for a in result.attempts if a.mode is not None and a.returncode == 0]
    for attempt in missed:
        print(f"  not killed, the job finished first: {attempt.job} {attempt.mode}")
    for attempt in result.attempts:
        if attempt.collateral or attempt.engine_failure:
            why = attempt.collateral or f"the engine: {attempt.engine_failure} (run again)"
            print(f"  {attempt.job} attempt {attempt.attempt} failed: {why}")
    for name, figures in result.tables.items():
        print("  " + f"{name}: " + ", ".join(f"{k} {v}" for k, v in figures.items()))
    for error in result.errors:
        print(f"  ERROR: {error}")
    sys.stdout.flush()


def print_summary(summary: dict) -> None:
    """The totals over the trials, as :func:`summarise` counted them."""
    failed = summary["trials_failed"]
    print(f"engine: {engine_description(summary['engine'])}")
    print(
        f"trials run: {summary['trials_run']}, failed: {len(failed)}"
        + (f" (trials {failed})" if failed else "")
    )
    print(f"kills per layer: {summary['kills_per_layer']}")
    print(f"kills per fault point: {summary['kills_per_fault_point']}")
    print("where the kills landed:")
    for phase, count in summary["kills_landed"].items():
        print(f"  {count:4d}  {phase}")
    if summary["not_killed_job_finished_first"]:
        print(
            f"planned kills that did not happen (the job finished first): {summary['not_killed_job_finished_first']}"
        )
    print(f"reruns: {summary['reruns']}")
    if summary["engine"] == "connect":
        print(
            f"engine server kills: {summary['engine_kills']}; attempts that failed with a killed engine "
            f"(another job's kill): {summary['failed_with_a_killed_engine'] or 'none'}"
        )
        print(
            f"failures of the engine's own, run again: {summary['engine_failures_run_again'] or 'none'}"
        )
    for name, figures in summary["rows"].items():
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in figures.items()))
    print(
        f"rows lost: {summary['lost']}, rows duplicated: {summary['duplicated']}, "
        f"unexpected or mismatched: {summary['unexpected_or_mismatched']}"
    )
    sys.stdout.flush()


def engine_description(engine: str) -> str:
    """How the jobs of a run are started, in words."""
    if engine == "connect":
        return (
            "connect (every job a client of the harness's own Spark Connect server, on a free port)"
        )
    return "spark-submit (every job with its own driver, local[2])"


# The options that decide a trial's plan and data: a resumed run must not mix trials of others.
PLAN_OPTIONS = ("seed", "hours", "events_per_second", "start", "engine")
# What a report written before an option existed ran with.
OPTION_DEFAULTS = {"engine": "spark-submit"}


def earlier_run(options: argparse.Namespace) -> tuple[list[TrialResult], dict[str, float] | None]:
    """The trials of an earlier run of the same plan (``--resume``) and its learned batch durations."""
    path = Path(options.report)
    if not path.exists():
        return [], None
    report = json.loads(path.read_text())
    for key in PLAN_OPTIONS:
        earlier = report["options"].get(key, OPTION_DEFAULTS.get(key))
        if earlier != getattr(options, key):
            raise SystemExit(
                f"--resume: {path} was written with --{key.replace('_', '-')} {earlier}, "
                f"not {getattr(options, key)}; use another --report or the same options."
            )
    trials = []
    for trial in report["trials"]:
        attempts = [Attempt(**attempt) for attempt in trial.pop("attempts")]
        trial.pop("ok", None)
        trials.append(TrialResult(**trial, attempts=attempts))
    return trials, report["summary"].get("learned_batch_seconds")


def write_report(
    options: argparse.Namespace,
    results: list[TrialResult],
    clock: BatchClock,
    summary: dict | None = None,
) -> None:
    """Write the options, the totals and every trial to ``options.report`` (atomically: a rename)."""
    summary = dict(summary or summarise(results, clock, options.engine))
    checkpoint_trials = summary.pop("checkpoint_trials", [])
    report = {
        "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "options": vars(options),
        "summary": summary,
        "trials": [asdict(r) | {"ok": r.ok} for r in results],
        "checkpoint_trials": checkpoint_trials,
    }
    path = Path(options.report)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(report, indent=2, default=str))
    os.replace(tmp, path)
