"""The lakehouse on object storage: an ``s3a://bucket/prefix`` root, and how each writer commits there.

A root is either a local folder or ``s3a://bucket/prefix`` (AWS S3 or any S3-compatible store:
the local server of ``make s3-up``, MinIO, Ceph). The settings come from the standard AWS
variables: ``AWS_ENDPOINT_URL_S3`` (empty for AWS S3 itself), ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``.

Every writer of a table commits through the store's put-if-absent (S3 conditional writes,
``If-None-Match: *``), so commits never overwrite each other, whoever makes them:

* Spark drivers (the engine, spark-submit tasks, local drivers) through the project's
  ``S3ConditionalPutLogStore`` (include/jars/s3/src), not Delta's S3SingleDriverLogStore, which is
  safe for one driver only;
* delta-rs (the ops tables, rollback's RESTORE) through object_store's conditional put;
* the project's own small files (checkpoint locks, generation markers) through :mod:`lakehouse.files`.

Streaming checkpoints need no rename: ``ObjectStoreCheckpointFileManager`` writes each offsets,
commits or state file in place through an abortable stream.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from dataclasses import dataclass
from urllib.parse import urlparse

from lakehouse.errors import ConfigError

SCHEMES = ("s3a", "s3")
COMMIT_STORE = "io.ysb.lakehouse.S3ConditionalPutLogStore"
CHECKPOINT_FILE_MANAGER = "io.ysb.lakehouse.ObjectStoreCheckpointFileManager"
ENVIRONMENT_CREDENTIALS = (
    "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"
)


def is_object_store(path: str) -> bool:
    """True for an ``s3a://`` (or ``s3://``) path."""
    return urlparse(str(path)).scheme in SCHEMES


def split(path: str) -> tuple[str, str]:
    """``s3a://bucket/a/b`` -> (``bucket``, ``a/b``)."""
    parsed = urlparse(path)
    return parsed.netloc, parsed.path.lstrip("/")


@dataclass(frozen=True)
class S3Settings:
    """Where the store is and who we are there; None fields fall back to the AWS defaults."""

    endpoint: str | None
    access_key: str | None
    secret_key: str | None
    region: str

    @classmethod
    def from_env(cls) -> S3Settings:
        return cls(
            endpoint=os.environ.get("AWS_ENDPOINT_URL_S3") or None,
            access_key=os.environ.get("AWS_ACCESS_KEY_ID") or None,
            secret_key=os.environ.get("AWS_SECRET_ACCESS_KEY") or None,
            region=os.environ.get("AWS_REGION", "us-east-1"),
        )

    @property
    def plain_http(self) -> bool:
        return bool(self.endpoint) and self.endpoint.startswith("http://")


def root_is_object_store(root: str | None = None) -> bool:
    return is_object_store(root or os.environ.get("LAKEHOUSE_ROOT", ""))


def spark_conf(root: str | None = None) -> dict[str, str]:
    """A driver's settings for a lakehouse on object storage (none for a local root)."""
    if not root_is_object_store(root):
        return {}
    settings = S3Settings.from_env()
    conf = {
        "spark.delta.logStore.s3a.impl": COMMIT_STORE,
        "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_FILE_MANAGER,
        # S3A sends If-None-Match: * for the commit store's creates (Hadoop 3.5's default; said
        # here because commits depend on it).
        "spark.hadoop.fs.s3a.create.conditional.enabled": "true",
        "spark.hadoop.fs.s3a.endpoint.region": settings.region,
        # s3:// paths (as delta-rs and other tools write them) read through S3A too.
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
    }
    if settings.endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = settings.endpoint
        # An S3-compatible server on one host name: bucket in the path, not in a DNS name.
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(not settings.plain_http).lower()
        # The SDK's "Expect: 100-continue" on uploads is answered wrongly by some S3-compatible
        # servers (the local one: state store uploads failed with "Status Code: 100").
        conf["spark.hadoop.fs.s3a.connection.expect.continue"] = "false"
    if settings.access_key and settings.secret_key:
        # The keys are read from the JVM's environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
        # which only its owner can read), never set here: a setting ends up on the engine's and
        # spark-submit's command lines (--conf), which every local user sees in `ps`.
        conf["spark.hadoop.fs.s3a.aws.credentials.provider"] = ENVIRONMENT_CREDENTIALS
    return conf


LOG_STORE_KEY = "spark.delta.logStore.s3a.impl"


def commit_store_problem(log_store: str | None, root: str | None = None) -> str | None:
    """What is wrong with a driver whose ``spark.delta.logStore.s3a.impl`` is ``log_store``, for a
    lakehouse at ``root`` (default: $LAKEHOUSE_ROOT); None when it may write there.

    Without the conditional-put store a driver commits with Delta's S3SingleDriverLogStore, which
    checks then writes: two writers on one table can both take a version, and one's commit is
    overwritten, each told it succeeded.
    """
    if not root_is_object_store(root) or log_store == COMMIT_STORE:
        return None
    return (
        f"This Spark driver commits to S3 with {log_store or 'Delta default store'} instead of "
        f"{COMMIT_STORE}: another writer's commit could be overwritten. Start it with "
        f"{LOG_STORE_KEY}={COMMIT_STORE} (lakehouse.spark.session_conf sets it; for the engine: "
        "make engine-down, then make engine-up with LAKEHOUSE_ROOT on S3, e.g. STORAGE=s3)."
    )


