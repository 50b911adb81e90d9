"""Deterministic YSB ad-event generator: writes JSON lines into the landing zone.

Usage:
    python -m lakehouse_tools.generator --start 2026-11-20T00:00Z --hours 3 --events-per-second 2 --seed 7

Every hour is generated from (seed, hour) alone, so generating hours 0-2 today and hour 3
tomorrow gives the same files as generating hours 0-3 at once (an hourly drip). Files appear
atomically: each is written under a hidden temporary name (which Spark's file source ignores)
and renamed into place; an hour whose files already exist is not written again.

Users act in bursts, so that sessions (30 minutes of inactivity) mean something: an hour's
events are spread over bursts (a user, a start, a few minutes' length, a few to a few dozen
events), and a user's bursts are tens of minutes to hours apart. A user whose burst ends late in
hour h often comes back early in hour h+1 (a session across the hour): hour h+1 recomputes hour
h's bursts from (seed, h) to know who, so adjacent hours are correlated and each hour still
depends on nothing but (seed, hour). Ads, ad types and event types are drawn per event as in
YSB, independently of the burst; an hour holds exactly ``int(events_per_second * 3600)`` events
(malformed lines included, re-sent duplicates not).

Layout: ``<root>/landing/events/YYYY-MM-DD/HH/part-NNNN.jsonl`` (the hour the producer wrote
it, not the event hour: late events sit in a later folder), ``<root>/landing/campaigns/
campaigns.csv`` (ad -> campaign), and ``<root>/landing/manifests/YYYY-MM-DDTHH.json`` (what
the generator put into each hour: its own record of the truth).

The same lines can go to a Kafka topic instead, one record per line: see
:mod:`lakehouse_tools.kafka_producer` (which imports this module, never the other way round).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lakehouse.config import Lakehouse
from lakehouse.files import lake_path, write_atomic

AD_TYPES = ("banner", "modal", "sponsored-search", "mail", "mobile")
EVENT_TYPES = ("view", "click", "purchase")
EVENT_TYPE_WEIGHTS = (0.80, 0.15, 0.05)
CAMPAIGNS = 100
ADS_PER_CAMPAIGN = 10
USERS = 1000
PAGES = 200
HOUR_MS = 3_600_000
# Bursts: a burst's events are lognormal (mean about MEAN_EVENTS_PER_BURST, from 1 up to
# MAX_EVENTS_PER_BURST), seconds to a minute apart (THINK_MS median), at most BURST_MAX_MS in all.
# The user pool grows beyond USERS at high rates so that a user bursts BURSTS_PER_USER_HOUR
# times an hour on average at most: a user's bursts stay tens of minutes to hours apart.
MEAN_EVENTS_PER_BURST = 10
MAX_EVENTS_PER_BURST = 60
THINK_MS = 20_000
BURST_MAX_MS = 20 * 60_000
BURSTS_PER_USER_HOUR = 0.75
# A burst starting in an hour's second half is followed, with probability RETURN_PROBABILITY, by
# the same user's return after a pause (exponential, mean RETURN_PAUSE_MS); a return that falls in
# the next hour takes the place of one of that hour's bursts starting in its first half.
RETURN_PROBABILITY = 0.5
RETURN_PAUSE_MS = 8 * 60_000


@dataclass(frozen=True)
class Disorder:
    """How messy the producer is; fractions are of the hour's events."""

    jitter_seconds: float = 5.0  # event time precedes arrival by up to this much
    late_fraction: float = 0.01  # events that arrive far behind the watermark
    late_by_minutes: float = 90.0
    duplicate_fraction: float = 0.01  # re-sent by an at-least-once producer
    malformed_fraction: float = 0.005  # lines that are not valid events

    @classmethod
    def none(cls) -> Disorder:
        return cls(0.0, 0.0, 0.0, 0.0, 0.0)


