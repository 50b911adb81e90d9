"""The engine's Python workers forked from one server (lakehouse_tools.python_workers): a module
run through the launcher sees what a new interpreter would (arguments, environment, working
directory, module path, standard streams, exit status, signals), and the launcher falls back to a
new interpreter when there is no server. Real processes, no Spark."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from lakehouse_tools.python_workers import write_launcher

PROBE = """
import json, os, sys
print(json.dumps({
    "argv": sys.argv[1:],
    "cwd": os.getcwd(),
    "variable": os.environ.get("PROBE_VARIABLE"),
    "first_paths": sys.path[:2],
    "parent": os.getppid(),
    "pandas_before_import": "pandas" in sys.modules,
    "stdin": sys.stdin.readline().strip(),
}))
print("to stderr", file=sys.stderr)
if sys.argv[1:2] == ["wait"]:
    import signal, time
    signal.signal(signal.SIGTERM, lambda *_: (print("terminated", flush=True), sys.exit(143)))
    print("waiting", flush=True)
    time.sleep(60)
if sys.argv[1:2] == ["fail"]:
    raise ValueError("the probe failed")
sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
"""


@pytest.fixture
def probe_dir(tmp_path):
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "probe.py").write_text(PROBE)
    return modules


@pytest.fixture
def server(tmp_path):
    """A fork server on a socket of the test's own: (its socket, its process)."""
    socket = tmp_path / "workers.sock"
    process = subprocess.Popen(
        [sys.executable, "-m", "lakehouse_tools.python_workers", "serve", str(socket)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert "forking from process" in process.stdout.readline()  # after its imports
    yield socket, process
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=30)


def run_probe(launcher, probe_dir, tmp_path, *args, **env):
    return subprocess.run(
        [str(launcher), "-m", "probe", *args],
        input="a line\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(probe_dir), "PROBE_VARIABLE": "seen", **env},
        timeout=60,
    )


def test_a_module_run_through_the_launcher_is_forked_and_sees_what_a_new_interpreter_would(
    server, probe_dir, tmp_path
):
    import json

    socket, process = server
    launcher = write_launcher(tmp_path / "python", socket)
    done = run_probe(launcher, probe_dir, tmp_path, "one", "two", PROBE_EXIT="3")
    assert done.returncode == 3, done.stderr
    assert done.stderr == "to stderr\n"
    assert json.loads(done.stdout) == {
        "argv": ["one", "two"],
        "cwd": str(tmp_path),
        "variable": "seen",
        "first_paths": [str(tmp_path), str(probe_dir)],
        "parent": process.pid,  # forked by the server,
        "pandas_before_import": True,  # with what it imported
        "stdin": "a line",
    }


def test_an_exception_in_the_module_is_printed_and_exits_1(server, probe_dir, tmp_path):
    launcher = write_launcher(tmp_path / "python", server[0])
    done = run_probe(launcher, probe_dir, tmp_path, "fail")
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == "ValueError: the probe failed"


def test_a_terminated_launcher_terminates_its_child(server, probe_dir, tmp_path):
    launcher = write_launcher(tmp_path / "python", server[0])
    launched = subprocess.Popen(
        [str(launcher), "-m", "probe", "wait"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(probe_dir)},
    )
    lines = iter(launched.stdout)
    next(lines)  # the probe's report
    assert next(lines) == "waiting\n"
    launched.terminate()  # what Spark does to a worker it stops
    assert launched.wait(timeout=30) == 143
    assert next(lines) == "terminated\n"


def test_without_a_server_the_launcher_runs_a_new_interpreter(probe_dir, tmp_path):
    import json

    launcher = write_launcher(tmp_path / "python", tmp_path / "no-server.sock")
    done = run_probe(launcher, probe_dir, tmp_path, "one", PROBE_EXIT="2")
    assert done.returncode == 2, done.stderr
    report = json.loads(done.stdout)
    assert report["pandas_before_import"] is False
    assert report["argv"] == ["one"] and report["stdin"] == "a line"


def test_a_command_that_is_not_a_module_runs_the_interpreter(server, tmp_path):
    launcher = write_launcher(tmp_path / "python", server[0])
    done = subprocess.run(
        [str(launcher), "-c", "import sys; print(sys.flags.isolated, 'pandas' in sys.modules)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout == "0 False\n"
