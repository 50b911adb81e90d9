"""Fault injection: SIGKILL the Spark driver of every layer, rerun it, and prove nothing was lost or doubled.

Usage:
    python -m lakehouse_tools.fault_injection --trials 3 --seed 1 [--hours 2 --events-per-second 0.1] \
        [--workdir DIR] [--report faults.json] [--keep] [--engine spark-submit|connect]
    python -m lakehouse_tools.fault_injection --trials 0 --checkpoint-trials 24 [--in-process] ...

Each trial builds a fresh lakehouse under the work folder, generates landing data with the
generator's default disorder (duplicates, malformed and late events) and loads dims.campaigns in
this process (a batch overwrite, atomic by itself: not under test). Then, layer by layer in DAG
order, every streaming job runs as a real ``spark-submit`` (local[2]) whose driver is killed with
SIGKILL, and is then run again, without the fault, until it exits 0, as an Airflow task retry
would. The two gold jobs run side by side, as in the DAG. How a job is killed:

* at a random moment: a seeded micro-batch to aim at, then a seeded fraction of a micro-batch's
  typical duration (learned from the runs so far) after the batch was planned; the kill goes to
  the spark-submit process group (JVM and Python driver). Anchoring on the batch rather than on
  the process start keeps kills out of the JVM start-up, which on a loaded machine varies by a
  minute and tests nothing. Bronze (whose Delta sink commits by itself, without foreachBatch)
  gets these only, reading one landing file per micro-batch so that kills land mid-stream.
* at a named fault point of :mod:`lakehouse.faults` (``LAKEHOUSE_FAULT_POINT``), where the
  driver kills itself, e.g. ``silver.after_merge``: after silver's Delta commit and before the
  checkpoint's.

Successive trials rotate through each job's kill modes (from a seeded start), so N trials cover
every mode about N / modes times. After each kill the harness records what had been committed
(the checkpoint's offset and commit logs, the Delta transaction ids of the job's tables and, for
silver, whether MERGE had started), so the report shows where the kills landed.

After the pipeline, the tables are read with one local Spark session and compared with the
landing files and the plain-Python oracle (:mod:`lakehouse_tools.oracle`): bronze must hold every
landing line exactly once, silver every valid event exactly once, the quarantine the oracle's
count per reason, and both gold tables the oracle's rows. Every trial and the totals are printed
(kills per layer and per fault point, rows lost and duplicated per table); ``--report`` writes
them as JSON. The exit status is 1 when any row was lost, duplicated or wrong, or a job could not
be brought to success, else 0.

On the warm engine (``--engine connect``) every job attempt is a Spark Connect client instead,
``python jobs/run.py <task>`` with ``LAKEHOUSE_ENGINE=connect`` in a process group of its own, and
the streaming query runs inside the engine's server. The harness starts an engine of its own
(``python -m lakehouse_tools.engine up`` with ``LAKEHOUSE_ENGINE_PORT`` a free port and
``LAKEHOUSE_ENGINE_DIR`` = ``<workdir>/engine``), so it never disturbs other engines (the default
one, a test run's), and stops it (``down``) when it ends, also on an error. It also loads the dimension and
reads the tables for the checks through that engine. A job is killed in one of two ways
(:data:`CONNECT_KILL_MODES`), both anchored on a micro-batch as above:

* ``random``: the client's process group is SIGKILLed. Its query goes on in the server; the
  rerun waits for the orphan's running batch, checks the checkpoint against the tables and starts
  the query, which stops the orphan (and the orphan's next batch refuses, its lease being gone).
* ``engine``: the engine's server process (:func:`lakehouse_tools.engine.server_pid`) is SIGKILLed;
  its supervisor starts a new one, and the rerun waits until it answers
  (:func:`lakehouse.spark.check_engine`). Every other client on the engine at that moment (the
  other gold jobs of the stage) fails with it: that is recorded as ``collateral`` and followed by
  reruns, which, like the reruns after any engine kill, do not count against ``--max-attempts``.

A query the engine itself fails to start (:data:`ENGINE_FAILURES`: its foreachBatch Python worker
not connecting back within Spark's fixed 10 s on a loaded machine) is run again with the same plan,
after a growing delay and one such start at a time, and counted in the report
(``engine_failures_run_again``).

The named fault points are not offered on the engine: :mod:`lakehouse.faults` fires in the process
that runs the batch, which on the engine is the server's Python worker; it was started by the
server, not by the client, so it never sees the ``LAKEHOUSE_FAULT_*`` variables the harness sets
on a job's process (and setting them on the shared server would make every query die there).

The plan of a trial (its data seed, kill modes, target batches and delay fractions) depends on
(seed, trial number, engine) alone (its data seed on (seed, trial number) only); where a random kill lands in wall-clock terms still depends on the
machine's speed, which is the point of killing at random.

Checkpoint trials (``--checkpoint-trials N``) damage a streaming job's checkpoint instead, one of
:data:`CHECKPOINT_KINDS` (its folder moved away, its newest offsets file removed or truncated, the
folder restored from an older copy), in one lakehouse that gains an hour of landing data per
trial. Each trial runs the pipeline (the damaged job must refuse to start, exit 2, and write
nothing), does exactly what the refusal's message says (:func:`follow_recovery`), runs the
pipeline again and compares every table with the landing files and the oracle. Trials rotate
through every (kind, job) pair. Jobs run as spark-submits, or in this process (``--in-process``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lakehouse import catalog, runner
from lakehouse.config import Lakehouse, engine_settings, jar_paths
from lakehouse.faults import ENV_BATCH, ENV_POINT
from lakehouse.spark import check_engine, fast_start_java_options
from lakehouse_tools.generator import parse_hour, write_campaigns, write_hours
from lakehouse_tools.oracle import Expected, expected_from_landing

PROJECT_DIR = Path(__file__).resolve().parents[2]
JOBS_DIR = PROJECT_DIR / "jobs"
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
        *(f"{LAYER[task]}.{point}" for point in runner.flow(catalog.task(task)).FAULT_POINTS),
        RANDOM,
    )
    for task in LAYER
}
# On the engine: the client killed, or the server (fault points do not fire there; see the docstring).
CONNECT_KILL_MODES = {task: (RANDOM, ENGINE) for task in LAYER}
# Source-fed tasks read one landing file per micro-batch, so that random kills land mid-stream.
JOB_ARGS = {task: ("--max-files-per-trigger", "1") for task in LAYER if catalog.task(task).source}
# First guesses of a micro-batch's duration (s) with the fast-start driver JVM, on the short side
# so that the first random kills land rather than come after the job has ended; replaced as runs
# are timed (and, with --resume, taken from the report).
DEFAULT_BATCH_SECONDS = {"bronze": 1.5, "silver": 5.0, "gold": 4.0}
MERGE_STARTED = "MergeIntoCommand: DELTA: MERGE operation"
PROBLEMS = ("lost", "duplicated", "unexpected", "mismatched")
# The per-batch records of a query (silver's ops.silver_batch_metrics): one row per micro-batch.
METRICS_TABLES = tuple(t.name for t in catalog.tables() if t.role == "metrics")
CHECKED_TABLES = (*(name for targets in TARGETS.values() for name in targets), *METRICS_TABLES)


# ---------------------------------------------------------------------------------------------
# Running one job with spark-submit, and killing it


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


def _batch_ids(folder: Path) -> set[int]:
    try:
        return {int(p.name) for p in folder.iterdir() if p.name.isdigit()}
    except FileNotFoundError:
        return set()


def _txn_version(table_path: str) -> int:
    """The highest Delta transaction version (micro-batch id) committed to a table, -1 if none."""
    best = -1
    for commit in Path(table_path, "_delta_log").glob("*.json"):
        for line in commit.read_text().splitlines():
            if '"txn"' in line:
                best = max(best, int(json.loads(line)["txn"]["version"]))
    return best


def describe_phase(lakehouse: Lakehouse, job: str, log: Path | None = None) -> str:
    """Where a job's query stood: the newest batch, and which of its writes were committed."""
    checkpoint = Path(lakehouse.table(TARGETS[job][0]).checkpoint())
    planned, done = _batch_ids(checkpoint / "offsets"), _batch_ids(checkpoint / "commits")
    if not planned:
        return "before any batch was planned"
    batch = max(planned)
    if done and max(done) >= batch:
        return f"batch {batch} checkpointed"
    written = [name for name in TARGETS[job] if _txn_version(lakehouse.table(name).path) >= batch]
    if written:
        return f"batch {batch}: {' + '.join(written)} committed, checkpoint not"
    if job == "silver_ad_events" and log is not None and log.exists():
        text = log.read_text(errors="replace")
        marker = text.rfind(f"Committed offsets for batch {batch}.")
        if marker >= 0 and MERGE_STARTED in text[marker:]:
            return f"batch {batch}: during MERGE, nothing committed"
    return f"batch {batch}: planned, nothing committed"


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


