"""The warm engine: one Spark Connect server that every job talks to as a thin client.

Usage (``make engine-up`` / ``make engine-down`` / ``make engine-status`` run these):
    python -m lakehouse_tools.engine up        # start it (supervised) unless it already answers
    python -m lakehouse_tools.engine down      # stop it: its whole process group
    python -m lakehouse_tools.engine status    # exit 0 when it answers a query, 1 when not

The server is ``spark-submit --class SparkConnectServer`` (pyspark's pip package has no
``sbin/start-connect-server.sh``) with the Delta jars and the session factory's settings,
``local[2]``, bound to 127.0.0.1 on ``$LAKEHOUSE_ENGINE_PORT`` (default 15002), its Spark UI off
(``LAKEHOUSE_ENGINE_UI=1`` turns it on), its log in ``$LAKEHOUSE_ENGINE_DIR/engine.log``. Clients
authenticate with a token (``$LAKEHOUSE_ENGINE_TOKEN``); the server gets it by environment, never on
its command line. The project's package is on the server's ``PYTHONPATH``: the ``foreachBatch``
functions of the jobs run in Python workers that the server starts, and they import ``lakehouse``
from there (the files on disk when a query starts: no restart after a code change).

A supervisor process (the leader of the engine's process group) restarts the server when it dies,
at most :func:`max_restarts` times in ``RESTART_WINDOW_S`` seconds; ``down`` stops the group. Beside
the server it runs the fork server of its Python workers (:mod:`lakehouse_tools.python_workers`).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lakehouse import metastore
from lakehouse.config import engine_settings, jar_paths
from lakehouse.errors import ConfigError
from lakehouse.spark import check_engine, lineage_conf, session_conf
from lakehouse_tools import python_workers

PROJECT_DIR = Path(__file__).resolve().parents[2]
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
# A server that keeps dying is given up on (its log says why) rather than restarted forever.
DEFAULT_MAX_RESTARTS, RESTART_WINDOW_S = 5, 300
START_TIMEOUT_S = 240
LOG_CONFIG = Path(__file__).with_name("engine-log4j2.properties")


def state_dir() -> Path:
    path = Path(os.environ.get("LAKEHOUSE_ENGINE_DIR") or PROJECT_DIR / ".local" / "engine")
    path.mkdir(parents=True, exist_ok=True)
    return path


def server_command() -> list[str]:
    settings = engine_settings()
    conf = {
        **session_conf(),
        # OpenLineage (LAKEHOUSE_LINEAGE=1): one listener for every session's queries, each query
        # run with its session's Airflow task as parent.
        **lineage_conf("spark-engine.jsonl", engine=True),
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(settings.port),
        "spark.ui.enabled": "true" if os.environ.get("LAKEHOUSE_ENGINE_UI") == "1" else "false",
        # A dead client's session (and its queries) is closed after this long without a request.
        "spark.connect.session.manager.defaultSessionTimeout": "30min",
        "spark.sql.shuffle.partitions": os.environ.get("LAKEHOUSE_ENGINE_SHUFFLE_PARTITIONS", "4"),
        "spark.python.worker.faulthandler.enabled": "true",
    }
    command = [
        str(spark_home() / "bin" / "spark-submit"),
        "--master",
        os.environ.get("LAKEHOUSE_ENGINE_MASTER", "local[2]"),
        "--class",
        SERVER_CLASS,
        "--name",
        "lakehouse-engine",
        "--driver-memory",
        os.environ.get("LAKEHOUSE_ENGINE_MEMORY", "3g"),
        "--jars",
        ",".join(jar_paths()),
        "--driver-java-options",
        f"{conf.pop('spark.driver.extraJavaOptions')} {java_options_added()}"
        f" -Dlog4j2.configurationFile={LOG_CONFIG}"
        f" -Dlakehouse.engine.level={os.environ.get('LAKEHOUSE_ENGINE_LOG_LEVEL', 'WARN')}",
    ]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return command


def java_options_added() -> str:
    """``$LAKEHOUSE_ENGINE_JAVA_OPTIONS``: the server JVM's options after the project's, so one of
    them overrides the project's (e.g. ``-XX:CompileThresholdScaling=10``: ``make bench-jit``)."""
    return os.environ.get("LAKEHOUSE_ENGINE_JAVA_OPTIONS", "")