@dataclass
class HourManifest:
    """What one generated hour holds: the generator's own ground truth."""

    hour: str
    files: int
    lines: int
    unique_events: int
    duplicates: int
    malformed: int
    late: int


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def campaign_dimension(seed: int) -> list[tuple[str, str]]:
    """(ad_id, campaign_id) pairs: CAMPAIGNS campaigns with ADS_PER_CAMPAIGN ads each."""
    rng = random.Random(f"campaigns-{seed}")
    pairs = []
    for _ in range(CAMPAIGNS):
        campaign_id = _uuid(rng)
        pairs.extend((_uuid(rng), campaign_id) for _ in range(ADS_PER_CAMPAIGN))
    return pairs


def _population(seed: int) -> tuple[list[tuple[str, str]], list[str]]:
    rng = random.Random(f"population-{seed}")
    users = [
        (_uuid(rng), f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}")
        for _ in range(USERS)
    ]
    pages = [_uuid(rng) for _ in range(PAGES)]
    return users, pages


def _more_users(users: list[tuple[str, str]], seed: int, count: int) -> list[tuple[str, str]]:
    """``count`` (user_id, ip_address) pairs: the population's ``users``, then more if needed."""
    rng = random.Random(f"more-users-{seed}")
    for _ in range(count - len(users)):
        users.append(
            (_uuid(rng), f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}")
        )
    return users


def _new_bursts(hour_start: datetime, seed: int, count: int, pool: int) -> list[list[int]]:
    """An hour's bursts as [user, start, length, events] (offsets in ms), exactly ``count`` events in all.

    Drawn from (seed, hour) alone, so the next hour can recompute them to find who comes back.
    """
    rng = random.Random(f"bursts-{seed}-{hour_start.isoformat()}")
    mu = math.log(MEAN_EVENTS_PER_BURST) - 0.5  # lognormal(mu, 1) has mean MEAN_EVENTS_PER_BURST
    bursts, left = [], count
    while left:
        events = min(left, MAX_EVENTS_PER_BURST, max(1, round(rng.lognormvariate(mu, 1.0))))
        start = rng.randrange(HOUR_MS)
        length = min(
            int((events - 1) * THINK_MS * rng.lognormvariate(0.0, 0.5)),
            BURST_MAX_MS,
            HOUR_MS - 1 - start,
        )
        bursts.append([rng.randrange(pool), start, length, events])
        left -= events
    return bursts


