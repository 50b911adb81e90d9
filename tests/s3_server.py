"""A private S3 server (include/s3/server.py) for a test session: on a free port, its own keys."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from lakehouse_tools.engine import free_port

PROJECT_DIR = Path(__file__).resolve().parents[1]
S3_PYTHON = PROJECT_DIR / ".venv-s3" / "bin" / "python"
BUCKET = "lakehouse"


@contextmanager
def running_s3_server(state_dir: Path) -> Iterator[dict[str, str]]:
    """Start the server; yields its settings as AWS_* variables; stops it (its process group)."""
    if not S3_PYTHON.exists():
        pytest.fail("no S3 server venv: run `make s3-venv` (make test does)")
    port = free_port()
    settings = {
        "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "LHTEST" + secrets.token_hex(6).upper(),
        "AWS_SECRET_ACCESS_KEY": secrets.token_hex(20),
        "AWS_REGION": "us-east-1",
    }
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        **settings,
        "LAKEHOUSE_S3_PORT": str(port),
        "LAKEHOUSE_S3_BUCKET": BUCKET,
        "LAKEHOUSE_S3_DIR": str(state_dir),
    }
    server = subprocess.Popen(
        [str(S3_PYTHON), str(PROJECT_DIR / "include" / "s3" / "server.py"), "run"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/_lakehouse/requests", timeout=1)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the S3 server did not start (exit {server.poll()})")
                time.sleep(0.2)
        time.sleep(0.5)  # the bucket is created right after the server answers
        yield settings
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


@contextmanager
def s3_environment(settings: dict[str, str], setenv) -> Iterator[None]:
    """This process's environment set for ``settings`` (through ``setenv``), and the lakehouse's
    cached bucket clients dropped before and after."""
    from lakehouse import files

    for name, value in settings.items():
        setenv(name, value)
    setenv("LAKEHOUSE_METASTORE", "none")
    files._bucket_store.cache_clear()
    try:
        yield
    finally:
        files._bucket_store.cache_clear()
