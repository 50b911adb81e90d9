"""The oracle's reading of raw event lines: which the event contract admits, and why not the others.

Plain Python over the bytes the producer wrote, sharing no code with the Spark jobs (only the
contract's published field names and reason codes); :mod:`lakehouse_tools.oracle` builds the
expected tables from the lines it admits.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime, timedelta

REQUIRED = (
    "event_id",
    "user_id",
    "page_id",
    "ad_id",
    "ad_type",
    "event_type",
    "event_time",
    "ip_address",
)
EVENT_TYPES = {"view", "click", "purchase"}
AD_TYPES = {"banner", "modal", "sponsored-search", "mail", "mobile"}
MAX_LINE_BYTES = 1024 * 1024
MAX_FUTURE_SKEW_US = 300_000_000  # an event over 5 minutes ahead of its ingestion is quarantined
# No producer means an event before this UTC date (seconds taken for millis land in 1970).
EVENT_TIME_FLOOR_MS = (
    datetime.fromisoformat(os.environ.get("LAKEHOUSE_EVENT_TIME_FLOOR", "2000-01-01"))
    - datetime(1970, 1, 1)
) // timedelta(milliseconds=1)
_BOM = "\ufeff"
_JSON_WHITESPACE = " \t\r\n"
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")  # what Spark's line reader splits on, and nothing else
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # any surrogate, high or low
# JSON that silver's parser (Jackson, default limits) refuses, though the grammar allows it:
# nesting deeper than 1000 (999 for a line: silver parses it inside one more array), integers of
# more than 1000 digits, other numbers of more than 1000 digits in all, names over 50,000 chars.
_MAX_DEPTH = 999
_MAX_NUMBER_DIGITS = 1000
_MAX_NAME_CHARS = 50_000


class _Malformed(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    # Duplicate keys are ambiguous (which value wins depends on the reader): malformed, at any depth.
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys) or any(
        len(key.encode("utf-16-le")) // 2 > _MAX_NAME_CHARS for key in keys
    ):
        raise _Malformed("duplicate or over-long key")
    return dict(pairs)


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_NUMBER_DIGITS:
        raise _Malformed("integer too long")
    return int(text)


def _number(text: str) -> float:
    if sum(char.isdigit() for char in text) > _MAX_NUMBER_DIGITS:
        raise _Malformed("number too long")
    return float(text)


def _no_constant(text: str):
    raise _Malformed(f"{text} is not JSON")


def _depth(text: str) -> int:
    """The deepest nesting of arrays and objects in a JSON text (brackets in strings don't count)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _strings(value):
    """Every string in a parsed JSON value, keys included."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            yield from item.keys()
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _parse(text: str):
    """The one JSON value of ``text``, or :class:`_Malformed` (``ValueError``)."""
    import sys

    deep = text.count("[") + text.count("{") > _MAX_DEPTH
    if deep and _depth(text) > _MAX_DEPTH:
        raise _Malformed("nested too deep")
    limit = sys.getrecursionlimit()
    if deep:  # Python's parser recurses once per level
        sys.setrecursionlimit(max(limit, 4 * _MAX_DEPTH + 100))
    try:
        value = json.loads(
            text,
            object_pairs_hook=_unique_keys,
            parse_int=_integer,
            parse_float=_number,
            parse_constant=_no_constant,
        )
    finally:
        sys.setrecursionlimit(limit)
    # An escaped lone surrogate ("\ud800") is valid JSON grammar but no character: malformed.
    if _SURROGATE_ESCAPE.search(text):
        for string in _strings(value):
            try:
                string.encode("utf-8")
            except UnicodeEncodeError:
                raise _Malformed("lone surrogate") from None
    return value


def _blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip(_JSON_WHITESPACE))


def line_verdict(
    line: str | bytes | None, ads: dict[str, str], ingested_at: datetime | None = None
) -> tuple[str | None, dict | None]:
    """(reason, event): the quarantine reason of a raw line (None if valid) and, if valid, its event.

    ``line`` is the raw line as bytes (or text: a ``str`` that is not encodable, i.e. holds lone
    surrogates, is not UTF-8); None is a record without a value. The checks and their order are
    the contract's. Without ``ingested_at`` the future check is skipped: the oracle cannot know when
    a job read a landing file.
    """
    if line is None:
        return "empty_line", None
    if isinstance(line, str):
        try:
            raw = line.encode("utf-8")
        except UnicodeEncodeError:
            return "invalid_utf8", None
    else:
        raw = line
    if raw.startswith(b"\x1f\x8b"):  # gzip's magic bytes: a compressed file named .jsonl
        return "gzip_payload", None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "invalid_utf8", None
    if len(raw) > MAX_LINE_BYTES:
        return "line_too_long", None
    if text.startswith(_BOM):
        text = text[1:]
    if not text.strip(_JSON_WHITESPACE):
        return "empty_line", None
    try:
        event = _parse(text)
    except ValueError:  # json.JSONDecodeError and _Malformed
        return "malformed_json", None
    if not isinstance(event, dict):
        return "malformed_json", None
    if any(_blank(event.get(name)) for name in REQUIRED):
        return "missing_required_field", None
    if any(not isinstance(event[name], str) for name in REQUIRED):
        return "wrong_field_type", None
    if not re.fullmatch(r"[0-9]{1,15}", event["event_time"]):
        return "invalid_event_time", None
    if int(event["event_time"]) < EVENT_TIME_FLOOR_MS:
        return "event_time_too_old", None
    if ingested_at is not None:
        moment = ingested_at if ingested_at.tzinfo else ingested_at.replace(tzinfo=UTC)
        ingested_us = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
        if int(event["event_time"]) * 1000 > ingested_us + MAX_FUTURE_SKEW_US:
            return "event_time_in_future", None
    if event["event_type"] not in EVENT_TYPES:
        return "unknown_event_type", None
    if event["ad_type"] not in AD_TYPES:
        return "unknown_ad_type", None
    if event["ad_id"] not in ads:
        return "unknown_ad_id", None
    return None, event


def file_lines(data: bytes) -> list[bytes]:
    """A file's lines as Spark's text reader gives them: a leading BOM dropped, split on CR, LF, CRLF."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    lines = _LINE_BREAK.split(data)
    return lines[:-1] if lines[-1] == b"" else lines
