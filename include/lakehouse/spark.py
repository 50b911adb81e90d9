"""The one SparkSession factory: Delta, small-machine defaults, never the master.

A job's session is one of two kinds, chosen by ``$LAKEHOUSE_ENGINE`` (or the ``engine`` argument):

* ``connect`` (the project's default): a thin client of the warm engine, a Spark Connect server
  (``make engine-up``, :mod:`lakehouse_tools.engine`) at :func:`lakehouse.config.engine_settings`'s
  URL. Each job gets a session of its own (``create()``; asked again by the same name, the job
  gets the same one, as a local driver's ``getOrCreate`` does), released when the job ends, so
  nothing (temporary views, cached data, session settings) passes from one run to the next.
* ``local``: a driver JVM in this process, as spark-submit (a real cluster) or a test fixture
  starts it; spark-submit decides the master. Under spark-submit the session is always this kind.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from lakehouse.config import engine_settings, jar_paths, jars_dir
from lakehouse.errors import ConfigError

ENGINES = ("connect", "local")

# HotSpot leaves a method of more than 8000 bytecode bytes interpreted for good. Spark's generated
# code for silver's classification is one such method; a driver that runs for more than seconds
# gains from compiling it (1M lines: 23 -> 17 CPU-s, BENCHMARKS.md section 12a). The parallel
# collector, not G1: G1's concurrent threads and write barriers cost silver a sixth of its CPU at
# 5M events (section 12), and a batch engine has no use for its short pauses.
LONG_RUN_JAVA_OPTIONS = "-XX:-DontCompileHugeMethods -XX:+UseParallelGC"

# Defaults sized for 2 cores; a cluster deployment overrides them with --conf.
DEFAULT_CONF = {
    "spark.driver.extraJavaOptions": LONG_RUN_JAVA_OPTIONS,
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    # Delta's log replay uses this many partitions; 50 is far too many for small tables.
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.databricks.delta.properties.defaults.appendOnly": "false",
    # Stateful queries (the sessions) keep their state in RocksDB rather than the JVM heap.
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.ui.showConsoleProgress": "false",
}


def session_conf() -> dict[str, str]:
    """Every setting a driver starts with: :data:`DEFAULT_CONF`, the lakehouse's storage (object
    storage's connector and commit settings when the root is on S3) and the table-name metastore."""
    from lakehouse import metastore, object_storage

    return {**DEFAULT_CONF, **object_storage.spark_conf(), **metastore.spark_conf()}


# OpenLineage (docs/lineage.md): Spark's listener, off unless LAKEHOUSE_LINEAGE=1. It reads its
# parent run once, from the SparkConf at its start: a spark-submit driver gets its Airflow task by
# --conf (the operator). The engine serves every task, so there a job's Connect session carries its
# task as a tag (lineage_parent_tag) and two classes of our own (include/jars/lineage-parent/) set
# each query run's parent from it: a listener before OpenLineage's notes the tag of the event being
# handled, and a transform transport's transformer rewrites the run's parent facet.
LINEAGE_LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"
LINEAGE_NAMESPACE = "ysb-lakehouse"
# The keys the Airflow OpenLineage provider injects into its own Spark operators' conf.
LINEAGE_PARENT_KEYS = (
    "spark.openlineage.parentJobNamespace",
    "spark.openlineage.parentJobName",
    "spark.openlineage.parentRunId",
    "spark.openlineage.rootParentJobNamespace",
    "spark.openlineage.rootParentJobName",
    "spark.openlineage.rootParentRunId",
)
# A job's Airflow task, as JSON of LINEAGE_PARENT_KEYS: a local driver's parent settings, an engine
# session's tag (the operator sets it for a task on the engine, passes --conf to spark-submit's).
LINEAGE_PARENT_ENV = "LAKEHOUSE_LINEAGE_PARENT"
# The engine's task-parent classes (make lineage-jars) and the prefix of the session tag they read.
LINEAGE_PARENT_JAR = "openlineage-task-parent.jar"
LINEAGE_TAGS_LISTENER = "lakehouse.lineage.JobTagsListener"
LINEAGE_PARENT_TRANSFORMER = "lakehouse.lineage.TaskParentTransformer"
LINEAGE_PARENT_TAG_PREFIX = "openlineage-parent-"
# Datasets named as the tables' own (the Airflow side's names, lakehouse_airflow.operators.
# lineage_dataset): the listener's `dataset.removePath.pattern` cuts the part its named group
# `remove` finds (the first match) from every dataset's name, column lineage's too. Here a Delta
# log (`<table>/_delta_log`, which Delta's own log-replay queries name) and a landing source's day
# and hour folders (`landing/events/2026-11-20/00`, what bronze's file source reads).
LINEAGE_REMOVE_PATH_PATTERN = (
    r"(?<remove>/_delta_log(?:/.*)?$"
    r"|(?<=/landing/[^/]{1,255})/[0-9]{4}-[0-9]{2}-[0-9]{2}(?:/.*)?$)"
)


