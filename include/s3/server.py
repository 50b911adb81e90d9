"""The local S3-compatible server: versitygw's posix gateway behind a thin front, on 127.0.0.1.

    server.py start    start in the background (own process group), wait until it answers
    server.py stop     SIGTERM its process group, wait, then SIGKILL
    server.py status   exit 0 if running, 3 if not
    server.py run      serve in the foreground (what `start` runs)

Settings (environment): LAKEHOUSE_S3_DIR (pid file, log, and ``data/``: the objects, one folder
per bucket), LAKEHOUSE_S3_PORT, LAKEHOUSE_S3_BIND (default 127.0.0.1; the compose stack's s3
service serves its network), LAKEHOUSE_S3_BUCKET, LAKEHOUSE_S3_GATEWAY (the versitygw binary;
default .local-s3bin/versitygw, which `make s3-gateway` installs), LAKEHOUSE_S3_VERSIONING=1 (keep
every object version, in ``versions/``: what `lakehouse audit` needs to see a replaced commit),
AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (the Makefile makes them once per clone). Only the
standard library.

The gateway (versitygw, Apache-2.0) does what S3 does: objects are files under ``data/`` and
survive a restart; every request's SigV4 signature is checked (a wrong secret gets 403
SignatureDoesNotMatch); ``If-None-Match: *`` is honoured on PUT and on multipart completion,
atomically (two racing commits: one wins, the other gets 412). Its secret reaches it through
its environment (ROOT_SECRET_ACCESS_KEY), never its command line.

The front, on LAKEHOUSE_S3_PORT, passes every request through unchanged (the signature covers
the Host header and the body, so it forwards them byte for byte) to the gateway on a private
loopback port, and adds what the tests and the benchmark read:
- ``GET /_lakehouse/requests``: request counts since the start, by method, the conditional
  creates and their refusals, and the Delta commits written without one (``unconditional-commits``:
  each could have replaced another writer's commit);
- ``/_lakehouse/faults`` (see ``Faults``): the next write whose key matches a pattern is held
  unanswered until the test has killed its writer, then dropped unapplied (as S3 drops an upload
  whose client died); or applied, and its answer lost (the connection closed instead).
"""

from __future__ import annotations

import hashlib
import hmac
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
from datetime import UTC, datetime
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
VERSIONS_DIR = STATE_DIR / "versions"
VERSIONING = os.environ.get("LAKEHOUSE_S3_VERSIONING", "") not in ("", "0")
REGION = os.environ.get("AWS_REGION", "us-east-1")
VERSIONING_ENABLED = (
    b'<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
    b"<Status>Enabled</Status></VersioningConfiguration>"
)
LOG_FILE = STATE_DIR / "server.log"
STATS_PATH = "/_lakehouse/requests"
# POST {"hold": regex} or {"lose_answer": regex} (optionally "agent": regex, "every": n) to arm a
# fault on the next write whose path matches; GET what is armed and held; POST .../drop to drop
# what is held (see Faults)
FAULTS_PATH = "/_lakehouse/faults"
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 20
BACKEND_TIMEOUT_S = 600
COPY_BUFFER = 1 << 20
DELTA_COMMIT = re.compile(r"/_delta_log/\d{20}\.json$")
# Hop-by-hop headers of the gateway's answer: the front frames its own answer to the client.
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class Faults:
    """Faults armed by a key pattern, each for the next matching write (PUT or POST).

    ``hold``: the request gets no answer until it is dropped; then it is answered 500 and never
    reaches the store, so the object does not appear: what S3 does with an upload whose client was
    killed. ``lose_answer``: the write is applied, and the client's connection is closed instead
    of answered: what a client sees when the answer is lost on the way (it cannot tell whether the
    write happened).

    Two optional fields narrow or repeat a fault: ``agent``, a pattern the request's User-Agent
    must match too (one kind of writer: ``object_store`` is delta-rs, ``aws-sdk-java`` S3A), and
    ``every``: the fault stays armed and fires on every n-th matching write (a fraction of them).
    """

    def __init__(self):
        self.lock = threading.Lock()
        self.armed: list[dict] = []
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
                self._arm(json.loads(body))
        with self.lock:
            return {
                "armed": [
                    {
                        f["kind"]: f["pattern"].pattern,
                        "agent": f["agent"].pattern,
                        "every": f["every"],
                        "fired": f["fired"],
                    }
                    for f in self.armed
                ],
                "held": list(self.held),
                "lost": list(self.lost),
            }

    def _arm(self, fault: dict) -> None:
        agent, every = fault.pop("agent", ""), int(fault.pop("every", 0))
        ((kind, pattern),) = fault.items()
        if kind not in ("hold", "lose_answer"):
            raise ValueError(f"unknown fault {kind!r}: hold or lose_answer")
        with self.lock:
            self.armed.append(
                {
                    "kind": kind,
                    "pattern": re.compile(pattern),
                    "agent": re.compile(agent),
                    "every": every,
                    "seen": 0,
                    "fired": 0,
                }
            )
            self.held.clear()
            self.lost.clear()
            self.dropped.clear()

    def take(self, method: str, path: str, agent: str) -> str | None:
        """The fault that fires on this request, if any: "hold" or "lose_answer" (a one-time fault
        is disarmed by it)."""
        if method not in ("PUT", "POST"):
            return None
        with self.lock:
            for fault in self.armed:
                if fault["pattern"].search(path) and fault["agent"].search(agent):
                    break
            else:
                return None
            fault["seen"] += 1
            if not fault["every"]:
                self.armed.remove(fault)
            elif fault["seen"] % fault["every"]:
                return None
            fault["fired"] += 1
            (self.held if fault["kind"] == "hold" else self.lost).append(path)
        return fault["kind"]


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
        fault = self.faults.take(method, path, self.headers.get("User-Agent", ""))
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
            if answer.status == 200 and method == "PUT" and DELTA_COMMIT.search(path):
                # A Delta commit written without put-if-absent could have replaced another.
                if self.headers.get("If-None-Match") != "*":
                    self.requests["unconditional-commits"] += 1
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


