"""Measuring: statistics, sizes, the driver JVM's peak memory, streaming query progress, timed processes.

Nothing here knows the pipeline: the worker and the out-of-process measurements time with these.
"""

from __future__ import annotations

import os
import platform
import resource
import statistics
import subprocess
import time
from pathlib import Path

from bench.ysb.tasks import task_of_query


def summary(values: list[float]) -> dict:
    """Median, min, max and count of ``values`` (all None when there are none)."""
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def parse_size(text: str) -> int:
    """``1M`` -> 1_000_000, ``200k`` -> 200_000, ``5000`` -> 5000."""
    text = text.strip().lower()
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * factor)


def size_label(events: int) -> str:
    if events >= 1_000_000:
        return f"{events / 1e6:.3g}M"
    if events >= 1_000:
        return f"{events / 1e3:.3g}k"
    return str(events)


def cores_of(master: str) -> int:
    """Cores of a ``local[N]`` master (``local[*]``: this machine's)."""
    inner = master[master.find("[") + 1 : master.find("]")] if "[" in master else "1"
    return (os.cpu_count() or 1) if inner == "*" else int(inner)


# ----------------------------------------------------------------------------------------------
# The driver JVM's memory


def jvm_pid(spark) -> int | None:
    """The driver JVM of this Python process (py4j starts it as a child)."""
    import psutil

    for child in psutil.Process().children(recursive=True):
        try:
            if child.name() == "java":
                return child.pid
        except psutil.Error:
            continue
    return None


def reset_peak_rss(pid: int | None) -> None:
    """Reset the kernel's peak-RSS mark (VmHWM) of ``pid``: writing 5 to clear_refs (Linux >= 4.0)."""
    if pid is None:
        return
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass  # not permitted: the peak then covers the whole process lifetime


def peak_rss_mb(pid: int | None) -> float | None:
    """Peak resident set size (VmHWM) of ``pid`` in MiB."""
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


# ----------------------------------------------------------------------------------------------
# Streaming query progress


class ProgressRecorder:
    """Collects every streaming query's progress (``durationMs`` etc.) through a query listener."""

    def __init__(self, spark):
        from pyspark.sql.streaming import StreamingQueryListener

        recorder = self

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event):
                recorder.names[str(event.id)] = event.name

            def onQueryProgress(self, event):
                p = event.progress
                recorder.events.append(
                    {
                        "id": str(p.id),
                        "name": p.name,
                        "batch": p.batchId,
                        "rows": p.numInputRows,
                        "durationMs": {k: int(v) for k, v in dict(p.durationMs).items()},
                    }
                )

            def onQueryIdle(self, event):
                pass

            def onQueryTerminated(self, event):
                recorder.terminated.add(str(event.id))

        self.names: dict[str, str] = {}
        self.events: list[dict] = []
        self.terminated: set[str] = set()
        self.taken: set[str] = set()  # queries whose end an earlier take() covered
        self.listener = Listener()
        self.spark = spark
        spark.streams.addListener(self.listener)

    def close(self) -> None:
        self.spark.streams.removeListener(self.listener)

    def take(self, queries: int = 0, timeout: float = 30.0) -> list[dict]:
        """The progress events since the last call, once ``queries`` queries have reported their end since then.

        Listener events arrive asynchronously, after the query has ended for its caller: on a busy
        machine the last query's may not even have started arriving, so the caller says how many
        queries it ran. Every query seen starting is waited for too.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (
            len(self.terminated - self.taken) < queries or set(self.names) - self.terminated
        ):
            time.sleep(0.05)
        events, self.events = self.events, []
        self.taken |= self.terminated
        self.names = {k: v for k, v in self.names.items() if k not in self.terminated}
        return events


def durations_by_job(events: list[dict]) -> dict[str, dict[str, int]]:
    """Sum of every ``durationMs`` component per task over its micro-batches."""
    out: dict[str, dict[str, int]] = {}
    for event in events:
        totals = out.setdefault(task_of_query(event["name"]), {})
        for key, value in event["durationMs"].items():
            totals[key] = totals.get(key, 0) + value
        totals["batches"] = totals.get("batches", 0) + 1
    return out


# ----------------------------------------------------------------------------------------------
# Processes and the machine


def run_measured(command: list[str], **kwargs) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run ``command`` to its end: (the completed process, wall seconds, CPU seconds of its process tree).

    CPU is user + system time of the children this process has waited for (the command and
    every process it waited for in turn, e.g. spark-submit's JVM and the Python driver).
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, **kwargs)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return done, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def machine_info() -> dict:
    """Cores, memory, CPU, kernel, versions and load average of this machine."""
    from importlib.metadata import version

    import delta  # noqa: F401
    import pyspark

    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "unknown"
    try:
        kb = int(Path("/proc/meminfo").read_text().split("\n")[0].split()[1])
        mem = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    return {
        "nproc": os.cpu_count(),
        "memory": mem,
        "cpu": cpu,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "delta_spark": version("delta-spark"),
        "airflow": version("apache-airflow"),
        "java": java[0] if java else "unknown",
        "load_average": os.getloadavg(),
    }
