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

import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

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


def check(written: dict[Table, tuple[Periods, dict]]) -> dict[str, dict | None]:
    """Measure the rules of each table a task wrote (and of its side tables) over the periods it
    wrote and its run's batches; record every result in one append, then judge.

    ``written``: each table's periods and its run's summary (its micro-batches' notes, its mode).
    Returns, by table, the number of results and the failed ``warn`` rules (None: no rules
    declared); raises :class:`ExpectationFailed` when a ``fail`` rule does not hold.
    """
    started = time.monotonic()
    plans = []  # (owner, spec, its per-hour rules, the hours to measure, its per-batch rules, notes)
    for table, (periods, summary) in written.items():
        for spec in (table.spec, *catalog.side_tables(table.spec)):
            if not spec.expectations:
                continue
            by_hour = [rule for rule in spec.expectations if rule.per == "hour"]
            again = still_failing(table.lakehouse, spec) if by_hour else []
            to_measure = Periods.of([*periods, *again], spec.grain) if by_hour else Periods()
            by_batch = [rule for rule in spec.expectations if rule.per == "batch"]
            notes = summary.get("batches", []) if by_batch else []
            plans.append((table, spec, by_hour, to_measure, by_batch, notes))
    results: dict[str, dict | None] = {table.name: None for table in written}
    for owner, *_ in plans:
        results[owner.name] = {"checked": 0, "failed_warn": []}
    if not any(to_measure or notes for _, _, _, to_measure, _, notes in plans):
        return results  # nothing written, nothing failing: no Spark job
    some = plans[0][0]
    lakehouse = some.lakehouse
    rows = []  # (owner, result)
    measurements = []  # (owner, spec, rules, hours or notes, how Spark measures them)
    for owner, spec, by_hour, to_measure, by_batch, notes in plans:
        if to_measure:
            answered = measured_from_stats(lakehouse, spec, by_hour, to_measure)
            if answered is not None:
                rows.extend((owner, row) for row in answered)
            else:
                measurements.append((owner, spec, by_hour, to_measure, _measure_hours))
        if notes:
            measurements.append((owner, spec, by_batch, notes, _measure_batches))
    results_table = lakehouse.table(RESULTS_TABLE)
    spark = None  # no Spark job when the Delta log answers every rule and the table exists
    if measurements or not delta_log.is_delta_table(results_table.path):
        spark = build_spark_session(some.task)
        ensure_table(spark, results_table)
    # Each is one Spark job over a table just written, most of its time Delta's snapshot of the new
    # version and the planning: side by side, a task's checks take about as long as the longest.
    with ThreadPoolExecutor(max_workers=max(len(measurements), 1)) as pool:
        running = [
            (owner, pool.submit(measure, spark, lakehouse, spec, rules, what))
            for owner, spec, rules, what, measure in measurements
        ]
        rows += [(owner, row) for owner, measured in running for row in measured.result()]
    if rows:
        mode = next(iter(written.values()))[1].get("mode", "incremental")
        airflow_run_id, airflow_try = airflow_run()
        context = {
            "checked_at": datetime.now(UTC),
            "mode": mode,
            "airflow_run_id": airflow_run_id,
            "airflow_try": airflow_try,
        }
        # A check is an event: nothing replays it (several tasks append at once, blind appends do not conflict).
        append_records([{**row, **context} for _, row in rows], results_table)
    for owner, row in rows:
        results[owner.name]["checked"] += 1
        if not row["passed"]:
            log.warning(
                "%s expectation %s: %s", row["table_name"], row["on_failure"], describe(row)
            )
            if row["on_failure"] == "warn":
                results[owner.name]["failed_warn"].append(describe(row))
    failed = [row for _, row in rows if not row["passed"]]
    gating = [
        (owner, row) for owner, row in rows if not row["passed"] and row["on_failure"] == "fail"
    ]
    log.info(
        "%s: %d expectation result(s), %d failed (%d gating), %.1f s",
        ", ".join(t.name for t in written),
        len(rows),
        len(failed),
        len(gating),
        time.monotonic() - started,
    )
    if gating:
        modules = sorted({f"lakehouse/tables/{_module(owner.spec)}.py" for owner, _ in gating})
        raise ExpectationFailed(
            f"{len(gating)} expectation(s) failed, so the tables computed from these hours are not updated:\n- "
            + "\n- ".join(describe(row) for _, row in gating)
            + f"\nFix the data of the hour (e.g. a backfill of it once the cause is fixed) or the rule in "
            f"{' or '.join(modules)}; every result is in {RESULTS_TABLE}."
        )
    return results


def _module(spec: TableSpec) -> str:
    """The module that declares ``spec`` (its name under lakehouse/tables)."""
    return spec.transform.__module__.rsplit(".", 1)[-1] if spec.transform else spec.task


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


def measured_from_stats(
    lakehouse: Lakehouse, spec: TableSpec, rules: list[Expectation], hours: Periods
) -> list[dict] | None:
    """The results of per-hour ``rules`` over ``hours`` from the statistics the Delta log keeps for
    each data file (row, null counts, minimums), without a Spark job; None when they cannot tell.

    They tell when every rule says how (``Expectation.from_stats``), the table's partitioning
    puts each file in one period (``Flow.period_of``) and every file of those periods has the
    statistics, without a deletion vector (its counts would include deleted rows). The same
    results as :func:`_measure_hours`: an hour without rows has none.
    """
    if any(rule.from_stats is None for rule in rules):
        return None
    files = delta_log.live_files(lakehouse.table(spec.name).path)
    if files is None:
        return None
    wanted = set(hours)
    stats_by_period: dict[datetime, list[dict]] = {}
    for add in files:
        period = spec.flow.period_of(spec, add.get("partitionValues") or {})
        if period is None:
            return None
        if period not in wanted:
            continue
        stats = json.loads(add.get("stats") or "{}")
        if add.get("deletionVector") or not stats or stats.get("tightBounds") is False:
            return None
        stats_by_period.setdefault(period, []).append(stats)
    results = []
    for period, stats in sorted(stats_by_period.items()):
        if not sum(s.get("numRecords", 0) for s in stats):
            continue
        for rule in rules:
            observed = _observed_from_stats(rule, stats)
            if observed is None:
                return None
            results.append(_result(spec, rule, observed, hour_start=period))
    return results


def _observed_from_stats(rule: Expectation, stats: list[dict]) -> float | None:
    """The rule's measure over the files with these statistics; None when they do not tell."""
    how, columns = rule.from_stats
    try:
        if how == "nulls":
            (column,) = columns
            return float(sum(s["nullCount"][column] for s in stats))
        if how == "negatives":  # 0 when no file's minimum is below 0; a count needs the rows
            for s in stats:
                for column in columns:
                    if s["nullCount"][column] < s["numRecords"] and s["minValues"][column] < 0:
                        return None
            return 0.0
    except (KeyError, TypeError):  # a column without statistics
        return None
    return None


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
