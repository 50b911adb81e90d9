"""Checkpoint trials: damage a checkpoint, expect the refusal, follow its recovery to the letter.

``--checkpoint-trials N`` damages a streaming job's checkpoint instead of killing its driver, one
of ``CHECKPOINT_KINDS`` (its folder moved away, its newest offsets file removed or truncated, the
folder restored from an older copy), in one lakehouse that gains an hour of landing data per
trial. Each trial runs the pipeline (the damaged job must refuse to start, exit 2, and write
nothing), does exactly what the refusal's message says (:func:`follow_recovery`), runs the
pipeline again and compares every table with the landing files and the oracle. Trials rotate
through every (kind, job) pair. Jobs run as spark-submits, or in this process (``--in-process``).
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from lakehouse import catalog
from lakehouse.config import Lakehouse
from lakehouse_tools.fault_harness.checkpoint_state import batch_ids
from lakehouse_tools.fault_harness.launch import REFUSED, TaskRunner
from lakehouse_tools.fault_harness.plan import (
    CHECKPOINT_KINDS,
    STREAMED_TASKS,
    TARGETS,
    plan_checkpoint_trials,
)
from lakehouse_tools.fault_harness.verdict import PROBLEMS, check_tables
from lakehouse_tools.generator import parse_hour, write_campaigns, write_hours


def refusal_message(output: str) -> str:
    """The message a job that refused logged (``ERROR lakehouse: ...``, one line), or ''."""
    lines = [
        line.split("ERROR lakehouse: ", 1)[1]
        for line in output.splitlines()
        if "ERROR lakehouse: " in line
    ]
    return lines[-1].strip() if lines else ""


def follow_recovery(message: str, run_task: TaskRunner) -> str:
    """Do exactly what a refusal's message says to recover (before the rerun it asks for); what was done.

    The messages of ``lakehouse.runtime`` name one of: files to delete ("Recovery: delete A and B
    (nothing else)"), a full refresh of a layer (``jobs/full_refresh.py --layer L``), or, after
    another driver ran beside this one, nothing but the rerun.
    """
    deleting = re.search(r"Recovery: delete (.+?) \(nothing else\)", message)
    if deleting:
        files = deleting.group(1).split(" and ")
        for name in files:
            # A checksum file Spark never wrote is already deleted.
            Path(name).unlink(missing_ok=True)
        return f"deleted {', '.join(files)}"
    refresh = re.search(r"jobs/full_refresh\.py --layer (\w+)", message)
    if refresh:
        status, output = run_task("full_refresh", "--layer", refresh.group(1))
        if status != 0:
            raise RuntimeError(
                f"full refresh of {refresh.group(1)} failed ({status}): {output[-3000:]}"
            )
        return f"full refresh of {refresh.group(1)}"
    if "make sure no other driver runs on this checkpoint" in message:
        return "nothing: no other driver runs on the checkpoint"
    raise RuntimeError(f"no recovery to follow in the message: {message!r}")


def run_pipeline(run_task: TaskRunner) -> tuple[str, int, str] | None:
    """Every streaming task in DAG order, as the DAG runs them; the first that fails (task, status, output), or None."""
    for task in STREAMED_TASKS:
        status, output = run_task(task)
        if status != 0:
            return task, status, output
    return None


def damage_checkpoint(
    kind: str, checkpoint: Path, aside: Path, older_copy: Path | None = None
) -> str:
    """Damage a checkpoint as ``kind`` says; what was done."""
    newest = max(batch_ids(checkpoint / "offsets"), default=None)
    if kind == "removed":
        aside.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(checkpoint), str(aside))
        return f"moved {checkpoint} to {aside}"
    if kind == "restored_older":
        shutil.rmtree(checkpoint)
        shutil.copytree(older_copy, checkpoint)
        restored = max(batch_ids(checkpoint / "offsets"))
        return f"restored {checkpoint} from an older copy (newest offsets {restored}, was {newest})"
    if newest is None:
        raise RuntimeError(f"{checkpoint} has no offsets file to damage")
    offsets = checkpoint / "offsets" / str(newest)
    if kind == "offsets_removed":
        offsets.unlink()
        offsets.with_name(f".{newest}.crc").unlink(missing_ok=True)
        return f"removed offsets/{newest} (commits/{newest} kept)"
    if kind == "offsets_truncated":
        data = offsets.read_bytes()
        offsets.write_bytes(data[: len(data) // 2])
        return f"truncated offsets/{newest} to {len(data) // 2} of {len(data)} bytes"
    raise ValueError(f"unknown checkpoint damage {kind!r}; known: {', '.join(CHECKPOINT_KINDS)}")


@dataclass
class CheckpointTrialResult:
    """One checkpoint trial: the damage, the refusal, the recovery followed, and the tables after it."""

    trial: int
    kind: str
    job: str
    damage: str = ""
    refused_by: str = ""  # the task that exited 2
    message: str = ""  # what it said
    recovery: str = ""  # what the harness did, as the message said
    tables: dict[str, dict[str, int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        figures_ok = all(
            figures.get(k, 0) == 0 for figures in self.tables.values() for k in PROBLEMS
        )
        return not self.errors and self.refused_by == self.job and bool(self.tables) and figures_ok


def _versions(lakehouse: Lakehouse, names) -> dict[str, int]:
    """The latest Delta version of each of these tables that exists (a refusal must leave them)."""
    from lakehouse import delta_log

    versions = {name: delta_log.latest_version(lakehouse.table(name).path) for name in names}
    return {name: version for name, version in versions.items() if version is not None}


def run_checkpoint_trial(
    trial: int, kind: str, job: str, lakehouse: Lakehouse, run_task: TaskRunner, spark, add_hour
) -> CheckpointTrialResult:
    """Damage ``job``'s checkpoint as ``kind`` says, expect its refusal, follow the recovery, check the tables.

    ``lakehouse`` has been through the pipeline; ``add_hour()`` lands the next hour of data.
    """
    result = CheckpointTrialResult(trial, kind, job)
    started = time.monotonic()
    try:
        checkpoint = Path(lakehouse.table(TARGETS[job][0]).checkpoint())
        older = None
        if kind == "restored_older":  # a copy of now, then the job moves on
            older = Path(lakehouse.root) / "aside" / f"trial-{trial:03d}-{job}-older"
            shutil.copytree(checkpoint, older)
            add_hour()
            failed = run_pipeline(run_task)
            if failed:
                raise RuntimeError(
                    f"{failed[0]} failed ({failed[1]}) before the damage: {failed[2][-3000:]}"
                )
        aside = Path(lakehouse.root) / "aside" / f"trial-{trial:03d}-{job}-moved-away"
        result.damage = damage_checkpoint(kind, checkpoint, aside, older)
        add_hour()  # new input waiting for the damaged job
        written = [t.name for t in catalog.written_by_task(catalog.task(job))]
        before = _versions(lakehouse, written)

        failed = run_pipeline(run_task)
        if failed is None:
            raise RuntimeError(
                f"{job} ran on the damaged checkpoint ({result.damage}) instead of refusing"
            )
        result.refused_by, status, output = failed
        result.message = refusal_message(output)
        if result.refused_by != job or status != REFUSED or not result.message:
            raise RuntimeError(
                f"{result.refused_by} failed with {status} (expected {job} to refuse): {output[-3000:]}"
            )
        if _versions(lakehouse, written) != before:
            after = _versions(lakehouse, written)
            raise RuntimeError(f"{job} wrote to its tables before refusing: {before} -> {after}")

        result.recovery = follow_recovery(result.message, run_task)
        failed = run_pipeline(run_task)
        if failed:
            task, status, output = failed
            raise RuntimeError(
                f"after the recovery ({result.recovery}), {task} failed ({status}): {output[-3000:]}"
            )
        result.tables = check_tables(spark, lakehouse)
    except Exception:
        result.errors.append(traceback.format_exc())
    result.seconds = round(time.monotonic() - started, 1)
    return result


def run_checkpoint_trials(
    options: argparse.Namespace, spark, workdir: Path
) -> list[CheckpointTrialResult]:
    """The checkpoint trials, in one lakehouse that has been through the pipeline and gains an hour per trial."""
    root = workdir / "checkpoint-trials"
    shutil.rmtree(root, ignore_errors=True)
    lakehouse = Lakehouse(root=str(root))
    run_task = TaskRunner(lakehouse, root / "logs", options.in_process, options.timeout)
    data_seed = random.Random(f"checkpoint-trials-data-{options.seed}").randrange(1_000_000)
    hours = iter(range(1_000_000))
    add_hour = lambda: write_hours(  # noqa: E731
        lakehouse,
        parse_hour(options.start) + timedelta(hours=next(hours)),
        1,
        options.events_per_second,
        data_seed,
    )
    results: list[CheckpointTrialResult] = []
    write_campaigns(lakehouse, data_seed)
    for _ in range(options.hours):
        add_hour()
    for table in catalog.tasks():
        if not table.streamed:
            run_task(table.task)
    failed = run_pipeline(run_task)
    if failed:
        raise RuntimeError(
            f"the pipeline failed before any damage: {failed[0]} ({failed[1]}): {failed[2][-3000:]}"
        )
    plan = plan_checkpoint_trials(options.seed, options.checkpoint_trials)
    for trial, (kind, job) in enumerate(plan):
        result = run_checkpoint_trial(trial, kind, job, lakehouse, run_task, spark, add_hour)
        results.append(result)
        _print_checkpoint_trial(result, len(plan))
        if not result.ok:
            break  # the lakehouse is not known to be whole: later trials would test nothing
    if all(r.ok for r in results) and len(results) == len(plan) and not options.keep:
        shutil.rmtree(root, ignore_errors=True)
    return results


def summarise_checkpoint_trials(results: list[CheckpointTrialResult]) -> dict:
    """Totals of the checkpoint trials: cases per kind, refusals, recoveries, rows lost or doubled."""
    lost = sum(f.get("lost", 0) for r in results for f in r.tables.values())
    duplicated = sum(f.get("duplicated", 0) for r in results for f in r.tables.values())
    wrong = sum(
        f.get("unexpected", 0) + f.get("mismatched", 0) for r in results for f in r.tables.values()
    )
    return {
        "cases": len(results),
        "cases_per_kind": dict(Counter(r.kind for r in results)),
        "cases_per_job": dict(Counter(r.job for r in results)),
        "refused": sum(r.refused_by == r.job for r in results),
        "recoveries": dict(
            Counter(re.sub(r"deleted .*", "deleted checkpoint files", r.recovery) for r in results)
        ),
        "failed": [r.trial for r in results if not r.ok],
        "lost": lost,
        "duplicated": duplicated,
        "unexpected_or_mismatched": wrong,
    }


def _print_checkpoint_trial(result: CheckpointTrialResult, total: int) -> None:
    verdict = "OK" if result.ok else "FAILED"
    where = f"{result.kind} on {result.job}"
    print(
        f"checkpoint trial {result.trial + 1}/{total}: {where}: {verdict} in {result.seconds:.0f} s"
    )
    print(f"  damage: {result.damage}")
    print(f"  refused by {result.refused_by or 'nobody'}: {result.message[:400]}")
    print(f"  recovery followed: {result.recovery}")
    for name, figures in result.tables.items():
        print("  " + f"{name}: " + ", ".join(f"{k} {v}" for k, v in figures.items()))
    for error in result.errors:
        print(f"  ERROR: {error}")
    sys.stdout.flush()


def print_checkpoint_summary(checkpoint: dict, planned: int) -> None:
    """The checkpoint trials' totals, as ``summarise_checkpoint_trials`` counted them."""
    print(
        f"checkpoint trials run: {checkpoint['cases']} of {planned}, failed: {checkpoint['failed'] or 'none'}"
    )
    print(f"  per kind: {checkpoint['cases_per_kind']}; per job: {checkpoint['cases_per_job']}")
    print(
        f"  refused by the damaged job: {checkpoint['refused']}; recoveries followed: {checkpoint['recoveries']}"
    )
    print(
        f"  rows lost: {checkpoint['lost']}, rows duplicated: {checkpoint['duplicated']}, "
        f"unexpected or mismatched: {checkpoint['unexpected_or_mismatched']}"
    )
    sys.stdout.flush()
