"""CPU seconds of a process tree: a command run to its end, and a live process with its descendants.

A command's figure is what this process gets back by waiting for it and for every process it left
behind: ``RUSAGE_CHILDREN`` counts a child (with the children it waited for in turn) once it is
reaped, and as a child subreaper this process also inherits, and reaps, descendants whose parent
exited first (PySpark's driver JVM outlives its Python process by a moment).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def become_subreaper() -> None:
    """Orphaned descendants are re-parented to this process instead of init (Linux >= 3.4)."""
    PR_SET_CHILD_SUBREAPER = 36
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def reap_all(timeout: float) -> list[int]:
    """Wait for every child of this process (orphans handed to it included); the pids still alive after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return []
        alive = [pid for pid, (ppid, _) in proc_stats().items() if ppid == os.getpid()]
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
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            code = process.wait()
    wall = time.perf_counter() - started
    stragglers = reap_all(timeout=60)
    if stragglers:  # still running a minute after the command exited: not ours to wait for forever
        for pid in stragglers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        reap_all(timeout=30)
    return code, wall, children_cpu() - before


def proc_stats() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, user + system + reaped children's CPU seconds) of every process."""
    stats = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        rest = text[text.rfind(")") + 2 :].split()
        # Fields 4 (ppid) and 14..17 (utime, stime, cutime, cstime) of proc(5); rest[0] is field 3.
        stats[int(entry.name)] = (int(rest[1]), sum(int(v) for v in rest[11:15]) / CLK_TCK)
    return stats


def tree_cpu(root: int, include_root: bool = True) -> float:
    """CPU seconds so far of the live process ``root`` and its descendants (each with the children it reaped)."""
    stats = proc_stats()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats and (include_root or pid != root):
            total += stats[pid][1]
        todo += children.get(pid, [])
    return total


def self_cpu() -> float:
    """CPU seconds so far of this process (all its threads)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def unreaped_cpu(root: int) -> float:
    """CPU seconds so far of the live grandchildren of ``root`` (and their descendants): what no
    ``RUSAGE_CHILDREN`` will count, when their parent ignores SIGCHLD.

    PySpark's worker daemon, a child of the driver JVM, does (``signal(SIGCHLD, SIG_IGN)``): its
    Python workers are reaped by the kernel, their CPU added to nobody's children time. A job
    reads this just before ``spark.stop()`` ends them; workers that ended earlier are not in it.
    """
    stats = proc_stats()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    return sum(tree_cpu(child, include_root=False) for child in children.get(root, []))
