"""Tables by name: the metastore every driver registers the catalog's tables in.

Spark's Hive metastore, its database kept by a Derby network server of this clone (``make
metastore-up``, :mod:`lakehouse_tools.metastore_server`, on 127.0.0.1:``$LAKEHOUSE_METASTORE_PORT``,
default 15270). Embedded Derby would let one JVM alone open the database, and the warm engine, the
spark-submit tasks (several at once) and the tests' drivers all need it; the server lets each
connect. Each lakehouse root has a metastore database of its own (``.local/metastore/databases/``,
made from a template the first time a driver of that root starts), so the many lakehouses of the
tests never share a name.

A driver's metastore is its ``$LAKEHOUSE_ROOT``'s (the engine's: the root it was started with). A
job registers the tables of its lakehouse as external Delta tables at their paths (databases per
layer: ``gold.campaign_hourly``) after it writes (:func:`register`, from :mod:`lakehouse.runner`),
only when its lakehouse is its session's metastore's: a test's job on an engine started for another
root writes nothing there. ``LAKEHOUSE_METASTORE=none`` turns it off (Spark's in-memory catalog,
tables by path only).

The database files are local to this machine (``.local/``): a deployment on several machines
points ``spark.hadoop.javax.jdo.option.*`` at a shared server instead (the Postgres of the
cluster setup can hold it), see docs/engine.md.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

from lakehouse import catalog, delta_log
from lakehouse.errors import ConfigError

PROJECT_DIR = Path(__file__).resolve().parents[2]
DEFAULT_PORT = 15270
# The conf key that names a session's metastore's lakehouse: jobs compare it with their own root.
ROOT_KEY = "spark.lakehouse.metastore.root"
# derbyclient, in .jars/ (make jars); not org.apache.derby.jdbc.ClientDriver: pyspark ships that name
# in derbytools, on the JVM's own class path, where the client it extends (in spark.jars) is out of sight.
CLIENT_DRIVER = "org.apache.derby.client.ClientAutoloadedDriver"
EMBEDDED_DRIVER = "org.apache.derby.jdbc.EmbeddedDriver"  # pyspark's derbytools: the template only


@dataclass(frozen=True)
class MetastoreSettings:
    """Where the metastore server listens and keeps its databases."""

    port: int
    state_dir: Path  # the server's derby.system.home: its log, the template, one database per root

    @property
    def template(self) -> Path:
        """A metastore database with Hive's schema and nothing else, copied for each new root."""
        return self.state_dir / "template"

    def database(self, root: str) -> Path:
        """The metastore database of the lakehouse at ``root``."""
        digest = hashlib.sha1(root.encode()).hexdigest()[:16]
        return self.state_dir / "databases" / digest

    def url(self, database: Path) -> str:
        return f"jdbc:derby://127.0.0.1:{self.port}/{database}"


def settings() -> MetastoreSettings:
    """``$LAKEHOUSE_METASTORE_PORT`` (default 15270) and ``$LAKEHOUSE_METASTORE_DIR`` (default .local/metastore)."""
    port = os.environ.get("LAKEHOUSE_METASTORE_PORT") or str(DEFAULT_PORT)
    if not port.isdigit():
        raise ConfigError(f"LAKEHOUSE_METASTORE_PORT={port!r}: give a port number, e.g. 15270.")
    state = os.environ.get("LAKEHOUSE_METASTORE_DIR") or PROJECT_DIR / ".local" / "metastore"
    return MetastoreSettings(port=int(port), state_dir=Path(state).absolute())


def enabled() -> bool:
    """False when ``$LAKEHOUSE_METASTORE`` is ``none``: no metastore, tables by path only."""
    value = os.environ.get("LAKEHOUSE_METASTORE", "derby")
    if value not in ("derby", "none"):
        raise ConfigError(f"LAKEHOUSE_METASTORE={value!r}: use derby (the default) or none.")
    return value == "derby"


def hive_client_jars() -> str:
    """The jars of Hive's metastore client: pyspark's and Derby's network client (``make jars``)."""
    import pyspark

    from lakehouse.config import jar_paths

    client = [path for path in jar_paths() if Path(path).name.startswith("derbyclient-")]
    if not client:
        raise ConfigError("No Derby client jar (derbyclient) in the jars folder: run `make jars`.")
    # Under spark-submit, pyspark is imported from $SPARK_HOME/python/lib/pyspark.zip.
    spark_home = os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent
    return ",".join([f"file://{spark_home}/jars/*.jar", f"file://{client[0]}"])


def hive_conf(url: str, warehouse: Path) -> dict[str, str]:
    """Spark's settings for a Hive metastore in the Derby database at JDBC ``url``."""
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": url,
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": (
            CLIENT_DRIVER if url.startswith("jdbc:derby://") else EMBEDDED_DRIVER
        ),
        # Hive's client in a class loader of its own, from pyspark's jars and Derby's client: the
        # client comes with spark.jars (--jars), which the JVM's class path cannot see, and a JDBC
        # driver must be loaded beside the pool that opens it (DriverManager checks the caller's loader).
        "spark.sql.hive.metastore.jars": "path",
        "spark.sql.hive.metastore.jars.path": hive_client_jars(),
        # The template has Hive's schema; these only matter if a newer Hive needs a table more.
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        # Managed tables (none of the catalog's; a user's CREATE TABLE without LOCATION) land here.
        "spark.sql.warehouse.dir": str(warehouse),
    }