def spark_home() -> Path:
    """The pyspark package as SPARK_HOME, without its ``python/`` folder.

    Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on its Python workers' path, and a
    worker must connect back within 10 s (hard-coded): importing pyspark from the zip (nothing
    compiled, nothing cached) misses that on a loaded machine, and the query fails to start.
    Without the zip the workers import the installed, compiled package.
    """
    import pyspark

    package = Path(pyspark.__file__).parent
    home = state_dir() / "spark-home"
    home.mkdir(exist_ok=True)
    for entry in package.iterdir():
        link = home / entry.name
        if entry.name != "python" and not link.exists():
            link.symlink_to(entry)
    return home


def server_env() -> dict[str, str]:
    settings = engine_settings()
    env = dict(os.environ)
    env["SPARK_HOME"] = str(spark_home())
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(PROJECT_DIR / "include"), env.get("PYTHONPATH")])
    )
    env["PYSPARK_PYTHON"] = worker_python()
    if forking_workers():
        env["PYSPARK_PYTHON"] = str(
            python_workers.write_launcher(
                state_dir() / "python", python_workers_socket(), worker_python()
            )
        )
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    if settings.token:
        env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = settings.token
    env.pop("LAKEHOUSE_ENGINE_TOKEN", None)
    return env


def worker_python() -> str:
    return os.environ.get("PYSPARK_PYTHON") or sys.executable


def forking_workers() -> bool:
    """``$LAKEHOUSE_ENGINE_PYTHON_FORKS`` (default 1): the server's Python workers are forked from
    a process that imported pyspark once (:mod:`lakehouse_tools.python_workers`); 0 starts each
    one as a new interpreter, as Spark does."""
    value = os.environ.get("LAKEHOUSE_ENGINE_PYTHON_FORKS", "1")
    if value not in ("0", "1"):
        sys.exit(
            f"engine: LAKEHOUSE_ENGINE_PYTHON_FORKS must be 1 (fork) or 0 (do not), not {value!r}"
        )
    return value == "1"


def python_workers_socket() -> Path:
    """The fork server's socket: in the engine's folder unless that path is too long for one."""
    path = state_dir() / "python-workers.sock"
    if len(str(path)) < 100:  # a Unix socket's path has at most 107 bytes
        return path
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"lakehouse-{os.getuid()}-{digest}.sock"


def start_python_workers(log) -> subprocess.Popen | None:
    """The fork server, in the supervisor's process group (``down`` stops it with the server)."""
    if not forking_workers():
        return None
    return subprocess.Popen(
        [
            worker_python(),
            "-m",
            "lakehouse_tools.python_workers",
            "serve",
            str(python_workers_socket()),
        ],
        env=server_env(),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
    )


def max_restarts() -> int:
    """``$LAKEHOUSE_ENGINE_MAX_RESTARTS`` (default 5): raised where the kills are deliberate (the fault harness)."""
    value = os.environ.get("LAKEHOUSE_ENGINE_MAX_RESTARTS", str(DEFAULT_MAX_RESTARTS))
    if not value.isdigit():
        sys.exit(
            f"engine: LAKEHOUSE_ENGINE_MAX_RESTARTS must be a whole number of restarts, not {value!r}"
        )
    return int(value)


def supervise() -> None:
    """Run the server and restart it when it dies, until SIGTERM (``down``) stops the group."""
    limit = max_restarts()
    log = open(state_dir() / "engine.log", "ab", buffering=0)
    child: subprocess.Popen | None = None
    stopping = False

    def stop(signum, frame):
        nonlocal stopping
        stopping = True
        if child and child.poll() is None:
            child.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    restarts: list[float] = []
    workers = None
    try:
        while not stopping:
            if workers is None or workers.poll() is not None:
                workers = start_python_workers(log)
            log.write(
                f"--- engine: starting the Spark Connect server ({time.strftime('%FT%TZ', time.gmtime())})\n".encode()
            )
            child = subprocess.Popen(server_command(), env=server_env(), stdout=log, stderr=log)
            code = child.wait()
            if stopping:
                break
            now = time.monotonic()
            restarts = [t for t in restarts if now - t < RESTART_WINDOW_S] + [now]
            log.write(
                f"--- engine: the server exited with {code}; restart {len(restarts)}/{limit}\n".encode()
            )
            if len(restarts) > limit:
                log.write(b"--- engine: too many restarts; giving up (see the log above)\n")
                sys.exit(1)
            time.sleep(2)
    finally:  # the fork server goes with the supervisor, however it ends
        if workers:
            workers.terminate()


