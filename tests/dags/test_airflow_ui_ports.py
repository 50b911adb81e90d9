"""`make airflow-ui`'s script, started twice as two clones would: both come up, every socket on 127.0.0.1.

No Spark: the DAGs are paused at creation, so the schedulers start no run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from airflow_env import PROJECT_DIR, airflow_environment, free_port, migrate

from lakehouse.config import Lakehouse

SCRIPT = PROJECT_DIR / "include" / "scripts" / "airflow_ui.sh"


def listening(pids: set[int]) -> set[str]:
    """The ``address:port`` every TCP socket of ``pids`` listens on (from /proc, IPv4 and IPv6)."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                if width == 8:
                    host = ".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0))
                else:
                    host = "::1" if address == "0" * 24 + "01000000" else f"[{address}]"
                found.add(f"{host}:{int(port, 16)}")
    return found


def group_pids(leader: int) -> set[int]:
    """The script and every process of the sessions it started (each component is its own session)."""
    pids = {leader}
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(entry))
    todo = [leader]
    while todo:
        for child in children.get(todo.pop(), []):
            pids.add(child)
            todo.append(child)
    return pids


def start_ui(tmp_path: Path, name: str, **env: str) -> tuple[subprocess.Popen, Path]:
    home = tmp_path / name
    home.mkdir()
    migrate(home)
    environment = airflow_environment(
        home,
        Lakehouse(str(tmp_path / f"{name}-lakehouse")),
        AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="True",
        AIRFLOW__CORE__PARALLELISM="2",
        **env,
    )
    out = home / "ui.out"
    process = subprocess.Popen(
        ["bash", str(SCRIPT)],
        env=environment,
        stdout=out.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return process, out


def wait_for(out: Path, text: str, process: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in out.read_text():
            return
        assert process.poll() is None, out.read_text()
        time.sleep(1)
    raise AssertionError(f"no {text!r} in {timeout} s:\n{out.read_text()}")


def stop(*processes: subprocess.Popen) -> None:
    """SIGTERM to every script at once (each waits up to 10 s for its components), then wait for each."""
    running = [process for process in processes if process.poll() is None]
    for process in running:
        os.kill(process.pid, signal.SIGTERM)
    for process in running:
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def test_two_clones_side_by_side_each_on_its_port_and_only_on_localhost(tmp_path):
    first_port, second_port = free_port(), free_port()
    # One by PORT (make airflow-ui PORT=...), one by Airflow's own variable.
    first, first_out = start_ui(tmp_path, "first", PORT=str(first_port))
    second, second_out = start_ui(tmp_path, "second", AIRFLOW__API__PORT=str(second_port))
    try:
        wait_for(first_out, "Airflow UI: http://127.0.0.1:", first)
        wait_for(second_out, "Airflow UI: http://127.0.0.1:", second)
        assert f"Airflow UI: http://127.0.0.1:{first_port} " in first_out.read_text()
        assert f"Airflow UI: http://127.0.0.1:{second_port} " in second_out.read_text()
        time.sleep(15)  # the scheduler and triggerer would have opened their log servers by now
        for process, port in ((first, first_port), (second, second_port)):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=10)
            assert process.poll() is None
            assert listening(group_pids(process.pid)) == {f"127.0.0.1:{port}"}

        # A third start on a port in use is refused in one sentence, naming what to type.
        third, third_out = start_ui(tmp_path, "third", PORT=str(first_port))
        assert third.wait(timeout=60) == 1
        assert third_out.read_text().strip() == (
            f"Port {first_port} on 127.0.0.1 is in use (another clone's Airflow UI?): choose another, "
            f"e.g. make airflow-ui PORT={first_port + 1}"
        )
    finally:
        stop(first, second)
    assert first_out.read_text().rstrip().endswith("Airflow stopped.")
