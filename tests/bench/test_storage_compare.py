"""bench/storage_compare.py's section and summary keys from saved figures: no servers, no Spark.

The measuring itself needs an S3 server and two engines (minutes even on tiny data): `make
bench-storage` runs it, and fails when a run's tables differ from the oracle.
"""

from __future__ import annotations

from bench import storage_compare


def run(cpu: float, wall: float, requests: dict | None) -> dict:
    tasks = {"bronze_ad_events": {"wall_s": wall / 2, "engine_cpu_s": cpu / 2, "rows": {}}}
    if requests is not None:
        tasks["bronze_ad_events"]["requests"] = 10
    return {
        "cpu_s": cpu,
        "wall_s": wall,
        "client_cpu_s": 1.0,
        "engine_cpu_s": cpu - 1.0,
        "server_cpu_s": 3.0 if requests is not None else None,
        "requests": requests,
        "tasks": tasks,
        "oracle_equal": True,
        "unwritten": ["ops.table_maintenance"],
    }


RESULTS = {
    "date": "2026-11-27 23:00Z",
    "command": "python -m bench.storage_compare --sizes demo",
    "sizes": {
        "demo": {
            "hours": 3,
            "events_per_second": 2.0,
            "events": 21600,
            "runs": {
                "local": [run(20.0, 10.0, None)],
                "s3": [run(30.0, 25.0, {"GET": 100, "PUT": 40, "put-if-absent": 12})],
            },
        }
    },
    "engines": {"local": {"start_s": 9.0}, "s3": {"start_s": 11.0}},
}


def test_the_section_puts_s3_beside_local_with_its_requests_and_the_tables_left_out():
    text = storage_compare.render(RESULTS)

    assert (
        "| demo (21,600 events, 3 h) | s3 | 30.0 | 29.0 | 1.0 | 25.0 | 1.50 | 2.50 | 140 | 3.0 | yes |"
        in text
    )
    assert "| demo | 100 | 0 | 40 | 0 | 0 | 12 | 0 |" in text
    assert "| bronze_ad_events | 5.0 | 12.5 | 2.5 |" in text
    assert "DAG ysb_maintenance): `ops.table_maintenance`." in text


def test_the_summary_keys_give_each_storage_and_the_ratios():
    figures = storage_compare.summary_figures(RESULTS)

    assert figures == {
        "storage_demo_local_cpu_s": 20.0,
        "storage_demo_local_wall_s": 10.0,
        "storage_demo_s3_cpu_s": 30.0,
        "storage_demo_s3_wall_s": 25.0,
        "storage_demo_s3_requests": 140,
        "storage_demo_s3_to_local_cpu_ratio": 1.5,
        "storage_demo_s3_to_local_wall_ratio": 2.5,
    }
