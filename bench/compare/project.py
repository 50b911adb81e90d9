"""Contender ``project``: the project's pipeline, in DAG order, on a driver in this process.

Every task of the DAG (:func:`lakehouse.catalog.tasks`, in DAG order: the dimension, bronze,
silver, every gold table, the sessions), so every table the catalog declares that a run writes is
written. Contender ``project_batch`` (the spec has ``batch_hours``) runs silver, gold and the
sessions in their batch form over those event hours, as a backfill does; the dimension and bronze
have none and run as above.

Each task runs as ``lakehouse.runner.run(task, ["--lakehouse-root", root])`` with
``LAKEHOUSE_ENGINE=local``, one incremental availableNow run per
task as the hourly DAG runs them, into an empty lakehouse whose landing zone is the dataset's. The
session is built first, with the settings the plain Spark job gets (``DEFAULT_CONF``, ``local[2]``,
``BENCH_SPARK_CONF``); the tasks' own ``build_spark_session`` calls reuse it.

CPU per task: this Python process's own (``RUSAGE_SELF``, every thread: the driver and its
``foreachBatch`` callbacks) plus the driver JVM's and its descendants' (``/proc``; the JVM is a live
child, so ``RUSAGE_CHILDREN`` would not see it), read before and after the task.
"""

from __future__ import annotations

import os
import time

from bench.harness import jvm_pid, self_cpu, tree_cpu, unreaped_cpu


def run(spec: dict) -> dict:
    from bench.compare import BENCH_SPARK_CONF
    from lakehouse import catalog, runner
    from lakehouse.config import Lakehouse
    from lakehouse.spark import build_spark_session

    started = time.perf_counter()
    spark = build_spark_session(
        "compare-project", {**BENCH_SPARK_CONF, "spark.master": "local[2]"}, engine_kind="local"
    )
    spark.sparkContext.setLogLevel("ERROR")
    pid = jvm_pid()

    def cpu() -> float:
        return self_cpu() + (tree_cpu(pid) if pid else 0.0)

    setup = {
        "wall": time.perf_counter() - started,
        "cpu": cpu(),
    }  # imports, JVM start, session (from process start)
    lakehouse = Lakehouse(spec["root"])
    batch = (
        ("--mode", "batch", "--start", spec["batch_hours"][0], "--end", spec["batch_hours"][1])
        if "batch_hours" in spec
        else ()
    )
    tasks = {}
    os.environ["LAKEHOUSE_ENGINE"] = "local"  # this process's driver, whatever the configuration
    for task in pipeline_tasks():
        table = catalog.task(task)
        before, began = cpu(), time.perf_counter()
        # Only tasks with a batch form take the batch arguments.
        runner.run(task, ["--lakehouse-root", lakehouse.root, *(batch if table.batch else ())])
        tasks[task] = {
            "wall": time.perf_counter() - began,
            "cpu": cpu() - before,
            "layer": table.layer,
        }
    lost = unreaped_cpu(pid) if pid else 0.0  # the Python workers' CPU, lost once they end
    peak_rss = jvm_peak_rss_bytes(pid) if pid else None
    started_stop = time.perf_counter()
    before = cpu()
    spark.stop()
    stop = {"wall": time.perf_counter() - started_stop, "cpu": cpu() - before}
    return {
        "setup": setup,
        "tasks": tasks,
        "stop": stop,
        "jvm_found": pid is not None,
        "unreaped_cpu": lost,
        "jvm_peak_rss_bytes": peak_rss,
    }


def jvm_peak_rss_bytes(pid: int) -> int | None:
    """The driver JVM's peak resident memory so far (VmHWM): the engine's, as this contender runs it."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def pipeline_tasks() -> list[str]:
    """The DAG's tasks, in DAG order: together they write every table but those of operations."""
    from lakehouse import catalog

    return [spec.task for spec in catalog.tasks()]
