"""Property-based fuzzing of the line paths: whatever a producer writes, nothing fails and nothing is lost.

Hypothesis generates batches of lines: valid events mixed with arbitrary bytes and text, arbitrary
JSON values in every field (strings, huge and tiny numbers, floats, booleans, nulls, nested
objects and arrays), blank strings, duplicate keys, text after the object, control characters,
long lines, byte-order marks and ISO timestamps. Each batch goes through the functions the jobs
use, on real Spark, once as landing files (``spark.read.text`` -> ``bronze_ad_events`` ->
``classify_ad_events``) and once as Kafka records (binary values cast to string, as the Kafka
source gives them). The invariants:

* classification never fails;
* every line is in silver, in the quarantine with a reason, or a counted duplicate, and each line
  gets the reason the plain-Python oracle gives it (per record for Kafka, per reason for files);
* silver holds only events that satisfy the contract (checked here in plain Python);
* every text column is valid UTF-8, and a line that was not keeps its exact bytes in ``raw_bytes``.

CI runs a few examples with a fixed seed. A long run: more examples (``FUZZ_EXAMPLES``), each batch
multiplied by lines bred from it (``FUZZ_SPLICE``: Hypothesis draws at most about a hundred lines
per example), ``FUZZ_PROGRESS=1`` to print each batch's counts and the running totals::

    FUZZ_EXAMPLES=80 FUZZ_SPLICE=10 FUZZ_PROGRESS=1 python -m pytest tests/fuzz -s -q -p no:cacheprovider
"""

from __future__ import annotations

import json
import os
import random
import re
import tempfile
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from lakehouse.tables.bronze_ad_events import bronze_ad_events
from lakehouse.tables.silver_ad_events import (
    classify_ad_events,
    deduplicate_ad_events,
    quarantined_ad_events,
    valid_ad_events,
)
from lakehouse_tools.oracle import expected_from_landing, expected_from_lines

pytestmark = [pytest.mark.integration]

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "3"))
MIN_LINES = int(os.environ.get("FUZZ_MIN_LINES", "50"))
MAX_LINES = int(os.environ.get("FUZZ_MAX_LINES", "200"))
SPLICE = int(os.environ.get("FUZZ_SPLICE", "0"))  # bred lines per drawn line (long runs)
PROGRESS = os.environ.get("FUZZ_PROGRESS") == "1"
INGESTED = datetime(2026, 11, 20, 10, 30)
INGESTED_MS = int(INGESTED.replace(tzinfo=UTC).timestamp() * 1000)
DAY_MS = 86_400_000
CAMPAIGNS = {f"ad-{n}": f"camp-{n % 3}" for n in range(5)}
FIELDS = (
    "event_id",
    "user_id",
    "page_id",
    "ad_id",
    "ad_type",
    "event_type",
    "event_time",
    "ip_address",
)
EVENT_TYPES = ("view", "click", "purchase")
AD_TYPES = ("banner", "modal", "sponsored-search", "mail", "mobile")
TEXT_COLUMNS = (
    "raw_line",
    "reason_detail",
    "rescued_data",
    *[f for f in FIELDS if f != "event_time"],
)
MAX_LINE_BYTES = 1024 * 1024

# ---- strategies ---------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([5e-324, 1.7976931348623157e308, -0.0, 1e-300])
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=8,
)
blank_strings = st.sampled_from(["", " ", "\t", " \r\n ", "\n"])
iso_times = st.datetimes(
    min_value=datetime(1900, 1, 1),
    max_value=datetime(2100, 1, 1),
    timezones=st.sampled_from([None, UTC, timezone(timedelta(hours=1))]),
).map(lambda moment: moment.isoformat())
event_times = st.one_of(
    st.integers(min_value=INGESTED_MS - 30 * DAY_MS, max_value=INGESTED_MS + DAY_MS).map(
        str
    ),  # valid
    st.integers(min_value=0, max_value=10**15 - 1).map(str),  # any 1-15 digits (mostly the future)
    st.integers(min_value=10**15, max_value=10**25).map(str),  # too many digits
    st.integers(min_value=-(10**15), max_value=-1).map(str),  # negative
    st.integers(min_value=0, max_value=10**15).map(lambda n: f"{n:015d}"),  # leading zeros
    iso_times,
    st.floats(min_value=0, max_value=1e16, allow_nan=False).map(str),  # "1.7e+12", "123.5"
    st.sampled_from(["123\n", " 123", "123 ", "١٢٣", "1_000", "0x10", "+5", "1e12", "NaN"]),
)


