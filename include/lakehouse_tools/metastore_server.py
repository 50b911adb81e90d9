"""The table-name metastore's server: Derby's network server on 127.0.0.1, one per clone.

Usage (``make metastore-up`` / ``metastore-down`` / ``metastore-status`` run these):
    python -m lakehouse_tools.metastore_server up          # start it unless it answers
    python -m lakehouse_tools.metastore_server down        # stop it (Derby's shutdown, then its process group)
    python -m lakehouse_tools.metastore_server status      # exit 0 when it answers, 1 when not
    python -m lakehouse_tools.metastore_server register    # register $LAKEHOUSE_ROOT's written tables now
    spark-sql $(python -m lakehouse_tools.metastore_server spark-sql-args)   # the tables by name in spark-sql

Its state is ``$LAKEHOUSE_METASTORE_DIR`` (default ``.local/metastore``, Derby's system home): the
server's log ``derby.log``, ``template/`` (a metastore database holding Hive's schema and nothing
else, made once by a local Spark driver on embedded Derby), and ``databases/<hash of the root>``,
one per lakehouse root, copied from the template by the first driver of that root
(:func:`lakehouse.metastore.ensure_database`). ``up`` first deletes the databases of local roots
that no longer exist (the tests' temporary lakehouses): safe then, as no server has them open.

The server is pyspark's own Derby (derby, derbyshared, derbytools) with Derby's network server
(``make metastore-jars``: .jars/metastore/); it accepts connections from 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lakehouse import metastore
from lakehouse.config import Lakehouse, jars_dir
from lakehouse.errors import ConfigError

SERVER_CLASS = "org.apache.derby.drda.NetworkServerControl"
START_TIMEOUT_S = 60
# Derby keeps every database it has opened in memory until it stops; a small page cache per
# database keeps a test session's many lakehouses (each its own database) within the heap.
SERVER_JAVA_OPTIONS = (
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Dderby.storage.pageCacheSize=64",
)


def classpath() -> str:
    """pyspark's Derby jars and the network server's (``make metastore-jars``)."""
    import pyspark

    spark_jars = Path(pyspark.__file__).parent / "jars"
    jars = [
        *sorted(spark_jars.glob("derby-*.jar")),
        *sorted(spark_jars.glob("derbyshared-*.jar")),
        *sorted(spark_jars.glob("derbytools-*.jar")),
        *sorted((jars_dir() / "metastore").glob("derbynet-*.jar")),
    ]
    if not any(j.name.startswith("derbynet") for j in jars):
        raise ConfigError(
            f"No Derby network server jar in {jars_dir() / 'metastore'}: run `make metastore-jars`."
        )
    return os.pathsep.join(map(str, jars))


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found:
        raise ConfigError(
            "No java on PATH (nor JAVA_HOME): Spark's JDK (17 or 21) runs the server."
        )
    return found


def control(*args: str, settings: metastore.MetastoreSettings) -> list[str]:
    return [
        java(),
        *SERVER_JAVA_OPTIONS,
        f"-Dderby.system.home={settings.state_dir}",
        "-cp",
        classpath(),
        SERVER_CLASS,
        *args,
        "-h",
        "127.0.0.1",
        "-p",
        str(settings.port),
    ]


def _pid_file(settings: metastore.MetastoreSettings) -> Path:
    return settings.state_dir / "server.pid"


def _running_group(settings: metastore.MetastoreSettings) -> int | None:
    try:
        pid = int(_pid_file(settings).read_text())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def build_template(settings: metastore.MetastoreSettings) -> None:
    """Make the template database: a local driver on embedded Derby creates Hive's schema (every
    table the jobs' registrations use) and removes what it registered."""
    if settings.template.is_dir():
        return
    partial = settings.state_dir / "template.tmp"
    shutil.rmtree(partial, ignore_errors=True)
    print(f"metastore: creating Hive's schema in {settings.template}", flush=True)
    done = subprocess.run(
        [sys.executable, "-m", "lakehouse_tools.metastore_server", "template", str(partial)],
        env={**os.environ, "LAKEHOUSE_METASTORE": "none"},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 or not partial.is_dir():
        raise ConfigError(f"metastore: the template was not made:\n{done.stderr[-3000:]}")
    partial.rename(settings.template)


def _make_template(target: str) -> None:
    """Run in a process of its own (a JVM that opens the database embedded, alone)."""
    from lakehouse.spark import build_spark_session

    settings = metastore.settings()
    conf = {
        **metastore.hive_conf(
            f"jdbc:derby:;databaseName={target};create=true", settings.state_dir / "warehouse"
        ),
        "spark.master": "local[1]",
        "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": f"-Dderby.stream.error.file={target}.log",
    }
    spark = build_spark_session("metastore-template", conf, engine_kind="local")
    with tempfile.TemporaryDirectory() as scratch:
        spark.sql("CREATE DATABASE lakehouse_template")
        spark.range(1).write.format("delta").save(f"{scratch}/t")
        spark.sql(f"CREATE TABLE lakehouse_template.t USING DELTA LOCATION '{scratch}/t'")
        spark.sql("SHOW TABLES IN lakehouse_template").collect()
        spark.sql("DESCRIBE TABLE EXTENDED lakehouse_template.t").collect()
        spark.sql("DROP TABLE lakehouse_template.t")
        spark.sql("DROP DATABASE lakehouse_template")
    spark.stop()


def prune(settings: metastore.MetastoreSettings) -> int:
    """Delete the databases of local lakehouse roots that no longer exist (server stopped); how many."""
    pruned = 0
    for root_file in sorted((settings.state_dir / "databases").glob("*.root")):
        root = root_file.read_text().strip()
        if "://" in root or Path(root).exists():
            continue
        shutil.rmtree(root_file.with_suffix(""), ignore_errors=True)
        root_file.with_suffix(".registered").unlink(missing_ok=True)
        root_file.unlink()
        pruned += 1
    return pruned


def up(timeout_s: float = START_TIMEOUT_S) -> None:
    settings = metastore.settings()
    if metastore.problem(settings) is None:
        print(f"metastore: already up on 127.0.0.1:{settings.port}")
        return
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    if _running_group(settings) is None:
        command = control("start", "-noSecurityManager", settings=settings)
        if pruned := prune(settings):
            print(f"metastore: deleted the databases of {pruned} lakehouse roots gone")
        build_template(settings)
        log = settings.state_dir / "server.out"
        server = subprocess.Popen(
            command,
            cwd=settings.state_dir,
            start_new_session=True,  # its own process group: `down` stops exactly it
            stdin=subprocess.DEVNULL,
            stdout=open(log, "ab"),
            stderr=subprocess.STDOUT,
        )
        _pid_file(settings).write_text(str(server.pid))
        print(f"metastore: starting (process group {server.pid}, log {log})", flush=True)
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if metastore.problem(settings) is None:
            print(f"metastore: up on 127.0.0.1:{settings.port}, databases in {settings.state_dir}")
            return
        if _running_group(settings) is None:
            break
        time.sleep(0.5)
    sys.exit(
        f"metastore: not answering on 127.0.0.1:{settings.port} after "
        f"{time.monotonic() - started:.0f} s; see {settings.state_dir / 'server.out'}"
    )


def down() -> None:
    settings = metastore.settings()
    group = _running_group(settings)
    if group is None:
        print("metastore: not running")
        return
    # Derby's own shutdown closes every database cleanly; the group is stopped whatever it did.
    subprocess.run(
        control("shutdown", settings=settings), capture_output=True, timeout=60, check=False
    )
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for _ in range(40):
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                _pid_file(settings).unlink(missing_ok=True)
                print(f"metastore: stopped (process group {group})")
                return
            time.sleep(0.5)
        os.killpg(group, signum)


def status() -> None:
    settings = metastore.settings()
    found = metastore.problem(settings)
    if found:
        sys.exit(f"metastore: {found}")
    databases = len(list((settings.state_dir / "databases").glob("*.root")))
    print(
        f"metastore: up on 127.0.0.1:{settings.port} (process group {_running_group(settings)}), "
        f"{databases} lakehouse databases in {settings.state_dir}"
    )


def register_now(root: str | None = None) -> None:
    """Register the written tables of the lakehouse at ``root`` (default ``$LAKEHOUSE_ROOT``)."""
    from lakehouse.spark import build_spark_session, release_engine_sessions

    lakehouse = Lakehouse.from_env(root)
    spark = build_spark_session("metastore_register")
    try:
        session_root = metastore.metastore_root(spark)
        if session_root != lakehouse.root:
            raise ConfigError(
                f"the session's metastore is not the one of {lakehouse.root} but of {session_root}: "
                "run with that LAKEHOUSE_ROOT (`make engine-up` restarts the engine for it)"
            )
        added = metastore.register(spark, lakehouse)
    finally:
        release_engine_sessions()
    print(f"metastore: registered {', '.join(added) or 'nothing new'}")


def spark_sql_args() -> list[str]:
    """spark-sql's arguments for ``$LAKEHOUSE_ROOT``'s tables by name. Its shell opens Hive's client
    without a class loader of its own, so Derby's client goes on the JVM's class path."""
    from lakehouse.config import jar_paths
    from lakehouse.spark import session_conf

    conf = session_conf()
    if metastore.ROOT_KEY not in conf:
        raise ConfigError("no metastore: set LAKEHOUSE_ROOT (and not LAKEHOUSE_METASTORE=none)")
    client = [path for path in jar_paths() if Path(path).name.startswith("derbyclient-")]
    args = ["--jars", ",".join(jar_paths()), "--driver-class-path", client[0]]
    for key, value in conf.items():
        # (and no JVM options: their spaces would not survive the shell's word splitting)
        if key not in (
            "spark.sql.hive.metastore.jars",
            "spark.sql.hive.metastore.jars.path",
            "spark.driver.extraJavaOptions",
        ):
            args += ["--conf", f"{key}={value}"]
    return args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "command", choices=("up", "down", "status", "register", "spark-sql-args", "template")
    )
    parser.add_argument("target", nargs="?", help="template: the database folder to create")
    args = parser.parse_args()
    try:
        if args.command == "template":
            _make_template(args.target)
        elif args.command == "register":
            register_now()
        elif args.command == "spark-sql-args":
            print(" ".join(spark_sql_args()))
        else:
            {"up": up, "down": down, "status": status}[args.command]()
    except ConfigError as error:
        sys.exit(f"metastore: {error}")


if __name__ == "__main__":
    main()