def _hour_bursts(hour_start: datetime, seed: int, count: int, pool: int) -> list[list[int]]:
    """An hour's own bursts, the first-half ones partly replaced by returns from the hour before.

    Only second-half bursts cause returns and only first-half ones are replaced, so whether an
    hour's burst happened never depends on the hour before it: no chain back to the first hour.
    """
    previous_start = hour_start - timedelta(hours=1)
    rng = random.Random(f"returns-{seed}-{previous_start.isoformat()}")
    returns = []
    for user, start, length, _ in _new_bursts(previous_start, seed, count, pool):
        if start >= HOUR_MS // 2 and rng.random() < RETURN_PROBABILITY:
            back_at = start + length + int(rng.expovariate(1 / RETURN_PAUSE_MS)) - HOUR_MS
            if 0 <= back_at < HOUR_MS // 2:
                returns.append((user, back_at))
    bursts = _new_bursts(hour_start, seed, count, pool)
    replaceable = (burst for burst in bursts if burst[1] < HOUR_MS // 2)
    for (user, back_at), burst in zip(returns, replaceable):  # returns beyond the slots are dropped
        burst[0], burst[1], burst[2] = user, back_at, min(burst[2], HOUR_MS - 1 - back_at)
    return bursts


def _event_offsets(rng: random.Random, bursts: list[list[int]], pool: int) -> list[tuple[int, int]]:
    """(offset ms, user) of every event of ``bursts``, spread over each burst, sorted by offset."""
    random_ = rng.random
    # One int per event (offset * pool + user) sorts much faster than tuples.
    keys = [
        (start + int(random_() * length)) * pool + user
        for user, start, length, events in bursts
        for _ in range(events)
    ]
    keys.sort()
    return [divmod(key, pool) for key in keys]


def _malformed_line(rng: random.Random, good_line: str) -> str:
    """A line that silver must quarantine: broken JSON, a missing field or an unknown ad."""
    kind = rng.choice(("truncated", "not_json", "missing_field", "unknown_ad"))
    if kind == "truncated":
        return good_line[: rng.randrange(1, len(good_line) - 1)]
    if kind == "not_json":
        return "this is not json"
    event = json.loads(good_line)
    if kind == "missing_field":
        del event[rng.choice(("ad_id", "event_type", "event_time", "event_id"))]
    else:
        event["ad_id"] = _uuid(rng)
    return json.dumps(event)


def generate_hour(
    hour_start: datetime,
    events_per_second: float,
    seed: int,
    disorder: Disorder = Disorder(),
    files_per_hour: int = 4,
) -> tuple[list[list[str]], HourManifest]:
    """The lines of one producer hour, split into ``files_per_hour`` files, and its manifest."""
    rng = random.Random(f"events-{seed}-{hour_start.isoformat()}")
    ads = [ad for ad, _ in campaign_dimension(seed)]
    count = int(events_per_second * 3600)
    pool = max(USERS, round(count / MEAN_EVENTS_PER_BURST / BURSTS_PER_USER_HOUR))
    users, pages = _population(seed)
    users = _more_users(users, seed, pool)
    hour_ms = int(hour_start.timestamp() * 1000)

    lines: list[tuple[int, str]] = []  # (arrival offset ms, line)
    late = duplicates = malformed = 0
    for arrival, user in _event_offsets(rng, _hour_bursts(hour_start, seed, count, pool), pool):
        user_id, ip_address = users[user]
        event_ms = hour_ms + arrival - int(rng.random() * disorder.jitter_seconds * 1000)
        if rng.random() < disorder.late_fraction:
            event_ms -= int(disorder.late_by_minutes * 60_000)
            late += 1
        event = {
            "event_id": _uuid(rng),
            "user_id": user_id,
            "page_id": rng.choice(pages),
            "ad_id": rng.choice(ads),
            "ad_type": rng.choice(AD_TYPES),
            "event_type": rng.choices(EVENT_TYPES, EVENT_TYPE_WEIGHTS)[0],
            "event_time": str(event_ms),
            "ip_address": ip_address,
        }
        line = json.dumps(event)
        if rng.random() < disorder.malformed_fraction:
            lines.append((arrival, _malformed_line(rng, line)))
            malformed += 1
            continue
        lines.append((arrival, line))
        if rng.random() < disorder.duplicate_fraction:
            # Re-sent a little later, possibly into the next file of the hour.
            lines.append((min(arrival + rng.randrange(120_000), 3_599_999), line))
            duplicates += 1
    lines.sort(key=lambda item: item[0])

    per_file_ms = 3_600_000 // files_per_hour
    files: list[list[str]] = [[] for _ in range(files_per_hour)]
    for arrival, line in lines:
        files[min(arrival // per_file_ms, files_per_hour - 1)].append(line)
    manifest = HourManifest(
        hour=hour_start.strftime("%Y-%m-%dT%H:00:00Z"),
        files=files_per_hour,
        lines=len(lines),
        unique_events=count - malformed,
        duplicates=duplicates,
        malformed=malformed,
        late=late,
    )
    return files, manifest


def write_campaigns(lakehouse: Lakehouse, seed: int) -> Path:
    """Write the ad -> campaign file (CSV with a header) for ``seed``."""
    path = lake_path(lakehouse.landing_campaigns)
    body = "ad_id,campaign_id\n" + "".join(
        f"{ad},{campaign}\n" for ad, campaign in campaign_dimension(seed)
    )
    write_atomic(path, body)
    return path


def write_hours(
    lakehouse: Lakehouse,
    start: datetime,
    hours: int,
    events_per_second: float,
    seed: int,
    disorder: Disorder = Disorder(),
    files_per_hour: int = 4,
) -> list[HourManifest]:
    """Generate ``hours`` producer hours from ``start`` into the landing zone (skipping existing ones)."""
    manifests = []
    for offset in range(hours):
        hour_start = start + timedelta(hours=offset)
        hour_dir = lake_path(lakehouse.landing_events) / hour_start.strftime("%Y-%m-%d/%H")
        manifest_path = (
            lake_path(lakehouse.root) / "landing" / "manifests" / f"{hour_start:%Y-%m-%dT%H}.json"
        )
        if manifest_path.exists():
            manifests.append(HourManifest(**json.loads(manifest_path.read_text())))
            continue
        files, manifest = generate_hour(
            hour_start, events_per_second, seed, disorder, files_per_hour
        )
        for index, lines in enumerate(files):
            write_atomic(
                hour_dir / f"part-{index:04d}.jsonl", "".join(f"{line}\n" for line in lines)
            )
        write_atomic(manifest_path, json.dumps(asdict(manifest), indent=2))
        manifests.append(manifest)
    return manifests


def parse_hour(value: str) -> datetime:
    """An ISO hour such as 2026-11-20T13:00Z (UTC when no offset is given), truncated to the hour."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def data_arguments(description: str) -> argparse.ArgumentParser:
    """The options that say which data to generate (shared by the files and the Kafka CLI)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--lakehouse-root", help="default: $LAKEHOUSE_ROOT")
    parser.add_argument(
        "--start", type=parse_hour, required=True, help="first hour, e.g. 2026-11-20T00:00Z"
    )
    parser.add_argument("--hours", type=int, default=1)
    parser.add_argument("--events-per-second", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--files-per-hour", type=int, default=4)
    parser.add_argument("--jitter-seconds", type=float, default=Disorder.jitter_seconds)
    parser.add_argument("--late-fraction", type=float, default=Disorder.late_fraction)
    parser.add_argument("--late-by-minutes", type=float, default=Disorder.late_by_minutes)
    parser.add_argument("--duplicate-fraction", type=float, default=Disorder.duplicate_fraction)
    parser.add_argument("--malformed-fraction", type=float, default=Disorder.malformed_fraction)
    return parser


def parse_data_arguments(
    parser: argparse.ArgumentParser, argv: list[str] | None
) -> tuple[argparse.Namespace, Disorder]:
    """Parsed options and the disorder they ask for; a bad size is a usage error."""
    args = parser.parse_args(argv)
    if args.hours < 1 or args.events_per_second <= 0:
        parser.error("--hours must be >= 1 and --events-per-second > 0")
    disorder = Disorder(
        args.jitter_seconds,
        args.late_fraction,
        args.late_by_minutes,
        args.duplicate_fraction,
        args.malformed_fraction,
    )
    return args, disorder


def main(argv: list[str] | None = None) -> None:
    args, disorder = parse_data_arguments(data_arguments(__doc__.split("\n\n")[0]), argv)
    lakehouse = Lakehouse.from_env(args.lakehouse_root)
    write_campaigns(lakehouse, args.seed)
    manifests = write_hours(
        lakehouse,
        args.start,
        args.hours,
        args.events_per_second,
        args.seed,
        disorder,
        args.files_per_hour,
    )
    print_manifests(manifests, "files")
    print(f"landing zone: {lakehouse.landing_events}")


def print_manifests(manifests: list[HourManifest], unit: str) -> None:
    for manifest in manifests:
        where = f"lines in {manifest.files} files" if unit == "files" else "records"
        print(
            f"{manifest.hour}: {manifest.lines} {where} "
            f"({manifest.unique_events} events, {manifest.duplicates} duplicates, "
            f"{manifest.malformed} malformed, {manifest.late} late)"
        )


if __name__ == "__main__":
    main()