# Jobs that are not a table's task: their own entry points.
OPERATIONS = {"full_refresh": JOBS_DIR / "full_refresh.py"}


def spark_submit_command(job: str, lakehouse: Lakehouse, *args: str) -> list[str]:
    """The spark-submit line of a job (a task, or an operation: full_refresh), as the DAG's tasks run it (local[2]).

    The driver JVM starts with the fast-start options (C1 JIT, the class-data-sharing archive of
    ``make driver-cds`` when built): a trial is eight short drivers, and these halve their CPU time
    without touching what is under test (the query, its checkpoint and its Delta commits).
    """
    local = Path(sys.executable).parent / "spark-submit"
    return [
        str(local) if local.exists() else (shutil.which("spark-submit") or "spark-submit"),
        "--master",
        "local[2]",
        "--jars",
        ",".join(jar_paths()),
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        "--driver-java-options",
        fast_start_java_options(),
        *([str(OPERATIONS[job])] if job in OPERATIONS else [str(JOBS_DIR / "run.py"), job]),
        "--lakehouse-root",
        lakehouse.root,
        *JOB_ARGS.get(job, ()),
        *args,
    ]


def job_environment(lakehouse: Lakehouse, fault: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a job's spark-submit: never an inherited fault, only ``fault``."""
    env = {
        key: value for key, value in os.environ.items() if not key.startswith("LAKEHOUSE_FAULT_")
    }
    env.update(
        PYTHONPATH=str(PROJECT_DIR / "include"),
        LAKEHOUSE_ROOT=lakehouse.root,
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        **(fault or {}),
    )
    return env


def client_command(job: str, lakehouse: Lakehouse, *args: str) -> list[str]:
    """The command of a job as a client of the warm engine (what an Airflow task runs in-process)."""
    return [
        sys.executable,
        str(JOBS_DIR / "run.py"),
        job,
        "--lakehouse-root",
        lakehouse.root,
        *JOB_ARGS.get(job, ()),
        *args,
    ]


def client_environment(lakehouse: Lakehouse) -> dict[str, str]:
    """A client job's environment: the engine of ``$LAKEHOUSE_ENGINE_PORT``, never a driver of its own."""
    env = job_environment(lakehouse)
    for key in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "LAKEHOUSE_ENGINE_URL"):
        env.pop(key, None)
    env["LAKEHOUSE_ENGINE"] = "connect"
    return env