def _pid_file() -> Path:
    return state_dir() / "supervisor.pid"


def _running_group() -> int | None:
    try:
        pid = int(_pid_file().read_text())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def server_pid() -> int | None:
    """The running server's process id (the supervisor's Java child), if any."""
    return next((pid for pid in _supervised() if _command_name(pid) == "java"), None)


def python_workers_pid() -> int | None:
    """The running fork server's process id (the supervisor's Python child), if any."""
    return next((pid for pid in _supervised() if _command_name(pid) != "java"), None)


def _supervised() -> list[int]:
    group = _running_group()
    if group is None:
        return []
    try:
        return [int(p) for p in Path(f"/proc/{group}/task/{group}/children").read_text().split()]
    except OSError:
        return []


def _command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def free_port() -> int:
    """A TCP port of 127.0.0.1 that no one listens on now: for an engine of one's own (a test's, the fault harness's)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _jars_file() -> Path:
    return state_dir() / "jars"


def up(timeout_s: float = START_TIMEOUT_S) -> None:
    settings = engine_settings()
    try:  # the metastore (make metastore-up) first: a server without it would keep dying
        conf = session_conf()
    except ConfigError as error:
        sys.exit(f"engine: {error}")
    # What a server takes once, at its start: its jars, its lakehouse's metastore and its lineage.
    try:
        lineage = lineage_conf("spark-engine.jsonl", engine=True)
    except ConfigError as error:
        sys.exit(f"engine: {error}")
    added = java_options_added()
    jars = "\n".join(
        [
            *jar_paths(),
            f"metastore: {conf.get(metastore.ROOT_KEY, 'none')}",
            *([f"lineage: {lineage}"] if lineage else []),
            *([f"java options: {added}"] if added else []),
            f"python workers: {'forked' if forking_workers() else 'new interpreters'}",
        ]
    )
    if check_engine(settings.url, timeout_s=5) is None:
        started_with = _jars_file().read_text() if _jars_file().exists() else jars
        if started_with == jars:
            print(f"engine: already up at {settings.display_url}")
            return
        # A server loads its jars once: new ones (e.g. make kafka-source-jars) need a new server;
        # another LAKEHOUSE_ROOT has another metastore; lineage is set when its listener starts;
        # a JVM's options, when it starts.
        print(
            "engine: its jars, its lakehouse's metastore, its lineage setting or its Java options "
            "changed since it started; restarting it"
        )
        down()
    if _running_group() is None:
        jar_paths()  # fail fast, with its message, before anything starts
        max_restarts()  # and with these
        forking_workers()
        log_path = state_dir() / "engine.log"
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "lakehouse_tools.engine", "supervise"],
            start_new_session=True,  # its own process group: `down` stops exactly it
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(log_path, "ab"),
        )
        _pid_file().write_text(str(supervisor.pid))
        _jars_file().write_text(jars)
        print(f"engine: starting (process group {supervisor.pid}, log {log_path})", flush=True)
    started, problem = time.monotonic(), None
    while time.monotonic() - started < timeout_s:
        problem = check_engine(settings.url, timeout_s=5)
        if problem is None:
            print(f"engine: up at {settings.display_url} after {time.monotonic() - started:.0f} s")
            return
        if _running_group() is None:
            break
        time.sleep(2)
    sys.exit(
        f"engine: not answering after {time.monotonic() - started:.0f} s ({problem}); see {state_dir() / 'engine.log'}"
    )


def down() -> None:
    group = _running_group()
    if group is None:
        print("engine: not running")
        return
    os.killpg(group, signal.SIGTERM)
    for _ in range(60):
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            break
        time.sleep(0.5)
    else:
        os.killpg(group, signal.SIGKILL)
    _pid_file().unlink(missing_ok=True)
    print(f"engine: stopped (process group {group})")


def status() -> None:
    settings = engine_settings()
    problem = check_engine(settings.url, timeout_s=10)
    if problem:
        sys.exit(f"engine: not answering at {settings.display_url}: {problem}")
    print(
        f"engine: up at {settings.display_url} (process group {_running_group()}, log {state_dir() / 'engine.log'})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("up", "down", "status", "supervise"))
    command = parser.parse_args().command
    {"up": up, "down": down, "status": status, "supervise": supervise}[command]()


if __name__ == "__main__":
    main()
