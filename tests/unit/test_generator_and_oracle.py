"""The generator is deterministic and drips hour by hour; the oracle agrees with its manifest."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from lakehouse.config import Lakehouse
from lakehouse_tools.generator import Disorder, write_campaigns, write_hours
from lakehouse_tools.oracle import expected_from_landing

START = datetime(2026, 11, 20, 0, tzinfo=timezone.utc)


def landing_files(lakehouse: Lakehouse) -> dict[str, bytes]:
    root = Path(lakehouse.landing_events)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_hourly_drip_equals_generating_all_hours_at_once(tmp_path):
    at_once, drip = Lakehouse(str(tmp_path / "a")), Lakehouse(str(tmp_path / "b"))
    write_hours(at_once, START, 3, events_per_second=0.05, seed=3)
    write_hours(drip, START, 2, events_per_second=0.05, seed=3)
    write_hours(drip, START.replace(hour=2), 1, events_per_second=0.05, seed=3)
    # Re-running an hour that exists writes nothing new (no duplicate files for bronze to ingest).
    write_hours(drip, START, 1, events_per_second=0.05, seed=3)

    assert landing_files(at_once) == landing_files(drip)
    assert len(landing_files(drip)) == 3 * 4
    assert not [p for p in Path(drip.landing_events).rglob(".*")], "temporary files left behind"


def test_seed_changes_the_data(tmp_path):
    one, two = Lakehouse(str(tmp_path / "a")), Lakehouse(str(tmp_path / "b"))
    write_hours(one, START, 1, events_per_second=0.05, seed=1)
    write_hours(two, START, 1, events_per_second=0.05, seed=2)
    assert landing_files(one) != landing_files(two)


def test_oracle_agrees_with_the_generators_manifest(tmp_path):
    lakehouse = Lakehouse(str(tmp_path / "lh"))
    disorder = Disorder(jitter_seconds=5, late_fraction=0.05, duplicate_fraction=0.05, malformed_fraction=0.05)
    write_campaigns(lakehouse, seed=5)
    manifests = write_hours(lakehouse, START, 2, events_per_second=0.2, seed=5, disorder=disorder)

    expected = expected_from_landing(lakehouse.landing_events, lakehouse.landing_campaigns)
    assert expected.lines == sum(m.lines for m in manifests)
    assert len(expected.events) == sum(m.unique_events for m in manifests)
    assert expected.duplicates == sum(m.duplicates for m in manifests)
    assert sum(expected.quarantined.values()) == sum(m.malformed for m in manifests) > 0
    late = sum(m.late for m in manifests)
    assert late > 0
    stored = json.loads((Path(lakehouse.root) / "landing/manifests/2026-11-20T00.json").read_text())
    assert stored["lines"] == manifests[0].lines
