"""The engine's Python workers, forked from one process that has imported pyspark already.

The engine starts a new Python process for every streaming query's ``foreachBatch`` function and
``transformWithState`` driver (Spark's ``StreamingPythonRunner`` never reuses one) and a new
``pyspark.daemon`` for every Connect session. Each pays for importing pyspark's Connect client,
pandas and pyarrow, about a CPU-second apiece: several seconds of every hourly run.

Instead, the engine's ``PYSPARK_PYTHON`` is a launcher (:func:`write_launcher`). A launcher run as
``python -m <module> ...`` hands its arguments, environment, working directory and standard streams
to the fork server (:func:`serve`, started by the engine's supervisor beside the JVM). The server
forks a child that runs the module as ``__main__`` with them; the launcher stays until the child
exits, passes on the signals Spark sends it, and exits with the child's status. Any other command
line, or a server that is not there, runs the real interpreter instead.

Only the standard library is imported at this module's top: the launcher runs it with ``-I -S``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
from pathlib import Path

# What the server imports once: the modules the engine runs as workers, and what they import.
PRELOADED = (
    "pyspark.sql.connect.streaming.worker.foreach_batch_worker",
    "pyspark.sql.streaming.transform_with_state_driver_worker",
    "pyspark.daemon",
    "pyspark.worker",
)
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
HEADER = struct.Struct("!I")
STATUS = struct.Struct("!i")


def write_launcher(path: Path, server_socket: Path, python: str = sys.executable) -> Path:
    """An executable at ``path`` that Spark can run as its Python: it asks the server at
    ``server_socket`` for a fork, or runs ``python`` when it cannot."""
    include = Path(__file__).resolve().parents[1]
    path.write_text(
        f"#!{python} -IS\n"
        "# Written by lakehouse_tools.engine: the engine's Python (lakehouse_tools/python_workers.py).\n"
        "import sys\n"
        f"sys.path.insert(0, {str(include)!r})\n"
        "from lakehouse_tools.python_workers import launch\n"
        f"launch({str(server_socket)!r}, {python!r})\n"
    )
    path.chmod(0o755)
    return path


def launch(server_socket: str, python: str) -> None:
    """The launcher's body: ``sys.argv`` is what Spark ran it with."""
    args = sys.argv[1:]
    if len(args) < 2 or args[0] != "-m":
        os.execv(python, [python, *args])
    # Held until the child's pid is known: the child may run (and Spark stop it) before then.
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED_SIGNALS)
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(server_socket)
        request = json.dumps({"args": args, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
        socket.send_fds(connection, [HEADER.pack(len(request))], [0, 1, 2])
        connection.sendall(request)
        child = STATUS.unpack(_read_exactly(connection, STATUS.size))[0]
    except (OSError, EOFError):  # no server, or it could not fork: nothing has run yet
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED_SIGNALS)
        os.execv(python, [python, *args])
    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, lambda signum, frame: os.kill(child, signum))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED_SIGNALS)
    try:
        status = STATUS.unpack(_read_exactly(connection, STATUS.size))[0]
    except EOFError:  # the child died without reporting (a signal)
        status = 1
    os._exit(status)


def serve(server_socket: Path) -> None:
    """Import :data:`PRELOADED`, then fork a child for each launcher that connects, until killed."""
    import gc
    import importlib
    import selectors

    for module in PRELOADED:
        importlib.import_module(module)
    gc.freeze()  # the children share these pages instead of copying them on the first collection
    server_socket.unlink(missing_ok=True)
    previous_umask = os.umask(0o177)  # only this user may connect: a fork runs what it is asked to
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(server_socket))
    os.umask(previous_umask)
    listener.listen(64)
    base_path = _base_path()
    print(f"python workers: forking from process {os.getpid()} at {server_socket}", flush=True)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    while True:
        if selector.select(timeout=1.0):
            connection, _ = listener.accept()
            try:
                _fork(connection, listener, base_path)
            except (OSError, EOFError, ValueError) as error:
                print(f"python workers: a request failed: {error!r}", file=sys.stderr, flush=True)
            finally:
                connection.close()
        _reap()


def _fork(connection: socket.socket, listener: socket.socket, base_path: list[str]) -> None:
    header, fds, _, _ = socket.recv_fds(connection, HEADER.size, 3)
    try:
        if len(header) != HEADER.size or len(fds) != 3:
            raise EOFError("a launcher sent no request")
        request = json.loads(_read_exactly(connection, HEADER.unpack(header)[0]))
        if os.fork() == 0:
            listener.close()
            _run_child(connection, fds, request, base_path)
    finally:
        for fd in fds:
            os.close(fd)


def _run_child(connection: socket.socket, fds: list[int], request: dict, base_path: list[str]):
    """In the forked child: become the process the launcher would have started, run it, report."""
    import atexit
    import io
    import runpy
    import traceback

    for signum in (*FORWARDED_SIGNALS, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    status = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        sys.stdin = io.TextIOWrapper(open(0, "rb", closefd=False))
        sys.stdout = io.TextIOWrapper(open(1, "wb", 0, closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(open(2, "wb", 0, closefd=False), write_through=True)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        # The path Python would have built for this environment: -m puts the working directory
        # first, then $PYTHONPATH (a Connect session's artifacts, the project), then the rest.
        python_path = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = [request["cwd"], *python_path, *base_path]
        sys.path_importer_cache.clear()
        args = request["args"]
        sys.argv = [args[1], *args[2:]]
        connection.sendall(STATUS.pack(os.getpid()))
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        status = 0
    except SystemExit as done:
        status = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        if not isinstance(done.code, int | None):
            print(done.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        connection.sendall(STATUS.pack(status))
    finally:
        os._exit(status)


def _base_path() -> list[str]:
    """This process's module path without its working directory and its ``$PYTHONPATH``: the
    interpreter's own (standard library, site-packages), which every child shares."""
    own = {os.getcwd(), "", *os.environ.get("PYTHONPATH", "").split(os.pathsep)}
    return [p for p in sys.path if p not in own]


def _reap() -> None:
    """Wait for the children that exited: their CPU time then counts as this process's children's."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _read_exactly(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise EOFError(f"the connection closed after {len(data)} of {size} bytes")
        data += chunk
    return data


if __name__ == "__main__":
    if sys.argv[1:2] != ["serve"] or len(sys.argv) != 3:
        sys.exit("usage: python -m lakehouse_tools.python_workers serve SOCKET")
    serve(Path(sys.argv[2]))