def lineage_enabled() -> bool:
    """``$LAKEHOUSE_LINEAGE`` is 1 (or true/on): drivers and the engine emit OpenLineage events."""
    return os.environ.get("LAKEHOUSE_LINEAGE", "").strip().lower() in ("1", "true", "on", "yes")


def lineage_dir() -> Path:
    """Where the file transport writes (``$LAKEHOUSE_LINEAGE_DIR``, default ``<repo>/.local/lineage``)."""
    return Path(
        os.environ.get("LAKEHOUSE_LINEAGE_DIR")
        or Path(__file__).resolve().parents[2] / ".local" / "lineage"
    )


def lineage_parent() -> dict[str, str]:
    """The job's Airflow task instance as Spark's parent keys (``$LAKEHOUSE_LINEAGE_PARENT``), or {}."""
    import json

    raw = os.environ.get(LINEAGE_PARENT_ENV)
    if not raw:
        return {}
    parent = json.loads(raw)
    return {key: str(parent[key]) for key in LINEAGE_PARENT_KEYS if parent.get(key)}


def lineage_parent_tag(parent: dict[str, str]) -> str:
    """``parent`` (:data:`LINEAGE_PARENT_KEYS`) as a Spark job tag, which may hold no comma: the
    prefix, then base64url of ``key=value`` lines (keys without ``spark.openlineage.``), as
    ``lakehouse.lineage.TaskParentTransformer`` decodes it."""
    import base64

    lines = "\n".join(
        f"{key.removeprefix('spark.openlineage.')}={parent[key]}"
        for key in LINEAGE_PARENT_KEYS
        if parent.get(key)
    )
    return LINEAGE_PARENT_TAG_PREFIX + base64.urlsafe_b64encode(lines.encode()).decode().rstrip("=")


def lineage_conf(events_file: str, *, engine: bool = False) -> dict[str, str]:
    """A driver's OpenLineage settings ({} when lineage is off): the listener, the namespace and the
    transport. The transport is a JSON-lines file ``events_file`` in :func:`lineage_dir`, unless
    ``$OPENLINEAGE_URL`` names an HTTP receiver (Marquez, DataHub; with ``$OPENLINEAGE_ENDPOINT`` and
    ``$OPENLINEAGE_API_KEY`` when set). A driver's listener also merges in the OpenLineage client's
    ``OPENLINEAGE__TRANSPORT__*`` variables and an ``openlineage.yml``.

    Every driver: datasets named as the tables' own (:data:`LINEAGE_REMOVE_PATH_PATTERN`) and no
    RDD job runs (``filter.rddEventsDisabled``).

    ``engine``: the Spark Connect server's; through a transform transport around that one
    (``lakehouse.lineage.TaskParentTransformer``) its query runs get their task as parent from the
    session's tag (:func:`lineage_parent_tag`), a job name of the task and table
    (``<dag_id>.<task_id>.<layer>.<table>``) and the spec's run cycle (one START, one terminal)."""
    if not lineage_enabled():
        return {}
    jars = {Path(jar).name for jar in jar_paths()}
    if not any(name.startswith("openlineage-spark") for name in jars) or (
        engine and LINEAGE_PARENT_JAR not in jars
    ):
        raise ConfigError(
            f"LAKEHOUSE_LINEAGE=1 but no OpenLineage jars in {jars_dir()}: run `make lineage-jars`."
        )
    conf = {
        "spark.extraListeners": LINEAGE_LISTENER,
        "spark.openlineage.namespace": os.environ.get(
            "LAKEHOUSE_LINEAGE_NAMESPACE", LINEAGE_NAMESPACE
        ),
        "spark.openlineage.dataset.removePath.pattern": LINEAGE_REMOVE_PATH_PATTERN,
        # No runs of RDD jobs (Delta's snapshot and state jobs: a START and never a terminal event,
        # under the engine's name and the table's machine path); each SQL query keeps its run.
        "spark.openlineage.filter.rddEventsDisabled": "true",
    }
    transport = "spark.openlineage.transport."
    if engine:  # the listener that notes each event's tag runs before OpenLineage's, in this order
        conf["spark.extraListeners"] = f"{LINEAGE_TAGS_LISTENER},{LINEAGE_LISTENER}"
        conf[transport + "type"] = "transform"
        conf[transport + "transformerClass"] = LINEAGE_PARENT_TRANSFORMER
        transport += "transport."
    if os.environ.get("OPENLINEAGE_URL"):
        conf[transport + "type"] = "http"
        conf[transport + "url"] = os.environ["OPENLINEAGE_URL"]
        # The OpenLineage clients' own variables beside the URL (the listener's merge of its
        # OPENLINEAGE__TRANSPORT__* ones does not reach a transport nested in the engine's).
        if os.environ.get("OPENLINEAGE_ENDPOINT"):
            conf[transport + "endpoint"] = os.environ["OPENLINEAGE_ENDPOINT"]
        if os.environ.get("OPENLINEAGE_API_KEY"):
            conf[transport + "auth.type"] = "api_key"
            conf[transport + "auth.apiKey"] = os.environ["OPENLINEAGE_API_KEY"]
    else:
        lineage_dir().mkdir(parents=True, exist_ok=True)
        conf[transport + "type"] = "file"
        conf[transport + "location"] = str(lineage_dir() / events_file)
    return conf