def valid_value(name: str):
    return {
        "event_id": st.integers(min_value=0, max_value=40).map(lambda n: f"e-{n}"),  # duplicates
        "user_id": st.sampled_from(["u-1", "u-2", "ü-3", "u 4"]),
        "page_id": st.text(min_size=1, max_size=10).filter(lambda s: s.strip(" \t\r\n")),
        "ad_id": st.sampled_from([*CAMPAIGNS, *CAMPAIGNS, "ad-99"]),
        "ad_type": st.sampled_from([*AD_TYPES, *AD_TYPES, "popup", "Banner"]),
        "event_type": st.sampled_from([*EVENT_TYPES, *EVENT_TYPES, "hover"]),
        # A month back to two days ahead: one in about thirty is over a day in the future.
        "event_time": st.integers(
            min_value=INGESTED_MS - 28 * DAY_MS, max_value=INGESTED_MS + 2 * DAY_MS
        ).map(str),
        "ip_address": st.sampled_from(
            ["10.0.0.1", "::1", "not an ip"]
        ),  # not checked by the contract
    }[name]


MISSING = object()
# What a broken field holds instead: anything, or nothing.
broken_values = st.one_of(blank_strings, json_values, event_times, st.just(MISSING))


@st.composite
def event_text(draw) -> str:
    # Most events are valid or nearly: a few fields at most are broken.
    broken = draw(st.sampled_from([0, 0, 0, 1, 1, 2, 8]))
    broken_fields = set(draw(st.permutations(FIELDS))[:broken])
    fields = {
        name: draw(broken_values if name in broken_fields else valid_value(name)) for name in FIELDS
    }
    event = {name: value for name, value in fields.items() if value is not MISSING}
    if draw(st.integers(0, 3)) == 3:  # schema drift
        extra = draw(st.dictionaries(st.text(max_size=8), json_values, max_size=3))
        event.update({key: value for key, value in extra.items() if key not in FIELDS})
    size = draw(st.integers(0, 199))  # (the simplest example, 0, is a short line)
    length = (
        MAX_LINE_BYTES + 1
        if size == 199
        else 60_000
        if size >= 197
        else 2_000
        if size >= 192
        else 0
    )
    if length:  # a long string: under or over the 1 MiB limit
        event[draw(st.sampled_from(["page_id", "padding"]))] = "p" * length
    text = json.dumps(event, ensure_ascii=draw(st.booleans()))
    if draw(st.integers(0, 9)) == 9:  # a duplicate key (the same or another value)
        key = draw(st.sampled_from(FIELDS))
        text = (
            text[:-1]
            + (", " if event else "")
            + json.dumps(key)
            + ": "
            + json.dumps(draw(json_values))
            + "}"
        )
    return text


# Mostly nothing after the event; sometimes whitespace (fine) or text (malformed).
trailers = st.one_of(
    st.just(""),
    st.just(""),
    st.just(""),
    st.sampled_from([" ", "\t", "  \t "]),
    st.sampled_from(["x", "]", "}", ",", ", {}", "{}", "[]", "\x00", "\x0b", '"', "null"]),
    st.text(max_size=10),
)