def start_job(
    job: str,
    lakehouse: Lakehouse,
    log: Path,
    fault: dict[str, str] | None = None,
    connect: bool = False,
) -> subprocess.Popen:
    """spark-submit ``job`` (or, ``connect``, run it as an engine client) in a process group of its own
    (JVM and Python driver, or the client), output to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    command = client_command(job, lakehouse) if connect else spark_submit_command(job, lakehouse)
    env = client_environment(lakehouse) if connect else job_environment(lakehouse, fault)
    with open(log, "ab") as out:
        return subprocess.Popen(
            command,
            env=env,
            cwd=PROJECT_DIR,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


class HarnessEngine:
    """The harness's own warm engine (connect mode): started, killed, awaited, stopped.

    It is addressed through the process environment, which :func:`engine_environment` sets for the
    whole run (``LAKEHOUSE_ENGINE_PORT``, ``LAKEHOUSE_ENGINE_DIR``), as ``lakehouse_tools.engine``
    and the jobs read it. Its kills are recorded, so an attempt can tell that the server died under it.
    """

    READY_TIMEOUT_S = 900.0

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.kills: list[
            tuple[float, str, int]
        ] = []  # (monotonic time, the job whose plan it was, server pid)
        self._lock = threading.Lock()
        # Held by a client started after an engine failure until its query runs (one start at a time).
        self.start_gate = threading.Lock()
        self.stopped = False

    def _tool(self, command: str, check: bool = True) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "lakehouse_tools.engine", command],
            env=dict(os.environ),
            cwd=PROJECT_DIR,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=self.READY_TIMEOUT_S,
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"engine {command} failed ({done.returncode}): {(done.stdout + done.stderr)[-2000:]}; "
                f"see {self.folder / 'engine.log'}"
            )

    def up(self) -> None:
        # An earlier run in this work folder that was killed left its engine running, on another port.
        self._tool("down", check=False)
        self._tool("up")

    def down(self) -> None:
        self.stopped = True  # no job thread starts it again
        self._tool("down", check=False)

    @property
    def url(self) -> str:
        return engine_settings().url

    def wait_ready(self) -> None:
        """Return once the engine answers a query; start it again if its supervisor gave up."""
        with self._lock:  # one `up` at a time: parallel reruns must not start two supervisors
            if self.stopped:
                raise RuntimeError("the harness is stopping: its engine is down")
            if check_engine(self.url, timeout_s=20) is None:
                return
            self._tool(
                "up"
            )  # waits for a restarting server; starts a new supervisor if there is none

    def kill_server(self, job: str) -> int | None:
        """SIGKILL the engine's server process; returns its pid once it is gone (None: no server found)."""
        from lakehouse_tools.engine import server_pid

        pid = server_pid()
        if pid is None:
            return None
        with self._lock:
            self.kills.append((time.monotonic(), job, pid))
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return pid
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        return pid

    def killed_between(self, start: float, end: float, but: str | None = None) -> list[str]:
        """The jobs whose plan killed the server between ``start`` and ``end`` (other than ``but``'s own kill)."""
        with self._lock:
            return [job for at, job, _ in self.kills if start <= at <= end and job != but]


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, dead but not yet reaped by its parent, is not alive)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@contextmanager
def engine_environment(workdir: Path):
    """This process's environment pointed at the harness's engine (connect mode), restored afterwards.

    The engine's port is a free one: its kills never reach another engine, and a long run can go on
    beside a test run or another clone's.
    """
    from lakehouse_tools.engine import free_port

    wanted = {
        "LAKEHOUSE_ENGINE": "connect",
        "LAKEHOUSE_ENGINE_PORT": str(free_port()),
        "LAKEHOUSE_ENGINE_DIR": str(workdir / "engine"),
        "LAKEHOUSE_ENGINE_URL": None,  # an explicit URL would win over the port
        # Its server is killed on purpose, a few times a minute: the supervisor's crash-loop limit
        # (5 restarts in 5 minutes) gave up on it, and a trial waited 10 minutes for its clients.
        "LAKEHOUSE_ENGINE_MAX_RESTARTS": "1000",
    }
    before = {key: os.environ.get(key) for key in wanted}
    try:
        for key, value in wanted.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def local_sessions():
    """Sessions built in this process are local ones (spark-submit mode: no engine anywhere)."""
    before = os.environ.get("LAKEHOUSE_ENGINE")
    os.environ["LAKEHOUSE_ENGINE"] = "local"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("LAKEHOUSE_ENGINE", None)
        else:
            os.environ["LAKEHOUSE_ENGINE"] = before


