"""What a trial will do, decided before anything runs: the pipeline's stages and each job's kill.

A plan depends on (seed, trial number, engine) alone (its data seed on (seed, trial number) only),
so a run can be repeated and a report resumed; where a random kill lands in wall-clock terms still
depends on the machine's speed, which is the point of killing at random.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from lakehouse import catalog

RANDOM = "random"
ENGINE = "engine"  # connect mode: the engine's server process is killed
ENGINES = ("spark-submit", "connect")


def _stages() -> tuple[tuple[str, ...], ...]:
    """The streaming tasks in DAG order, grouped as the DAG runs them (tasks of one level in parallel)."""
    level: dict[str, int] = {}
    for table in catalog.tasks():
        if table.streamed:
            level[table.task] = 1 + max(
                (level.get(up.task, -1) for up in catalog.upstream_tasks(table)), default=-1
            )
    return tuple(
        tuple(task for task, at in level.items() if at == n) for n in sorted(set(level.values()))
    )


STAGES = _stages()
LAYER = {task: catalog.task(task).layer for stage in STAGES for task in stage}
# The data tables each task writes, the first one owning the checkpoint.
TARGETS = {
    task: tuple(t.name for t in catalog.written_by_task(catalog.task(task)) if t.layer != "ops")
    for task in LAYER
}
# A task's named fault points (its flow's, e.g. silver.after_merge), then a kill at a random moment:
# mostly during the batch's Spark jobs, MERGE included.
KILL_MODES = {
    task: (
        *(f"{LAYER[task]}.{point}" for point in catalog.task(task).flow.fault_points),
        RANDOM,
    )
    for task in LAYER
}
# On the engine: the client killed, or the server (fault points do not fire there; see
# lakehouse_tools.fault_harness.attempt).
CONNECT_KILL_MODES = {task: (RANDOM, ENGINE) for task in LAYER}
# Source-fed tasks read one landing file per micro-batch, so that random kills land mid-stream.
JOB_ARGS = {task: ("--max-files-per-trigger", "1") for task in LAYER if catalog.task(task).source}


@dataclass
class JobPlan:
    """How one job of a trial is to be killed."""

    job: str
    mode: str
    batch: int
    fraction: float  # random kills: the fraction of a batch's duration to wait after it was planned


def plan_trial(
    seed: int, trial: int, landing_files: int, engine: str = "spark-submit"
) -> tuple[int, list[JobPlan]]:
    """The data seed and per-job kill plan of a trial: a function of (seed, trial, engine) alone."""
    rng = random.Random(f"fault-injection-{seed}-{trial}")
    data_seed = rng.randrange(1_000_000)
    plans = []
    for job, modes in (CONNECT_KILL_MODES if engine == "connect" else KILL_MODES).items():
        # Rotate through the modes from a seeded start: every mode comes up once per len(modes) trials.
        first = random.Random(f"fault-injection-{seed}-{job}").randrange(len(modes))
        mode = modes[(first + trial) % len(modes)]
        # A source-fed job reads one landing file per batch: aim at any of them. The others run one batch.
        batch = rng.randrange(landing_files) if job in JOB_ARGS else 0
        plans.append(JobPlan(job, mode, batch, rng.random()))
    return data_seed, plans


# How a checkpoint is damaged; each must be refused before anything is written, and the recovery
# the refusal prints must bring every table back to the oracle's.
CHECKPOINT_KINDS = ("removed", "offsets_removed", "offsets_truncated", "restored_older")
STREAMED_TASKS = tuple(task for stage in STAGES for task in stage)


def plan_checkpoint_trials(seed: int, count: int) -> list[tuple[str, str]]:
    """(kind, job) of each checkpoint trial: every kind in turn, jobs rotating from a seeded start and
    skipping one more after each round of kinds (4 kinds and 6 jobs: 24 trials cover every pair;
    without the skip, only the 12 pairs whose kind and job have the same parity)."""
    first = random.Random(f"checkpoint-trials-{seed}").randrange(len(STREAMED_TASKS))
    kinds = len(CHECKPOINT_KINDS)
    return [
        (
            CHECKPOINT_KINDS[n % kinds],
            STREAMED_TASKS[(first + n + n // kinds) % len(STREAMED_TASKS)],
        )
        for n in range(count)
    ]
