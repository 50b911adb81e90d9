"""A private S3 server (include/s3/server.py) for a test session: on a free port, its own keys."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from lakehouse_tools.engine import free_port

PROJECT_DIR = Path(__file__).resolve().parents[1]
GATEWAY = PROJECT_DIR / ".local-s3bin" / "versitygw"
BUCKET = "lakehouse"


@contextmanager
def running_s3_server(
    state_dir: Path, keys: tuple[str, str] | None = None, versioning: bool = False
) -> Iterator[dict[str, str]]:
    """Start the server (its objects in ``state_dir``/data, kept by a later server on the same
    folder and ``keys``; every object version kept when ``versioning``); yields its settings as
    AWS_* variables; stops it (its process group)."""
    if not GATEWAY.exists():
        pytest.fail("no S3 gateway: run `make s3-gateway` (make test does)")
    port = free_port()
    settings = {
        "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": keys[0] if keys else "LHTEST" + secrets.token_hex(6).upper(),
        "AWS_SECRET_ACCESS_KEY": keys[1] if keys else secrets.token_hex(20),
        "AWS_REGION": "us-east-1",
    }
    env = {
        **os.environ,
        **settings,
        "LAKEHOUSE_S3_PORT": str(port),
        "LAKEHOUSE_S3_BUCKET": BUCKET,
        "LAKEHOUSE_S3_DIR": str(state_dir),
        "LAKEHOUSE_S3_VERSIONING": "1" if versioning else "",
    }
    server = subprocess.Popen(
        [sys.executable, str(PROJECT_DIR / "include" / "s3" / "server.py"), "run"],
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


def signed_request(
    settings: dict[str, str],
    method: str,
    key: str,
    body: bytes = b"",
    query: str = "",
    headers: dict[str, str] | None = None,
    secret: str | None = None,
) -> tuple[int, bytes]:
    """One request to the bucket, signed by hand with SigV4 (as the AWS SDKs sign): its status and
    body. ``secret`` signs with another secret than the server's."""
    import hashlib
    import hmac
    from datetime import UTC, datetime
    from urllib.parse import quote, urlparse

    host = urlparse(settings["AWS_ENDPOINT_URL_S3"]).netloc
    now = datetime.now(UTC)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    path = quote(f"/{BUCKET}/{key}")
    sent = {
        "host": host,
        "x-amz-date": stamp,
        "x-amz-content-sha256": hashlib.sha256(body).hexdigest(),
        **{name.lower(): value for name, value in (headers or {}).items()},
    }
    names = ";".join(sorted(sent))
    canonical_query = "&".join(sorted(p if "=" in p else p + "=" for p in query.split("&") if p))
    canonical = "\n".join(
        [method, path, canonical_query, *(f"{n}:{sent[n]}" for n in sorted(sent)), "", names]
        + [sent["x-amz-content-sha256"]]
    )
    scope = f"{day}/{settings['AWS_REGION']}/s3/aws4_request"
    to_sign = (
        f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    )
    signing = ("AWS4" + (secret or settings["AWS_SECRET_ACCESS_KEY"])).encode()
    for part in (day, settings["AWS_REGION"], "s3", "aws4_request"):
        signing = hmac.new(signing, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(signing, to_sign.encode(), hashlib.sha256).hexdigest()
    sent["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={settings['AWS_ACCESS_KEY_ID']}/{scope}, "
        f"SignedHeaders={names}, Signature={signature}"
    )
    url = settings["AWS_ENDPOINT_URL_S3"] + path + (f"?{query}" if query else "")
    request = urllib.request.Request(url, data=body or None, method=method, headers=sent)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