def _batch_running(checkpoint: Path) -> bool:
    from lakehouse.runtime import batch_running

    return batch_running(str(checkpoint))


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the job's process group (what is left of it); never anything else."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# Connect mode: how long a client may take to fail after its engine was killed under it.
CLIENT_AFTER_ENGINE_KILL_S = 600.0
# Connect mode: failures of the engine itself, not of the job nor of a kill, after which the attempt
# is run again (as an Airflow retry would: after a delay, and here one query start at a time) and
# the failure is counted in the report. The Python worker a foreachBatch query needs is started by
# the server when the query starts and must connect back within a fixed 10 s
# (PythonWorkerFactory.createSimpleWorker): three gold queries starting at once on a loaded 2-core
# machine (the harness runs niced) miss it.
ENGINE_FAILURES = ("Timed out while waiting for the Python worker to connect back",)
ENGINE_RETRY_DELAY_S = 20.0  # times the number of engine failures of the job so far, at most 120 s
GATE_HOLD_S = (
    180.0  # a gated client lets the next one start once its query runs, or after this long
)


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
    known = _batch_ids(checkpoint / "offsets") | _batch_ids(checkpoint / "commits")
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
            for batch in _batch_ids(checkpoint / "offsets") - planned_at.keys() - known:
                planned_at[batch] = now
            if attempt.mode in (RANDOM, ENGINE) and kill_at is None and attempt.batch in planned_at:
                attempt.delay_s = round(fraction * clock.of(layer), 2)
                kill_at = planned_at[attempt.batch] + attempt.delay_s
            if kill_at is not None and now >= kill_at:
                if attempt.mode == ENGINE and engine.killed_between(started, now):
                    kill_at = float(
                        "inf"
                    )  # another job's kill was first: this client fails with that server
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
            for batch in _batch_ids(checkpoint / "commits") - known:
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
            kill_group(
                process
            )  # a fault point kills the JVM and the driver; any Python worker left goes too
            attempt.phase = describe_phase(lakehouse, job, log)
            if engine is not None and _batch_running(checkpoint):
                attempt.phase += " (its batch still running on the engine)"
    if engine is not None and process.returncode != 0 and not attempt.killed:
        # Another job's engine kill: this client failed with the server (the plan of the kill says whose).
        others = engine.killed_between(
            started, time.monotonic(), but=job if server_killed else None
        )
        if others:
            attempt.collateral = f"the engine was killed under it ({', '.join(others)}'s plan)"
        else:
            output = _tail(str(log), 400)
            attempt.engine_failure = next(
                (failure for failure in ENGINE_FAILURES if failure in output), ""
            )
    attempt.seconds = round(time.monotonic() - started, 1)
    return attempt


