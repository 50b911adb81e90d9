"""Starting a job as the DAG's tasks do (a spark-submit, or a client of the warm engine), and killing it.

Every job runs in a process group of its own, so a kill takes its JVM, its Python driver and their
workers, and never anything else. :class:`TaskRunner` runs a task to its end instead (the
checkpoint trials and the operational-error tests), as a spark-submit or in this process.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import traceback
from pathlib import Path

from lakehouse import runner
from lakehouse.config import Lakehouse, jar_paths
from lakehouse.spark import fast_start_java_options
from lakehouse_tools.fault_harness.plan import JOB_ARGS

# include/lakehouse_tools/fault_harness/launch.py -> the project folder.
PROJECT_DIR = Path(__file__).resolve().parents[3]
JOBS_DIR = PROJECT_DIR / "jobs"


# Jobs that are not a table's task: their own entry points.
OPERATIONS = {"full_refresh": JOBS_DIR / "full_refresh.py"}


def short_driver(lakehouse: Lakehouse) -> list[str]:
    """spark-submit with what a short driver of this project starts with, before its application:
    local[2], the lakehouse's jars, no UI, and the fast-start JVM options (C1 JIT, the
    class-data-sharing archive of ``make driver-cds`` when built), which halve a short driver's
    CPU time without touching what it runs."""
    local = Path(sys.executable).parent / "spark-submit"
    return [
        str(local) if local.exists() else (shutil.which("spark-submit") or "spark-submit"),
        "--master",
        "local[2]",
        "--jars",
        ",".join(jar_paths(lakehouse.root)),
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        "--driver-java-options",
        fast_start_java_options(),
    ]


def spark_submit_command(job: str, lakehouse: Lakehouse, *args: str) -> list[str]:
    """The spark-submit line of a job (a task, or an operation: full_refresh), as the DAG's tasks
    run it (:func:`short_driver`): a fault trial is eight short drivers."""
    return [
        *short_driver(lakehouse),
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


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the job's process group (what is left of it); never anything else."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def log_tail(log: str, lines: int = 25) -> str:
    """The last ``lines`` lines of a job's log, for an error message."""
    path = Path(log)
    if not path.exists():
        return "(no log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


REFUSED = 2  # the exit status of a job that refuses to start (a ConfigError)


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
        from lakehouse.errors import ConfigError

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
