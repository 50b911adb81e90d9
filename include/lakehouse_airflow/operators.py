"""The Airflow task that runs a job: as a client of the warm engine, or by spark-submit.

Which one is the Spark connection's business (``spark_lakehouse``), decided when the task runs,
so the DAG's shape never depends on it:

* ``spark_connect`` (the project's default): the job runs in the task's own process as a thin
  Spark Connect client of the engine (``make engine-up``); what the job logs, and its summary
  (the task's return value, an XCom), are the task's.
* ``spark``: ``spark-submit jobs/<job>.py`` with the connection's master (``local[2]``, a
  standalone cluster), as before the engine existed. ``jobs/run.py`` hands its summary back in a
  JSON file the operator names (``$LAKEHOUSE_SUMMARY_FILE``) and reads once the driver has ended,
  so both kinds annotate the same asset events.

Either way a task emits an asset event only for the tables its run wrote, with one partition per
event hour written (:mod:`lakehouse_airflow.assets`).

With lineage on (``LAKEHOUSE_LINEAGE=1``, docs/lineage.md) the task hands its OpenLineage identity
(the Airflow provider's ``spark.openlineage.parent*``/``rootParent*`` keys) to spark-submit as
``--conf``: the driver's application run is the task's child. On the engine the job's Connect
sessions carry the same keys as a tag (``$LAKEHOUSE_LINEAGE_PARENT``, :mod:`lakehouse.spark`): each
of its query runs is the task's child. Either way the task's own OpenLineage events carry its inputs
and outputs (:meth:`SparkJobOperator.get_openlineage_facets_on_complete`).

Nothing here imports Spark until a task runs (DAG files import this module at parse time).
"""

from __future__ import annotations

import ast
import gc
import importlib
import json
import os
import tempfile
import time
from collections.abc import Sequence
from functools import cache
from typing import Any

from airflow.sdk import BaseOperator

from lakehouse.catalog import ExpectationFailed, TableSpec
from lakehouse.errors import ConfigError
from lakehouse_airflow import assets
from lakehouse_airflow.macros import JOBS_DIR, SPARK_CONN_ID, jars_arg, job_path, py_files_arg
from lakehouse_airflow.summaries import summary_lines

CONNECT = "spark_connect"
# Where jobs/run.py writes its summary when spark-submit runs it (a client-mode driver: this machine).
SUMMARY_FILE_ENV = "LAKEHOUSE_SUMMARY_FILE"
# The title of the task log's group that holds the job's progress lines.
# A spark-submit driver's log4j settings (warnings, and progress, without times of their own).
DRIVER_LOG_CONFIG = os.path.join(os.path.dirname(__file__), "driver-log4j2.properties")
LOG_TIMES_ENV = "LAKEHOUSE_LOG_TIMES"

PROGRESS_GROUP = "progress (a line per micro-batch: rows, seconds)"


