"""A private, real Apache Kafka broker for tests.

``start_kafka_broker(workdir)`` runs ``include/kafka/kafka.sh run`` (single node, KRaft, combined
broker + controller) with its config, data and logs in ``workdir`` and its two listeners on free
ports of 127.0.0.1, from the jars ``make kafka-jars`` copies into ``.kafka/libs``. The broker
leads its own process group; ``KafkaBroker.stop()`` always ends that group within a bound.

``kafka_broker`` is a session-scoped pytest fixture around it; import it from ``conftest.py``::

    from kafka_broker import kafka_broker  # noqa: F401
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KAFKA_SH = ROOT / "include" / "kafka" / "kafka.sh"
KAFKA_LIBS = Path(os.environ.get("KAFKA_LIBS", ROOT / ".kafka" / "libs"))
STARTED_LINE = "Kafka Server started"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
_PORT_TAKEN = ("Address already in use", "BindException")


@dataclass
class KafkaBroker:
    bootstrap_servers: str
    port: int
    controller_port: int
    workdir: Path
    log_path: Path  # log4j: warnings, errors and the start line
    out_path: Path  # the JVM's stdout/stderr (storage format output, crashes)
    process: subprocess.Popen = field(repr=False)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM the broker's process group, wait up to ``timeout`` s, then SIGKILL it.

        Idempotent; never raises because the broker is already gone.
        """
        _stop_group(self.process, timeout)

    def log_tail(self, lines: int = 40) -> str:
        return _tail(self.log_path, lines) + _tail(self.out_path, lines)


def _stop_group(proc: subprocess.Popen, timeout: float) -> None:
    if proc.returncode is not None:
        return  # stopped and reaped before: its group id may now belong to someone else
    pgid = proc.pid  # start_new_session: the broker leads its own group
    _killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _exit_status(proc) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    # The leader is not reaped yet (alive, or a zombie), so the group id is still the broker's:
    # SIGKILL whatever is left of the group, then reap.
    _killpg(pgid, signal.SIGKILL)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a SIGKILLed process not reaped
        pass


def _exit_status(proc: subprocess.Popen) -> int | None:
    """The exit status if the process has exited, without reaping it (None while it runs)."""
    if proc.returncode is not None:
        return proc.returncode
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return proc.poll()
    return None if info is None else info.si_status


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except FileNotFoundError:
        return f"--- {path}: (missing)\n"
    return f"--- last lines of {path}\n" + "\n".join(text) + "\n"


def _launch(workdir: Path, libs: Path, timeout: float) -> KafkaBroker:
    port = _free_port()
    controller_port = _free_port()
    while controller_port == port:
        controller_port = _free_port()
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path, out_path = logs / "server.log", logs / "kafka.out"
    env = {
        **os.environ,
        "KAFKA_DIR": str(workdir),
        "KAFKA_LIBS": str(libs),
        "KAFKA_PORT": str(port),
        "KAFKA_CONTROLLER_PORT": str(controller_port),
    }
    offset = log_path.stat().st_size if log_path.exists() else 0
    with open(out_path, "ab") as out:
        proc = subprocess.Popen(
            [str(KAFKA_SH), "run", f"--kafka-dir={workdir}"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    broker = KafkaBroker(
        bootstrap_servers=f"127.0.0.1:{port}",
        port=port,
        controller_port=controller_port,
        workdir=workdir,
        log_path=log_path,
        out_path=out_path,
        process=proc,
    )
    atexit.register(broker.stop, 10)  # a safety net should the caller forget
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < timeout:
            status = _exit_status(proc)
            if status is not None:
                raise _StartError(
                    f"the Kafka broker exited with status {status} during startup", broker
                )
            if _port_open(port) and log_path.exists():
                with open(log_path, "rb") as f:
                    f.seek(offset)
                    if STARTED_LINE.encode() in f.read():
                        return broker
            time.sleep(0.25)
        raise _StartError(f"the Kafka broker did not come up within {timeout:.0f} s", broker)
    except BaseException:
        broker.stop(10)
        raise


class _StartError(RuntimeError):
    def __init__(self, message: str, broker: KafkaBroker):
        self.port_taken = any(s in broker.log_tail(200) for s in _PORT_TAKEN)
        super().__init__(
            f"{message} (bootstrap {broker.bootstrap_servers}, dir {broker.workdir})\n"
            + broker.log_tail()
        )


def start_kafka_broker(
    workdir: Path, *, timeout: float = START_TIMEOUT_S, libs: Path = KAFKA_LIBS
) -> KafkaBroker:
    """Start a single-node KRaft broker in ``workdir`` on free 127.0.0.1 ports; return once it
    serves. Raises RuntimeError, with the tail of the broker's logs, if it does not come up within
    ``timeout`` seconds. The caller must ``stop()`` it."""
    if not any(libs.glob("kafka_2.13-*.jar")):
        raise RuntimeError(f"no Kafka broker jars in {libs}: run `make kafka-jars`")
    workdir = Path(workdir).resolve()
    for attempt in range(3):
        # The free ports are only free when chosen: another process may take one before the
        # broker binds it. Retry with new ports (a fresh directory: the old one is formatted for
        # the old controller port) when that is why it failed.
        attempt_dir = workdir if attempt == 0 else workdir / f"retry-{attempt}"
        try:
            return _launch(attempt_dir, libs, timeout)
        except _StartError as e:
            if not e.port_taken or attempt == 2:
                raise
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory):
    """A real Kafka broker for the whole test session; always stopped at the end."""
    broker = start_kafka_broker(tmp_path_factory.mktemp("kafka"))
    try:
        yield broker
    finally:
        broker.stop()
