"""Contender ``project``: the project's pipeline, in DAG order, on a driver in this process.

Every task of the DAG (:func:`lakehouse.catalog.tasks`, in DAG order), so every table the catalog
declares that a run writes is written. Contender ``project_batch`` (the spec has ``batch_hours``)
runs the tasks that have a batch form in it over those event hours, as a backfill does; the others
run as above.

Each task runs as ``lakehouse.runner.run(task, ["--lakehouse-root", root])``, one incremental
availableNow run per task as the hourly DAG runs them, into an empty lakehouse whose landing zone
is the dataset's. The session is built first, with the settings the plain Spark job gets
(:func:`bench.harness.local_driver` with ``BENCH_SPARK_CONF``); the tasks' own
``build_spark_session`` calls reuse it.

CPU per task: this Python process's own (every thread: the driver and its ``foreachBatch``
callbacks) plus the driver JVM's and its descendants' (``/proc``), read before and after the task.
"""

from __future__ import annotations

import time
from pathlib import Path

from bench.harness import BENCH_SPARK_CONF, jvm_pid, local_driver, process_cpu, unreaped_cpu


def run(spec: dict) -> dict:
    from lakehouse import catalog, runner

    started = time.perf_counter()
    spark = local_driver("compare-project", BENCH_SPARK_CONF)
    pid = jvm_pid()
    # imports, JVM start, session (from process start)
    setup = {"wall": time.perf_counter() - started, "cpu": process_cpu(pid)}
    hours = spec.get("batch_hours")
    batch = ("--mode", "batch", "--start", hours[0], "--end", hours[1]) if hours else ()
    tasks = {}
    for task in pipeline_tasks():
        table = catalog.task(task)
        before, began = process_cpu(pid), time.perf_counter()
        # Only tasks with a batch form take the batch arguments.
        runner.run(task, ["--lakehouse-root", spec["root"], *(batch if table.batch else ())])
        tasks[task] = {
            "wall": time.perf_counter() - began,
            "cpu": process_cpu(pid) - before,
            "layer": table.layer,
        }
    lost = unreaped_cpu(pid) if pid else 0.0  # the Python workers' CPU, lost once they end
    peak = peak_rss_bytes(pid) if pid else None
    began, before = time.perf_counter(), process_cpu(pid)
    spark.stop()
    stop = {"wall": time.perf_counter() - began, "cpu": process_cpu(pid) - before}
    return {
        "setup": setup,
        "tasks": tasks,
        "stop": stop,
        "jvm_found": pid is not None,
        "unreaped_cpu": lost,
        "jvm_peak_rss_bytes": peak,
    }


def peak_rss_bytes(pid: int) -> int | None:
    """The driver JVM's peak resident memory so far (VmHWM): the engine's, as this contender runs it."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return next(
        (int(ln.split()[1]) * 1024 for ln in status.splitlines() if ln[:6] == "VmHWM:"), None
    )


def pipeline_tasks() -> list[str]:
    """The DAG's tasks, in DAG order: together they write every table but those of operations."""
    from lakehouse import catalog

    return [spec.task for spec in catalog.tasks()]