# ---------------------------------------------------------------------------------------------
# A trial


@dataclass
class JobPlan:
    job: str
    mode: str
    batch: int
    fraction: float  # random kills: the fraction of a batch's duration to wait after it was planned


@dataclass
class TrialResult:
    trial: int
    data_seed: int
    root: str
    landing_files: int = 0
    landing_lines: int = 0
    attempts: list[Attempt] = field(default_factory=list)
    tables: dict[str, dict[str, int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def kills(self) -> list[Attempt]:
        return [a for a in self.attempts if a.killed]

    @property
    def ok(self) -> bool:
        return not self.errors and all(
            figures.get(k, 0) == 0 for figures in self.tables.values() for k in PROBLEMS
        )


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


def run_trial(
    options: argparse.Namespace,
    trial: int,
    spark,
    clock: BatchClock,
    workdir: Path,
    engine: HarnessEngine | None = None,
) -> TrialResult:
    """Generate data, run the pipeline with one kill per streaming job and reruns, check the tables.

    With ``engine`` (connect mode) the jobs are its clients, and so are the dimension's load and,
    when ``spark`` is None, the checks (a session of this process, released after them).
    """
    files_per_hour = 4
    data_seed, plans = plan_trial(
        options.seed, trial, options.hours * files_per_hour, options.engine
    )
    root = workdir / f"trial-{trial:03d}"
    shutil.rmtree(root, ignore_errors=True)
    lakehouse = Lakehouse(root=str(root))
    result = TrialResult(trial=trial, data_seed=data_seed, root=str(root))
    started = time.monotonic()

    try:
        write_campaigns(lakehouse, data_seed)
        write_hours(
            lakehouse,
            parse_hour(options.start),
            options.hours,
            options.events_per_second,
            data_seed,
        )
        landing = sorted(Path(lakehouse.landing_events).rglob("*.jsonl"))
        result.landing_files = len(landing)
        result.landing_lines = sum(len(_lines(p)) for p in landing)
        if engine is not None:
            engine.wait_ready()
        for (
            table
        ) in catalog.tasks():  # what is not streamed (the dimension) is loaded here, not under test
            if not table.streamed:
                runner.run(table.task, ["--lakehouse-root", lakehouse.root])

        by_job = {plan.job: plan for plan in plans}
        for stage in STAGES:
            threads = [
                threading.Thread(  # daemons: a stopped harness (SIGTERM) does not wait for its jobs
                    target=_kill_then_retry,
                    args=(by_job[job], lakehouse, clock, options, result, engine),
                    daemon=True,
                )
                for job in stage
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if result.errors:
                break
        if not result.errors:
            if spark is None:  # connect mode: the checks read through the harness's engine
                from lakehouse.spark import build_spark_session, release_engine_sessions

                engine.wait_ready()
                try:
                    result.tables = check_tables(
                        build_spark_session("fault-injection-check"), lakehouse
                    )
                finally:
                    release_engine_sessions()
            else:
                result.tables = check_tables(spark, lakehouse)
    except Exception:  # a broken trial is reported, and the next one still runs
        result.errors.append(traceback.format_exc())
    result.seconds = round(time.monotonic() - started, 1)
    return result


def _kill_then_retry(
    plan: JobPlan,
    lakehouse: Lakehouse,
    clock: BatchClock,
    options,
    result: TrialResult,
    engine=None,
) -> None:
    """One run killed as planned, then reruns without faults until one exits 0 (bounded)."""
    try:
        _kill_then_rerun(plan, lakehouse, clock, options, result, engine)
    except Exception:  # in a thread: record it, or the trial would go on as if the job had run
        result.errors.append(f"{plan.job}: {traceback.format_exc()}")


# Connect mode: attempts that failed only because another job's plan killed the engine under them,
# or because of one of ENGINE_FAILURES, are run again and not counted against --max-attempts, up to
# this many per job (three gold jobs share a stage).
MAX_ENGINE_RERUNS = 10


def _after_engine_failure(engine: HarnessEngine, failures: int) -> None:
    """The delay of a retry after the engine failed a query (longer each time), then the engine up."""
    time.sleep(min(ENGINE_RETRY_DELAY_S * failures, 120.0))
    engine.wait_ready()


def _kill_then_rerun(
    plan: JobPlan,
    lakehouse: Lakehouse,
    clock: BatchClock,
    options,
    result: TrialResult,
    engine=None,
) -> None:
    logs = Path(lakehouse.root) / "logs"
    number = 0
    engine_failures = 0
    while (
        True
    ):  # the planned kill; again after a failure of the engine's own (the plan still to carry out)
        number += 1
        first = Attempt(plan.job, number, plan.mode, batch=plan.batch)
        if engine_failures:
            _after_engine_failure(engine, engine_failures)
        run_attempt(
            first,
            lakehouse,
            logs / f"{plan.job}.{number}.log",
            clock,
            plan.fraction,
            options.timeout,
            engine,
            gated=engine_failures > 0,
        )
        result.attempts.append(first)
        if not first.engine_failure or engine_failures >= MAX_ENGINE_RERUNS:
            break
        engine_failures += 1
    if first.returncode == 0:
        return  # the kill came too late (the job had finished): nothing to resume
    if not first.killed and not first.collateral:
        result.errors.append(
            f"{plan.job} attempt {number} ended with {first.returncode} {first.phase}: {_tail(first.log)}"
        )
        return
    failed, collateral = 0, engine_failures
    last_failed_with_the_engine = False
    while failed < options.max_attempts and collateral <= MAX_ENGINE_RERUNS:
        number += 1
        log = logs / f"{plan.job}.{number}.log"
        waited_from = time.monotonic()
        if last_failed_with_the_engine:
            _after_engine_failure(engine, collateral)
        elif engine is not None:
            engine.wait_ready()  # as a retry would find it: the supervisor restarts a killed server
        rerun = run_attempt(
            Attempt(plan.job, number, None),
            lakehouse,
            log,
            clock,
            timeout_s=options.timeout,
            engine=engine,
            gated=last_failed_with_the_engine,
        )
        if engine is not None and rerun.returncode != 0 and not rerun.collateral:
            others = engine.killed_between(waited_from, time.monotonic())
            if others:
                rerun.collateral = f"the engine was killed under it ({', '.join(others)}'s plan)"
        result.attempts.append(rerun)
        if rerun.returncode == 0:
            return
        last_failed_with_the_engine = bool(rerun.engine_failure)
        if rerun.collateral or rerun.engine_failure:
            collateral += 1
        else:
            failed += 1
    last = result.attempts[-1].log
    result.errors.append(
        f"{plan.job}: no success in {failed + collateral} run(s) ({collateral} failed with the engine): "
        f"{_tail(last)}"
    )


def _lines(path: Path) -> list[str]:
    # As the oracle reads them.
    return path.read_bytes().decode("utf-8", errors="replace").splitlines()


def _tail(log: str, lines: int = 25) -> str:
    path = Path(log)
    if not path.exists():
        return "(no log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


# ---------------------------------------------------------------------------------------------
# Checkpoint trials: damage a checkpoint, expect the refusal, follow its recovery to the letter

# How a checkpoint is damaged; each must be refused before anything is written, and the recovery
# the refusal prints must bring every table back to the oracle's.
CHECKPOINT_KINDS = ("removed", "offsets_removed", "offsets_truncated", "restored_older")
REFUSED = 2  # the exit status of a job that refuses to start (a ConfigError)
STREAMED_TASKS = tuple(task for stage in STAGES for task in stage)


class TaskRunner:
    """Runs a task (a table's job, or full_refresh) to its end: (exit status, what it printed).

    As a spark-submit (the default), or in this process on the harness's Spark session, where a
    ConfigError stands for exit status 2, as ``runtime.run_job`` turns it into.
    """

    def __init__(
        self, lakehouse: Lakehouse, logs: Path, in_process: bool = False, timeout_s: float = 1800.0
    ):
        self.lakehouse, self.logs, self.in_process, self.timeout_s = (
            lakehouse,
            logs,
            in_process,
            timeout_s,
        )
        self.runs = 0

    def __call__(self, task: str, *args: str) -> tuple[int, str]:
        self.runs += 1
        if self.in_process:
            return self._in_process(task, args)
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{self.runs:03d}-{task}.log"
        with open(log, "wb") as out:
            done = subprocess.run(
                spark_submit_command(task, self.lakehouse, *args),
                env=job_environment(self.lakehouse),
                cwd=PROJECT_DIR,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=self.timeout_s,
                start_new_session=True,
            )
        return done.returncode, log.read_text(errors="replace")

    def _in_process(self, task: str, args: tuple[str, ...]) -> tuple[int, str]:
        from lakehouse import refresh
        from lakehouse.config import ConfigError

        argv = ["--lakehouse-root", self.lakehouse.root, *JOB_ARGS.get(task, ()), *args]
        try:
            if task in OPERATIONS:
                refresh.main(argv)
            else:
                runner.run(task, argv)
        except ConfigError as error:
            return REFUSED, f"ERROR lakehouse: {error}"
        except Exception:
            return 1, traceback.format_exc()
        return 0, ""


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
            Path(name).unlink(
                missing_ok=True
            )  # a checksum file Spark never wrote is already deleted
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
    newest = max(_batch_ids(checkpoint / "offsets"), default=None)
    if kind == "removed":
        aside.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(checkpoint), str(aside))
        return f"moved {checkpoint} to {aside}"
    if kind == "restored_older":
        shutil.rmtree(checkpoint)
        shutil.copytree(older_copy, checkpoint)
        restored = max(_batch_ids(checkpoint / "offsets"))
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


def _versions(lakehouse: Lakehouse, names) -> dict[str, int]:
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


# ---------------------------------------------------------------------------------------------
# Checking the tables


def _landing_key(source_file: str, landing_root: str) -> str:
    """A bronze row's landing file relative to the landing folder (file names repeat across hours)."""
    path = source_file.removeprefix("file:")
    marker = landing_root.rstrip("/") + "/"
    return path.split(marker, 1)[1] if marker in path else path


def check_tables(spark, lakehouse: Lakehouse) -> dict[str, dict[str, int]]:
    """Rows lost, duplicated, unexpected or wrong per table, against the landing files and the oracle."""
    read = lambda name: spark.read.format("delta").load(lakehouse.table(name).path)  # noqa: E731
    landing = Path(lakehouse.landing_events)
    expected: Expected = expected_from_landing(
        lakehouse.landing_events, lakehouse.landing_campaigns
    )
    figures: dict[str, dict[str, int]] = {}

    want = Counter(
        (str(path.relative_to(landing)), line)
        for path in sorted(landing.rglob("*.jsonl"))
        for line in _lines(path)
    )
    got = Counter(
        (_landing_key(row.source_file, lakehouse.landing_events), row.raw_line)
        for row in read("bronze.ad_events").select("source_file", "raw_line").collect()
    )
    surplus = got - want
    figures["bronze.ad_events"] = {
        "expected": sum(want.values()),
        "rows": sum(got.values()),
        "lost": sum((want - got).values()),
        "duplicated": sum(n for key, n in surplus.items() if key in want),
        "unexpected": sum(n for key, n in surplus.items() if key not in want),
    }

    ids = [row.event_id for row in read("silver.ad_events").select("event_id").collect()]
    unique = set(ids)
    figures["silver.ad_events"] = {
        "expected": len(expected.events),
        "rows": len(ids),
        "lost": len(set(expected.events) - unique),
        "duplicated": len(ids) - len(unique),
        "unexpected": len(unique - set(expected.events)),
    }

    per_reason = read("silver.quarantine_ad_events").groupBy("reason").count().collect()
    reasons = {row.reason: row["count"] for row in per_reason}
    wanted = Counter(expected.quarantined)
    figures["silver.quarantine_ad_events"] = {
        "expected": sum(wanted.values()),
        "rows": sum(reasons.values()),
        "lost": sum((wanted - Counter(reasons)).values()),
        # More rows of a reason than the oracle has: counted as duplicates (a misclassified line
        # would also show as one lost under its right reason).
        "duplicated": sum((Counter(reasons) - wanted).values()),
    }

    # A query's per-batch records: one row per committed micro-batch of the current checkpoint
    # generation (a batch whose metrics row is missing is "lost"), and together they account for
    # every line the query read, every row it inserted and every line it quarantined.
    for name in METRICS_TABLES:
        writer = catalog.get(catalog.get(name).written_by)
        paths = lakehouse.table(writer.name)
        generation = paths.current_generation()
        rows = read(name).where(f"generation = {generation}").collect()
        batches = _batch_ids(Path(paths.checkpoint(generation)) / "commits")
        seen = Counter(row.batch_id for row in rows)
        totals = {
            "lines": read(writer.upstream[0]).count(),
            "inserted": read(writer.name).count(),
            "quarantined": read(catalog.side(writer, "quarantine").name).count(),
        }
        figures[name] = {
            "expected": len(batches),
            "rows": len(rows),
            "lost": len(batches - seen.keys()),
            "duplicated": sum(n - 1 for n in seen.values()),
            "unexpected": len(seen.keys() - batches),
            "mismatched": sum(
                any(row[column] is None for row in rows)
                or sum(row[column] for row in rows) != total
                for column, total in totals.items()
            ),
        }

    # Gold tables: whole rows against the oracle's (a wrong value counts as one lost and one unexpected row).
    for table in catalog.tables():
        if table.layer != "gold":
            continue
        columns = table.column_names
        wanted = Counter(tuple(row[c] for c in columns) for row in expected.rows(table.name))
        actual = Counter(tuple(row) for row in read(table.name).select(*columns).collect())
        surplus = actual - wanted
        figures[table.name] = {
            "expected": sum(wanted.values()),
            "rows": sum(actual.values()),
            "lost": sum((wanted - actual).values()),
            "duplicated": sum(n for row, n in surplus.items() if row in wanted),
            "unexpected": sum(n for row, n in surplus.items() if row not in wanted),
            "mismatched": 0,
        }
    return figures


# ---------------------------------------------------------------------------------------------
# Summary and entry point


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


def _print_trial(result: TrialResult, total: int) -> None:
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


def _print_summary(summary: dict) -> None:
    failed = summary["trials_failed"]
    print(f"engine: {_engine_description(summary['engine'])}")
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


def _engine_description(engine: str) -> str:
    if engine == "connect":
        return (
            "connect (every job a client of the harness's own Spark Connect server, on a free port)"
        )
    return "spark-submit (every job with its own driver, local[2])"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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


# The options that decide a trial's plan and data: a resumed run must not mix trials of others.
PLAN_OPTIONS = ("seed", "hours", "events_per_second", "start", "engine")
# What a report written before an option existed ran with.
OPTION_DEFAULTS = {"engine": "spark-submit"}


def _earlier_run(options: argparse.Namespace) -> tuple[list[TrialResult], dict[str, float] | None]:
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


def run(options: argparse.Namespace, spark=None) -> dict:
    """Run the trials; returns the summary (with every trial's details under ``trials``).

    ``spark``: the session that reads the tables for the checks (spark-submit mode: a local one is
    made when None; connect mode: None reads them through the harness's engine).
    """
    options.engine = getattr(options, "engine", "spark-submit")
    workdir = Path(options.workdir or tempfile.mkdtemp(prefix="fault-injection-")).absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    results, learned = _earlier_run(options) if options.resume else ([], None)
    clock = BatchClock(learned)
    print(
        f"fault injection: {options.trials} trial(s), seed {options.seed}, work folder {workdir}"
        + (f"; {len(results)} already run (--resume)" if results else "")
    )
    print(f"engine: {_engine_description(options.engine)}")
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
        _print_trial(result, options.trials)
        if result.ok and not options.keep:
            shutil.rmtree(result.root, ignore_errors=True)
        if options.report:
            _write_report(options, results, clock)


def _finish(options, results: list[TrialResult], clock: BatchClock, checkpoint_results) -> dict:
    summary = summarise(results, clock, options.engine)
    if results:
        _print_summary(summary)
    if options.checkpoint_trials:
        summary["checkpoint"] = summarise_checkpoint_trials(checkpoint_results)
        _print_checkpoint_summary(summary["checkpoint"], options.checkpoint_trials)
        summary["checkpoint_trials"] = [asdict(r) | {"ok": r.ok} for r in checkpoint_results]
    if options.report:
        _write_report(options, results, clock, summary)
    summary["trials"] = [asdict(r) | {"ok": r.ok} for r in results]
    return summary


def _print_checkpoint_summary(checkpoint: dict, planned: int) -> None:
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


def _write_report(
    options: argparse.Namespace,
    results: list[TrialResult],
    clock: BatchClock,
    summary: dict | None = None,
) -> None:
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


def _stop_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)  # unwinds through run(): its engine is stopped on the way out


def main(argv: list[str] | None = None) -> int:
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


if __name__ == "__main__":
    sys.exit(main())
