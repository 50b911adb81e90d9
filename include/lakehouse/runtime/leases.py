"""The checkpoint lock on object storage: a lease object, since S3 has no file locks.

On a local file system the kernel holds the driver lock and drops it when its holder dies
(:mod:`lakehouse.runtime.locks`). On S3 the lock is an object beside the checkpoint,
``.driver.lease``, created with put-if-absent (``If-None-Match: *``), so two drivers on any
machines cannot both take it. Its holder renews it every ``RENEW_S`` seconds from a thread; a
holder killed -9 stops renewing, and ``EXPIRES_S`` (or ``$LAKEHOUSE_LEASE_EXPIRES_S``) after its
last renewal the next driver takes the lease over, with a conditional overwrite (``If-Match`` on
the ETag it read), so that of two drivers taking over one stale lease only one wins. A batch checks the lease before it writes, as
on a local disk: a different token means another driver took over, an expired one that its
client is gone.

A batch's own lock (the engine running a killed client's batch) is ``.batch.lease``: created at
a batch's start, renewed while it runs, deleted at its end; ignored once it has expired (its
process died with it) or is older than the locks' batch wait.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from lakehouse.errors import ConfigError
from lakehouse.files import S3Path, lake_path

RENEW_S = 10.0
EXPIRES_S = 45.0
# How long a killed driver's lease outlives it (a retry waits that long): seconds, default EXPIRES_S.
EXPIRES_ENV = "LAKEHOUSE_LEASE_EXPIRES_S"
DRIVER_LEASE = ".driver.lease"
BATCH_LEASE = ".batch.lease"


def _now() -> float:
    return time.time()


def _expires_s() -> float:
    try:
        return float(os.environ.get(EXPIRES_ENV) or EXPIRES_S)
    except ValueError:
        raise ConfigError(
            f"{EXPIRES_ENV} must be a number of seconds, not {os.environ[EXPIRES_ENV]!r}"
        ) from None


def _renew_s(expires: float) -> float:
    return min(
        RENEW_S, expires / 4
    )  # several renewals per lifetime: one slow PUT is not a takeover


def _read(path: S3Path) -> tuple[dict, str] | None:
    """The lease's content and ETag (None: no lease)."""

    try:
        result = path._store().get(path.key)
        return json.loads(bytes(result.bytes())), result.meta["e_tag"]
    except FileNotFoundError:
        return None
    except ValueError:  # a torn or foreign object: treat as expired, with its ETag
        return {"expires": 0}, path._store().head(path.key)["e_tag"]


def _put(path: S3Path, body: dict, mode) -> str | None:
    """Write the lease under ``mode`` (create, or update if the ETag matches); its new ETag, or
    None when another driver got there first."""
    from obstore.exceptions import AlreadyExistsError, PreconditionError

    try:
        result = path._store().put(path.key, json.dumps(body).encode(), mode=mode)
    except (AlreadyExistsError, PreconditionError):
        return None
    return result["e_tag"]


def describe(body: dict) -> str:
    return f"pid {body.get('pid')} on {body.get('host')} since {body.get('since')}"


@contextmanager
def driver_lease(checkpoint: str, name: str, busy: type[Exception]) -> Iterator[str]:
    """Hold ``checkpoint``'s lease while the block runs; yields its token. Raises ``busy`` when a
    live driver holds it."""
    path = lake_path(checkpoint) / DRIVER_LEASE
    token = uuid.uuid4().hex
    body = {
        "lease": token,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    expires = _expires_s()
    etag = _put(path, {**body, "expires": _now() + expires}, "create")
    if etag is None:
        held = _read(path)
        if held is not None and held[0].get("expires", 0) > _now():
            raise busy(
                f"{name}: another driver holds checkpoint {checkpoint} ({describe(held[0])}, lease "
                f"renewed until {time.strftime('%H:%M:%S', time.gmtime(held[0]['expires']))} UTC). "
                "Not starting a second writer; let it finish (an Airflow retry will run after it)."
            )
        # Expired (its driver died): take it over, unless another driver does so first.
        update = {"e_tag": held[1]} if held is not None else "create"
        etag = _put(path, {**body, "expires": _now() + expires}, update)
        if etag is None:
            raise busy(f"{name}: another driver took checkpoint {checkpoint} over just now.")
    stop = threading.Event()
    state = {"etag": etag}

    def renew() -> None:
        while not stop.wait(_renew_s(expires)):
            new = _put(path, {**body, "expires": _now() + expires}, {"e_tag": state["etag"]})
            if new is None:  # taken over (we stalled past expiry): batches will see it and stop
                return
            state["etag"] = new

    renewer = threading.Thread(target=renew, name=f"lease-{name}", daemon=True)
    renewer.start()
    try:
        yield token
    finally:
        stop.set()
        renewer.join()
        held = _read(path)
        if held is not None and held[0].get("lease") == token:
            path.unlink(missing_ok=True)


def driver_running(checkpoint: str) -> bool:
    """True while a driver's lease on ``checkpoint`` has not expired."""
    held = _read(lake_path(checkpoint) / DRIVER_LEASE)
    return held is not None and held[0].get("expires", 0) > _now()


def lease_problem(checkpoint: str, token: str) -> str | None:
    """Why a batch of the driver holding ``token`` must not write (None: it may)."""
    held = _read(lake_path(checkpoint) / DRIVER_LEASE)
    if held is None or held[0].get("expires", 0) <= _now():
        return "its client is gone"
    if held[0].get("lease") != token:
        return "another client took it over"
    return None


@contextmanager
def batch_lease(checkpoint: str, wait_s: float) -> Iterator[None]:
    """Mark a batch of ``checkpoint`` as running while the block runs; waits up to ``wait_s`` for
    one running. The mark is renewed like a driver's lease: a batch whose process died (a killed
    spark-submit driver) stops counting once it has expired."""
    path = lake_path(checkpoint) / BATCH_LEASE
    expires = _expires_s()
    deadline = _now() + wait_s
    while _put(path, {"started": _now(), "renewed": _now()}, "create") is None:
        held = _read(path)
        if held is not None and not _batch_alive(held[0], wait_s):
            path.unlink(missing_ok=True)  # a batch whose process died
        elif _now() > deadline:
            raise TimeoutError(f"a batch of {checkpoint} has been running for {wait_s} s")
        time.sleep(1)
    started = _now()
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(_renew_s(expires)):
            path.write_bytes(json.dumps({"started": started, "renewed": _now()}).encode())

    renewer = threading.Thread(target=renew, name="batch-lease", daemon=True)
    renewer.start()
    try:
        yield
    finally:
        stop.set()
        renewer.join()
        path.unlink(missing_ok=True)


def _batch_alive(body: dict, wait_s: float) -> bool:
    """A batch lease still counts: renewed within a lease's lifetime, and not running past ``wait_s``."""
    now = _now()
    return body.get("renewed", 0) > now - _expires_s() and body.get("started", 0) >= now - wait_s


def batch_running(checkpoint: str, wait_s: float) -> bool:
    """True while a live batch of ``checkpoint``'s query holds its batch lease."""
    held = _read(lake_path(checkpoint) / BATCH_LEASE)
    return held is not None and _batch_alive(held[0], wait_s)
