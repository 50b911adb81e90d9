"""The harness's own warm engine (``--engine connect``), and the environment this process runs in.

In connect mode every job attempt is a Spark Connect client (``python jobs/run.py <task>`` with
``LAKEHOUSE_ENGINE=connect``) and the streaming query runs inside the engine's server. The harness
starts an engine of its own (``python -m lakehouse_tools.engine up`` with ``LAKEHOUSE_ENGINE_PORT``
a free port and ``LAKEHOUSE_ENGINE_DIR`` = ``<workdir>/engine``), so it never disturbs other
engines (the default one, a test run's), and stops it (``down``) when it ends, also on an error.
It also loads the dimension and reads the tables for the checks through that engine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from lakehouse.config import engine_settings
from lakehouse.spark import check_engine
from lakehouse_tools.fault_harness.launch import PROJECT_DIR


class HarnessEngine:
    """The harness's own warm engine (connect mode): started, killed, awaited, stopped.

    It is addressed through the process environment, which :func:`engine_environment` sets for the
    whole run (``LAKEHOUSE_ENGINE_PORT``, ``LAKEHOUSE_ENGINE_DIR``), as ``lakehouse_tools.engine``
    and the jobs read it. Its kills are recorded, so an attempt can tell that the server died under it.
    """

    READY_TIMEOUT_S = 900.0

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        # (monotonic time, the job whose plan it was, server pid)
        self.kills: list[tuple[float, str, int]] = []
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
            # Waits for a restarting server; starts a new supervisor if there is none.
            self._tool("up")

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
