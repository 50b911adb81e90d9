"""What every job shares: its arguments, one driver per checkpoint, the checkpoint checks, the run.

- :mod:`.job_args`: the command line, logging, the Airflow run a job serves;
- :mod:`.locks`: the checkpoint lock, the client's lease, batch notes;
- :mod:`.checkpoint_checks`: a checkpoint compared with what its tables recorded of it;
- :mod:`.available_now`: a streaming query run to completion (``trigger(availableNow=True)``).

The names jobs and flows use are here, so ``from lakehouse.runtime import ...`` says what, not where.
"""

from lakehouse.runtime.available_now import run_available_now, run_job
from lakehouse.runtime.checkpoint_checks import (
    CheckpointMismatch,
    Written,
    check_checkpoint,
    record_identity,
    refresh_advice,
)
from lakehouse.runtime.job_args import JobArgs, airflow_run, log, parse_job_args
from lakehouse.runtime.locks import (
    CheckpointBusy,
    QueryOrphaned,
    batch_running,
    checkpoint_lock,
    guarded_batches,
    read_batch_notes,
)

__all__ = [
    "CheckpointBusy",
    "CheckpointMismatch",
    "JobArgs",
    "QueryOrphaned",
    "Written",
    "airflow_run",
    "batch_running",
    "check_checkpoint",
    "checkpoint_lock",
    "guarded_batches",
    "log",
    "parse_job_args",
    "read_batch_notes",
    "record_identity",
    "refresh_advice",
    "run_available_now",
    "run_job",
]
