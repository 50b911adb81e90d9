"""Event periods (hours, days), the Delta predicates built from them, and which hours a DAG run owns."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lakehouse import catalog
from lakehouse.errors import ConfigError
from lakehouse.periods import Grain, Periods, parse_instant
from lakehouse_airflow.macros import end_arg, mode_arg, owned_hour, run_interval, start_arg


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


SILVER, HOURLY = catalog.get("silver.ad_events"), catalog.get("gold.campaign_hourly")


def test_interval_is_half_open_and_whole_hours():
    hours = Periods.between(utc(2026, 11, 20, 22), utc(2026, 11, 21, 1))
    assert hours.starts == (utc(2026, 11, 20, 22), utc(2026, 11, 20, 23), utc(2026, 11, 21, 0))
    assert SILVER.periods_predicate(hours) == (
        "(event_date = DATE'2026-11-20' AND event_hour IN (22, 23)) OR "
        "(event_date = DATE'2026-11-21' AND event_hour IN (0))"
    )
    assert HOURLY.periods_predicate(hours) == (
        "event_date IN (DATE'2026-11-20', DATE'2026-11-21') AND hour_start IN "
        "(TIMESTAMP'2026-11-20 22:00:00', TIMESTAMP'2026-11-20 23:00:00', TIMESTAMP'2026-11-21 00:00:00')"
    )


def test_an_hour_widens_to_its_day_and_a_day_is_read_as_its_24_hours():
    hours = Periods.of([utc(2026, 11, 20, 14, 5), utc(2026, 11, 20, 23), utc(2026, 11, 21, 0, 1)])
    days = hours.to(Grain.DAY)
    assert days == Periods((utc(2026, 11, 20), utc(2026, 11, 21)), Grain.DAY)
    assert str(days) == "2 day(s) 2026-11-20..2026-11-21"
    assert len(days.hours()) == 48 and days.hours().first == utc(2026, 11, 20)
    assert days.hours().to(Grain.DAY) == days
    # A whole day of an hour-partitioned table is selected by its date alone.
    assert SILVER.periods_predicate(days) == (
        "(event_date = DATE'2026-11-20') OR (event_date = DATE'2026-11-21')"
    )
    with pytest.raises(ConfigError, match="not on a whole day"):
        Periods.between(utc(2026, 11, 20, 1), utc(2026, 11, 21), Grain.DAY)


def test_a_ten_year_interval_is_counted_and_trimmed_in_linear_time():
    import time

    started = time.process_time()
    decade = Periods.between(utc(2016, 1, 1), utc(2026, 1, 1))
    rest = decade.without(Periods.between(utc(2020, 1, 1), utc(2021, 1, 1)))
    assert (len(decade), len(rest), len(decade.to(Grain.DAY))) == (87_672, 78_888, 3_653)
    # Quadratic arithmetic took minutes here; linear takes well under a second.
    assert time.process_time() - started < 5


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        ("2026-11-20T10:30Z", "2026-11-20T12:00Z", "not on a whole hour"),
        ("2026-11-20T12:00Z", "2026-11-20T12:00Z", "Empty interval"),
        ("yesterday", "2026-11-20T12:00Z", "Not an ISO-8601 time"),
    ],
)
def test_bad_intervals_fail_with_a_message(start, end, message):
    with pytest.raises(ConfigError, match=message):
        Periods.between(parse_instant(start), parse_instant(end))


def test_a_key_window_widens_each_hour_across_days_and_leaves_out_the_range_itself():
    hours = Periods.between(
        datetime(2026, 11, 20, 23, tzinfo=UTC), datetime(2026, 11, 21, 1, tzinfo=UTC)
    )
    around = hours.widened(1).without(hours)
    assert around.isoformats() == ["2026-11-20T22:00:00+00:00", "2026-11-21T01:00:00+00:00"]
    assert hours.widened(0) == hours
    assert SILVER.periods_predicate(around) == (
        "(event_date = DATE'2026-11-20' AND event_hour IN (22)) OR "
        "(event_date = DATE'2026-11-21' AND event_hour IN (1))"
    )


def test_a_run_owns_the_hour_that_ended_at_its_logical_date():
    import pendulum

    assert owned_hour(utc(2026, 11, 20, 3)).starts == (utc(2026, 11, 20, 2),)
    # Airflow hands tasks pendulum datetimes.
    assert owned_hour(pendulum.datetime(2026, 11, 20, 3, tz="UTC")).starts == (
        utc(2026, 11, 20, 2),
    )


class _Run:
    def __init__(self, run_type):
        self.run_type = run_type


def test_backfill_runs_are_batch_over_their_own_hour_and_others_incremental():
    at = utc(2026, 11, 20, 3)
    backfill, scheduled = _Run("backfill"), _Run("scheduled")
    assert (mode_arg(backfill, {}, at), start_arg(backfill, {}, at), end_arg(backfill, {}, at)) == (
        "batch",
        "2026-11-20T02:00Z",
        "2026-11-20T03:00Z",
    )
    assert (mode_arg(scheduled, {"mode": "incremental"}, at), start_arg(scheduled, {}, at)) == (
        "incremental",
        "",
    )


def test_manual_batch_run_takes_its_range_from_params():
    params = {"mode": "batch", "start": "2026-11-20T00:00Z", "end": "2026-11-20T05:00Z"}
    assert len(run_interval("manual", params, utc(2026, 11, 22))) == 5
    with pytest.raises(ConfigError, match="needs the start and end params"):
        run_interval("manual", {"mode": "batch"}, utc(2026, 11, 22))


def test_the_engine_check_tells_a_dead_port_from_a_port_without_a_grpc_server():
    import socket

    from lakehouse.spark import check_engine

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        assert check_engine(f"sc://localhost:{port}/", query=False).startswith(
            "nothing listens on localhost"
        )
        listener.listen()  # a port that accepts connections but speaks no gRPC: not an engine
        assert check_engine(f"sc://localhost:{port}/", timeout_s=1, query=False) == (
            f"localhost:{port} listens but its gRPC server did not answer within 1 s"
        )


def test_the_consistency_check_takes_the_named_tables_in_dag_order_and_refuses_others():
    from lakehouse.consistency import tables_to_check

    every = [table.name for table in catalog.batch_tables()]
    assert [table.name for table in tables_to_check(None)] == every
    assert [table.name for table in tables_to_check([""])] == every  # the DAG form's default
    named = tables_to_check(["gold.user_sessions", "silver.ad_events"])
    assert [table.name for table in named] == ["silver.ad_events", "gold.user_sessions"]
    assert tables_to_check(["gold.user_sessions, silver.ad_events"]) == named
    with pytest.raises(ConfigError, match=r"--table gold\.nope: not a table the check recomputes"):
        tables_to_check(["gold.nope", "silver.ad_events"])
