"""The local S3-compatible server: versitygw's posix gateway behind a thin front, on 127.0.0.1.

    server.py start    start in the background (own process group), wait until it answers
    server.py stop     SIGTERM its process group, wait, then SIGKILL
    server.py status   exit 0 if running, 3 if not
    server.py run      serve in the foreground (what `start` runs)

Settings (environment): LAKEHOUSE_S3_DIR (pid file, log, and ``data/``: the objects, one folder
per bucket), LAKEHOUSE_S3_PORT, LAKEHOUSE_S3_BIND (default 127.0.0.1; the compose stack's s3
service serves its network), LAKEHOUSE_S3_BUCKET, LAKEHOUSE_S3_GATEWAY (the versitygw binary;
default .local-s3bin/versitygw, which `make s3-gateway` installs), AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY (the Makefile makes them once per clone). Only the standard library.

The gateway (versitygw, Apache-2.0) does what S3 does: objects are files under ``data/`` and
survive a restart; every request's SigV4 signature is checked (a wrong secret gets 403
SignatureDoesNotMatch); ``If-None-Match: *`` is honoured on PUT and on multipart completion,
atomically (two racing commits: one wins, the other gets 412). Its secret reaches it through
its environment (ROOT_SECRET_ACCESS_KEY), never its command line.

The front, on LAKEHOUSE_S3_PORT, passes every request through unchanged (the signature covers
the Host header and the body, so it forwards them byte for byte) to the gateway on a private
loopback port, and adds what the tests and the benchmark read:
- ``GET /_lakehouse/requests``: request counts since the start, by method, and the conditional
  creates and their refusals;
- ``/_lakehouse/faults`` (see ``Faults``): the next write whose key matches a pattern is held
  unanswered until the test has killed its writer, then dropped unapplied (as S3 drops an upload
  whose client died); or applied, and its answer lost (the connection closed instead).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
STATE_DIR = Path(os.environ.get("LAKEHOUSE_S3_DIR", ROOT / ".local" / "s3"))
DATA_DIR = STATE_DIR / "data"
PORT = int(os.environ.get("LAKEHOUSE_S3_PORT", "15090"))
BIND = os.environ.get("LAKEHOUSE_S3_BIND", "127.0.0.1")
BUCKET = os.environ.get("LAKEHOUSE_S3_BUCKET", "lakehouse")
GATEWAY = Path(os.environ.get("LAKEHOUSE_S3_GATEWAY", ROOT / ".local-s3bin" / "versitygw"))
PID_FILE = STATE_DIR / "server.pid"
LOG_FILE = STATE_DIR / "server.log"
STATS_PATH = "/_lakehouse/requests"
# POST {"hold": regex} or {"lose_answer": regex} to arm a fault on the next write whose path
# matches; GET what is armed and held; POST .../drop to drop what is held (see Faults)
FAULTS_PATH = "/_lakehouse/faults"
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 20
BACKEND_TIMEOUT_S = 600
COPY_BUFFER = 1 << 20
# Hop-by-hop headers of the gateway's answer: the front frames its own answer to the client.
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class Faults:
    """Faults armed by a key pattern, each for the next matching write (PUT or POST).

    ``hold``: the request gets no answer until it is dropped; then it is answered 500 and never
    reaches the store, so the object does not appear: what S3 does with an upload whose client was
    killed. ``lose_answer``: the write is applied, and the client's connection is closed instead
    of answered: what a client sees when the answer is lost on the way (it cannot tell whether the
    write happened).
    """

    def __init__(self):
        self.lock = threading.Lock()
        self.armed: list[tuple[str, re.Pattern]] = []
        self.held: list[str] = []
        self.lost: list[str] = []
        self.dropped = threading.Event()

    def control(self, method: str, path: str, body: bytes) -> dict:
        if method == "POST":
            if path.endswith("/drop"):
                with self.lock:
                    self.armed.clear()
                    self.dropped.set()
            else:
                ((kind, pattern),) = json.loads(body).items()
                if kind not in ("hold", "lose_answer"):
                    raise ValueError(f"unknown fault {kind!r}: hold or lose_answer")
                with self.lock:
                    self.armed.append((kind, re.compile(pattern)))
                    self.held.clear()
                    self.lost.clear()
                    self.dropped.clear()
        with self.lock:
            return {
                "armed": [{kind: p.pattern} for kind, p in self.armed],
                "held": list(self.held),
                "lost": list(self.lost),
            }

    def take(self, method: str, path: str) -> str | None:
        """The fault armed for this request (now disarmed), if any: "hold" or "lose_answer"."""
        if method not in ("PUT", "POST"):
            return None
        with self.lock:
            match = next((f for f in self.armed if f[1].search(path)), None)
            if match is None:
                return None
            self.armed.remove(match)
            (self.held if match[0] == "hold" else self.lost).append(path)
        return match[0]


class Front(BaseHTTPRequestHandler):
    """One client connection: each request passed to the gateway as it came, its answer back."""

    protocol_version = "HTTP/1.1"  # keep-alive, as S3 does; the gateway answers 100-continue
    disable_nagle_algorithm = True  # an answer's header and body go out at once, not 40 ms apart
    backend_port = 0
    requests: Counter[str] = Counter()
    faults = Faults()

    def log_message(self, format, *args):  # the gateway's errors are in the log; not every request
        pass

    def _body(self) -> bytes:
        """The request's body as it came on the wire (chunked framing kept: it is signed so)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raw = bytearray()
            while True:
                line = self.rfile.readline()
                raw += line
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while (trailer := self.rfile.readline()) not in (b"\r\n", b"\n", b""):
                        raw += trailer
                    raw += b"\r\n"
                    return bytes(raw)
                raw += self.rfile.read(size + 2)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _answer(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _serve(self) -> None:
        method, path = self.command, self.path.split("?")[0]
        body = self._body()
        if path == STATS_PATH:
            return self._answer(200, json.dumps(dict(self.requests)).encode())
        if path.startswith(FAULTS_PATH):
            return self._answer(200, json.dumps(self.faults.control(method, path, body)).encode())
        self.requests[method] += 1
        if self.headers.get("If-None-Match") == "*":
            self.requests["put-if-absent"] += 1
        fault = self.faults.take(method, path)
        if fault == "hold":
            self.faults.dropped.wait()
            self.requests["dropped"] += 1
            error = b"<Error><Code>InternalError</Code><Message>dropped</Message></Error>"
            return self._answer(500, error, "application/xml")
        # A connection per request: a reused one the gateway closed meanwhile could not be told
        # from a lost answer, and a request must never reach the store twice.
        backend = http.client.HTTPConnection("127.0.0.1", self.backend_port, BACKEND_TIMEOUT_S)
        try:
            backend.putrequest(method, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                backend.putheader(name, value)
            backend.endheaders(body or None)
            answer = backend.getresponse()
            if answer.status == 412:
                self.requests["precondition-failed"] += 1
            if fault == "lose_answer":
                answer.read()
                self.requests["answers-lost"] += 1
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return None
            self.send_response_only(answer.status, answer.reason)
            for name, value in answer.getheaders():
                if name.lower() not in HOP_BY_HOP:
                    self.send_header(name, value)
            if method == "HEAD":
                if answer.getheader("Content-Length") is not None:
                    self.send_header("Content-Length", answer.getheader("Content-Length"))
                self.end_headers()
                return None
            length = answer.getheader("Content-Length")
            if length is None or answer.chunked:
                content = answer.read()
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)
                return None
            self.send_header("Content-Length", length)
            self.end_headers()
            while chunk := answer.read(COPY_BUFFER):
                self.wfile.write(chunk)
        finally:
            backend.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _serve


def free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def answers(port: int, path: str = "/") -> bool:
    """True once something answers HTTP on 127.0.0.1:port (any status)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def run() -> None:
    if not os.access(GATEWAY, os.X_OK):
        sys.exit(f"s3 server: no gateway at {GATEWAY}; run `make s3-gateway`.")
    (DATA_DIR / BUCKET).mkdir(parents=True, exist_ok=True)  # a bucket is a folder of data/
    backend_port = free_loopback_port()
    credentials = {
        "ROOT_ACCESS_KEY_ID": os.environ["AWS_ACCESS_KEY_ID"],
        "ROOT_SECRET_ACCESS_KEY": os.environ["AWS_SECRET_ACCESS_KEY"],
    }
    gateway = subprocess.Popen(
        # posix: an object is a file; --keep-alive: the front's connections need no new handshake
        [str(GATEWAY), "--port", f"127.0.0.1:{backend_port}", "--quiet", "--keep-alive"]
        + ["posix", str(DATA_DIR)],
        env={**os.environ, **credentials},
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while not answers(backend_port):
        if gateway.poll() is not None or time.monotonic() > deadline:
            gateway.kill()
            sys.exit(f"s3 server: the gateway did not start (exit {gateway.poll()})")
        time.sleep(0.1)
    Front.backend_port = backend_port
    ThreadingHTTPServer.request_queue_size = 128
    server = ThreadingHTTPServer((BIND, PORT), Front)
    server.daemon_threads = True

    def shut_down(*_):
        gateway.terminate()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, shut_down)
    print(f"s3 server: serving bucket {BUCKET} on http://{BIND}:{PORT} from {DATA_DIR}", flush=True)
    try:
        server.serve_forever()
    finally:
        gateway.terminate()
        gateway.wait(timeout=STOP_TIMEOUT_S)


def running_pid() -> int | None:
    try:
        pid = int(PID_FILE.read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    # A recycled pid must not pass for the server: its command line names this file.
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    return pid if str(Path(__file__).resolve()) in cmdline else None


def serves() -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{PORT}{STATS_PATH}", timeout=2):
            return True
    except (OSError, urllib.error.URLError):
        return False


def start() -> None:
    if running_pid():
        print(f"s3 server: already running on 127.0.0.1:{PORT} (pid {running_pid()})")
        return
    if serves():
        sys.exit(f"s3 server: port {PORT} is taken by another process; set LAKEHOUSE_S3_PORT.")
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with open(LOG_FILE, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "run"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group (front and gateway): `stop` signals it
        )
    PID_FILE.write_text(str(process.pid))
    deadline = time.monotonic() + START_TIMEOUT_S
    while not serves():
        if process.poll() is not None or time.monotonic() > deadline:
            tail = LOG_FILE.read_text(errors="replace").splitlines()[-20:]
            sys.exit("s3 server: did not start; last lines of its log:\n" + "\n".join(tail))
        time.sleep(0.2)
    print(
        f"s3 server: bucket {BUCKET} on http://127.0.0.1:{PORT} (pid {process.pid}, "
        f"objects in {DATA_DIR}, log {LOG_FILE})"
    )


def stop() -> None:
    pid = running_pid()
    if not pid:
        print("s3 server: not running")
        return
    os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while running_pid() and time.monotonic() < deadline:
        time.sleep(0.2)
    if running_pid():
        os.killpg(pid, signal.SIGKILL)
    PID_FILE.unlink(missing_ok=True)
    print(f"s3 server: stopped (objects kept in {DATA_DIR})")


def status() -> None:
    pid = running_pid()
    if not pid:
        print("s3 server: not running")
        sys.exit(3)
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}{STATS_PATH}", timeout=5) as answer:
        counts = json.load(answer)
    print(f"s3 server: running on 127.0.0.1:{PORT} (pid {pid}); requests so far {counts}")


if __name__ == "__main__":
    commands = {"run": run, "start": start, "stop": stop, "status": status}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        sys.exit(f"usage: server.py {{{'|'.join(commands)}}}")
    commands[sys.argv[1]]()