def problem(metastore: MetastoreSettings | None = None) -> str | None:
    """None when the metastore server answers, else what is wrong and what to do."""
    metastore = metastore or settings()
    try:
        socket.create_connection(("127.0.0.1", metastore.port), timeout=2).close()
    except OSError as error:
        return (
            f"The table-name metastore (Derby network server) does not answer on 127.0.0.1:"
            f"{metastore.port} ({error.strerror or error}): start it with `make metastore-up`, "
            "or set LAKEHOUSE_METASTORE=none to run without table names."
        )
    if not metastore.template.is_dir():
        return f"No metastore template at {metastore.template}: run `make metastore-up`."
    return None


def ensure_database(root: str, metastore: MetastoreSettings | None = None) -> Path:
    """The metastore database of ``root``, copied from the template if it is new.

    The copy is made here, before any JVM connects: two drivers that created Hive's schema in one
    new database at once would fail each other. A local operation on this clone's ``.local/``.
    """
    metastore = metastore or settings()
    database = metastore.database(root)
    if database.is_dir():
        return database
    database.parent.mkdir(parents=True, exist_ok=True)
    with open(database.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not database.is_dir():
            partial = database.with_name(f".{database.name}.tmp")
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(metastore.template, partial)
            (database.parent / f"{database.name}.root").write_text(root + "\n")
            registered_file(root, metastore).unlink(missing_ok=True)  # a new database has no names
            partial.rename(database)
    return database


def spark_conf() -> dict[str, str]:
    """Settings a driver needs to find its lakehouse's metastore (``$LAKEHOUSE_ROOT``'s).

    None without a root or with ``LAKEHOUSE_METASTORE=none``; a server that does not answer fails
    here, before the JVM starts, with what to do.
    """
    root = os.environ.get("LAKEHOUSE_ROOT")
    if not root or not enabled():
        return {}
    from lakehouse.config import Lakehouse

    root = Lakehouse.from_env(root).root
    metastore = settings()
    found = problem(metastore)
    if found:
        raise ConfigError(found)
    database = ensure_database(root, metastore)
    return {
        **hive_conf(metastore.url(database), metastore.state_dir / "warehouse"),
        ROOT_KEY: root,
    }


def metastore_root(spark) -> str | None:
    """The lakehouse root whose metastore ``spark`` (a local or engine session) uses, if any."""
    try:
        return spark.conf.get(ROOT_KEY, None) or None
    except Exception:  # a Connect server that never heard of the key
        return None


def registered_file(root: str, metastore: MetastoreSettings | None = None) -> Path:
    """The names registered in ``root``'s metastore database, one per line, kept beside it."""
    return (metastore or settings()).database(root).with_suffix(".registered")


def register(spark, lakehouse) -> list[str]:
    """Register every written catalog table of ``lakehouse`` that the metastore lacks; the names registered.

    Each is an external Delta table at its path (``CREATE TABLE IF NOT EXISTS silver.ad_events
    USING DELTA LOCATION '<path>'``: no commit, the schema stays the Delta log's), in a database
    per layer. A no-op unless ``spark``'s metastore is this lakehouse's. A table re-created at its
    path (a full refresh, a RESTORE, a deleted folder written again) keeps its registration.

    The names registered are noted in :func:`registered_file`, so a run whose tables all have
    names asks the metastore nothing (listing it costs a task about half a CPU-second on the
    engine). A table dropped by hand gets its name back once that file is deleted.
    """
    if not enabled():
        return []
    noted = registered_file(lakehouse.root)
    known = set(noted.read_text().split()) if noted.is_file() else set()
    unnamed = [
        spec
        for spec in catalog.tables()
        if spec.name not in known and delta_log.is_delta_table(lakehouse.table(spec.name).path)
    ]
    if not unnamed or metastore_root(spark) != lakehouse.root:
        return []
    databases = {row[0] for row in spark.sql("SHOW DATABASES").collect()}
    registered = set()
    for layer in sorted({spec.layer for spec in unnamed} & databases):
        registered |= {
            f"{layer}.{row[1]}" for row in spark.sql(f"SHOW TABLES IN {layer}").collect()
        }
    added = []
    for spec in unnamed:
        if spec.name in registered:
            continue
        if spec.layer not in databases:
            spark.sql(
                f"CREATE DATABASE IF NOT EXISTS {spec.layer} "
                f"COMMENT 'the lakehouse at {lakehouse.root}: {spec.layer} layer'"
            )
            databases.add(spec.layer)
        location = lakehouse.table(spec.name).path.replace("\\", "\\\\").replace("'", "\\'")
        spark.sql(f"CREATE TABLE IF NOT EXISTS {spec.name} USING DELTA LOCATION '{location}'")
        added.append(spec.name)
    if not noted.parent.is_dir():  # a metastore directory other than this process's
        return added
    # Tasks running side by side may each rewrite it: a name lost here is only looked up again.
    partial = noted.with_name(f".{noted.name}.{os.getpid()}")
    partial.write_text("".join(f"{name}\n" for name in sorted(known | {s.name for s in unnamed})))
    partial.replace(noted)
    return added