def enable_versioning(port: int, credentials: dict[str, str]) -> None:
    """Turn the bucket's versioning on (PutBucketVersioning, signed with SigV4 by hand: only the
    standard library here)."""
    body = VERSIONING_ENABLED
    now = datetime.now(UTC)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    headers = {
        "host": f"127.0.0.1:{port}",
        "x-amz-content-sha256": hashlib.sha256(body).hexdigest(),
        "x-amz-date": stamp,
    }
    names = ";".join(headers)  # already in sorted order
    canonical = "\n".join(
        ["PUT", f"/{BUCKET}", "versioning=", *(f"{n}:{v}" for n, v in headers.items()), ""]
        + [names, headers["x-amz-content-sha256"]]
    )
    scope = f"{day}/{REGION}/s3/aws4_request"
    key = ("AWS4" + credentials["ROOT_SECRET_ACCESS_KEY"]).encode()
    for part in (day, REGION, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    signature = hmac.new(
        key, f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{digest}".encode(), hashlib.sha256
    ).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={credentials['ROOT_ACCESS_KEY_ID']}/{scope}, "
        f"SignedHeaders={names}, Signature={signature}"
    )
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/{BUCKET}?versioning", data=body, method="PUT", headers=headers
    )
    try:
        urllib.request.urlopen(request, timeout=10).close()
    except urllib.error.HTTPError as error:
        sys.exit(f"s3 server: could not enable versioning: {error.code} {error.read()[:300]!r}")


def run() -> None:
    if not os.access(GATEWAY, os.X_OK):
        sys.exit(f"s3 server: no gateway at {GATEWAY}; run `make s3-gateway`.")
    (DATA_DIR / BUCKET).mkdir(parents=True, exist_ok=True)  # a bucket is a folder of data/
    if VERSIONING:
        VERSIONS_DIR.mkdir(exist_ok=True)
    backend_port = free_loopback_port()
    credentials = {
        "ROOT_ACCESS_KEY_ID": os.environ["AWS_ACCESS_KEY_ID"],
        "ROOT_SECRET_ACCESS_KEY": os.environ["AWS_SECRET_ACCESS_KEY"],
    }
    # Versioning keeps every object version in versions/ (what `lakehouse audit` reads to find a
    # commit that replaced another); off by default: the lake's rewritten files would pile up.
    versioning = ["--versioning-dir", str(VERSIONS_DIR)] if VERSIONING else []
    gateway = subprocess.Popen(
        # posix: an object is a file; --keep-alive: the front's connections need no new handshake
        [str(GATEWAY), "--port", f"127.0.0.1:{backend_port}", "--quiet", "--keep-alive"]
        + ["posix", *versioning, str(DATA_DIR)],
        env={**os.environ, **credentials},
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while not answers(backend_port):
        if gateway.poll() is not None or time.monotonic() > deadline:
            gateway.kill()
            sys.exit(f"s3 server: the gateway did not start (exit {gateway.poll()})")
        time.sleep(0.1)
    if VERSIONING:
        enable_versioning(backend_port, credentials)
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