def delta_rs_uri(path: str) -> str:
    """The path as delta-rs names it (``s3://``); local paths unchanged."""
    if is_object_store(path):
        bucket, key = split(path)
        return f"s3://{bucket}/{key}"
    return path


def delta_rs_options(path: str) -> dict[str, str] | None:
    """delta-rs ``storage_options`` for ``path``: None for a local path.

    delta-rs commits to S3 with conditional puts (``If-None-Match: *``), the same coordination
    as the Spark drivers' commit store, so both may write one table.
    """
    if not is_object_store(path):
        return None
    settings = S3Settings.from_env()
    options = {"AWS_REGION": settings.region, "conditional_put": "etag"}
    if settings.endpoint:
        options["AWS_ENDPOINT_URL"] = settings.endpoint
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
        if settings.plain_http:
            options["AWS_ALLOW_HTTP"] = "true"
    if settings.access_key and settings.secret_key:
        options["AWS_ACCESS_KEY_ID"] = settings.access_key
        options["AWS_SECRET_ACCESS_KEY"] = settings.secret_key
    return options


def require_jars(jars: list[str]) -> None:
    """Fail fast when an object-storage root has no S3 jars to use."""
    if not any("hadoop-aws" in jar for jar in jars):
        raise ConfigError(
            "LAKEHOUSE_ROOT is on object storage but the S3 jars are missing: run `make s3-jars`."
        )


def delta_table(path: str, **kwargs):
    """``deltalake.DeltaTable`` at a local or object-storage ``path`` (delta-rs, no JVM)."""
    from deltalake import DeltaTable

    return DeltaTable(delta_rs_uri(path), storage_options=delta_rs_options(path), **kwargs)


def read_delta(path: str, columns: list[str] | None = None, predicate: str | None = None):
    """The rows of the Delta table at ``path`` as a ``pyarrow.Table`` (delta-rs's own scan: deletion
    vectors applied; ``predicate``: a SQL condition, exact per row).

    Not ``to_pyarrow_table``: it reads through delta-rs's Python filesystem handler over its Rust
    runtime, and the process then aborted at exit in 6-18 runs of 20 ("terminate called without an
    active exception", exit 134, after its work was done; delta-rs 1.6.6, pyarrow 26; the kind of
    delta-io/delta-rs#2184): ``lakehouse status`` among them. Its own scan exits cleanly.
    """
    import pyarrow as pa

    delta = delta_table(path)
    rows = pa.table(delta.scan(columns=columns, predicate=predicate))
    # In the table's own Arrow types (the scan gives string views, which Arrow cannot sort).
    schema = pa.schema(delta.schema().to_arrow())
    return rows.cast(pa.schema([schema.field(name) for name in rows.column_names]))


def write_delta(path: str, data, **kwargs) -> None:
    """``deltalake.write_deltalake`` to a local or object-storage ``path``: commits by put-if-absent,
    exactly once.

    A commit whose PUT landed but whose answer was lost is retried by the client and refused (412,
    the version exists): delta-rs took that for another writer's commit and added the same data
    file again at the next version, which a reader going commit by commit (a Delta streaming
    source, the change feed) sees twice. So every write carries an app transaction (``txn``) of
    this thread's writer: delta-rs refuses to commit over a commit holding it, and the refusal is
    reconciled here, as the Java store reconciles its own (include/jars/s3/src): the write
    succeeded when the table holds this write's transaction, and fails otherwise. (A writer's id
    stays in the table's state until ``delta.setTransactionRetentionDuration`` expires it.)
    """
    from deltalake import CommitProperties, Transaction, write_deltalake

    if not is_object_store(path):
        # A local commit is a link that exists or not: there is no answer to lose.
        write_deltalake(path, data, **kwargs)
        return
    if kwargs.get("commit_properties") is not None:
        raise ValueError("write_delta sets its own commit_properties (its transaction id)")
    app_id, version = _writer.next_transaction()
    transaction = Transaction(app_id, version, last_updated=int(time.time() * 1000))
    try:
        write_deltalake(
            delta_rs_uri(path),
            data,
            storage_options=delta_rs_options(path),
            commit_properties=CommitProperties(app_transactions=[transaction]),
            **kwargs,
        )
    except Exception:
        # The answer to our own commit may have been lost: then the table holds our transaction.
        try:
            committed = delta_table(path).transaction_version(app_id)
        except Exception:
            committed = None
        if committed != version:
            raise


class _Writer(threading.local):
    """This thread's delta-rs writer: an app id of its own and the number of its writes.

    One id per process and thread (not per write) keeps the table's transaction state to one
    entry per writer; its versions only grow, so the table holding exactly this write's version
    means this write was committed. ``last_updated`` lets a table's
    ``delta.setTransactionRetentionDuration`` expire the ids of writers long gone.
    """

    def __init__(self):
        self.pid, self.app_id, self.version = None, "", 0

    def next_transaction(self) -> tuple[str, int]:
        if self.pid != os.getpid():
            # A forked child (an Airflow task) must not share its parent's id: two writers under
            # one id could each take the other's commit for its own.
            self.pid, self.app_id, self.version = os.getpid(), f"lakehouse-{uuid.uuid4().hex}", 0
        self.version += 1
        return self.app_id, self.version


_writer = _Writer()
