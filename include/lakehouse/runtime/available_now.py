"""Running a streaming query to completion with ``trigger(availableNow=True)``: check, start, await, summarise.

Before a query starts, its checkpoint is compared with what its tables recorded of it
(:mod:`lakehouse.runtime.checkpoint_checks`); the run also mends what a killed driver left
(an unfinished first plan, a watermark batch whose follow-up never ran).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming import DataStreamWriter

from lakehouse import checkpoint_log
from lakehouse.errors import ConfigError
from lakehouse.freshness import watermark_advance_pending

if TYPE_CHECKING:
    from lakehouse.progress import ProgressLog

from lakehouse.runtime.checkpoint_checks import (
    Written,
    check_checkpoint,
    explain_query_failure,
    record_identity,
)
from lakehouse.runtime.job_args import configure_logging, log
from lakehouse.runtime.locks import checkpoint_lock, read_batch_notes


def _withdraw_last_commit(checkpoint: str, name: str) -> None:
    """Make Spark run again the batch that moved a stateful query's watermark, and then the one that acts on it.

    Spark runs the no-data batch that fires a moved watermark's timers only right after the batch
    that moved it, in the same run: a driver that died in between leaves a checkpoint on which a
    restarted query finds nothing to do (Connect-mode fault trial 24: 46 sessions never closed).
    Without its commit file the batch is replayed as after any crash (its writes are skipped by
    their transaction ids) and the no-data batch follows.
    """
    batch = checkpoint_log.newest(checkpoint, "commits")
    log.warning(
        "%s: batch %s moved the watermark and the batch that acts on it did not run (its driver died); "
        "replaying batch %s",
        name,
        batch,
        batch,
    )
    commit, crc = checkpoint_log.log_files(checkpoint, "commits", batch)
    # The checksum first: a stale one would fail Spark's rename of the commit it writes again.
    crc.unlink(missing_ok=True)
    commit.unlink()


def _clear_unfinished_first_plan(checkpoint: str, name: str) -> None:
    """Remove the temp file a driver killed while it planned a new query's first batch left in ``offsets/``.

    Spark starts a query whose checkpoint has no offsets file as a new one, and refuses to when its
    offsets, commits or state folder holds any file (``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``,
    spark.sql.streaming.verifyCheckpointDirectoryEmptyOnStart): every retry failed so after the
    engine died while the sessions query wrote batch 0's offsets (Connect-mode fault trial 70).
    An offsets file never renamed into place planned nothing: no batch ran, nothing was written.
    """
    for leftover in checkpoint_log.unfinished_writes(checkpoint, "offsets"):
        log.warning(
            "%s: removing %s, left by a driver that died while it planned the query's first batch",
            name,
            leftover,
        )
        leftover.unlink(missing_ok=True)


def run_available_now(
    writer: DataStreamWriter | Callable[[str], DataStreamWriter],
    checkpoint: str,
    name: str,
    writes: tuple[Written, ...] | list[Written] = (),
    caught_up: Callable[[], str | None] | None = None,
    progress_log: ProgressLog | None = None,
    then: Callable[[], dict] | None = None,
) -> dict:
    """Process everything new since the checkpoint, then stop (``trigger(availableNow=True)``); a summary.

    ``writer`` is the query's writer, or a function of the lease that makes it (a foreachBatch
    query wraps its batch function with :func:`guarded_batches`). ``writes`` are the tables the
    query writes and the Delta transaction app ids it writes with: the checkpoint must agree with
    them (:func:`check_checkpoint`) or the query does not start. The summary holds the notes of
    the batches run (what each batch function returned), each also logged here.

    ``caught_up`` (:mod:`lakehouse.freshness`) says why there is nothing new, from files alone:
    the query is then not started at all (an hourly run with nothing new costs no Spark job).
    ``progress_log``: where the batches' progress reports are kept (:mod:`lakehouse.progress`).
    ``then``: work after the query (or instead of it, with nothing new), still under the
    checkpoint's lock; what it returns is added to the summary.
    """
    with checkpoint_lock(checkpoint, name) as lease:
        check_checkpoint(checkpoint, name, writes)
        if watermark_advance_pending(checkpoint):
            _withdraw_last_commit(checkpoint, name)
        if not checkpoint_log.batches(checkpoint, "offsets"):
            _clear_unfinished_first_plan(checkpoint, name)
        why = caught_up() if caught_up else None
        if why:
            log.info("%s: nothing new (%s); the query was not started", name, why)
            return {
                "table": name,
                "micro_batches": 0,
                "input_rows": 0,
                "batches": [],
                "not_started": why,
                **(then() if then else {}),
            }
        if callable(writer):  # a writer factory: it wraps its batch function with the lease
            writer = writer(lease)
        query = _start(
            writer.queryName(name)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True),
            name,
        )
        record_identity(checkpoint, name, str(query.id))
        try:
            _await_with_progress(query, name)
        except StreamingQueryException as error:
            explained = explain_query_failure(error, name, checkpoint)
            if explained is error:
                raise
            raise explained from error
        every = [p for p in query.recentProgress if p.batchId is not None]
        after = then() if then else {}
    progress = [p for p in every if p.numInputRows]
    rows = sum(p.numInputRows for p in progress)
    ran = [
        p.batchId for p in every if p.numInputRows or p.stateOperators
    ]  # no-data batches of a stateful query act too
    notes = read_batch_notes(checkpoint, ran)
    if progress_log and writes:
        progress_log.record(
            name,
            str(query.id),
            [p for p in every if p.batchId in ran],
            writes[0].table,
            writes[0].app_id,
        )
    for note in notes:
        log.info("%s batch %s: %s", name, note.get("batch_id", "?"), note.get("summary", note))
    log.info(
        "%s: %d micro-batch(es), %d input row(s), checkpoint %s",
        name,
        len(progress),
        rows,
        checkpoint,
    )
    summary = {
        "table": name,
        "micro_batches": len(progress),
        "input_rows": rows,
        "batches": notes,
        **after,
    }
    if every and every[-1].stateOperators:
        last = every[-1]
        summary["state_rows"] = sum(op.numRowsTotal for op in last.stateOperators)
        summary["state_memory_bytes"] = sum(op.memoryUsedBytes for op in last.stateOperators)
        summary["rows_behind_watermark"] = sum(
            op.numRowsDroppedByWatermark for p in every for op in p.stateOperators
        )
        log.info(
            "%s: state %d row(s), %d byte(s) in memory, watermark %s",
            name,
            summary["state_rows"],
            summary["state_memory_bytes"],
            (last.eventTime or {}).get("watermark"),
        )
    return summary


PROGRESS_EVERY_S = 30  # a line in the task log at least this often while a query runs
POLL_S = 2  # how often a running query is asked for the micro-batches it has finished


def _await_with_progress(query, name: str) -> None:
    """Wait for the query to stop, logging each micro-batch as it finishes (its rows and seconds),
    and how far it got every ``PROGRESS_EVERY_S`` seconds when no batch finished meanwhile."""
    started = last_line = time.monotonic()
    logged: set[int] = set()
    while True:
        stopped = query.awaitTermination(POLL_S)
        done = [p for p in query.recentProgress if p.batchId is not None]
        for progress in done:
            if progress.batchId in logged or not (progress.numInputRows or progress.stateOperators):
                continue
            logged.add(progress.batchId)
            seconds = (progress.durationMs or {}).get("triggerExecution", 0) / 1000
            log.info(
                "%s: micro-batch %d done: %s row(s) in %.1f s",
                name,
                progress.batchId,
                f"{progress.numInputRows:,}",
                seconds,
            )
            last_line = time.monotonic()
        if stopped:
            return
        if time.monotonic() - last_line >= PROGRESS_EVERY_S:
            log.info(
                "%s: running for %.0f s; %d micro-batch(es) done, %d input row(s) so far",
                name,
                time.monotonic() - started,
                len(done),
                sum(p.numInputRows for p in done),
            )
            last_line = time.monotonic()


# On the engine a foreachBatch query starts a Python worker that must connect back to the server
# within 10 s (hard-coded in Spark); on a machine loaded far beyond its cores it sometimes does not.
# Nothing has run then (no batch planned), so starting again is safe.
WORKER_START_FAILED = "Python worker failed to connect back"
START_ATTEMPTS = 4


def _start(writer: DataStreamWriter, name: str):
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            return writer.start()
        except Exception as error:
            if WORKER_START_FAILED not in str(error) or attempt == START_ATTEMPTS:
                raise
            pause = 5 * attempt
            log.warning(
                "%s: the engine's Python worker did not start in time (attempt %d/%d); again in %d s",
                name,
                attempt,
                START_ATTEMPTS,
                pause,
            )
            time.sleep(pause)
    raise AssertionError("unreachable")


def run_job(main: Callable[[], None]) -> None:
    """Run a job's ``main`` from the command line; a configuration error exits 2 with its message.

    A job that finished ends its process without the interpreter's teardown: a native thread pool
    torn down while a worker still runs aborts the process ("terminate called without an active
    exception", SIGABRT), and spark-submit then reports a finished job as failed.
    """
    configure_logging()
    try:
        main()
    except ConfigError as error:
        log.error("%s", error)
        sys.exit(2)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
