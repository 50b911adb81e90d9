"""A Spark standalone cluster on 127.0.0.1 (one master, one worker) run from the pip pyspark.

Usage:
    python include/cluster/spark_standalone.py start|stop|status|master-url

    start       start the master, then the worker; return once the worker is registered (ALIVE)
    stop        SIGTERM each daemon's process group (the worker's also holds its executors and
                their Python workers), wait, then SIGKILL whatever is left of the group
    status      exit 0 if both daemons run, 3 if not
    master-url  print spark://127.0.0.1:PORT

Settings (environment; ``make cluster-start`` passes its variables):
    SPARK_CLUSTER_DIR          spark-defaults.conf, logs/, pids/, work/    (<repo>/.local/spark)
    SPARK_MASTER_PORT          7077
    SPARK_MASTER_WEBUI_PORT    8090 (8080 is Airflow's UI)
    SPARK_WORKER_WEBUI_PORT    8091
    SPARK_WORKER_CORES         2
    SPARK_WORKER_MEMORY        3g (what the executors of all running applications may use)
    SPARK_DAEMON_MEMORY        512m (heap of the master and of the worker themselves)

Layout under SPARK_CLUSTER_DIR: spark-defaults.conf (the daemons' properties file; its path on
their command lines tells this cluster's JVMs from any other), logs/{master,worker}.out (each
JVM's output), pids/{master,worker}.pid, work/<app-id>/<executor-id>/ (each executor's working
directory: the jars and py-files it fetched, its stdout and stderr).

Why not ``$SPARK_HOME/sbin/spark-daemon.sh start ...`` (the pip pyspark ships it, though not
start-master.sh): its stop is a bare ``kill`` that does not wait, and the daemons it starts stay
in the caller's process group, so an executor outliving a killed worker cannot be found. Here
each daemon is ``bin/spark-class`` run in a session of its own (as include/kafka/kafka.sh runs the
broker): its process group holds everything it starts, and stop ends exactly that group.

What executors see: the daemons run with PYTHONPATH removed from their environment and their
working directory in SPARK_CLUSTER_DIR, so executors import the project's Python code only from
what spark-submit ships (``--py-files``), never from the driver's checkout or working directory.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
DAEMONS = {
    "master": "org.apache.spark.deploy.master.Master",
    "worker": "org.apache.spark.deploy.worker.Worker",
}
PORT_TAKEN = ("Address already in use", "BindException", "Failed to bind", "Service '")
DEFAULTS_CONF = """\
# Written by include/cluster/spark_standalone.py for the master and the worker of this cluster.
# A port in use fails the start rather than moving to the next one (the URLs would be wrong).
spark.port.maxRetries 0
# No REST submission server: jobs come through spark-submit in client mode, and its fixed port
# (6066) would keep a second cluster on this machine from starting.
spark.master.rest.enabled false
# Delete the folders (fetched jars, logs) of applications finished more than a day ago.
spark.worker.cleanup.enabled true
spark.worker.cleanup.appDataTtl 86400
"""


class ClusterError(RuntimeError):
    """The cluster did not start (or stop); the message carries the tail of the daemons' logs."""

    def __init__(self, message: str, port_taken: bool = False):
        super().__init__(message)
        self.port_taken = port_taken


