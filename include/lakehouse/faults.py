"""Fault points for the fault-injection harness: kill this Spark driver at a named moment.

The harness sets ``LAKEHOUSE_FAULT_POINT`` (a flow's ``fault_points`` entry prefixed with the
layer, e.g. ``silver.after_merge``) and, optionally,
``LAKEHOUSE_FAULT_BATCH`` (the micro-batch id at which to fire, default the first one that reaches
the point). When a job reaches that point it SIGKILLs its own driver: the JVM that spark-submit
started (this Python process's parent) and then itself, as a crashed machine would, with no
cleanup, no checkpoint commit and no chance to log. Unset (always, in production): a no-op.
"""

from __future__ import annotations

import os
import signal

ENV_POINT = "LAKEHOUSE_FAULT_POINT"
ENV_BATCH = "LAKEHOUSE_FAULT_BATCH"


def fault_point(name: str, batch_id: int | None = None) -> None:
    """Kill the driver here if the harness asked for ``name`` (at ``batch_id``)."""
    wanted = os.environ.get(ENV_POINT)
    if not wanted or not name.startswith(wanted):
        return
    wanted_batch = os.environ.get(ENV_BATCH)
    if wanted_batch not in (None, "") and batch_id is not None and int(wanted_batch) != batch_id:
        return
    if os.environ.get("LAKEHOUSE_FAULT_KILL_PARENT", "1") == "1" and _parent_is_spark_submit():
        os.kill(os.getppid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def _parent_is_spark_submit() -> bool:
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as handle:
            return b"org.apache.spark.deploy.SparkSubmit" in handle.read()
    except OSError:
        return False
