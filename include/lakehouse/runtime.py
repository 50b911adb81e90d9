"""What every job entry point shares: arguments, logging, and running a query to completion.

Before a streaming query starts, its checkpoint is compared with what its tables recorded of it
(:func:`check_checkpoint`): a checkpoint that does not match them (missing, replaced, older than
the tables, partly deleted, damaged) would make Delta skip batches as already written, or write
them twice, without an error. The job refuses to start instead, and says what to do.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import logging
import os
import re
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming import DataStreamWriter

from lakehouse import checkpoint_log
from lakehouse.config import ConfigError, Lakehouse, TablePaths
from lakehouse.freshness import watermark_advance_pending
from lakehouse.hours import HourRange, parse_instant

if TYPE_CHECKING:
    from lakehouse.progress import ProgressLog

log = logging.getLogger("lakehouse")


@dataclass(frozen=True)
class JobArgs:
    """The run parameters every job accepts (Airflow passes them as ``application_args``)."""

    lakehouse: Lakehouse
    mode: str  # "incremental" (a streaming availableNow run) or "batch" (recompute an interval)
    hours: HourRange | None  # the interval of a batch run
    generation: int | None  # checkpoint generation; None: the target table's current one
    max_files_per_trigger: int

    def generation_of(self, table: TablePaths) -> int:
        return self.generation if self.generation is not None else table.current_generation()


def parse_job_args(description: str, argv: list[str] | None = None, batch: bool = True) -> JobArgs:
    """Parse a job's command line; a bad combination fails with a message that says what to fix."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--lakehouse-root", help="default: $LAKEHOUSE_ROOT")
    parser.add_argument(
        "--mode",
        choices=("incremental", "batch") if batch else ("incremental",),
        default="incremental",
    )
    parser.add_argument(
        "--start", help="batch mode: first event hour, ISO-8601 (e.g. 2026-11-20T13:00Z)"
    )
    parser.add_argument("--end", help="batch mode: end of the interval, exclusive")
    parser.add_argument(
        "--generation",
        type=int,
        help="checkpoint generation (default: the table's current one; a full refresh moves it)",
    )
    parser.add_argument("--max-files-per-trigger", type=int, default=1000)
    args = parser.parse_args(argv)

    # Airflow renders the interval args of an incremental run as empty strings.
    args.start, args.end = args.start or None, args.end or None
    hours = None
    if args.mode == "batch":
        if not (args.start and args.end):
            parser.error(
                "--mode batch needs --start and --end (an event-time interval [start, end))"
            )
        hours = HourRange.between(parse_instant(args.start), parse_instant(args.end))
    elif args.start or args.end:
        parser.error("--start/--end only apply to --mode batch")
    return JobArgs(
        lakehouse=Lakehouse.from_env(args.lakehouse_root),
        mode=args.mode,
        hours=hours,
        generation=args.generation,
        max_files_per_trigger=args.max_files_per_trigger,
    )


def configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def airflow_run() -> tuple[str | None, int | None]:
    """The Airflow dag run id and try number of the task running this job (None outside Airflow)."""
    try:
        airflow_try = int(os.environ["AIRFLOW_CTX_TRY_NUMBER"])
    except (KeyError, ValueError):
        airflow_try = None
    return os.environ.get("AIRFLOW_CTX_DAG_RUN_ID"), airflow_try


class CheckpointBusy(ConfigError):
    """Another driver is running the same streaming query (e.g. an Airflow retry beside the first try)."""


@contextmanager
def checkpoint_lock(checkpoint: str, name: str) -> Iterator[str]:
    """Hold an exclusive lock on ``checkpoint`` for this driver's lifetime, or fail fast.

    Spark does not stop two drivers from running one checkpoint at the same time. The sinks'
    transaction ids already keep a second writer from committing a batch twice, but two drivers
    racing on the offset log fail late and confusingly; this lock makes the second one fail at
    once with a clear message. The kernel drops the lock when the holder dies, even by SIGKILL.
    (A POSIX lock: it covers drivers on one machine or a shared POSIX file system.)

    Yields the lease: a token written into the lock file, which the query's batches check
    (:func:`guarded_batches`): on the warm engine a query outlives a client killed -9, and must not
    go on writing unattended, nor beside the client that takes over.
    """
    Path(checkpoint).mkdir(parents=True, exist_ok=True)
    lock_path = Path(checkpoint) / ".driver.lock"
    handle = open(lock_path, "a+")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise CheckpointBusy(
                f"{name}: another driver is already running on checkpoint {checkpoint} ({holder}). "
                "Not starting a second writer; let it finish (an Airflow retry will run after it)."
            ) from None
        lease = uuid.uuid4().hex
        handle.seek(0)
        handle.truncate()
        handle.write(
            f"pid {os.getpid()} on {socket.gethostname()} since "
            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} lease {lease}"
        )
        handle.flush()
        _wait_for_running_batch(checkpoint, name)
        yield lease
    finally:
        handle.close()


