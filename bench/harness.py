"""The one benchmark harness: what every scenario measures with and leaves behind.

- a progress line per step (:func:`log`);
- repetitions and their medians (:func:`stats`, :func:`median`, :func:`alternating`);
- the process-tree CPU timer (:func:`run_tree` for a command run to its end, :func:`timed` and
  :func:`tree_cpu` for a live process and its descendants, :func:`unreaped_cpu` for PySpark's
  Python workers), and a driver in this process for the jobs (:func:`local_driver`);
- an engine of the scenario's own on a free port (:class:`Engine`);
- the results: ``bench/results/<scenario>.json`` and the scenario's keys of the shared, flat
  ``bench/results/summary.json`` (:func:`save_results`), from which ``make benchmarks-md``
  (:mod:`bench.render`) draws BENCHMARKS.md without rerunning anything.

A command's CPU figure is what this process gets back by waiting for it and for every process it
left behind: ``RUSAGE_CHILDREN`` counts a child (with the children it waited for in turn) once it
is reaped, and as a child subreaper this process also inherits, and reaps, descendants whose parent
exited first (PySpark's driver JVM outlives its Python process by a moment).
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import resource
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[1]
RESULTS = PROJECT_DIR / "bench" / "results"
SUMMARY = "summary.json"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(message: str) -> None:
    """One progress line: the time of day and the step."""
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", flush=True)


# ----------------------------------------------------------------------------------------------
# Repetitions and medians


def stats(values: list[float | None]) -> dict:
    """Median, min, max and count of ``values`` (None left out; all None when none is left)."""
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def median(values: list[float | None]) -> float | None:
    return stats(values)["median"]


def cell(values: list[float], digits: int = 1) -> str:
    """A table cell: the median (min–max) of ``values``; a single value alone; none as a dash."""
    if not values:
        return "–"
    text = f"{statistics.median(values):.{digits}f}"
    return (
        text if len(values) == 1 else f"{text} ({min(values):.{digits}f}–{max(values):.{digits}f})"
    )


def alternating(contenders: list[str], rep: int) -> list[str]:
    """The order of repetition ``rep``: a, b, c, then c, b, a, ... (no contender always first)."""
    return list(contenders) if rep % 2 == 0 else list(contenders)[::-1]


def parse_size(text: str) -> int:
    """``1M`` -> 1_000_000, ``200k`` -> 200_000, ``5000`` -> 5000."""
    text = text.strip().lower()
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * factor)


def size_label(events: int) -> str:
    if events >= 1_000_000:
        return f"{events / 1e6:.3g}M"
    return f"{events / 1e3:.3g}k" if events >= 1_000 else str(events)


def machine_info() -> dict:
    """Cores, memory, CPU, kernel, versions and load average of this machine."""
    from importlib.metadata import version

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown",
    )
    kib = int(Path("/proc/meminfo").read_text().split()[1])
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    return {
        "nproc": os.cpu_count(),
        "memory": f"{kib / 1024 / 1024:.1f} GiB",
        "cpu": cpu,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "pyspark": version("pyspark"),
        "delta_spark": version("delta-spark"),
        "java": java[0] if java else "unknown",
        "load_average": os.getloadavg(),
    }


# ----------------------------------------------------------------------------------------------
# The process-tree CPU timer


def become_subreaper() -> None:
    """Orphaned descendants are re-parented to this process instead of init (Linux >= 3.4)."""
    PR_SET_CHILD_SUBREAPER = 36
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def self_cpu() -> float:
    """CPU seconds so far of this process (all its threads)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def proc_stats() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, user + system + reaped children's CPU seconds) of every process."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        rest = text[text.rfind(")") + 2 :].split()
        # Fields 4 (ppid) and 14..17 (utime, stime, cutime, cstime) of proc(5); rest[0] is field 3.
        found[int(entry.name)] = (int(rest[1]), sum(int(v) for v in rest[11:15]) / CLK_TCK)
    return found


def tree_cpus(root: int, include_root: bool = True) -> dict[int, float]:
    """pid -> CPU seconds so far of the live process ``root`` and each of its descendants (each
    with the children it reaped)."""
    found = proc_stats()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in found.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in found and (include_root or pid != root):
            out[pid] = found[pid][1]
        todo += children.get(pid, [])
    return out


