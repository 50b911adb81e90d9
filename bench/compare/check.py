"""Did a contender produce the same tables as the project? And did the project produce what the oracle expects?

Read with delta-rs (through Polars), no Spark. What "the same" means, per table:

* silver (``silver.ad_events``): the same number of rows, one per ``event_id``, and for every
  event the same contract fields, campaign, event date and hour (``source_file`` and
  ``ingested_at`` say which copy of a duplicate was kept and when: they may differ);
* the quarantine: the same number of lines for every reason;
* every gold table: the same rows as a set, every column of the project's table compared exactly
  except floating-point columns (``ctr``), within 1e-9.

A contender that does less (drops the quarantine, skips the dedup, aggregates fewer events) fails.
"""

from __future__ import annotations

from pathlib import Path

from bench.compare import FIELDS, QUARANTINE, SILVER

FLOAT_TOLERANCE = 1e-9
SILVER_COLUMNS = (*FIELDS, "campaign_id", "event_date", "event_hour")


def _normalised(frame):
    """Timestamps as UTC microseconds and integers as Int64, so two writers' types compare."""
    import polars as pl

    casts = {}
    for name, dtype in frame.schema.items():
        if isinstance(dtype, pl.Datetime):
            casts[name] = (
                pl.col(name).dt.replace_time_zone("UTC")
                if dtype.time_zone is None
                else pl.col(name)
            ).cast(pl.Datetime("us", "UTC"))
        elif dtype.is_integer():
            casts[name] = pl.col(name).cast(pl.Int64)
        elif dtype == pl.Float32:
            casts[name] = pl.col(name).cast(pl.Float64)
    return frame.with_columns(**casts) if casts else frame


def read_table(path: str):
    import polars as pl

    if not Path(path, "_delta_log").is_dir():
        return None
    return _normalised(pl.read_delta(path))


def same_rows(expected, actual, name: str) -> str | None:
    """None when ``actual`` holds ``expected``'s rows (as a set, every column of ``expected``), else what differs."""
    import polars as pl

    missing = [c for c in expected.columns if c not in actual.columns]
    if missing:
        return f"{name}: columns missing: {', '.join(missing)}"
    actual = actual.select(expected.columns)
    if expected.height != actual.height:
        return f"{name}: {actual.height} rows, expected {expected.height}"
    floats = [c for c, t in expected.schema.items() if t.is_float()]
    keys = [c for c in expected.columns if c not in floats]
    for c in keys:
        if expected.schema[c] != actual.schema[c]:
            return f"{name}: column {c} is {actual.schema[c]}, expected {expected.schema[c]}"
    left, right = expected.sort(keys, nulls_last=True), actual.sort(keys, nulls_last=True)
    differing = (
        left.select(keys)
        .with_row_index()
        .join(right.select(keys).with_row_index(), on="index", suffix="_actual")
        .filter(pl.any_horizontal(pl.col(c).ne_missing(pl.col(f"{c}_actual")) for c in keys))
    )
    if differing.height:
        return f"{name}: {differing.height} of {expected.height} rows differ, e.g. {differing.row(0, named=True)}"
    for c in floats:
        a, b = left[c], right[c].cast(pl.Float64)
        if not (a.is_null() == b.is_null()).all():
            return f"{name}: {c} is null in different rows"
        worst = (a - b).abs().max()
        if worst is not None and worst > FLOAT_TOLERANCE:
            return f"{name}: {c} differs by up to {worst}"
    return None


def reason_counts(quarantine) -> dict[str, int]:
    import polars as pl

    return dict(quarantine.group_by("reason").agg(pl.len()).sort("reason").iter_rows())


def compare_tables(reference: dict[str, str], candidate: dict[str, str]) -> dict[str, dict]:
    """Per output table (the reference's): ``{"ok": bool, "detail": str}``; the reference is the project's lakehouse."""
    out = {}
    for name, path in reference.items():
        expected, actual = (
            read_table(path),
            read_table(candidate[name]) if name in candidate else None,
        )
        if expected is None:
            out[name] = {"ok": False, "detail": f"{name}: the reference has no table at {path}"}
            continue
        if actual is None:
            out[name] = {"ok": False, "detail": f"{name}: not written"}
            continue
        if name == SILVER:
            problem = same_silver(expected, actual)
        elif name == QUARANTINE:
            problem = same_reasons(reason_counts(expected), actual)
        else:
            problem = same_rows(expected, actual, name)
        out[name] = {"ok": problem is None, "detail": problem or _described(name, expected)}
    return out


def same_silver(expected, actual) -> str | None:
    if actual.height != expected.height:
        return f"{SILVER}: {actual.height} rows, expected {expected.height}"
    if actual["event_id"].n_unique() != actual.height:
        return f"{SILVER}: {actual.height - actual['event_id'].n_unique()} duplicate event_ids"
    columns = [c for c in SILVER_COLUMNS if c in expected.columns]
    return same_rows(expected.select(columns), actual, SILVER)


def same_reasons(expected: dict[str, int], actual) -> str | None:
    found = reason_counts(actual)
    if found != expected:
        return f"{QUARANTINE}: lines by reason {found}, expected {expected}"
    return None


def _described(name: str, frame) -> str:
    if name == QUARANTINE:
        return f"{frame.height} rows: " + ", ".join(
            f"{r} {n}" for r, n in reason_counts(frame).items()
        )
    return f"{frame.height} rows"


def against_oracle(
    landing_events: str, campaigns_csv: str, tables: dict[str, str]
) -> dict[str, dict]:
    """The project's tables vs :mod:`lakehouse_tools.oracle` (plain Python over the raw lines), per table."""
    import polars as pl

    from lakehouse_tools.oracle import GOLD, expected_from_landing

    expected = expected_from_landing(landing_events, campaigns_csv)
    out = {}
    for name, path in tables.items():
        actual = read_table(path)
        if actual is None:
            out[name] = {"ok": False, "detail": f"{name}: not written"}
            continue
        if name == SILVER:
            ids = set(expected.events)
            problem = (
                None
                if actual.height == len(ids) and set(actual["event_id"].to_list()) == ids
                else (
                    f"{SILVER}: {actual.height} rows, the oracle expects {len(ids)} unique valid events"
                )
            )
        elif name == QUARANTINE:
            problem = same_reasons(dict(sorted(expected.quarantined.items())), actual)
        elif name in GOLD:
            rows = expected.rows(name)
            oracle = (
                pl.DataFrame(rows, schema={c: actual.schema[c] for c in actual.columns})
                if rows
                else actual.clear()
            )
            problem = same_rows(_normalised(oracle), actual, name)
        else:
            problem = f"{name}: the oracle has no expectation for it"
        out[name] = {"ok": problem is None, "detail": problem or _described(name, actual)}
    return out
