"""Data-quality expectations: the rules declared beside a table, checked after each run that writes it.

A rule (:class:`lakehouse.catalog.Expectation`) is a SQL aggregate over a table's rows and the
comparison it must satisfy, e.g. ``count_if(campaign_id IS NULL)`` ``= 0``. After a task's query
(or backfill) has written, each rule of its tables is measured per event hour the run wrote (per
micro-batch for ``per="batch"`` rules) and every result is appended to ``ops.expectation_results``.
A failed ``warn`` rule is logged; a failed ``fail`` rule fails the task with a message naming the
hour, the rule and the measured value, so the tables downstream are not computed from that hour.

An hour whose last check of a ``fail`` rule failed is checked again by every later run of the
task, whether or not it brought new rows for it: a retry, or the next hourly run, cannot pass just
because it found nothing new. The hour stays failed until its data is fixed (a backfill of the
hour, a fixed dimension) or the rule is changed.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import partial

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse import catalog, delta_log, object_storage
from lakehouse.catalog import Expectation, ExpectationFailed, TableSpec
from lakehouse.config import Lakehouse, Table
from lakehouse.periods import Periods
from lakehouse.runtime import airflow_run, log
from lakehouse.sinks import append_records, ensure_table
from lakehouse.spark import build_spark_session

RESULTS_TABLE = "ops.expectation_results"


def check(table: Table, periods: Periods, summary: dict) -> dict | None:
    """Measure the rules of ``table`` and its side tables over ``periods`` and the run's batches; record and judge.

    ``summary`` is the run's (its micro-batches' notes, its mode). Returns the number of results
    and the failed ``warn`` rules (None: no rules declared); raises :class:`ExpectationFailed`
    when a ``fail`` rule does not hold.
    """
    declared = [
        spec for spec in (table.spec, *catalog.side_tables(table.spec)) if spec.expectations
    ]
    if not declared:
        return None
    lakehouse = table.lakehouse
    started = time.monotonic()
    batches = summary.get("batches", [])
    plans = []  # (table, its per-hour rules, the hours to measure them over, its per-batch rules)
    for spec in declared:
        by_hour = [rule for rule in spec.expectations if rule.per == "hour"]
        again = still_failing(lakehouse, spec) if by_hour else []
        by_batch = [rule for rule in spec.expectations if rule.per == "batch"]
        plans.append(
            (
                spec,
                by_hour,
                Periods.of([*periods, *again], spec.grain) if by_hour else Periods(),
                by_batch,
            )
        )
    if not any(to_measure or (by_batch and batches) for _, _, to_measure, by_batch in plans):
        return {"checked": 0, "failed_warn": []}  # nothing written, nothing failing: no Spark job
    spark = build_spark_session(table.task)
    results_table = lakehouse.table(RESULTS_TABLE)
    ensure_table(spark, results_table)
    measurements = []
    for spec, by_hour, to_measure, by_batch in plans:
        if to_measure:
            measurements.append(
                partial(_measure_hours, spark, lakehouse, spec, by_hour, to_measure)
            )
        if by_batch and batches:
            measurements.append(
                partial(_measure_batches, spark, lakehouse, spec, by_batch, batches)
            )
    # Each is one Spark job over a table just written, most of its time Delta's snapshot of the new
    # version and the planning: side by side, a task's checks take about as long as the longest.
    with ThreadPoolExecutor(max_workers=max(len(measurements), 1)) as pool:
        running = [pool.submit(measure) for measure in measurements]
        rows = [row for measured in running for row in measured.result()]
    if rows:
        checked_at = datetime.now(UTC)
        airflow_run_id, airflow_try = airflow_run()
        context = {
            "checked_at": checked_at,
            "mode": summary.get("mode", "incremental"),
            "airflow_run_id": airflow_run_id,
            "airflow_try": airflow_try,
        }
        # A check is an event: nothing replays it (several tasks append at once, blind appends do not conflict).
        append_records([{**row, **context} for row in rows], results_table)
    failed = [row for row in rows if not row["passed"]]
    for row in failed:
        log.warning("%s expectation %s: %s", row["table_name"], row["on_failure"], describe(row))
    gating = [describe(row) for row in failed if row["on_failure"] == "fail"]
    log.info(
        "%s: %d expectation result(s), %d failed (%d gating), %.1f s",
        table.name,
        len(rows),
        len(failed),
        len(gating),
        time.monotonic() - started,
    )
    if gating:
        raise ExpectationFailed(
            f"{len(gating)} expectation(s) failed, so the tables computed from these hours are not updated:\n- "
            + "\n- ".join(gating)
            + f"\nFix the data of the hour (e.g. a backfill of it once the cause is fixed) or the rule in "
            f"lakehouse/tables/{table.task}.py; every result is in {RESULTS_TABLE}."
        )
    return {
        "checked": len(rows),
        "failed_warn": [describe(row) for row in failed if row["on_failure"] == "warn"],
    }


def describe(row: dict) -> str:
    where = (
        f"hour {row['hour_start']:%Y-%m-%dT%H:00Z}"
        if row["hour_start"]
        else f"batch {row['batch_id']}"
    )
    observed = "nothing" if row["observed"] is None else f"{row['observed']:g}"
    return f"{row['table_name']} {where}: rule {row['rule']!r} ({row['measure']} {row['holds']}) measured {observed}"


def still_failing(lakehouse: Lakehouse, spec: TableSpec) -> list[datetime]:
    """The hours of ``spec`` whose last check of one of its current ``fail`` rules failed.

    Read with delta-rs, not Spark: every run of a gated task asks, and most runs find nothing.
    Only this table's results are read (by predicate), and maintenance keeps a month of them
    (and each hour's newest failure): what a run reads does not grow with history.
    """
    path = lakehouse.table(RESULTS_TABLE).path
    gating = {
        rule.rule for rule in spec.expectations if rule.on_failure == "fail" and rule.per == "hour"
    }
    if not gating or not delta_log.is_delta_table(path):
        return []
    # By the table's name (its files' stats prune the others); not by ``passed``: delta-rs 1.6
    # drops every file Spark wrote when filtering on a boolean (Spark keeps no min/max for it),
    # so a failure rewritten by maintenance would vanish. The rows read are bounded by the
    # table's declared retention (ops_expectation_results.py), not by every check ever made.
    results = object_storage.read_delta(
        path,
        ["rule", "hour_start", "checked_at", "passed"],
        "table_name = '{}'".format(spec.name.replace("'", "''")),
    )
    newest: dict[tuple[str, datetime], bool] = {}
    for result in sorted(results.to_pylist(), key=lambda r: r["checked_at"]):
        if result["rule"] in gating and result["hour_start"] is not None:
            newest[(result["rule"], result["hour_start"])] = result["passed"]
    return sorted({hour for (_, hour), passed in newest.items() if not passed})


def _measure_hours(
    spark: SparkSession,
    lakehouse: Lakehouse,
    spec: TableSpec,
    rules: list[Expectation],
    hours: Periods,
) -> list[dict]:
    """One result per (rule, hour) among ``hours`` that has rows (an hour without rows has nothing to measure)."""
    if not hours:
        return []
    measured = (
        spark.read.format("delta")
        .load(lakehouse.table(spec.name).path)
        .filter(spec.periods_predicate(hours))
        .groupBy(F.expr(spec.period_sql).alias("hour_start"))
        .agg(*(F.expr(rule.measure).cast("double").alias(f"m{i}") for i, rule in enumerate(rules)))
        .collect()
    )
    return [
        _result(spec, rule, row[f"m{i}"], hour_start=row.hour_start)
        for row in measured
        for i, rule in enumerate(rules)
    ]


def _measure_batches(
    spark: SparkSession,
    lakehouse: Lakehouse,
    spec: TableSpec,
    rules: list[Expectation],
    notes: list[dict],
) -> list[dict]:
    """One result per (rule, micro-batch) of this run (a batch's rows: its batch id, in its generation)."""
    batches = {
        (note["generation"], note["batch_id"])
        for note in notes
        if "generation" in note and "batch_id" in note
    }
    if not batches:
        return []
    frame = spark.read.format("delta").load(lakehouse.table(spec.name).path)
    selected = F.lit(False)
    for generation, batch_id in batches:
        selected = selected | (
            (F.col("generation") == generation) & (F.col("batch_id") == batch_id)
        )
    measured = (
        frame.filter(selected)
        .groupBy("batch_id")
        .agg(*(F.expr(rule.measure).cast("double").alias(f"m{i}") for i, rule in enumerate(rules)))
        .collect()
    )
    return [
        _result(spec, rule, row[f"m{i}"], batch_id=row.batch_id)
        for row in measured
        for i, rule in enumerate(rules)
    ]


def _result(spec: TableSpec, rule: Expectation, observed, hour_start=None, batch_id=None) -> dict:
    return {
        "table_name": spec.name,
        "rule": rule.rule,
        "on_failure": rule.on_failure,
        "measure": rule.measure,
        "holds": rule.holds,
        "hour_start": hour_start,
        "batch_id": batch_id,
        "observed": observed,
        "passed": rule.passes(observed),
    }
