"""
### YSB hourly lakehouse

Runs the Yahoo! Streaming Benchmark pipeline every hour: the campaign dimension, then
**bronze** (raw landing lines) → **silver** (parsed, validated, deduplicated, enriched; bad lines
quarantined) → **gold** (per-campaign KPIs, among them YSB's views per 10-second window). One task
per query of the catalog (`include/lakehouse/tables`; `gold_aggregates` is one query writing five
tables), in the order their upstream tables give; each task's outlets are the tables it writes as
Assets (`delta://<layer>.<table>`; its ops records in the group `lakehouse_ops`), its inlets the
tables it reads. A task emits an asset event only
for a table its run wrote, with the rows written and the event hours in the event's extra.

Each Spark task is a Structured Streaming query with `trigger(availableNow=True)`: it processes
what arrived since its checkpoint and stops. The same jobs also run in **batch mode** over an
event-time interval, replacing exactly those hours:

* a run created by `airflow backfill create` recomputes the event hour it owns,
  **[logical date − 1h, logical date)**, e.g.
  `airflow backfill create --dag-id ysb_hourly --from-date 2026-11-20T01:00:00+00:00 --to-date 2026-11-20T03:00:00+00:00`
  recomputes event hours 00:00, 01:00 and 02:00;
* a manual run with `mode=batch` recomputes `[start, end)`; over more than 31 days, only with
  `confirm_long_interval` on (preflight otherwise refuses it, with its hours and runs).

**A backfill ignores the Run Parameters** of the Backfill dialog (mode, start, end,
confirm_long_interval, source, full_refresh): each of its runs is a batch run over the hour it owns, as above. Choose the hours
with the dialog's date range; the parameters only matter for a run made with *Trigger*.

Batch runs start at silver (bronze is the raw, replayable log: there is nothing to recompute in
it). A manual run with `full_refresh` = `bronze`, `silver` or `gold` first empties that layer and
the layers computed from it and moves their streaming queries to a new checkpoint generation
(the old checkpoint is kept), so the run rebuilds them from upstream.

Spark: the `spark_lakehouse` connection (`AIRFLOW_CONN_SPARK_LAKEHOUSE`, JSON form). A `spark_connect`
connection (the default) runs each task as a thin client of the warm engine (`make engine-up`); a
`spark` connection (master `local[2]` or `spark://HOST:7077`) runs each task by spark-submit.
"""

from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Param, TriggerRule, task

from lakehouse import catalog
from lakehouse.kafka_settings import DEFAULT_TOPIC, SOURCES
from lakehouse_airflow.macros import LONG_INTERVAL, MACROS
from lakehouse_airflow.operators import SparkJobOperator, TableJobOperator

# Every table task's run parameters, rendered when it runs; the operator passes a table the ones
# its job takes (the interval to a table with a batch form, the source's to bronze). The brokers
# come from the kafka_lakehouse connection, looked up only when source=kafka (else the job falls
# back to $KAFKA_BOOTSTRAP_SERVERS).
RUN_PARAMETERS = {
    "mode": "{{ lakehouse_mode(dag_run, params, logical_date) }}",
    "start": "{{ lakehouse_start(dag_run, params, logical_date) }}",
    "end": "{{ lakehouse_end(dag_run, params, logical_date) }}",
    "source": "{{ params.source }}",
    "kafka_bootstrap_servers": "{{ lakehouse_kafka_bootstrap_servers(params, conn) }}",
    "kafka_topic": "{{ params.kafka_topic }}",
}

# The shape of start and end, checked by Airflow when a run is created (the trigger form and the
# REST API answer 400, and no run exists): a whole hour in UTC, as typed (2026-11-20T13:00Z) or as
# the form's date picker sends it (2026-11-20T13:00:00.000Z). Its title is what the refusal shows
# beside the pattern. `format: date-time` alone checks nothing here: jsonschema checks it only with
# rfc3339-validator installed, and RFC 3339 would refuse the 13:00Z form the docs use.
WHOLE_HOUR = {
    "title": "a whole hour in UTC, e.g. 2026-11-20T13:00Z",
    "pattern": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:00(:00(\.000)?)?(Z|[+-][0-9]{2}:00)?$",
}