class QueryOrphaned(RuntimeError):
    """A query's client is gone (killed) or another client took its checkpoint over: the query stops."""


BATCH_WAIT_S = 600


def _wait_for_running_batch(checkpoint: str, name: str) -> None:
    """Wait until no batch of this checkpoint runs: one of a killed client's query may still be on the engine.

    Its next batch sees the new lease and stops; checking the checkpoint while it writes would see
    a state that is only half way from one batch to the next.
    """
    with open(Path(checkpoint) / ".batch.lock", "a+") as batch_lock:
        try:
            fcntl.flock(batch_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            log.warning(
                "%s: a batch of an earlier run of this query is still running on the engine; waiting",
                name,
            )
        deadline = time.monotonic() + BATCH_WAIT_S
        while time.monotonic() < deadline:
            time.sleep(1)
            try:
                fcntl.flock(batch_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                continue
        raise CheckpointBusy(
            f"{name}: a batch of an earlier run on checkpoint {checkpoint} has been running for {BATCH_WAIT_S} s "
            "more; not starting beside it. If no run of this query is active, the engine may hang: restart it "
            "(make engine-down engine-up)."
        )


def batch_running(checkpoint: str) -> bool:
    """True while a batch of ``checkpoint``'s query holds its batch lock (e.g. on the engine, after its client died)."""
    path = Path(checkpoint) / ".batch.lock"
    if not path.exists():
        return False
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True


def guarded_batches(on_batch: Callable, checkpoint: str, lease: str, name: str) -> Callable:
    """``on_batch`` for foreachBatch, run only while its client holds ``lease``; its summary is noted.

    Each batch holds the checkpoint's batch lock while it runs (a client taking over waits for it),
    and first checks that its client still holds the driver lock with this lease: a query whose
    client died or was replaced stops at its next batch instead of writing on. What ``on_batch``
    returns (a dict) is the batch's note (:func:`read_batch_notes`): on the warm engine the
    function runs in the server's Python worker, whose log the task never sees.
    """

    def guarded(rows, batch_id: int) -> None:
        with open(Path(checkpoint) / ".batch.lock", "a+") as batch_lock:
            fcntl.flock(batch_lock, fcntl.LOCK_EX)
            _check_lease(checkpoint, lease, name, batch_id)
            note = on_batch(rows, batch_id)
        if note is not None:
            _write_note(checkpoint, batch_id, note)

    return guarded


def _check_lease(checkpoint: str, lease: str, name: str, batch_id: int) -> None:
    with open(Path(checkpoint) / ".driver.lock", "a+") as driver_lock:
        try:
            fcntl.flock(driver_lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            driver_lock.seek(0)
            if f"lease {lease}" in driver_lock.read():
                return  # its client holds the lock: go on
            raise QueryOrphaned(
                f"{name} batch {batch_id}: another client took checkpoint {checkpoint} over; stopping"
            ) from None
        raise QueryOrphaned(
            f"{name} batch {batch_id}: its client is gone (checkpoint {checkpoint}); stopping"
        )


def _notes_dir(checkpoint: str) -> Path:
    path = Path(checkpoint)
    return path.with_name(path.name + ".batches")


def _write_note(checkpoint: str, batch_id: int, note: dict) -> None:
    folder = _notes_dir(checkpoint)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{batch_id}.tmp"
    tmp.write_text(json.dumps(note, default=str))
    os.replace(tmp, folder / f"{batch_id}.json")


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
    crc.unlink(
        missing_ok=True
    )  # first: a stale checksum would fail Spark's rename of the commit it writes again
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


def read_batch_notes(checkpoint: str, batch_ids: list[int]) -> list[dict]:
    """The notes of these batches (what each batch's function returned), in batch order."""
    notes = []
    for batch_id in sorted(batch_ids):
        try:
            notes.append(json.loads((_notes_dir(checkpoint) / f"{batch_id}.json").read_text()))
        except (OSError, ValueError):
            continue
    return notes


def run_available_now(
    writer: DataStreamWriter | Callable[[str], DataStreamWriter],
    checkpoint: str,
    name: str,
    writes: tuple[Written, ...] | list[Written] = (),
    caught_up: Callable[[], str | None] | None = None,
    progress_log: ProgressLog | None = None,
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
            query.awaitTermination()
        except StreamingQueryException as error:
            explained = explain_query_failure(error, name, checkpoint)
            if explained is error:
                raise
            raise explained from error
        every = [p for p in query.recentProgress if p.batchId is not None]
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
    summary = {"table": name, "micro_batches": len(progress), "input_rows": rows, "batches": notes}
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


# --------------------------------------------------------------------------------------------
# The checkpoint against its tables


class CheckpointMismatch(ConfigError):
    """A checkpoint does not agree with what its tables recorded; the message names the recovery."""


@dataclass(frozen=True)
class Written:
    """A table a streaming query writes, and the Delta transaction app id its writes carry.

    ``app_id`` None: the Delta streaming sink, whose app id is the query id (the checkpoint's).
    """

    table: TablePaths
    app_id: str | None = None


IDENTITY_SUFFIX = ".identity.json"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def identity_record(checkpoint: str) -> Path:
    """Where the query id of ``checkpoint`` is recorded: beside the folder (``gen=N.identity.json``),
    so the record outlives a checkpoint folder that is moved away, deleted or replaced."""
    path = Path(checkpoint)
    return path.with_name(path.name + IDENTITY_SUFFIX)


def _recorded_query_id(checkpoint: str) -> str | None:
    return _query_id_in(identity_record(checkpoint), "query_id")


def _query_id_in(path: Path, key: str) -> str | None:
    try:
        return str(json.loads(path.read_text())[key])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def record_identity(checkpoint: str, name: str, query_id: str) -> None:
    """Record which query a checkpoint belongs to, once (its first run, or the first since this check exists)."""
    if _recorded_query_id(checkpoint) == query_id:
        return
    record = identity_record(checkpoint)
    tmp = record.with_name(f".{record.name}.tmp")
    tmp.write_text(
        json.dumps({"query_id": query_id, "writer": name, "checkpoint": str(checkpoint)})
    )
    os.replace(tmp, record)


@dataclass(frozen=True)
class CheckpointLog:
    """What a streaming checkpoint holds: its query id and the batch ids of its offsets and commit logs."""

    path: Path
    query_id: str | None
    offsets: tuple[int, ...]
    commits: tuple[int, ...]
    damaged: tuple[
        str, ...
    ]  # unreadable files, relative to the checkpoint: "metadata", "offsets/7"

    @classmethod
    def read(cls, checkpoint: str) -> CheckpointLog:
        path = Path(checkpoint)
        damaged = []
        query_id = _query_id_in(path / "metadata", "id")
        if query_id is None and (path / "metadata").exists():
            damaged.append("metadata")
        logs = {}
        for folder in ("commits", "offsets"):  # commits first: see check_checkpoint
            ids = checkpoint_log.batches(checkpoint, folder)
            damaged += [
                f"{folder}/{n}"
                for n in ids
                if not _log_file_readable(path / folder / str(n), folder)
            ]
            logs[folder] = ids
        return cls(path, query_id, logs["offsets"], logs["commits"], tuple(damaged))

    @property
    def planned(self) -> int:
        """The newest batch with an offsets file (-1: none)."""
        return max(self.offsets, default=-1)

    @property
    def committed(self) -> int:
        """The newest batch with a commit file (-1: none)."""
        return max(self.commits, default=-1)

    def files(self, folder: str, batch: int) -> list[str]:
        """A log file and its hidden checksum file, as a recovery names them."""
        return [str(path) for path in checkpoint_log.log_files(self.path, folder, batch)]


def _log_file_readable(path: Path, folder: str) -> bool:
    """Spark's log format: a version line ``vN``, then JSON lines (offsets: metadata, then one per source, "-" none)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return False
    if not lines or not re.fullmatch(r"v[0-9]+", lines[0]):
        return False
    body = lines[1:]
    if len(body) < (2 if folder == "offsets" else 1):
        return False
    try:
        return all(line == "-" or isinstance(json.loads(line), dict) for line in body)
    except ValueError:
        return False


def refresh_advice(layer: str) -> str:
    """How to rebuild ``layer`` (and everything computed from it) when its checkpoint cannot be trusted."""
    return (
        f"Recovery: a full refresh of {layer}, which empties {layer} and every layer computed "
        f"from it (Delta keeps the old versions) and moves their queries to a new checkpoint generation: trigger "
        f'ysb_hourly with full_refresh={layer}, or run `spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" '
        f"jobs/full_refresh.py --layer {layer}` and then every task from {layer} on. Do not delete or edit "
        "checkpoint files by hand: a batch planned again under a number the tables already hold is skipped by "
        "Delta as written (its input lost), or written twice by the Delta sink."
    )


def _delete(files: list[str], task: str, why: str) -> str:
    return f"Recovery: delete {' and '.join(files)} (nothing else), then rerun {task}: {why}."


def check_checkpoint(checkpoint: str, name: str, writes=(), retained: int = 100) -> None:
    """Refuse to start a query whose checkpoint does not agree with what its tables recorded of it.

    The tables' record is Delta's transaction state (:func:`lakehouse.sinks.committed_txns`): the
    newest batch id each table holds from this writer. A normal crash leaves at most the newest
    planned batch written and not checkpointed, which Spark replays and Delta skips; anything
    else (no checkpoint while the tables hold batches, a checkpoint of another query, one older
    than its tables, offsets or commit files missing or damaged) fails with a
    :class:`CheckpointMismatch` that names what was found and a recovery that is safe to follow.
    """
    from lakehouse import catalog, delta_log

    txns_of = {
        written.table.name: delta_log.committed_txns(written.table.path) for written in writes
    }
    layer = name.split(".")[0]
    try:
        task = catalog.task(name).task
    except ConfigError:
        task = f"the {name} job"
    state = CheckpointLog.read(checkpoint)
    recorded = _recorded_query_id(checkpoint)
    where = f"{name}: checkpoint {checkpoint}"
    if recorded and state.query_id and recorded != state.query_id:
        raise CheckpointMismatch(
            f"{where} belongs to another query: its metadata names query {state.query_id}, but the query whose "
            f"batches the tables hold is {recorded} (recorded in {identity_record(checkpoint)}). A checkpoint "
            "copied or restored from elsewhere does not match its tables: resuming from it would skip or repeat "
            f"batches. Nothing was written. {refresh_advice(layer)}"
        )
    if "metadata" in state.damaged:
        raise CheckpointMismatch(
            f"{where}: its metadata file (the query id) is damaged. Nothing was written. {refresh_advice(layer)}"
        )

    # What the tables hold of this writer: app id -> newest batch id (-1: none).
    sink_query = state.query_id or recorded
    held: dict[str, tuple[str, int]] = {}  # table -> (app id, batch)
    unattributed: dict[str, tuple[str, int]] = {}
    for written in writes:
        txns = txns_of[written.table.name]
        if written.app_id is not None:
            held[written.table.name] = (written.app_id, txns.get(written.app_id, -1))
        elif sink_query:
            held[written.table.name] = (sink_query, txns.get(sink_query, -1))
        elif not state.offsets:
            # A new Delta-sink checkpoint with no record: the table's streaming writers must all be
            # other checkpoints' (recorded beside them, or named in their metadata), or this one was
            # moved away before its query id was recorded.
            root = Path(written.table.checkpoint_root)
            known = {_query_id_in(p, "query_id") for p in root.rglob(f"gen=*{IDENTITY_SUFFIX}")}
            known |= {
                _query_id_in(p, "id")
                for p in root.rglob("gen=*/metadata")
                if re.fullmatch(r"gen=\d+", p.parent.name)
            }
            for app_id, version in txns.items():
                if _UUID.fullmatch(app_id) and app_id not in known:
                    unattributed[written.table.name] = (app_id, version)
    holding = {table: (app_id, batch) for table, (app_id, batch) in held.items() if batch >= 0}

    def holds(tables: dict[str, tuple[str, int]]) -> str:
        return ", ".join(
            f"{table} holds batch {batch} (Delta transaction {app_id}, version {batch})"
            for table, (app_id, batch) in tables.items()
        )

    if not state.offsets and not state.commits:
        if holding or unattributed:
            detail = (
                holds(holding)
                if holding
                else (
                    holds(unattributed)
                    + ", written by a streaming query that no checkpoint of the table is recorded for"
                )
            )
            raise CheckpointMismatch(
                f"{where} holds no batch (moved away, deleted or never copied), but the tables already hold this "
                f"writer's: {detail}. A new checkpoint would number its batches from 0 again: Delta would skip "
                f"them as already written, or append every input again. Nothing was written. {refresh_advice(layer)}"
            )
        return  # a new checkpoint for new tables

    problems = []
    if state.query_id is None:
        problems.append("its metadata file (the query id) is missing")
    planned, committed = state.planned, state.committed
    # Spark purges log files older than its retained batches (in no particular order, so a driver
    # killed while purging may leave holes there): only the retained window must be whole.
    for folder, ids in (("offsets", state.offsets), ("commits", state.commits)):
        window = [n for n in ids if n >= max(planned, committed) - retained + 2]
        missing = sorted(set(range(window[0], window[-1] + 1)) - set(window)) if window else []
        if missing:
            problems.append(f"{folder}/ lacks batch(es) {', '.join(map(str, missing))}")
    if committed > planned:
        problems.append(f"commits/{committed} exists but offsets/{committed} does not")
    elif committed < planned - 1:
        problems.append(
            f"commits/ ends at batch {committed}, offsets/ at {planned} (commit files deleted)"
        )
    damaged = [f for f in state.damaged if f != "metadata"]
    if damaged:
        problems.append(f"damaged (truncated or not Spark's format): {', '.join(damaged)}")
    ahead = {
        table: (app_id, batch) for table, (app_id, batch) in holding.items() if batch > planned
    }
    if ahead:
        problems.append(
            f"its newest planned batch is {planned} (newest committed {committed}) but {holds(ahead)}: the "
            "checkpoint is older than its tables (restored from an older copy, or its newest files deleted)"
        )
    if not problems:
        return

    found = f"{where} does not agree with its tables: {'; '.join(problems)}."
    # The recoveries short of a full refresh, each only where it is provably safe: the files to
    # delete describe a batch that no table holds yet, or one whose input is still recorded.
    known_all = bool(writes) and len(held) == len(writes)
    newest_held = max((batch for _, batch in held.values()), default=-1)
    if not ahead and len(problems) == 1:
        if damaged == [f"commits/{committed}"] and committed == planned:
            why = (
                f"batch {committed} is replayed with the same input (offsets/{committed} is intact) and every "
                "table skips what it already holds of it"
            )
            raise CheckpointMismatch(
                f"{found} {_delete(state.files('commits', committed), task, why)}"
            )
        if damaged == [f"offsets/{planned}"] and known_all and newest_held < planned:
            files = state.files("offsets", planned) + (
                state.files("commits", planned) if committed == planned else []
            )
            since = f"where batch {planned - 1} ended" if planned > 0 else "the start"
            why = f"batch {planned} is planned again from {since} and written once"
            raise CheckpointMismatch(
                f"{found} No table holds batch {planned} yet. {_delete(files, task, why)}"
            )
        if committed == planned + 1 and not damaged and known_all and newest_held < committed:
            why = f"batch {committed} is planned again from where batch {planned} ended and written once"
            raise CheckpointMismatch(
                f"{found} No table holds batch {committed}. {_delete(state.files('commits', committed), task, why)}"
            )
    raise CheckpointMismatch(
        f"{found} Resuming from it would plan batches the tables already hold with other input (Delta would "
        f"skip them) or miss some. Nothing was written. {refresh_advice(layer)}"
    )


def explain_query_failure(error: Exception, name: str, checkpoint: str) -> Exception:
    """Turn a streaming failure caused by the checkpoint into an error that says what happened and how to recover."""
    message = str(error)
    trace = f"{message}\n{getattr(error, '_stackTrace', '') or ''}"
    first = message.splitlines()[0][:300] if message else type(error).__name__
    table, layer = name, name.split(".")[0]
    if "CONCURRENT_STREAM_LOG_UPDATE" in trace or "Multiple streaming jobs detected" in trace:
        batch = re.search(r"detected for (\d+)", trace)
        which = f"batch {batch.group(1)}" if batch else "a batch"
        return ConfigError(
            f"{table}: while this driver ran {which}, that batch appeared in the commit log of checkpoint "
            f"{checkpoint} ({first}): another driver ran the same query at the same time (on another machine, or "
            "on a file system that does not honour the checkpoint lock), or the checkpoint's files were changed by "
            "hand while the job ran. This driver stopped before committing; what it wrote carries the batch's "
            "transaction ids, so nothing was written twice. Recovery: make sure no other driver runs on this "
            f"checkpoint, then rerun {table}'s job: it checks the checkpoint against its tables before it starts "
            "and either resumes or says what to do."
        )
    unreadable = (
        "log file was malformed",
        "incomplete log file",
        "unexpected end",
        "next on empty iterator",
        "jsonparseexception",
        "jsoneofexception",
    )
    if any(marker in trace.lower() for marker in unreadable):
        return ConfigError(
            f"{table}: the checkpoint {checkpoint} has a damaged log file that Spark could not read ({first}). "
            f"Nothing was written. {refresh_advice(layer)}"
        )
    incompatible = (
        "not compatible",
        "StateSchemaNotCompatible",
        "schema is not compatible",
        "STATE_STORE_",
        "STREAMING_STATEFUL_OPERATOR",
    )
    if any(marker in message for marker in incompatible):
        return ConfigError(
            f"{table}: the query no longer matches its checkpoint {checkpoint} ({first[:200]}). Nothing was "
            f"written. {refresh_advice(layer)}"
        )
    return error


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
