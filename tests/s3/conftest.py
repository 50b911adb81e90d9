"""Object storage: a private S3 server (include/s3/server.py) and an engine started for it.

The module's lakehouses live under ``s3a://lakehouse/<test>``; the engine that runs their jobs is
started after the server, with its endpoint and keys, as ``make engine-up STORAGE=s3`` would.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from lakehouse.config import Lakehouse
from lakehouse_tools.engine import free_port

PROJECT_DIR = Path(__file__).resolve().parents[2]
S3_PYTHON = PROJECT_DIR / ".venv-s3" / "bin" / "python"
BUCKET = "lakehouse"


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A private S3 server on a free port of 127.0.0.1: its settings as AWS_* variables."""
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
        "LAKEHOUSE_S3_DIR": str(tmp_path_factory.mktemp("s3")),
    }
    server = subprocess.Popen(
        [str(S3_PYTHON), str(PROJECT_DIR / "include" / "s3" / "server.py"), "run"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
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
    try:
        yield settings
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def s3_settings(s3_server):
    """The S3 settings in this process's environment for the module (undone after it)."""
    from lakehouse import files

    with pytest.MonkeyPatch.context() as patch:
        for name, value in s3_server.items():
            patch.setenv(name, value)
        patch.setenv("LAKEHOUSE_METASTORE", "none")
        files._bucket_store.cache_clear()
        yield patch
    files._bucket_store.cache_clear()


@pytest.fixture(scope="module")
def s3_engine(s3_settings, s3_server, tmp_path_factory):
    """An engine of the module's own started for S3 (its root on the server), for the module's jobs."""
    from helpers import private_engine

    s3_settings.setenv("LAKEHOUSE_ROOT", f"s3a://{BUCKET}/engine")
    with private_engine(tmp_path_factory.mktemp("s3-engine"), s3_settings.setenv):
        yield s3_server


@pytest.fixture
def s3_lakehouse(s3_settings, request) -> Lakehouse:
    """A lakehouse of the test's own on the S3 server."""
    name = request.node.name.replace("[", "-").replace("]", "")
    return Lakehouse(root=f"s3a://{BUCKET}/{name}-{secrets.token_hex(3)}")


@pytest.fixture(scope="module")
def s3_reader(s3_engine):
    """A session on the module's engine, for reading the S3 tables."""
    from lakehouse.spark import build_spark_session

    session = build_spark_session("s3-tests", engine_kind="connect", outlives_jobs=True)
    yield session
    session.stop()