with DAG(
    dag_id="ysb_hourly",
    schedule="@hourly",
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": pendulum.duration(minutes=1)},
    user_defined_macros=MACROS,
    doc_md=__doc__,
    tags=["ysb", "lakehouse"],
    params={
        # Backfills ignore every param (see the DAG's docs); the descriptions say so, as the
        # Backfill dialog shows them under "Run Parameters".
        "mode": Param(
            "incremental",
            enum=["incremental", "batch"],
            title="Mode",
            description="incremental: process what arrived since the last run. batch: recompute the "
            "event hours [start, end) from silver on. A backfill is always batch over the hour each "
            "of its runs owns, whatever this says.",
        ),
        # start and end: their shape is checked when the run is created (WHOLE_HOUR); what one
        # param cannot see (a reversed range, mode=batch without them, an interval longer than
        # 31 days unconfirmed) is refused by the preflight task, in a sentence.
        "start": Param(
            None,
            type=["null", "string"],
            format="date-time",
            allOf=[WHOLE_HOUR],
            title="Start (batch mode)",
            description="First event hour to recompute, a whole hour in UTC (ISO-8601), e.g. "
            "2026-11-20T13:00Z. Only for mode=batch; ignored by backfills.",
        ),
        "end": Param(
            None,
            type=["null", "string"],
            format="date-time",
            allOf=[WHOLE_HOUR],
            title="End (batch mode)",
            description="End of the interval, exclusive, a whole hour in UTC, e.g. 2026-11-20T16:00Z "
            "recomputes 13:00, 14:00 and 15:00. Only for mode=batch; ignored by backfills.",
        ),
        "confirm_long_interval": Param(
            False,
            type="boolean",
            title="Confirm a long interval (batch mode)",
            description=f"mode=batch over more than {LONG_INTERVAL.days} days runs only with this "
            "on; without it, preflight refuses the run and says how many hours it would recompute. "
            "Ignored by backfills (each of their runs is one hour).",
        ),
        "source": Param(
            "files",
            enum=list(SOURCES),
            title="Bronze's source",
            description="files: the landing folder. kafka: the topic below (brokers: connection "
            "kafka_lakehouse). Incremental runs only: batch runs and backfills start at silver.",
        ),
        "kafka_topic": Param(
            DEFAULT_TOPIC,
            type="string",
            title="Kafka topic",
            description="With source=kafka: the topic bronze reads.",
        ),
        "full_refresh": Param(
            "none",
            enum=["none", "bronze", "silver", "gold"],
            title="Full refresh",
            description="Rebuild this layer and the ones computed from it from upstream (new "
            "checkpoints), then run incrementally. Manual incremental runs only; ignored by backfills.",
        ),
    },
) as dag:

    @task(retries=0)
    def preflight(params=None, dag_run=None, logical_date=None, conn=None) -> None:
        """Fail before any JVM starts if the connection, landing zone, jars or params are wrong.

        Every problem found here needs a person (a setting, a parameter, data to generate), so the
        task fails at once (no retries) instead of retrying. Each problem is one error line of the
        log; a run that can go logs what it will do (a batch run: its hours).
        """
        import logging

        from lakehouse_airflow.operators import spark_problems
        from lakehouse_airflow.preflight import preflight as check
        from lakehouse_airflow.preflight import run_plan, source_problems, stale_note

        log = logging.getLogger("airflow.task")
        problems = (
            spark_problems()
            + check(dict(params), dag_run.run_type, logical_date)
            + source_problems(params, conn)
        )
        if problems:
            for problem in problems:
                log.error("Preflight refused the run: %s", problem)
            # SystemExit, not AirflowFailException: Airflow's task runner logs every exception it
            # fails a task with under its traceback (12 frames of its own), but a SystemExit as one
            # line ("Task exited"). retries=0 makes the failure final, as AirflowFailException did.
            raise SystemExit(f"preflight: {len(problems)} problem(s), see the lines above")
        log.info(run_plan(dict(params), dag_run.run_type, logical_date))
        if note := stale_note():
            log.warning(note)

    @task.branch
    def choose_path(params=None, dag_run=None, logical_date=None) -> str:
        """Batch runs go straight to silver; incremental runs start at the dimension (or a refresh)."""
        from lakehouse_airflow.macros import mode_arg

        if mode_arg(dag_run, params, logical_date) == "batch":
            return "batch_recompute"
        return "full_refresh" if params["full_refresh"] != "none" else "incremental"

    full_refresh = SparkJobOperator(
        task_id="full_refresh",
        job="full_refresh",
        application_args=[
            "--lakehouse-root", "{{ lakehouse_root() }}", "--layer", "{{ params.full_refresh }}",
        ],
    )  # fmt: skip
    path = preflight() >> choose_path()
    incremental, batch_recompute = (
        EmptyOperator(task_id="incremental"),
        EmptyOperator(task_id="batch_recompute"),
    )
    path >> [full_refresh, incremental, batch_recompute]

    # One task per table with a query of its own, wired as the catalog's upstream tables say.
    # Incremental runs start at the tables fed by a source; batch runs at the first tables with a
    # batch form. Those entry tasks join two branches of which one is skipped, hence their rule.
    tables = catalog.tasks()
    entries = {
        table.task: [full_refresh, incremental]
        if not catalog.upstream_tasks(table)
        else [batch_recompute]
        for table in tables
        if not catalog.upstream_tasks(table)
        or (table.batch and not any(u.batch for u in catalog.upstream_tasks(table)))
    }
    jobs = {
        table.task: TableJobOperator(
            table=table,
            **RUN_PARAMETERS,
            **(
                {"trigger_rule": TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS}
                if table.task in entries
                else {}
            ),
        )
        for table in tables
    }
    for table in tables:
        for upstream in catalog.upstream_tasks(table):
            jobs[upstream.task] >> jobs[table.task]
        entries.get(table.task, []) >> jobs[table.task]