def tree_cpu(root: int, include_root: bool = True) -> float:
    """CPU seconds so far of the live process ``root`` and its descendants (each with the children it reaped)."""
    return sum(tree_cpus(root, include_root).values())


def cpu_between(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds a process tree used between two :func:`tree_cpus` readings, process by process.

    A process gone by the second reading (a Python worker that exited) adds nothing: a difference
    of sums would subtract everything it had used before.
    """
    return sum(max(0.0, cpu - before.get(pid, 0.0)) for pid, cpu in after.items())


# Where an engine's CPU goes, by how its JVM's threads are named (proc(5) keeps 15 characters:
# "C2 CompilerThread0", "Executor task launch worker ..." renamed "Executor task idle worker#3").
JVM_THREAD_PARTS = {"C1 CompilerThre": "jit", "C2 CompilerThre": "jit", "Executor task": "tasks"}


def jvm_parts(pid: int) -> dict[str, dict[int, float]]:
    """CPU seconds so far of the JVM ``pid``, in parts, each by thread or process id: ``jit`` (its
    compiler threads), ``tasks`` (Spark's task threads), ``python`` (its Python workers, live or
    reaped) and ``jvm`` (the whole JVM, threads that exited included)."""
    parts: dict[str, dict[int, float]] = {"jit": {}, "tasks": {}, "python": {}, "jvm": {}}
    for task in os.scandir(f"/proc/{pid}/task"):
        try:
            text = Path(task.path, "stat").read_text()
        except OSError:
            continue
        name = text[text.find("(") + 1 : text.rfind(")")]
        part = next((p for prefix, p in JVM_THREAD_PARTS.items() if name.startswith(prefix)), None)
        if part:
            rest = text[text.rfind(")") + 2 :].split()
            parts[part][int(task.name)] = (int(rest[11]) + int(rest[12])) / CLK_TCK
    text = Path(f"/proc/{pid}/stat").read_text()
    rest = [int(v) for v in text[text.rfind(")") + 2 :].split()[11:15]]
    parts["jvm"][pid] = (rest[0] + rest[1]) / CLK_TCK
    parts["python"] = tree_cpus(pid, include_root=False) | {pid: (rest[2] + rest[3]) / CLK_TCK}
    return parts


def jvm_parts_between(before: dict, after: dict) -> dict[str, float]:
    """What each part of :func:`jvm_parts` used between two readings; ``other`` is the JVM's own
    CPU that is neither compiling nor running tasks (planning, Delta's log, commits, streaming)."""
    used = {part: cpu_between(before[part], after[part]) for part in after}
    used["other"] = max(0.0, used.pop("jvm") - used["jit"] - used["tasks"])
    return {part: round(cpu, 2) for part, cpu in used.items()}


def jvm_pid() -> int | None:
    """The driver JVM of this Python process (py4j starts it as a child)."""
    for pid, (ppid, _) in proc_stats().items():
        try:
            if ppid == os.getpid() and Path(f"/proc/{pid}/comm").read_text().strip() == "java":
                return pid
        except OSError:
            continue
    return None


@contextmanager
def timed(pid: int | None = None) -> Iterator[dict]:
    """CPU seconds of the process tree ``pid`` (default: this process's) and wall seconds over the
    block, in the dict it yields once the block ends (``cpu_s``, ``wall_s``)."""
    pid = pid or os.getpid()
    took: dict = {}
    cpu, wall = tree_cpu(pid), time.perf_counter()
    yield took
    took.update(cpu_s=tree_cpu(pid) - cpu, wall_s=time.perf_counter() - wall)


# The measured contenders' drivers (bench.engine_compare, bench.sessions_compare): the project's
# settings but the master, memory and UI; the tests' (local_driver's default) shuffle less.
BENCH_SPARK_CONF = {
    "spark.master": "local[2]",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "2g",
}


def local_driver(app: str, conf: dict | None = None):
    """A ``local[2]`` driver in this process (``conf``, by default the tests' settings); the jobs
    then run on it."""
    if conf is None:
        from conftest import TEST_SPARK_CONF as conf

    from lakehouse.spark import build_spark_session

    os.environ["LAKEHOUSE_ENGINE"] = "local"
    spark = build_spark_session(app, conf, engine_kind="local")
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def process_cpu(jvm: int | None) -> float:
    """CPU seconds so far of this process and of its driver JVM ``jvm`` with the JVM's children."""
    return self_cpu() + (tree_cpu(jvm) if jvm else 0.0)


def unreaped_cpu(root: int) -> float:
    """CPU seconds so far of the live grandchildren of ``root`` (and their descendants): what no
    ``RUSAGE_CHILDREN`` will count, when their parent ignores SIGCHLD.

    PySpark's worker daemon, a child of the driver JVM, does (``signal(SIGCHLD, SIG_IGN)``): its
    Python workers are reaped by the kernel, their CPU added to nobody's children time. A job
    reads this just before ``spark.stop()`` ends them; workers that ended earlier are not in it.
    """
    children = [pid for pid, (ppid, _) in proc_stats().items() if ppid == root]
    return sum(tree_cpu(child, include_root=False) for child in children)


def session_of(pid: int) -> int | None:
    """The session id of process ``pid`` (field 6 of proc(5)), None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text[text.rfind(")") + 2 :].split()[3])


def reap_session(session: int, timeout: float) -> list[int]:
    """Wait for this process's children in ``session`` (a command's orphans handed to it
    included), so their CPU is counted; the pids still alive after ``timeout``.

    Only that session's: a test runner's own children (an engine, a server) are left alone.
    """
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for pid, (ppid, _) in proc_stats().items():
            if ppid != os.getpid() or session_of(pid) != session:
                continue
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    alive.append(pid)
            except ChildProcessError:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def run_tree(
    command: list[str], env: dict, log_path: Path, timeout: float
) -> tuple[int, float, float]:
    """Run ``command`` in a session of its own until it and every descendant ended: (exit code, wall s, CPU s).

    Wall time ends when the command exits; CPU covers its whole process tree (call
    :func:`become_subreaper` once first). On ``timeout`` the session is killed.
    """
    before = children_cpu()
    started = time.perf_counter()
    with open(log_path, "w") as out:
        process = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            code = process.wait()
    wall = time.perf_counter() - started
    for pid in reap_session(process.pid, timeout=60):  # alive a minute after the command exited
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    reap_session(process.pid, timeout=30)
    return code, wall, children_cpu() - before


def run_worker(
    module: str, kind: str, spec: dict, folder: Path, include: Path, timeout: float, **env: str
) -> tuple[int, float, float, dict | None, Path]:
    """``python -m MODULE worker KIND SPEC.json`` in a process tree of its own (:func:`run_tree`),
    ``include`` as the project's code: (exit code, wall s, CPU s, what it wrote to the spec's
    ``out``, None if it failed, its log). The module's ``__main__`` calls :func:`worker_main`."""
    spec_path, out = folder / f"{kind}.spec.json", folder / f"{kind}.out.json"
    folder.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    spec_path.write_text(json.dumps({**spec, "out": str(out)}, indent=1))
    paths = os.pathsep.join([str(include), str(PROJECT_DIR)])
    env = {**os.environ, "PYTHONPATH": paths, "LAKEHOUSE_ENGINE": "local", **env}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    log_path = folder / f"{kind}.log"
    command = [sys.executable, "-m", module, "worker", kind, str(spec_path)]
    code, wall, cpu = run_tree(command, env, log_path, timeout)
    result = json.loads(out.read_text()) if code == 0 and out.is_file() else None
    return code, wall, cpu, result, log_path


