"""One driver per checkpoint: the checkpoint lock, the client's lease that a batch checks before it writes, and batch notes.

On the warm engine a client killed -9 leaves its query running on the server; the lease lets each
batch find out that its client is gone (or another took the checkpoint over) and stop before writing.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import lakehouse.runtime.leases as leases
from lakehouse.errors import ConfigError
from lakehouse.files import lake_path, write_atomic
from lakehouse.object_storage import is_object_store
from lakehouse.runtime.job_args import log


class CheckpointBusy(ConfigError):
    """Another driver is running the same streaming query (e.g. an Airflow retry beside the first try)."""


@contextmanager
def checkpoint_lock(checkpoint: str, name: str) -> Iterator[str]:
    """Hold an exclusive lock on ``checkpoint`` for this driver's lifetime, or fail fast.

    Spark does not stop two drivers from running one checkpoint at the same time. The sinks'
    transaction ids already keep a second writer from committing a batch twice, but two drivers
    racing on the offset log fail late and confusingly; this lock makes the second one fail at
    once with a clear message. The kernel drops the lock when the holder dies, even by SIGKILL.
    (A POSIX lock: it covers drivers on one machine or a shared POSIX file system. A checkpoint on
    object storage takes a lease object there instead: :mod:`lakehouse.runtime.leases`.)

    Yields the lease: a token written into the lock file, which the query's batches check
    (:func:`guarded_batches`): on the warm engine a query outlives a client killed -9, and must not
    go on writing unattended, nor beside the client that takes over.
    """
    if is_object_store(checkpoint):
        with leases.driver_lease(checkpoint, name, CheckpointBusy) as lease:
            _wait_for_running_batch(checkpoint, name)
            yield lease
        return
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
    if is_object_store(checkpoint):
        deadline = time.monotonic() + BATCH_WAIT_S
        while leases.batch_running(checkpoint, BATCH_WAIT_S):
            if time.monotonic() > deadline:
                raise CheckpointBusy(_still_running(checkpoint, name))
            time.sleep(1)
        return
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
        raise CheckpointBusy(_still_running(checkpoint, name))


def _still_running(checkpoint: str, name: str) -> str:
    return (
        f"{name}: a batch of an earlier run on checkpoint {checkpoint} has been running for {BATCH_WAIT_S} s "
        "more; not starting beside it. If no run of this query is active, the engine may hang: restart it "
        "(make engine-down engine-up)."
    )


def driver_running(checkpoint: str) -> bool:
    """True while a driver holds ``checkpoint``'s lock (on object storage: a lease not yet expired)."""
    if is_object_store(checkpoint):
        return leases.driver_running(checkpoint)
    return _held_by_another(Path(checkpoint) / ".driver.lock")


def batch_running(checkpoint: str) -> bool:
    """True while a batch of ``checkpoint``'s query holds its batch lock (e.g. on the engine, after its client died)."""
    if is_object_store(checkpoint):
        return leases.batch_running(checkpoint, BATCH_WAIT_S)
    return _held_by_another(Path(checkpoint) / ".batch.lock")


def _held_by_another(lock_file: Path) -> bool:
    """True while another open file holds ``lock_file``'s flock (closing ours releases a probe's)."""
    if not lock_file.exists():
        return False
    with open(lock_file, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
    return False


def guarded_batches(on_batch: Callable, checkpoint: str, lease: str, name: str) -> Callable:
    """``on_batch`` for foreachBatch, run only while its client holds ``lease``; its summary is noted.

    Each batch holds the checkpoint's batch lock while it runs (a client taking over waits for it),
    and first checks that its client still holds the driver lock with this lease: a query whose
    client died or was replaced stops at its next batch instead of writing on. What ``on_batch``
    returns (a dict) is the batch's note (:func:`read_batch_notes`): on the warm engine the
    function runs in the server's Python worker, whose log the task never sees.
    """

    def guarded(rows, batch_id: int) -> None:
        if is_object_store(checkpoint):
            with leases.batch_lease(checkpoint, BATCH_WAIT_S):
                problem = leases.lease_problem(checkpoint, lease)
                if problem:
                    raise QueryOrphaned(
                        f"{name} batch {batch_id}: {problem} (checkpoint {checkpoint}); stopping"
                    )
                note = on_batch(rows, batch_id)
            if note is not None:
                _write_note(checkpoint, batch_id, note)
            return
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


def _notes_dir(checkpoint: str):
    path = lake_path(checkpoint)
    return path.with_name(path.name + ".batches")


def _write_note(checkpoint: str, batch_id: int, note: dict) -> None:
    write_atomic(_notes_dir(checkpoint) / f"{batch_id}.json", json.dumps(note, default=str))


def read_batch_notes(checkpoint: str, batch_ids: list[int]) -> list[dict]:
    """The notes of these batches (what each batch's function returned), in batch order."""
    notes = []
    for batch_id in sorted(batch_ids):
        try:
            notes.append(json.loads((_notes_dir(checkpoint) / f"{batch_id}.json").read_text()))
        except (OSError, ValueError):
            continue
    return notes