@st.composite
def lines(draw) -> bytes | None:
    kind = draw(st.integers(0, 21))
    if kind < 14:  # an event, sometimes with a BOM, whitespace or text around it
        text = (
            draw(st.sampled_from(["", "", "", "\ufeff", " ", "\t"]))
            + draw(event_text())
            + draw(trailers)
        )
        line = text.encode()
    elif kind == 14:
        line = draw(st.binary(max_size=60))
    elif kind == 15:
        line = draw(st.text(max_size=60)).encode()
    elif kind == 16:  # an event cut short
        text = draw(event_text())
        line = text[: draw(st.integers(0, len(text)))].encode()
    elif kind == 17:  # an event with a few bytes replaced (mostly invalid UTF-8)
        data = bytearray(draw(event_text()).encode())
        for _ in range(draw(st.integers(1, 3))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0x80, 0xFF))
        line = bytes(data)
    elif kind == 18:  # any JSON value, e.g. an array or a bare string
        line = json.dumps(draw(json_values)).encode()
    elif kind == 19:  # control characters anywhere
        line = draw(
            st.text(
                alphabet=st.characters(max_codepoint=0x1F) | st.sampled_from('{}[]":,'), max_size=30
            )
        ).encode()
    elif kind == 20:  # two events on one line
        line = (
            draw(event_text()) + draw(st.sampled_from(["", " ", ","])) + draw(event_text())
        ).encode()
    else:
        line = draw(st.sampled_from([b"", b" ", b"\xef\xbb\xbf", b"\xef\xbb", b"\xff", None]))
    return line