def worker_main(workers: dict, argv: list[str]) -> None:
    """A worker of :func:`run_worker`: ``KIND SPEC.json`` runs ``workers[KIND](spec)`` and writes
    what it returns to the spec's ``out`` file."""
    kind, spec_path = argv
    spec = json.loads(Path(spec_path).read_text())
    Path(spec["out"]).write_text(json.dumps(workers[kind](spec), indent=1, default=str))


# ----------------------------------------------------------------------------------------------
# The code a scenario measures


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=PROJECT_DIR, capture_output=True, text=True, check=True
    ).stdout.strip()


def code_snapshot(work: Path, rev: str = "HEAD", worktree: bool = False) -> tuple[str, Path]:
    """(the code's version, its ``include`` folder): ``rev``'s exported under ``work`` (edits made
    while a scenario runs are in no figure), or with ``worktree`` the files on disk."""
    try:
        commit = git("rev-parse", "--short", rev)
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)", PROJECT_DIR / "include"
    if worktree:
        dirty = git("status", "--porcelain", "--", "include")
        return commit + (
            "+uncommitted changes in include/" if dirty else ""
        ), PROJECT_DIR / "include"
    target = work / "code" / commit
    if not (target / "include").is_dir():
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "archive", commit, "include"], cwd=PROJECT_DIR, capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return commit, target / "include"


