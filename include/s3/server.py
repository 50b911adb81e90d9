"""The local S3-compatible server: moto's S3 in server mode (on 127.0.0.1), one bucket, one key.

    server.py start    start in the background (own process group), wait until it answers
    server.py stop     SIGTERM its process group, wait, then SIGKILL
    server.py status   exit 0 if running, 3 if not
    server.py run      serve in the foreground (what `start` runs)

Settings (environment): LAKEHOUSE_S3_DIR (pid file, log, request counts), LAKEHOUSE_S3_PORT,
LAKEHOUSE_S3_BIND (default 127.0.0.1; the compose stack's s3 service serves its network), LAKEHOUSE_S3_BUCKET, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (the Makefile makes them once per
clone). `start`, `stop` and `status` need only the standard library; `run` runs in the server's
own venv (.venv-s3, include/s3/requirements.txt).

Three things moto's server does not do the way S3 does, made right here (the third: see OneContinue):
- It checks ``If-None-Match: *`` (S3's put-if-absent, which every Delta commit relies on) and
  then writes, in separate steps, on a server of many threads: two racing commits could both
  succeed. Writes are serialized, so the check and the write are one step, as on S3.
- It accepts any credentials. Requests signed with another access key id are refused (403
  InvalidAccessKeyId, as S3 answers); the signature itself is not verified.

For the fault tests it can also hold a write in flight (``/_lakehouse/faults``, see ``Faults``):
the next write whose key matches a pattern waits, unanswered, until the test has killed its
writer, and is then dropped unapplied, as S3 drops an upload whose client died before it ended.

Data lives in the server's memory: `stop` loses every table (fine for a demo and the tests; a
durable local store is Ceph's RGW or Garage, set up apart).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
STATE_DIR = Path(os.environ.get("LAKEHOUSE_S3_DIR", ROOT / ".local" / "s3"))
PORT = int(os.environ.get("LAKEHOUSE_S3_PORT", "15090"))
BIND = os.environ.get("LAKEHOUSE_S3_BIND", "127.0.0.1")
BUCKET = os.environ.get("LAKEHOUSE_S3_BUCKET", "lakehouse")
PID_FILE = STATE_DIR / "server.pid"
LOG_FILE = STATE_DIR / "server.log"
# GET: request counts since the server started, by method, and conditional creates and their refusals
STATS_PATH = "/_lakehouse/requests"
# POST a JSON {"hold": regex} to arm a hold on the next write whose path matches; GET what is armed
# and held; POST to .../drop to drop what is held (see Faults)
FAULTS_PATH = "/_lakehouse/faults"
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 20
_ACCESS_KEY = re.compile(r"Credential=([^/]+)/")


class Faults:
    """Writes held in flight for the fault tests: armed by a key pattern, dropped on request.

    A held request gets no answer until it is dropped; then it is answered 500 and never reaches
    the store, so the object does not appear: what S3 does with an upload whose client was killed.
    """

    def __init__(self):
        self.lock = threading.Lock()
        self.armed: list[re.Pattern] = []
        self.held: list[str] = []
        self.dropped = threading.Event()

    def control(self, environ) -> dict:
        if environ["REQUEST_METHOD"] == "POST":
            if environ["PATH_INFO"].endswith("/drop"):
                with self.lock:
                    self.armed.clear()
                    self.dropped.set()
            else:
                size = int(environ.get("CONTENT_LENGTH") or 0)
                pattern = json.loads(environ["wsgi.input"].read(size))["hold"]
                with self.lock:
                    self.armed.append(re.compile(pattern))
                    self.held.clear()
                    self.dropped.clear()
        with self.lock:
            return {"armed": [p.pattern for p in self.armed], "held": list(self.held)}

    def hold(self, environ) -> bool:
        """True when this write was held (and has now been dropped): it must not be applied."""
        if environ["REQUEST_METHOD"] not in ("PUT", "POST"):
            return False
        path = environ.get("PATH_INFO", "")
        with self.lock:
            match = next((p for p in self.armed if p.search(path)), None)
            if match is None:
                return False
            self.armed.remove(match)
            self.held.append(path)
        self.dropped.wait()
        return True


class ServedLikeS3:
    """WSGI middleware around moto: one writer at a time, the access key checked, requests counted."""

    def __init__(self, app, access_key: str):
        self.app = app
        self.access_key = access_key
        self.write_lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.faults = Faults()

    def __call__(self, environ, start_response):
        method = environ["REQUEST_METHOD"]
        if environ.get("PATH_INFO") == STATS_PATH:
            body = json.dumps(dict(self.requests)).encode()
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]
        if environ.get("PATH_INFO", "").startswith(FAULTS_PATH):
            body = json.dumps(self.faults.control(environ)).encode()
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]
        self.requests[method] += 1
        presented = _ACCESS_KEY.search(
            environ.get("HTTP_AUTHORIZATION", "")
            or environ.get("QUERY_STRING", "").replace("%2F", "/")
        )
        if not presented or presented.group(1) != self.access_key:
            start_response("403 Forbidden", [("Content-Type", "application/xml")])
            return [
                b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>InvalidAccessKeyId</Code>"
                b"<Message>The AWS Access Key Id you provided does not exist in our records."
                b"</Message></Error>"
            ]
        if environ.get("HTTP_IF_NONE_MATCH") == "*":
            self.requests["put-if-absent"] += 1

        def counted(status, headers, *exc_info):
            if status.startswith("412"):
                self.requests["precondition-failed"] += 1
            return start_response(status, headers, *exc_info)

        if self.faults.hold(environ):
            self.requests["dropped"] += 1
            start_response("500 Internal Server Error", [("Content-Type", "application/xml")])
            return [b"<Error><Code>InternalError</Code><Message>dropped</Message></Error>"]
        if method in ("PUT", "POST", "DELETE"):
            with self.write_lock:  # the response is produced, and the write done, under the lock
                return list(self.app(environ, counted))
        return self.app(environ, counted)


def run() -> None:
    import boto3
    from moto.server import create_backend_app
    from werkzeug.serving import WSGIRequestHandler, make_server

    class OneContinue(WSGIRequestHandler):
        # http.server answers "Expect: 100-continue" and werkzeug answers it again; the AWS SDK's
        # async client (S3A's file uploads, e.g. the state store's) takes the second "100" for the
        # final response ("S3Exception: Status Code: 100"). One is enough (moto PR 9975).
        def handle_expect_100(self):
            return True

    access_key = os.environ["AWS_ACCESS_KEY_ID"]
    app = ServedLikeS3(create_backend_app("s3"), access_key)
    server = make_server(BIND, PORT, app, threaded=True, request_handler=OneContinue)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{PORT}",
        aws_access_key_id=access_key,
        aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    ).create_bucket(Bucket=BUCKET)
    print(f"s3 server: serving bucket {BUCKET} on http://{BIND}:{PORT}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: server.shutdown())
    thread.join()


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
    python = os.environ.get("LAKEHOUSE_S3_PYTHON", sys.executable)
    with open(LOG_FILE, "ab") as log:
        process = subprocess.Popen(
            [python, str(Path(__file__).resolve()), "run"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: `stop` signals the group
        )
    PID_FILE.write_text(str(process.pid))
    deadline = time.monotonic() + START_TIMEOUT_S
    while not serves():
        if process.poll() is not None or time.monotonic() > deadline:
            tail = LOG_FILE.read_text(errors="replace").splitlines()[-20:]
            sys.exit("s3 server: did not start; last lines of its log:\n" + "\n".join(tail))
        time.sleep(0.2)
    print(
        f"s3 server: bucket {BUCKET} on http://127.0.0.1:{PORT} (pid {process.pid}, log {LOG_FILE})"
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
    print("s3 server: stopped")


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
