"""Session fragments: a micro-batch's events cut by Arrow into runs of one user's events, a
bucket of users' runs in one cell, the stateful processor's and the batch form's input."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse.tables.gold_user_sessions import SESSION_GAP_MS

# The query's key: a bucket of users (a hash of user_id), not the user. Each state or timer call
# is a round trip between the Python worker and the JVM's state server, a few per key and batch;
# per user they were most of the query's cost (1M events: some 40k users, issue 39). Per bucket
# they are a few hundred per batch; a bucket's value (its users' open sessions as JSON) stays
# within a few hundred kB at 5M events over 3 hours.
USER_BUCKETS = 256
EVENT_FIELDS = ["event_ms", "event_id", "event_type", "ad_id", "campaign_id"]
# What the processor reads: per bucket of users and input partition of a micro-batch, one row
# (:func:`session_fragments`). ``fragments`` is an Arrow IPC stream of FRAGMENT_COLUMNS, a fragment
# per run of one user's events with the figures the state keeps; ``fragment_events`` one of their events
# (EVENT_FIELDS, in fragment order), read only for a fragment that starts behind the watermark and
# so may hold late events. PySpark hands a row-based processor each cell of its input as a Python
# object made on its own (an Arrow scalar each), which was the processor's largest cost; a bucket's
# fragments arrive in one cell instead and are read column by column.
FRAGMENT_COLUMNS = [
    "user_id",
    "start_ms",
    "end_ms",
    "first_event_id",
    "first_campaign_id",
    "last_event_id",
    "last_campaign_id",
    "events",
    "views",
    "clicks",
    "purchases",
    "ads",
    "campaigns",
]
FRAGMENTS_SCHEMA = "bucket INT, fragments BINARY, fragment_events BINARY"


def session_fragments(batches, with_events: bool = True):
    """A partition's events (Arrow batches of ``bucket``, ``user_id`` and EVENT_FIELDS) -> its session fragments.

    For ``mapInArrow`` before the stateful processor. A fragment is a run of one user's events of
    this partition, in (event_ms, event_id) order, each less than the gap after the one before: the
    rule of :func:`add_events`, so a fragment lies within one session of the user, and merging a
    user's fragments gives the sessions their events would. Computed with Arrow and numpy, and
    passed on a bucket at a time (FRAGMENTS_SCHEMA): the processor's Python then handles a fragment
    rather than every event's fields, which were most of the query's Python time (issue 39).
    Without ``with_events`` (the batch form) the fragments' events are left out (nulls).
    """
    batches = list(batches)
    if not batches:
        return
    table = pa.Table.from_batches(batches).combine_chunks()
    n = table.num_rows
    if n == 0:
        return
    events = {name: table[name].chunk(0) for name in table.column_names}
    codes = {
        name: pc.dictionary_encode(events[name])
        for name in ("user_id", "event_type", "ad_id", "campaign_id")
    }
    # By bucket, user (any order of users), then time; event ids are unique in silver and break ties.
    order = pc.sort_indices(
        pa.table(
            {
                "bucket": events["bucket"],
                "user": codes["user_id"].indices,
                "event_ms": events["event_ms"],
                "event_id": events["event_id"],
            }
        ),
        sort_keys=[(name, "ascending") for name in ("bucket", "user", "event_ms", "event_id")],
    ).to_numpy()
    user = codes["user_id"].indices.to_numpy()[order]
    event_ms = events["event_ms"].to_numpy()[order]
    starts = np.ones(n, dtype=bool)
    starts[1:] = (user[1:] != user[:-1]) | (np.diff(event_ms) >= SESSION_GAP_MS)
    first = np.flatnonzero(starts)
    last = np.append(first[1:], n) - 1
    fragment = np.cumsum(starts) - 1

    def count(kind: str) -> pa.Array:
        matches = np.flatnonzero(
            codes["event_type"].dictionary.to_numpy(zero_copy_only=False) == kind
        )
        is_kind = np.isin(codes["event_type"].indices.to_numpy()[order], matches)
        return pa.array(np.add.reduceat(is_kind.astype(np.int64), first))

    def distinct(name: str) -> pa.Array:
        size = len(codes[name].dictionary)
        pairs = np.sort(fragment * size + codes[name].indices.to_numpy()[order])
        pairs = pairs[np.append(True, pairs[1:] != pairs[:-1])]
        bounds = np.searchsorted(pairs // size, np.arange(len(first) + 1))
        return pa.ListArray.from_arrays(
            pa.array(bounds.astype(np.int32)), codes[name].dictionary.take(pa.array(pairs % size))
        )

    first_at, last_at = pa.array(order[first]), pa.array(order[last])
    fragments = pa.table(
        {
            "user_id": events["user_id"].take(first_at),
            "start_ms": pa.array(event_ms[first]),
            "end_ms": pa.array(event_ms[last]),
            "first_event_id": events["event_id"].take(first_at),
            "first_campaign_id": events["campaign_id"].take(first_at),
            "last_event_id": events["event_id"].take(last_at),
            "last_campaign_id": events["campaign_id"].take(last_at),
            "events": pa.array((last - first + 1).astype(np.int64)),
            "views": count("view"),
            "clicks": count("click"),
            "purchases": count("purchase"),
            "ads": distinct("ad_id"),
            "campaigns": distinct("campaign_id"),
        }
    )
    in_order = pa.array(order)
    sorted_events = pa.table({name: events[name].take(in_order) for name in EVENT_FIELDS})
    bucket = events["bucket"].to_numpy()[order[first]]  # each fragment's
    cut = np.flatnonzero(np.diff(bucket)) + 1
    fragment_starts, fragment_ends = np.append(0, cut), np.append(cut, len(first))
    event_bounds = np.append(first, n)

    def ipc(part: pa.Table) -> bytes:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, part.schema) as writer:
            writer.write_table(part)
        return sink.getvalue().to_pybytes()

    fragment_blobs, event_blobs = [], []
    for start, end in zip(fragment_starts.tolist(), fragment_ends.tolist(), strict=True):
        fragment_blobs.append(ipc(fragments.slice(start, end - start)))
        rows_from, rows_to = int(event_bounds[start]), int(event_bounds[end])
        event_blobs.append(
            ipc(sorted_events.slice(rows_from, rows_to - rows_from)) if with_events else None
        )
    yield pa.RecordBatch.from_arrays(
        [
            pa.array(bucket[fragment_starts], pa.int32()),
            pa.array(fragment_blobs, pa.binary()),
            pa.array(event_blobs, pa.binary()),
        ],
        names=["bucket", "fragments", "fragment_events"],
    )


def read_fragments(blob: bytes) -> Iterator[tuple]:
    """A ``fragments`` cell -> its fragments, tuples of FRAGMENT_COLUMNS (Arrow to Python a column at a time)."""
    table = pa.ipc.open_stream(blob).read_all()
    return zip(*(column.to_pylist() for column in table.columns), strict=True)


def read_events(blob: bytes):
    """A ``fragment_events`` cell -> its events as an Arrow table (EVENT_FIELDS), for :func:`events_of`."""
    return pa.ipc.open_stream(blob).read_all()


def events_of(events, first_row: int, count: int) -> list[tuple]:
    """The events of one fragment: ``count`` rows of an ``events`` table from ``first_row``, as tuples."""
    part = events.slice(first_row, count)
    return list(zip(*(column.to_pylist() for column in part.columns), strict=True))


def user_bucket(user_id: Column) -> Column:
    """The query's key for a user: one of USER_BUCKETS, a hash of the user id (Spark's, stable across runs)."""
    return F.pmod(F.xxhash64(user_id), F.lit(USER_BUCKETS)).cast("int")


def fragments_by_bucket(events: DataFrame, with_events: bool = True) -> DataFrame:
    """``events`` (user_id and EVENT_FIELDS) as FRAGMENTS_SCHEMA rows, keyed by bucket: the stream's and the batch form's first step."""
    return events.withColumn("bucket", user_bucket(F.col("user_id"))).mapInArrow(
        partial(session_fragments, with_events=with_events), FRAGMENTS_SCHEMA
    )