# ----------------------------------------------------------------------------------------------
# An engine of the scenario's own


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Engine:
    """A warm engine of the scenario's own (``python -m lakehouse_tools.engine up|down``) on a
    free port, named to this process's jobs through the environment."""

    def __init__(self, state_dir: Path):
        self.port, self.started = free_port(), False
        os.environ.update(
            LAKEHOUSE_ENGINE_PORT=str(self.port),
            LAKEHOUSE_ENGINE_DIR=str(state_dir),
            LAKEHOUSE_ENGINE_TOKEN=secrets.token_hex(16),
        )
        os.environ.pop("LAKEHOUSE_ENGINE_URL", None)

    def _command(self, verb: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "lakehouse_tools.engine", verb],
            env=os.environ,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def up(self) -> None:
        """Start it and wait until it answers a query."""
        status = self._command("status", 60)
        if status.returncode == 0:
            raise RuntimeError(f"something already answers on port {self.port}: {status.stdout}")
        self._command("down", 120)  # a supervisor of an earlier run that no longer answers
        self.started = True
        done = self._command("up", 600)
        if done.returncode != 0:
            raise RuntimeError(f"the engine did not start:\n{done.stdout}{done.stderr[-3000:]}")

    def down(self) -> None:
        if self.started:
            done = self._command("down", 180)
            log(f"engine: {(done.stdout + done.stderr).strip()}")
            self.started = False


# ----------------------------------------------------------------------------------------------
# The results


def declared_tables() -> list[str]:
    """The tables the catalog declares now."""
    from lakehouse import catalog

    return [spec.name for spec in catalog.tables()]


def update_summary(path: Path, figures: dict) -> None:
    """Update one scenario's keys of a flat JSON object, keeping every other key."""
    current = json.loads(path.read_text()) if path.exists() else {}
    current.update(figures)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")


def save_results(
    scenario: str,
    results_dir: Path = RESULTS,
    *,
    results: dict | None = None,
    section: str | None = None,
    figures: dict | None = None,
    catalog: list[str] | None = None,
    renderer: str | None = None,
    per_table: bool = True,
    title: str | None = None,
    command: str | None = None,
) -> Path:
    """Write ``results_dir/<scenario>.json`` and the scenario's ``figures`` into its summary.json.

    ``results`` are what ``render(results)`` of the module ``renderer`` (default ``bench.<scenario>``)
    draws the section from; a scenario without a ``render`` gets a table of its ``figures``.
    ``section`` is Markdown saved as it is. ``per_table``: the figures depend on the catalog's
    tables (the report then says which of today's tables a run left out). ``title`` and
    ``command`` head the section of a scenario the template does not place.
    """
    figures = figures or {}
    saved: dict = {
        "benchmark": scenario,
        "saved_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "catalog": catalog if catalog is not None else declared_tables(),
        "summary_keys": sorted(figures),
        "renderer": renderer or f"bench.{scenario}",
    }
    if not per_table:
        saved["per_table"] = False
    saved.update({k: v for k, v in (("title", title), ("command", command)) if v})
    if results is not None:
        saved["results"] = results
    if section is not None:
        saved["section"] = section
    if results is None and section is None:
        saved["figures"] = figures
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{scenario}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(saved, indent=1, default=str) + "\n")
    os.replace(tmp, path)
    if figures:
        update_summary(results_dir / SUMMARY, figures)
    return path