def spliced(batch: list[bytes | None], rng: random.Random, count: int) -> list[bytes]:
    """``count`` more lines bred from ``batch``: events with fields crossed over, and byte splices.

    Hypothesis draws at most about a hundred lines per example; a long run multiplies them this
    way (FUZZ_SPLICE) to put many more lines through each Spark call.
    """
    sources = [line for line in batch if line is not None and len(line) < 100_000] or [b"{}"]
    events = []
    for line in sources:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    bred = []
    for _ in range(count):
        roll = rng.random()
        if events and roll < 0.6:  # each field from one of a few parent events
            parents = rng.sample(events, min(len(events), 3))
            keys = sorted(
                {key for parent in parents for key in parent}
            )  # sorted: sets vary by process
            rng.shuffle(keys)
            child = {}
            for key in keys:
                parent = rng.choice(parents)
                if key in parent:
                    child[key] = parent[key]
            if rng.random() < 0.5:  # a new id, so that silver grows
                child["event_id"] = f"s-{rng.randrange(10**9)}"
            text = json.dumps(
                child,
                ensure_ascii=rng.random() < 0.5,
                separators=rng.choice([(",", ":"), (", ", ": ")]),
            )
            bred.append(text.encode() + rng.choice([b"", b"", b"", b" ", b"x", b"}", b"\t"]))
        elif roll < 0.85:  # the head of one line and the tail of another
            head, tail = rng.choice(sources), rng.choice(sources)
            bred.append(head[: rng.randint(0, len(head))] + tail[rng.randint(0, len(tail)) :])
        else:  # a few bytes changed
            data = bytearray(rng.choice(sources) or b" ")
            for _ in range(rng.randint(1, 3)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            bred.append(bytes(data))
    return bred


@st.composite
def batches(draw) -> list[bytes | None]:
    """A batch of lines, some sent again (an at-least-once producer), in any order."""
    batch = draw(st.lists(lines(), min_size=MIN_LINES, max_size=MAX_LINES))
    again = draw(st.lists(st.integers(0, len(batch) - 1), max_size=len(batch) // 10))
    batch = draw(st.permutations(batch + [batch[index] for index in again]))
    if SPLICE:
        batch += spliced(batch, random.Random(draw(st.integers(0, 2**32))), SPLICE * len(batch))
    return batch


# ---- checks -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def campaigns(spark):
    return spark.createDataFrame(sorted(CAMPAIGNS.items()), "ad_id string, campaign_id string")


@pytest.fixture(scope="module")
def campaigns_csv(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fuzz") / "campaigns.csv"
    path.write_text(
        "ad_id,campaign_id\n" + "".join(f"{ad},{campaign}\n" for ad, campaign in CAMPAIGNS.items())
    )
    return path


TOTALS: Counter = Counter()


def per_line(lines: list[bytes | None], campaigns_csv: Path) -> tuple[list[str | None], dict]:
    """The oracle's reason for each line, and what the valid lines say, by event id."""
    reasons, copies = [], {}
    for line in lines:
        expected = expected_from_lines([line], campaigns_csv, INGESTED)
        reasons.append(next(iter(expected.quarantined), None))
        for event_id, event in expected.events.items():
            copies.setdefault(event_id, set()).add(
                (event["campaign_id"], event["millis"], event["event_type"], event["user_id"])
            )
    return reasons, copies


def satisfies_contract(row) -> bool:
    """An independent statement of the contract, on a silver row (plain Python, no shared code)."""
    strings = all(
        isinstance(row[f], str) and row[f].strip(" \t\r\n") for f in FIELDS if f != "event_time"
    )
    latest = INGESTED + timedelta(days=1)
    return (
        strings
        and datetime(1970, 1, 1) <= row.event_time <= latest
        and (row.event_date, row.event_hour) == (row.event_time.date(), row.event_time.hour)
        and row.event_type in EVENT_TYPES
        and row.ad_type in AD_TYPES
        and row.campaign_id == CAMPAIGNS.get(row.ad_id)
        and row.source_file is not None
    )


def classify_and_check(
    bronze,
    campaigns,
    expected,
    lines: list[bytes | None],
    reasons: list[str | None],
    copies: dict,
    source: str,
) -> tuple[list, Counter]:
    """Run the silver functions on ``bronze`` and check every invariant against the oracle's ``expected``.

    ``lines`` and ``reasons`` are the input lines and the oracle's reason for each; ``copies`` maps
    an event id to what each valid line with that id says (silver keeps any one).

    Returns the quarantine rows and the silver rows' count by reason (for the progress totals).
    """
    classified = classify_ad_events(bronze, campaigns).cache()
    try:
        silver = deduplicate_ad_events(valid_ad_events(classified)).collect()
        quarantine = (
            quarantined_ad_events(classified).select("raw_line", "reason", "source_file").collect()
        )
        # Each quarantined line by its exact bytes, to name the lines where silver and the oracle differ.
        exact = (
            classified.filter("reason IS NOT NULL")
            .select(
                F.hex(F.coalesce("raw_bytes", F.col("raw_line").cast("binary"))).alias("line"),
                "raw_line",
                "reason",
            )
            .collect()
        )
        # Every text column valid UTF-8: raw_line and reason_detail of every row, the event fields of silver.
        valid_text = F.least(
            *[F.coalesce(F.is_valid_utf8(column), F.lit(True)) for column in TEXT_COLUMNS]
        )
        totals = classified.select(
            F.count(F.lit(1)).alias("lines"),
            F.count_if(F.col("reason").isNull()).alias("valid"),
            F.count_if(~valid_text).alias("not_utf8"),
        ).first()
    finally:
        classified.unpersist()
    bronze_count, valid_count, not_utf8 = totals.lines, totals.valid, totals.not_utf8

    actual_lines = Counter(
        (None if r.raw_line is None else bytes.fromhex(r.line), r.reason) for r in exact
    )
    wanted_lines = Counter((line, reason) for line, reason in zip(lines, reasons) if reason)
    differ = [
        (line, reason, n)
        for (line, reason), n in (
            (actual_lines - wanted_lines) + (wanted_lines - actual_lines)
        ).items()
    ]
    assert not differ, f"{source}: silver and the oracle differ on: " + "; ".join(
        f"{(line or b'')[:300]!r}: silver {Counter({k: v for k, v in actual_lines.items() if k[0] == line})} "
        f"oracle {Counter({k: v for k, v in wanted_lines.items() if k[0] == line})}"
        for line, _, _ in differ[:5]
    )
    by_reason = Counter(row.reason for row in quarantine)
    duplicates = valid_count - len(silver)
    assert len(silver) + len(quarantine) + duplicates == bronze_count == expected.lines, source
    assert all(row.reason for row in quarantine)
    assert dict(by_reason) == dict(expected.quarantined), source
    assert duplicates == expected.duplicates, source
    assert sorted(row.event_id for row in silver) == sorted(expected.events), source
    for row in silver:
        millis = (
            row.event_time.replace(tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)
        ) // timedelta(milliseconds=1)
        assert (row.campaign_id, millis, row.event_type, row.user_id) in copies[row.event_id], row
        assert satisfies_contract(row), row
    assert not_utf8 == 0
    return quarantine, Counter(
        {**by_reason, "silver": len(silver), "duplicates": duplicates, "lines": bronze_count}
    )


def report(source: str, counts: Counter) -> None:
    TOTALS.update({f"{source}:{key}": value for key, value in counts.items()})
    TOTALS.update(counts)
    if PROGRESS:
        summary = ", ".join(
            f"{key}={value}" for key, value in sorted(TOTALS.items()) if ":" not in key
        )
        print(f"[fuzz] {source} batch: {counts['lines']} lines; totals: {summary}", flush=True)


FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)


@FUZZ_SETTINGS
@given(
    batch=batches(),
    files=st.integers(1, 3),
    crlf=st.booleans(),
    bom=st.booleans(),
    final_break=st.booleans(),
)
def test_landing_lines_are_never_lost_and_never_fail(
    spark, campaigns, campaigns_csv, batch, files, crlf, bom, final_break
):
    records = [line for line in batch if line is not None]  # a file has no null lines
    with tempfile.TemporaryDirectory() as landing:
        for number in range(files):
            part = records[number::files]
            data = (b"\r\n" if crlf else b"\n").join(part) + (
                b"\n" if final_break and part else b""
            )
            Path(landing, f"part-{number}.jsonl").write_bytes(
                (b"\xef\xbb\xbf" if bom else b"") + data
            )
        landing_files = sorted(Path(landing).glob("*.jsonl"))
        read = spark.read.text(f"{landing}/*.jsonl").select(
            "value",
            F.col("_metadata.file_path").alias("source_file"),
            F.lit(INGESTED).alias("ingested_at"),
        )
        bronze = bronze_ad_events(read)
        expected = expected_from_landing(landing, campaigns_csv, INGESTED)
        file_lines = [line for path in landing_files for line in _file_lines(path)]
        reasons, copies = per_line(file_lines, campaigns_csv)
        _, counts = classify_and_check(
            bronze, campaigns, expected, file_lines, reasons, copies, "files"
        )
        # bronze keeps the exact bytes of every line that is not UTF-8, and only of those
        raw = bronze.select(F.hex("raw_bytes").alias("b")).filter("b IS NOT NULL").collect()
        invalid = [line for line in file_lines if not _is_utf8(line)]
        assert sorted(bytes.fromhex(r.b) for r in raw) == sorted(invalid)
    report("files", counts)


@FUZZ_SETTINGS
@given(batch=batches())
def test_kafka_records_are_never_lost_and_never_fail(spark, campaigns, campaigns_csv, batch):
    rows = [
        (
            None if value is None else bytearray(value),
            "fuzz",
            offset % 3,
            offset,
            INGESTED,
            INGESTED,
        )
        for offset, value in enumerate(batch)
    ]
    records = spark.createDataFrame(
        rows,
        "value binary, kafka_topic string, kafka_partition int, kafka_offset bigint, kafka_timestamp timestamp, ingested_at timestamp",
    )
    # What kafka_lines_stream gives: the value cast to a string, bytes as they are.
    bronze = bronze_ad_events(records.withColumn("value", F.col("value").cast("string")))
    expected = expected_from_lines(batch, campaigns_csv, INGESTED)
    reasons, copies = per_line(batch, campaigns_csv)
    quarantine, counts = classify_and_check(
        bronze, campaigns, expected, batch, reasons, copies, "kafka"
    )

    # Each record has the oracle's reason, and keeps its bytes when they are not UTF-8.
    actual = {int(row.source_file.rsplit("/", 1)[1]): row.reason for row in quarantine}
    assert actual == {offset: reason for offset, reason in enumerate(reasons) if reason}
    raw = (
        bronze.select("kafka_offset", F.hex("raw_bytes").alias("b"))
        .filter("b IS NOT NULL")
        .collect()
    )
    assert {r.kafka_offset: bytes.fromhex(r.b) for r in raw} == {
        offset: value
        for offset, value in enumerate(batch)
        if value is not None and not _is_utf8(value)
    }
    report("kafka", counts)


def _is_utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _file_lines(path: Path) -> list[bytes]:
    """A file's lines: a leading BOM dropped, split on CR, LF and CRLF (as a line reader does)."""
    data = path.read_bytes()
    data = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    split = re.split(rb"\r\n|\r|\n", data)
    return split[:-1] if split[-1] == b"" else split