# What a client may set in its own session; the rest is the server's (lakehouse_tools.engine).
SESSION_CONF_PREFIXES = (
    "spark.sql.session.",
    "spark.sql.shuffle.",
    "spark.databricks.delta.snapshotPartitions",
)

_engine_sessions: dict[str, SparkSession] = {}  # by app name
# pyspark marks a process that opened a Connect session as Connect-only (functions then build
# Connect columns); a process that also holds a local session (`make test-fast`'s tests) gets its
# mode back when its jobs' sessions end, one whose session outlives the jobs (the tests' reader on
# the engine) keeps it.
_connect_mode_before: list[bool] = []
_outliving_sessions: list[str] = []


def engine() -> str:
    """Which kind of session jobs get: ``local`` under spark-submit, else ``$LAKEHOUSE_ENGINE`` (default local)."""
    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # spark-submit started this Python with its JVM
        return "local"
    chosen = os.environ.get("LAKEHOUSE_ENGINE") or "local"
    if chosen not in ENGINES:
        raise ConfigError(f"LAKEHOUSE_ENGINE={chosen!r}: use one of {', '.join(ENGINES)}.")
    return chosen


def is_remote(spark: SparkSession) -> bool:
    """True for a Spark Connect client session (no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def build_spark_session(
    app_name: str,
    extra_conf: dict[str, str] | None = None,
    engine_kind: str | None = None,
    *,
    outlives_jobs: bool = False,
) -> SparkSession:
    """A Delta-enabled session named ``app_name``; ``extra_conf`` overrides the defaults.

    ``outlives_jobs``: an engine session that the jobs run in this process leave open (a test
    process's reader); a job's own sessions end with it (:func:`release_engine_sessions`).
    """
    if (engine_kind or engine()) == "connect":
        return _engine_session(app_name, extra_conf, outlives_jobs)
    if not _engine_sessions and not _outliving_sessions:
        # A Connect-mode variable inherited from the parent process (a test process reading on
        # the engine) would turn this local session into a remote one that has no URL.
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    builder = SparkSession.builder.appName(app_name)
    # One events file per driver process: drivers of several tasks may run at once.
    lineage = lineage_conf(f"spark-{app_name}-{os.getpid()}.jsonl".replace(" ", "_"))
    if lineage:
        lineage.update(lineage_parent())
    conf = {**session_conf(), **lineage, **(extra_conf or {})}
    # spark.jars set here only matters when no JVM runs yet (tests, python -m); spark-submit
    # already put the same jars on the classpath through --jars.
    conf.setdefault("spark.jars", ",".join(jar_paths()))
    for key, value in conf.items():
        builder = builder.config(key, value)
    return require_commit_store(builder.getOrCreate())


class LazySession:
    """A job's session, built (for a Connect client: connected) on first use.

    A run that finds nothing new from files alone never needs one: on the engine, importing the
    Connect client and opening a session cost a task most of its 0.7 CPU-s with nothing to do.
    Anything asked of it goes to the session, which is then built once.
    """

    def __init__(self, app_name: str):
        self._app_name = app_name
        self._session: SparkSession | None = None

    @property
    def built(self) -> bool:
        return self._session is not None

    def get(self) -> SparkSession:
        if self._session is None:
            self._session = build_spark_session(self._app_name)
        return self._session

    def __getattr__(self, name: str):
        if name.startswith("__"):  # copy, pickle and the like: not the session's
            raise AttributeError(name)
        return getattr(self.get(), name)


def lazy_session(app_name: str) -> SparkSession:
    """:class:`LazySession` for ``app_name``, typed as the session it stands for."""
    return LazySession(app_name)  # type: ignore[return-value]


def require_commit_store(spark: SparkSession) -> SparkSession:
    """``spark``, once it is known to commit to an S3 lakehouse through the conditional-put store
    (ConfigError with the fix otherwise): a session without it can lose other writers' commits."""
    from lakehouse import object_storage

    log_store = spark.conf.get(object_storage.LOG_STORE_KEY, None)
    if problem := object_storage.commit_store_problem(log_store):
        raise ConfigError(problem)
    return spark


def _engine_session(
    app_name: str, extra_conf: dict[str, str] | None, outlives_jobs: bool
) -> SparkSession:
    if not outlives_jobs and app_name in _engine_sessions:
        # The job's own session again (its expectations' checks): its settings (code generation) hold.
        spark = _engine_sessions[app_name]
        for key, value in (extra_conf or {}).items():
            if key.startswith(SESSION_CONF_PREFIXES):
                spark.conf.set(key, value)
        return spark
    settings = engine_settings()
    problem = check_engine(settings.url, timeout_s=3, query=False)
    if problem:
        raise ConfigError(
            f"The Spark engine at {settings.display_url} does not answer ({problem}): start it with "
            "`make engine-up`, or run the job with its own driver (LAKEHOUSE_ENGINE=local, or spark-submit)."
        )
    if outlives_jobs:  # the process stays in Connect mode after its jobs' sessions end
        os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
        _connect_mode_before[:] = [True] * len(_connect_mode_before)
        _outliving_sessions.append(app_name)
    elif not _engine_sessions:
        _connect_mode_before.append("SPARK_CONNECT_MODE_ENABLED" in os.environ)
    spark = (
        SparkSession.builder.remote(settings.url)
        .config("spark.sql.session.timeZone", "UTC")
        .create()
    )
    for key, value in {**DEFAULT_CONF, **(extra_conf or {})}.items():
        if key.startswith(SESSION_CONF_PREFIXES):
            spark.conf.set(key, value)
    # Shown in the engine's log and Spark UI beside each query and job of this session.
    spark.addTag(f"lakehouse-{app_name}".replace(".", "-").replace("_", "-"))
    parent = lineage_parent()
    if parent:  # the job's Airflow task, for the engine's OpenLineage runs (lineage_conf)
        spark.addTag(lineage_parent_tag(parent))
    if not outlives_jobs:
        _engine_sessions[app_name] = spark
    return require_commit_store(spark)


# Spark compiles Java for each query plan's projections, filters and fused stages (Janino, then
# the JIT compiles each new class again) and keeps only the last 100 classes. A small run's
# queries are many and their rows few: on the warm engine a third of a small hour's CPU went to
# compiling, and interpreted the hour took about 0.7x the CPU; at 1M events interpreted took
# 1.6-2x (BENCHMARKS.md §14). So a job that reads less than this is interpreted.
GENERATED_CODE_FROM_BYTES = 16 * 1024 * 1024


def fit_code_generation(
    spark: SparkSession, input_bytes: int | None, new_only: bool = False
) -> str:
    """Interpret the session's queries when their input is small (``input_bytes``, None: unknown)
    and compile them otherwise; what was chosen, for the job's log. Set before a streaming query
    starts, it holds for its micro-batches too. ``new_only``: the figure is what is new upstream
    (an incremental run), not a bound on everything read."""
    interpreted = input_bytes is not None and input_bytes < GENERATED_CODE_FROM_BYTES
    spark.conf.set("spark.sql.codegen.wholeStage", "false" if interpreted else "true")
    spark.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN" if interpreted else "FALLBACK")
    mib = None if input_bytes is None else f"{input_bytes / 1024**2:.1f} MiB"
    size = (
        "of unknown size"
        if mib is None
        else f"{mib} new upstream (and the periods it touches)"
        if new_only
        else f"at most {mib}"
    )
    return f"input {size}: queries {'interpreted' if interpreted else 'compiled'}"


def release_engine_sessions() -> None:
    """End the engine sessions this process opened (a job's last step; a no-op for local sessions)."""
    while _engine_sessions:
        _, session = _engine_sessions.popitem()
        try:
            session.stop()
        except Exception:
            pass
    if _connect_mode_before and not _connect_mode_before.pop():
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


def _grpc_problem(address: str, timeout_s: float) -> str | None:
    """None when a gRPC server at ``address`` answers a call within ``timeout_s``.

    The call is to a method no Spark Connect server has: any status the server sends back
    (UNIMPLEMENTED, or UNAUTHENTICATED without the token) proves it answers. A plain call, not
    ``channel_ready_future``: watching a channel's state starts a thread that polls every 0.2 s and
    ``close()`` waits for it, 0.2 s of every task's start.
    """
    import grpc  # pyspark's Connect client needs it: always installed

    with grpc.insecure_channel(address) as channel:
        try:
            channel.unary_unary("/lakehouse.Probe/Answer")(
                b"", timeout=timeout_s, wait_for_ready=True
            )
        except grpc.RpcError as error:
            if error.code() in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
                return (
                    f"{address} listens but its gRPC server did not answer within {timeout_s:.0f} s"
                )
    return None


def check_engine(url: str, timeout_s: float = 10, query: bool = True) -> str | None:
    """None when the Spark Connect server at ``url`` answers a query within ``timeout_s``, else why not.

    ``query`` False: only that its gRPC server answers (an HTTP/2 handshake, a fraction of a second
    where a session and a query cost seconds: what a task checks before it starts).
    A port that does not listen is reported at once; the client's own retries would wait minutes.
    """
    parsed = urlparse(url.replace("sc://", "http://", 1).split(";")[0])
    host, port = parsed.hostname or "localhost", parsed.port or 15002
    try:
        socket.create_connection((host, port), timeout=min(timeout_s, 3)).close()
    except OSError as error:
        return f"nothing listens on {host}:{port}: {error.strerror or error}"
    if not query:
        return _grpc_problem(f"{host}:{port}", timeout_s)
    outcome: list[str | None] = []

    def probe() -> None:
        connect_mode_before = "SPARK_CONNECT_MODE_ENABLED" in os.environ
        try:
            session = SparkSession.builder.remote(url).create()
            try:
                session.range(1).collect()
            finally:
                session.stop()
                if not connect_mode_before:
                    os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
            outcome.append(None)
        except Exception as error:
            outcome.append(str(error).splitlines()[0][:300] if str(error) else type(error).__name__)

    worker = threading.Thread(target=probe, daemon=True)
    worker.start()
    worker.join(timeout_s)
    if not outcome:
        return f"no answer within {timeout_s:.0f} s"
    return outcome[0]


# Short-lived drivers (an hourly availableNow run, a fault-injection rerun) spend most of their CPU
# compiling and loading classes, not on data. C1-only JIT and a class-data-sharing archive of the
# classes such a run loads (`make driver-cds`, see lakehouse_tools.jvm_warmup) halve their CPU time
# (BENCHMARKS.md). Not for long backfills: C2 pays off once a JVM runs for minutes.
FAST_START_JAVA_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def driver_cds_archive() -> Path:
    """Where ``make driver-cds`` writes the driver's class-data-sharing archive (beside the jars)."""
    return jars_dir() / "spark-driver.jsa"


def fast_start_java_options() -> str:
    """The driver JVM options of a short run; the archive only if it was built (else it is skipped)."""
    options = list(FAST_START_JAVA_OPTIONS)
    archive = driver_cds_archive()
    if archive.is_file():
        # -Xshare:auto (the default) ignores an archive that no longer matches the JDK or classpath.
        options.append(f"-XX:SharedArchiveFile={archive}")
    return " ".join(options)
