"""One attempt of a job: started, killed as its plan says, and how it ended.

A kill is anchored on a micro-batch: a seeded batch to aim at, then a seeded fraction of a
batch's typical duration (:class:`BatchClock`, learned from the runs so far) after the batch was
planned. Anchoring on the batch rather than on the process start keeps kills out of the JVM
start-up, which on a loaded machine varies by a minute and tests nothing. A named fault point
(``LAKEHOUSE_FAULT_POINT``, :mod:`lakehouse.faults`) makes the driver kill itself instead.

On the warm engine a job is killed in one of two ways (``CONNECT_KILL_MODES``):

* ``random``: the client's process group is SIGKILLed. Its query goes on in the server; the
  rerun waits for the orphan's running batch, checks the checkpoint against the tables and starts
  the query, which stops the orphan (and the orphan's next batch refuses, its lease being gone).
* ``engine``: the engine's server process is SIGKILLed; its supervisor starts a new one, and the
  rerun waits until it answers. Every other client on the engine at that moment (the other gold
  jobs of the stage) fails with it: that is recorded as ``collateral``.

A query the engine itself fails to start (:data:`ENGINE_FAILURES`) is recorded as an
``engine_failure``, for the trial to run it again with the same plan.

The named fault points are not offered on the engine: :mod:`lakehouse.faults` fires in the process
that runs the batch, which on the engine is the server's Python worker; it was started by the
server, not by the client, so it never sees the ``LAKEHOUSE_FAULT_*`` variables the harness sets
on a job's process (and setting them on the shared server would make every query die there).
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from lakehouse.config import Lakehouse
from lakehouse.faults import ENV_BATCH, ENV_POINT
from lakehouse_tools.fault_harness.checkpoint_state import (
    batch_ids,
    batch_still_running,
    describe_phase,
)
from lakehouse_tools.fault_harness.harness_engine import HarnessEngine
from lakehouse_tools.fault_harness.launch import kill_group, log_tail, start_job
from lakehouse_tools.fault_harness.plan import ENGINE, LAYER, RANDOM, TARGETS


@dataclass
class Attempt:
    """One spark-submit of a job: how it was to be killed, how it ended, where it stood."""

    job: str
    attempt: int
    mode: str | None  # None: a rerun without faults; RANDOM; or a fault point
    batch: int | None = None  # the micro-batch aimed at
    delay_s: float | None = None  # random kills: seconds after that batch was planned
    returncode: int | None = None
    killed: bool = False
    phase: str = ""  # what was committed when the driver died
    seconds: float = 0.0
    log: str = ""
    # Connect mode: the engine was killed under this attempt by another job's plan (it failed with it).
    collateral: str = ""
    # Connect mode: the engine failed the query for a reason of its own (ENGINE_FAILURES), not a kill.
    engine_failure: str = ""


# First guesses of a micro-batch's duration (s) with the fast-start driver JVM, on the short side
# so that the first random kills land rather than come after the job has ended; replaced as runs
# are timed (and, with --resume, taken from the report).
DEFAULT_BATCH_SECONDS = {"bronze": 1.5, "silver": 5.0, "gold": 4.0}


class BatchClock:
    """Learned duration of one micro-batch per layer (planned -> checkpointed), for random kills."""

    def __init__(self, learned: dict[str, float] | None = None) -> None:
        self.seconds = {**DEFAULT_BATCH_SECONDS, **(learned or {})}
        self._lock = threading.Lock()

    def observe(self, layer: str, seconds: float) -> None:
        with self._lock:
            self.seconds[layer] = 0.6 * self.seconds[layer] + 0.4 * seconds

    def of(self, layer: str) -> float:
        with self._lock:
            return self.seconds[layer]


# Connect mode: how long a client may take to fail after its engine was killed under it.
CLIENT_AFTER_ENGINE_KILL_S = 600.0
# Connect mode: failures of the engine itself, not of the job nor of a kill, after which the attempt
# is run again (as an Airflow retry would: after a delay, and here one query start at a time) and
# the failure is counted in the report. The Python worker a foreachBatch query needs is started by
# the server when the query starts and must connect back within a fixed 10 s
# (PythonWorkerFactory.createSimpleWorker): three gold queries starting at once on a loaded 2-core
# machine (the harness runs niced) miss it.
ENGINE_FAILURES = ("Timed out while waiting for the Python worker to connect back",)
# A gated client lets the next one start once its query runs, or after this long.
GATE_HOLD_S = 180.0


def run_attempt(
    attempt: Attempt,
    lakehouse: Lakehouse,
    log: Path,
    clock: BatchClock,
    fraction: float = 0.0,
    timeout_s: float = 1800.0,
    engine: HarnessEngine | None = None,
    gated: bool = False,
) -> Attempt:
    """Run one spark-submit of ``attempt.job`` (with ``engine``: one engine client); kill it as
    ``attempt.mode`` says; fill in how it ended.

    ``gated``: the client starts when no other gated client is starting, and holds the engine's
    start gate until its query runs (a batch is planned), it ends, or :data:`GATE_HOLD_S` passed.
    """
    job, layer = attempt.job, LAYER[attempt.job]
    checkpoint = Path(lakehouse.table(TARGETS[job][0]).checkpoint())
    fault = None
    if attempt.mode not in (None, RANDOM, ENGINE):
        if engine is not None:
            raise ValueError(
                f"{attempt.mode}: fault points do not fire on the engine (see the module's docstring)"
            )
        fault = {ENV_POINT: attempt.mode, ENV_BATCH: str(attempt.batch)}
    if attempt.mode == ENGINE and engine is None:
        raise ValueError("an engine kill needs the harness's engine (--engine connect)")
    attempt.log = str(log)
    # Batches already in the checkpoint are neither timed nor aimed at.
    known = batch_ids(checkpoint / "offsets") | batch_ids(checkpoint / "commits")
    gate = engine.start_gate if gated and engine is not None else None
    if gate is not None:
        gate.acquire()
    started = time.monotonic()
    try:
        process = start_job(job, lakehouse, log, fault, connect=engine is not None)
    except BaseException:
        if gate is not None:
            gate.release()
        raise
    planned_at: dict[int, float] = {}
    kill_at = None
    server_killed = False
    try:
        while process.poll() is None:
            now = time.monotonic()
            if gate is not None and (planned_at or now - started > GATE_HOLD_S):
                gate.release()
                gate = None
            if now - started > timeout_s:
                kill_group(process)
                process.wait()
                attempt.phase = f"timed out after {timeout_s:.0f} s"
                break
            for batch in batch_ids(checkpoint / "offsets") - planned_at.keys() - known:
                planned_at[batch] = now
            if attempt.mode in (RANDOM, ENGINE) and kill_at is None and attempt.batch in planned_at:
                attempt.delay_s = round(fraction * clock.of(layer), 2)
                kill_at = planned_at[attempt.batch] + attempt.delay_s
            if kill_at is not None and now >= kill_at:
                if attempt.mode == ENGINE and engine.killed_between(started, now):
                    # Another job's kill was first: this client fails with that server.
                    kill_at = float("inf")
                    continue
                if attempt.mode == ENGINE:
                    # The server dies; the client fails when it notices (its phase is the server's at the kill).
                    server_killed = engine.kill_server(job) is not None
                    attempt.phase = describe_phase(lakehouse, job, log) if server_killed else ""
                    try:
                        process.wait(timeout=CLIENT_AFTER_ENGINE_KILL_S)
                    except subprocess.TimeoutExpired:
                        kill_group(process)
                        process.wait()
                        attempt.phase += f" (the client was still running {CLIENT_AFTER_ENGINE_KILL_S:.0f} s later: killed)"
                    break
                kill_group(process)
                process.wait()
                break
            for batch in batch_ids(checkpoint / "commits") - known:
                if batch in planned_at:
                    clock.observe(layer, now - planned_at[batch])
                    known.add(batch)
            time.sleep(0.1)
    finally:
        if gate is not None:
            gate.release()
        if process.poll() is None:
            kill_group(process)
            process.wait()
    attempt.returncode = process.returncode
    if server_killed:
        attempt.killed = process.returncode != 0
        attempt.phase = f"engine killed: {attempt.phase}"
    else:
        attempt.killed = process.returncode == -signal.SIGKILL and not attempt.phase
        if attempt.killed:
            # A fault point kills the JVM and the driver; any Python worker left goes too.
            kill_group(process)
            attempt.phase = describe_phase(lakehouse, job, log)
            if engine is not None and batch_still_running(checkpoint):
                attempt.phase += " (its batch still running on the engine)"
    if engine is not None and process.returncode != 0 and not attempt.killed:
        # Another job's engine kill: this client failed with the server (the plan of the kill says whose).
        others = engine.killed_between(
            started, time.monotonic(), but=job if server_killed else None
        )
        if others:
            attempt.collateral = f"the engine was killed under it ({', '.join(others)}'s plan)"
        else:
            output = log_tail(str(log), 400)
            attempt.engine_failure = next(
                (failure for failure in ENGINE_FAILURES if failure in output), ""
            )
    attempt.seconds = round(time.monotonic() - started, 1)
    return attempt
