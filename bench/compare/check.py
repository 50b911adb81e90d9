"""Did each contender write the same tables as the project? And the project what the oracle expects?

Read with delta-rs (through Polars), no Spark. Every table the catalog declares gets a verdict
(``status``), per contender:

* ``equal``: the same as the reference. Silver: the same rows, one per ``event_id``, with the
  same contract fields, campaign, event date and hour (``source_file`` and ``ingested_at`` say
  which copy of a duplicate was kept and when: they may differ); the quarantine: the same number
  of lines per reason; bronze: the same lines, as many times each; every other table (the
  dimension, every gold table, a gold table added tomorrow): the same rows as a set, every column
  of the reference compared exactly but floating-point ones (``ctr``), within 1e-9;
* ``differs`` or ``not written``: a contender that does less (drops a reason, skips the dedup,
  aggregates fewer events, splits sessions elsewhere) or forgot a table it claims: a failure;
* ``not implemented``: a table the contender does not claim to write (a minimal job has no ops
  records): reported, not a failure;
* ``not run``: a table no run of the benchmark writes (one an operation such as maintenance writes);
* ``unchecked``: written, with nothing to compare it with (the ops records: times and ids differ
  from run to run; the oracle has no expectation for them).
"""

from __future__ import annotations

from pathlib import Path

from bench.compare import BRONZE, CAMPAIGNS, FIELDS, QUARANTINE, SILVER

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


EQUAL, DIFFERS, NOT_WRITTEN = "equal", "differs", "not written"
NOT_IMPLEMENTED, NOT_RUN, UNCHECKED = "not implemented", "not run", "unchecked"


def verdict(status: str, detail: str = "") -> dict:
    """A table's outcome: ``ok`` is False only when it differs or a claimed table is missing."""
    return {"status": status, "ok": status not in (DIFFERS, NOT_WRITTEN), "detail": detail}


def compare_tables(
    reference: dict[str, str],
    candidate: dict[str, str],
    implements: tuple[str, ...] | None = None,
) -> dict[str, dict]:
    """Per table of ``reference`` (the project's lakehouse: every declared table), the verdict on
    ``candidate``'s; ``implements``: the tables the candidate claims (None: whatever it wrote)."""
    out = {}
    for name, path in reference.items():
        if implements is not None and name not in implements:
            out[name] = verdict(NOT_IMPLEMENTED)
            continue
        expected, actual = (
            read_table(path),
            read_table(candidate[name]) if name in candidate else None,
        )
        if actual is None and expected is None:
            out[name] = verdict(NOT_RUN, "no run of the benchmark writes it")
            continue
        if actual is None:
            if implements is not None:
                out[name] = verdict(NOT_WRITTEN, f"{name}: not written")
            else:  # the project's other forms: what they do not write is theirs to leave out
                out[name] = verdict(NOT_RUN, "not written by this run")
            continue
        if expected is None:
            out[name] = verdict(UNCHECKED, "the project's run did not write it")
            continue
        if name.startswith("ops."):
            out[name] = verdict(UNCHECKED, f"{actual.height} rows (run records: not compared)")
            continue
        if name == SILVER:
            problem = same_silver(expected, actual)
        elif name == QUARANTINE:
            problem = same_reasons(reason_counts(expected), actual)
        elif name == BRONZE:
            problem = same_lines(expected, actual)
        else:
            problem = same_rows(expected, actual, name)
        out[name] = (
            verdict(DIFFERS, problem) if problem else verdict(EQUAL, _described(name, expected))
        )
    return out


def same_lines(expected, actual) -> str | None:
    """Bronze: the same raw lines, as many times each (hashed: the lines themselves may be long)."""
    import polars as pl

    def counts(frame):
        return frame.select(pl.col("raw_line").hash().alias("h")).group_by("h").len().sort("h")

    if actual.height != expected.height:
        return f"{BRONZE}: {actual.height} lines, expected {expected.height}"
    if not counts(expected).equals(counts(actual)):
        return f"{BRONZE}: the same number of lines, but not the same lines"
    return None


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
    import csv

    import polars as pl

    from lakehouse import catalog
    from lakehouse_tools.oracle import GOLD, expected_from_landing

    expected = expected_from_landing(landing_events, campaigns_csv)
    with open(campaigns_csv, newline="", encoding="utf-8") as handle:
        ads = sorted((row["ad_id"], row["campaign_id"]) for row in csv.DictReader(handle))
    out = {}
    for name, path in tables.items():
        actual = read_table(path)
        known = name in (SILVER, QUARANTINE, BRONZE, CAMPAIGNS) or name in GOLD
        if actual is None:
            operation = getattr(catalog.get(name), "operation", None)
            out[name] = (
                verdict(NOT_WRITTEN, f"{name}: not written")
                if known
                else verdict(NOT_RUN, f"written by {operation}" if operation else "not written")
            )
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
        elif name == BRONZE:
            problem = (
                None
                if actual.height == expected.lines
                else f"{BRONZE}: {actual.height} rows, the oracle read {expected.lines} lines"
            )
        elif name == CAMPAIGNS:
            found = sorted(actual.select("ad_id", "campaign_id").iter_rows())
            problem = None if found == ads else f"{CAMPAIGNS}: not the rows of campaigns.csv"
        elif name in GOLD:
            rows = expected.rows(name)
            oracle = (
                pl.DataFrame(rows, schema={c: actual.schema[c] for c in actual.columns})
                if rows
                else actual.clear()
            )
            problem = same_rows(_normalised(oracle), actual, name)
        else:
            out[name] = verdict(UNCHECKED, f"{actual.height} rows (no oracle for it)")
            continue
        out[name] = (
            verdict(DIFFERS, problem) if problem else verdict(EQUAL, _described(name, actual))
        )
    return out