def spark_home() -> Path:
    """The pip pyspark's folder: it holds bin/spark-class and jars/, so it serves as SPARK_HOME."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        raise ClusterError("pyspark is not installed in this Python: run `make venv`")
    home = Path(spec.origin).parent
    if not (home / "bin" / "spark-class").is_file():
        raise ClusterError(
            f"{home}/bin/spark-class not found: is pyspark installed from its full pip package?"
        )
    return home


@dataclass
class SparkCluster:
    """One master and one worker on 127.0.0.1, their state under ``state_dir``."""

    state_dir: Path
    master_port: int = 7077
    master_webui_port: int = 8090
    worker_webui_port: int = 8091
    worker_cores: int = 2
    worker_memory: str = "3g"
    daemon_memory: str = "512m"
    # The daemons this object started (to reap them) and where their logs ended before.
    _procs: dict = field(default_factory=dict, repr=False, compare=False)
    _log_offsets: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_env(cls) -> SparkCluster:
        env = os.environ
        return cls(
            state_dir=Path(env.get("SPARK_CLUSTER_DIR") or ROOT / ".local" / "spark").absolute(),
            master_port=int(env.get("SPARK_MASTER_PORT") or 7077),
            master_webui_port=int(env.get("SPARK_MASTER_WEBUI_PORT") or 8090),
            worker_webui_port=int(env.get("SPARK_WORKER_WEBUI_PORT") or 8091),
            worker_cores=int(env.get("SPARK_WORKER_CORES") or 2),
            worker_memory=env.get("SPARK_WORKER_MEMORY") or "3g",
            daemon_memory=env.get("SPARK_DAEMON_MEMORY") or "512m",
        )

    # ---- Where things are ----------------------------------------------------------------------
    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    @property
    def webui_url(self) -> str:
        return f"http://{HOST}:{self.master_webui_port}"

    @property
    def conf_path(self) -> Path:
        return self.state_dir / "spark-defaults.conf"

    @property
    def work_dir(self) -> Path:
        return self.state_dir / "work"

    def log_path(self, daemon: str) -> Path:
        return self.state_dir / "logs" / f"{daemon}.out"

    def pid_path(self, daemon: str) -> Path:
        return self.state_dir / "pids" / f"{daemon}.pid"

    # ---- State ---------------------------------------------------------------------------------
    def running_pid(self, daemon: str) -> int | None:
        """The daemon's pid if its pid file names a live JVM (or launcher) of this cluster."""
        try:
            pid = int(self.pid_path(daemon).read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if not _alive(pid):
            return None
        # A recycled pid must not pass for the daemon: its command line names this cluster's
        # properties file and the daemon's class (both in spark-class's and in the JVM's).
        cmdline = _cmdline(pid)
        return pid if str(self.conf_path) in cmdline and DAEMONS[daemon] in cmdline else None

    def master_state(self, timeout: float = 2.0) -> dict | None:
        """The master's own view (its web UI's /json/): workers, active and completed apps."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
        try:
            with opener.open(f"{self.webui_url}/json/", timeout=timeout) as response:
                return json.load(response)
        except (OSError, ValueError):
            return None

    def worker_alive(self) -> bool:
        state = self.master_state() or {}
        return any(
            w.get("state") == "ALIVE"
            and str(w.get("webuiaddress", "")).endswith(f":{self.worker_webui_port}")
            for w in state.get("workers", [])
        )

    def log_tail(self, lines: int = 40) -> str:
        return "".join(_tail(self.log_path(d), lines) for d in DAEMONS)

    # ---- Start and stop ------------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start whichever daemon is not running; return once the worker is registered.

        Raises ClusterError (with the logs' tails) if a port is taken or the cluster does not come
        up within ``timeout`` seconds; what this call started is stopped again then.
        """
        spark_class = spark_home() / "bin" / "spark-class"
        for sub in ("logs", "pids", "work"):
            (self.state_dir / sub).mkdir(parents=True, exist_ok=True)
        self.conf_path.write_text(DEFAULTS_CONF)
        deadline = time.monotonic() + timeout
        try:
            if self.running_pid("master") is None:
                self._check_ports_free(self.master_port, self.master_webui_port)
                self._launch("master", spark_class)
            self._wait(
                "master", deadline, lambda: (self.master_state() or {}).get("status") == "ALIVE"
            )
            if self.running_pid("worker") is None:
                self._check_ports_free(self.worker_webui_port)
                self._launch("worker", spark_class)
            self._wait("worker", deadline, self.worker_alive)
        except BaseException:
            self.stop(timeout=10)
            raise

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop the worker, then the master: SIGTERM the daemon's process group, wait up to
        ``timeout`` s for the daemon, then SIGKILL every process still in the group. Idempotent."""
        for daemon in ("worker", "master"):
            pid = self.running_pid(daemon)
            proc = self._procs.pop(daemon, None)
            if pid is not None:
                _killpg(pid, signal.SIGTERM)
                deadline = time.monotonic() + timeout
                while _alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.2)
                # The group's id stays reserved while any member lives, so whoever is still in
                # it is this daemon's (an executor, a Python worker, or the JVM itself).
                if _group_members(pid):
                    print(
                        f"spark_standalone: {daemon}: SIGKILL to what is left of group {pid}",
                        file=sys.stderr,
                    )
                    _killpg(pid, signal.SIGKILL)
                    end = time.monotonic() + 10
                    while _group_members(pid) and time.monotonic() < end:
                        time.sleep(0.1)
            if proc is not None:  # started by this process: reap it
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    pass
            self.pid_path(daemon).unlink(missing_ok=True)

    def _launch(self, daemon: str, spark_class: Path) -> None:
        args = ["--host", HOST, "--properties-file", str(self.conf_path)]
        if daemon == "master":
            args += ["--port", str(self.master_port), "--webui-port", str(self.master_webui_port)]
        else:
            args += [
                "--cores",
                str(self.worker_cores),
                "--memory",
                self.worker_memory,
                "--webui-port",
                str(self.worker_webui_port),
                "--work-dir",
                str(self.work_dir),
                self.master_url,
            ]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(
            SPARK_HOME=str(spark_class.parents[1]),
            SPARK_LOCAL_IP=HOST,  # the web UIs bind this address too (else 0.0.0.0)
            SPARK_LOG_DIR=str(self.state_dir / "logs"),
            SPARK_PID_DIR=str(self.state_dir / "pids"),
            SPARK_WORKER_DIR=str(self.work_dir),
            SPARK_DAEMON_MEMORY=self.daemon_memory,
        )
        log_path = self.log_path(daemon)
        self._log_offsets[daemon] = log_path.stat().st_size if log_path.exists() else 0
        with open(log_path, "ab") as log:
            # A session of its own: the daemon leads a process group that holds all it starts
            # and does not end with the shell (or make) that started it.
            proc = subprocess.Popen(
                [str(spark_class), DAEMONS[daemon], *args],
                cwd=self.state_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._procs[daemon] = proc
        self.pid_path(daemon).write_text(f"{proc.pid}\n")

    def _wait(self, daemon: str, deadline: float, ready) -> None:
        while True:
            proc = self._procs.get(daemon)
            if proc is not None and proc.poll() is not None:
                raise self._start_error(
                    f"the Spark {daemon} exited with status {proc.returncode} during startup"
                )
            if ready():
                return
            if time.monotonic() > deadline:
                raise self._start_error(f"the Spark {daemon} did not come up in time")
            time.sleep(0.5)

    def _start_error(self, message: str) -> ClusterError:
        fresh = "".join(_read_from(self.log_path(d), self._log_offsets.get(d, 0)) for d in DAEMONS)
        return ClusterError(
            f"{message} (master {self.master_url}, UI {self.webui_url}, state in {self.state_dir})\n"
            + self.log_tail(),
            port_taken=any(s in fresh for s in PORT_TAKEN),
        )

    def _check_ports_free(self, *ports: int) -> None:
        for port in ports:
            if _port_open(port):
                raise ClusterError(f"{HOST}:{port} is taken by another process", port_taken=True)


# ---- Processes ---------------------------------------------------------------------------------
def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name: [state, ppid, pgrp, ...]."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def _alive(pid: int) -> bool:
    fields = _proc_stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def _group_members(pgid: int) -> list[int]:
    """Live processes whose process group is ``pgid``."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _proc_stat(int(entry.name))
            if fields and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                members.append(int(entry.name))
    return members


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1):
            return True
    except OSError:
        return False


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except FileNotFoundError:
        return f"--- {path}: (missing)\n"
    return f"--- last lines of {path}\n" + "\n".join(text) + "\n"


def _read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) == 2 else ""
    cluster = SparkCluster.from_env()
    if command == "start":
        started = time.monotonic()
        try:
            cluster.start()
        except ClusterError as error:
            print(f"spark_standalone: {error}", file=sys.stderr)
            return 1
        print(
            f"spark_standalone: master {cluster.master_url} (UI {cluster.webui_url}), one worker "
            f"({cluster.worker_cores} cores, {cluster.worker_memory}), up in {time.monotonic() - started:.0f} s; "
            f"state in {cluster.state_dir}"
        )
    elif command == "stop":
        cluster.stop()
        print("spark_standalone: stopped")
    elif command == "status":
        pids = {d: cluster.running_pid(d) for d in DAEMONS}
        if not all(pids.values()):
            listed = ", ".join(f"{daemon}: {pid or '-'}" for daemon, pid in pids.items())
            print(f"spark_standalone: not running ({listed})")
            return 3
        print(
            f"spark_standalone: running (pids {pids}), master {cluster.master_url}, UI {cluster.webui_url}"
        )
    elif command == "master-url":
        print(cluster.master_url)
    else:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