@cache
def job_mains() -> dict[str, str]:
    """Each job file of ``jobs/`` and the function it runs (``module:main``), read from its
    ``from lakehouse.<module> import main`` line: the engine calls that function in the task's
    process, spark-submit runs the file. Parsed, not imported (no Spark at DAG parse time)."""
    mains = {}
    for path in sorted(JOBS_DIR.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and any(a.name == "main" for a in node.names):
                mains[path.stem] = f"{node.module}:main"
    return mains


def spark_connection(conn_id: str = SPARK_CONN_ID):
    from airflow.sdk import BaseHook

    return BaseHook.get_connection(conn_id)


def engine_url(conn_id: str = SPARK_CONN_ID) -> str:
    """The Spark Connect URL of a ``spark_connect`` connection (its password is the token)."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    return SparkConnectHook(conn_id).get_connection_url()


def spark_problems(conn_id: str = SPARK_CONN_ID) -> list[str]:
    """What stops the Spark tasks: no connection, an engine that does not answer, a wrong master."""
    from lakehouse_airflow.preflight import master_problems

    try:
        connection = spark_connection(conn_id)
    except Exception:
        return [
            f"No Airflow connection {conn_id!r}: set AIRFLOW_CONN_{conn_id.upper()} (the Makefile's default: "
            '{"conn_type": "spark_connect", "host": "localhost", "port": 15002, "password": <token>}; or '
            '{"conn_type": "spark", "host": "local[2]"} for spark-submit; the JSON form).'
        ]
    if connection.conn_type == CONNECT:
        from lakehouse.config import EngineSettings
        from lakehouse.spark import check_engine

        url = engine_url(conn_id)
        # A handshake, not a query: a session and a query would cost the run seconds every hour.
        problem = check_engine(url, timeout_s=15, query=False)
        if problem:
            shown = EngineSettings(port=0, token=None, url=url).display_url
            return [
                f"The Spark engine at {shown} (connection {conn_id!r}) does not answer: {problem}. "
                "Start it with `make engine-up` (its log: .local/engine/engine.log)."
            ]
        return []
    try:
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        master = SparkSubmitHook(conn_id=conn_id)._connection["master"]
    except Exception:
        master = None
    return master_problems(master)


def lineage_dataset(path: str) -> tuple[str, str]:
    """A storage path as an OpenLineage dataset's (namespace, name), as Spark's listener names it:
    ``file`` and the absolute path, or ``s3://bucket`` and the key."""
    from urllib.parse import urlparse

    parsed = urlparse(path)
    if parsed.scheme in ("s3", "s3a", "s3n"):
        return f"s3://{parsed.netloc}", parsed.path.lstrip("/")
    return "file", os.path.abspath(parsed.path if parsed.scheme == "file" else path)


def lineage_parent(context) -> dict[str, str]:
    """The task instance as Spark's OpenLineage parent (and its DAG run as root), as the OpenLineage
    provider gives its own Spark operators; {} when lineage is off or the provider is missing."""
    from lakehouse.spark import lineage_enabled

    if not lineage_enabled():
        return {}
    try:
        from airflow.providers.openlineage.utils.spark import (
            inject_parent_job_information_into_spark_properties,
        )
    except ImportError:
        return {}
    return {
        key: str(value)
        for key, value in inject_parent_job_information_into_spark_properties({}, context).items()
    }


class SparkJobOperator(BaseOperator):
    """Run ``jobs/<job>.py`` with ``application_args`` (templated) on the connection's kind of Spark."""

    template_fields: Sequence[str] = ("application_args",)
    ui_color = "#e8f1fb"

    def __init__(
        self, *, job: str, application_args: list[str], conn_id: str = SPARK_CONN_ID, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        if job not in job_mains():
            raise ValueError(f"unknown job {job!r}: one of {', '.join(job_mains())}")
        self.job, self.application_args, self.conn_id = job, application_args, conn_id

    def execute(self, context) -> Any:
        started = time.monotonic()
        # The job's own lines (a line per micro-batch as it finishes, with rows and seconds) go in a
        # group of the log, open while the task runs; the UI folds it, as it folds Airflow's "Pre
        # Execute" group, so a finished task's log leads with the project's summary below it.
        on_engine = spark_connection(self.conn_id).conn_type == CONNECT
        self.log.info("::group::%s: %s", self.task_id, PROGRESS_GROUP)
        try:
            if on_engine:
                summary = self.run_on_engine(lineage_parent(context))
            else:
                summary = self.spark_submit(lineage_parent(context))
        finally:
            self.log.info("::endgroup::")
        if summary is None and not on_engine:
            # No summary came back (a job other than run.py, or a driver on another machine):
            # every outlet gets its event, without partitions.
            return None
        written = self.written(summary)
        self._lineage_written = sorted(written)
        for line in summary_lines(self.task_id, summary, written, time.monotonic() - started):
            self.log.info("%s", line)
        self.keep_written_outlets(context, written)
        return summary

    def get_openlineage_facets_on_complete(self, task_instance):
        """The task's own OpenLineage inputs and outputs: none for a job that is not a table's
        (:class:`TableJobOperator` names its tables)."""
        from airflow.providers.openlineage.extractors import OperatorLineage

        return OperatorLineage()

    def written(self, summary: Any) -> dict[str, dict]:
        """The tables this run wrote, each with its asset event's extra (:mod:`lakehouse_airflow.assets`)."""
        if self.job == "maintenance":
            return assets.maintenance_written(summary)
        return {}

    def keep_written_outlets(self, context, written: dict[str, dict]) -> None:
        """Only the tables this run wrote keep their outlet (so get an event), each with rows and event hours.

        Airflow builds a succeeding task's asset events from its outlets at that moment (the task
        runner's ``ti.task.outlets``), so the tables left out get none; the DAG still declares them all.
        Each gets one event, its periods in the extra; a table a DAG is scheduled on by its
        partitions (:func:`assets.partitioned`) one event per period instead, its partition key
        (``add_partitions``: an hour, or a day of a day table).
        """
        kept = [outlet for outlet in self.outlets if getattr(outlet, "name", None) in written]
        for outlet in kept:
            events = context["outlet_events"][outlet]
            events.extra = written[outlet.name]
            extra = written[outlet.name]
            if extra.get("periods") and assets.partitioned(outlet.name):
                events.add_partitions(assets.partition_keys(extra["periods"], extra.get("grain")))
        left = [o.name for o in self.outlets if o not in kept]
        if left:
            self.log.info("No asset event for %s: this run wrote nothing there", ", ".join(left))
        self.outlets = kept

    def run_on_engine(self, parent: dict[str, str] | None = None) -> Any:
        from lakehouse.spark import LINEAGE_PARENT_ENV, release_engine_sessions

        os.environ["LAKEHOUSE_ENGINE"] = "connect"
        os.environ["LAKEHOUSE_ENGINE_URL"] = engine_url(self.conn_id)
        # The Airflow task as its Spark sessions' tag: the engine's query runs' parent.
        if parent:
            os.environ[LINEAGE_PARENT_ENV] = json.dumps(parent)
        else:
            os.environ.pop(LINEAGE_PARENT_ENV, None)
        module, function = job_mains()[self.job].split(":")
        main = getattr(importlib.import_module(module), function)
        try:
            return main(list(self.application_args))
        except (ExpectationFailed, ConfigError) as refused:
            from airflow.sdk.exceptions import AirflowFailException

            from lakehouse.runtime.locks import CheckpointBusy

            if isinstance(refused, CheckpointBusy):  # another try still runs the query: retry later
                raise

            # A retry would find the hour failing again (lakehouse.expectations), or the same setting
            # wrong: fail at once, with the message alone (its traceback says nothing more to a user).
            raise AirflowFailException(str(refused)) from None
        finally:
            release_engine_sessions()
            os.environ.pop(LINEAGE_PARENT_ENV, None)
            # This process now holds Airflow's, pyspark's and pandas' objects until it ends: the
            # cyclic GC would walk them all again at each full collection and at the interpreter's
            # exit (2 s of a small `dags test` run's 23 s, and CPU in every task's process). Frozen,
            # they are left out of both.
            gc.freeze()

    def short_run(self) -> bool:
        """Is this a run of seconds (a driver that starts fast beats one that compiles well)?"""
        return False

    def driver_java_options(self) -> str:
        """A spark-submit driver's JVM options: fast start for a short run, the long-run options
        (with the class-data archive that ``make setup`` builds) otherwise; its log without times."""
        from lakehouse.spark import (
            LONG_RUN_JAVA_OPTIONS,
            driver_cds_archive,
            fast_start_java_options,
        )

        if self.short_run():
            options = fast_start_java_options()
        else:
            archive = driver_cds_archive()
            options = LONG_RUN_JAVA_OPTIONS + (
                f" -XX:SharedArchiveFile={archive}" if archive.is_file() else ""
            )
        return f"{options} -Dlog4j2.configurationFile={DRIVER_LOG_CONFIG}"

    def spark_submit(self, parent: dict[str, str] | None = None) -> Any:
        """spark-submit the job; its summary (what ``jobs/run.py`` wrote to the summary file), or None."""
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        with tempfile.TemporaryDirectory(prefix="lakehouse-summary-") as folder:
            summary_file = os.path.join(folder, "summary.json")
            hook = SparkSubmitHook(
                conn_id=self.conn_id,
                # the Airflow task as the driver's parent run; the driver JVM's options
                conf={
                    **(parent or {}),
                    "spark.driver.extraJavaOptions": self.driver_java_options(),
                },
                jars=jars_arg(),
                py_files=py_files_arg() or None,
                name=self.task_id,
                application_args=list(self.application_args),
                # The task's logger stamps each line of the driver's output: the job's lines carry no time of their own.
                env_vars={
                    "LAKEHOUSE_ENGINE": "local",
                    SUMMARY_FILE_ENV: summary_file,
                    LOG_TIMES_ENV: "0",
                },
            )
            hook.submit(job_path(self.job))
            if not os.path.exists(summary_file):
                if self.job == "run":
                    self.log.warning(
                        "The driver wrote no summary to %s (a driver on another machine?): "
                        "every outlet gets an event, without event hours",
                        summary_file,
                    )
                return None
            with open(summary_file, encoding="utf-8") as handed_back:
                return json.load(handed_back)


class TableJobOperator(SparkJobOperator):
    """Run ``table``'s query (``jobs/run.py <task>``): its run parameters are templated fields
    (``mode``, ``start``, ``end``; the source's for a source-fed table) that render the job's
    arguments; its outlets are the tables it may write, its inlets the tables it reads."""

    template_fields: Sequence[str] = (
        "lakehouse_root",
        "mode",
        "start",
        "end",
        "source",
        "kafka_bootstrap_servers",
        "kafka_topic",
    )

    def __init__(
        self,
        *,
        table: TableSpec,
        lakehouse_root: str = "{{ lakehouse_root() }}",
        mode: str = "incremental",
        start: str = "",
        end: str = "",
        source: str = "",
        kafka_bootstrap_servers: str = "",
        kafka_topic: str = "",
        **kwargs: Any,
    ) -> None:
        from lakehouse import catalog

        kwargs.setdefault("task_id", table.task)
        kwargs.setdefault("outlets", [assets.asset(t) for t in assets.task_tables(table)])
        kwargs.setdefault("inlets", [assets.asset(catalog.get(name)) for name in table.upstream])
        super().__init__(job="run", application_args=[], **kwargs)
        self.table = table
        self.lakehouse_root, self.mode, self.start, self.end = lakehouse_root, mode, start, end
        self.source, self.kafka_topic = source, kafka_topic
        self.kafka_bootstrap_servers = kafka_bootstrap_servers

    def job_argv(self) -> list[str]:
        """The job's arguments from the rendered fields: the interval only for a table with a batch
        form, the source's only for a source-fed stream; an empty field is left out."""
        batch, fed = self.table.batch, bool(self.table.source and self.table.streamed)
        given = {
            "--lakehouse-root": self.lakehouse_root,
            "--mode": self.mode if batch else "",
            "--start": self.start if batch else "",
            "--end": self.end if batch else "",
            "--source": self.source if fed else "",
            "--kafka-bootstrap-servers": self.kafka_bootstrap_servers if fed else "",
            "--kafka-topic": self.kafka_topic if fed else "",
        }
        options = [part for flag, value in given.items() if value for part in (flag, value)]
        return [self.table.task, *options]

    def short_run(self) -> bool:
        """An incremental run, or a batch over a day at most (a backfill's run owns an hour)."""
        if self.mode != "batch" or not (self.start and self.end):
            return True
        from lakehouse.periods import Periods, parse_instant

        return len(Periods.between(parse_instant(self.start), parse_instant(self.end))) <= 24

    def execute(self, context) -> Any:
        self.application_args = self.job_argv()
        return super().execute(context)

    def written(self, summary: Any) -> dict[str, dict]:
        return assets.written(self.table, summary)

    def get_openlineage_facets_on_complete(self, task_instance):
        """The task's own OpenLineage inputs and outputs (the Airflow provider asks once the task
        has succeeded): its upstream tables (or its landing source) and the tables its run wrote,
        named by storage path as Spark's listener names them (:func:`lineage_dataset`)."""
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import Dataset

        from lakehouse.config import Lakehouse

        lakehouse = Lakehouse.from_env(self.lakehouse_root or None)
        inputs = [lakehouse.table(name).path for name in self.table.upstream]
        if self.table.source:
            inputs.append(lakehouse.landing(self.table.source))
        outputs = [lakehouse.table(name).path for name in getattr(self, "_lineage_written", [])]
        return OperatorLineage(
            inputs=[Dataset(*lineage_dataset(path)) for path in inputs],
            outputs=[Dataset(*lineage_dataset(path)) for path in outputs],
        )
