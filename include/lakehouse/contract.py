"""The event contract: what a producer promises about a YSB ad event (Spark-free, shared by every layer)."""

import os
from datetime import UTC, datetime

# The YSB event as the producer writes it: every field a string (event_time is epoch millis).
RAW_EVENT_FIELDS = (
    "event_id",
    "user_id",
    "page_id",
    "ad_id",
    "ad_type",
    "event_type",
    "event_time",
    "ip_address",
)
AD_TYPES = ("banner", "modal", "sponsored-search", "mail", "mobile")
EVENT_TYPES = ("view", "click", "purchase")

# event_time is epoch milliseconds written as 1 to 15 ASCII digits in a JSON string. The digits
# alone admit 1970, which no producer means: a time before the floor (seconds taken for millis,
# "1763596800" being 1970-01-21; epoch 0; a default date) is quarantined as event_time_too_old,
# and a value of 10 digits is flagged as likely epoch seconds in the reason's detail. The floor is
# a UTC date, LAKEHOUSE_EVENT_TIME_FLOOR (ISO, default 2000-01-01), the same for the jobs and the
# engine (set it in the environment both start in).
EVENT_TIME_FLOOR = os.environ.get("LAKEHOUSE_EVENT_TIME_FLOOR", "2000-01-01")
EVENT_TIME_FLOOR_MILLIS = int(
    datetime.fromisoformat(EVENT_TIME_FLOOR).replace(tzinfo=UTC).timestamp() * 1000
)
# Epoch seconds of 2001-09-09 to 2286 have 10 digits; milliseconds of those years have 13.
SECONDS_DIGITS = 10

# Where a Kafka record came from, kept in bronze (null for rows read from landing files).
KAFKA_LINEAGE_COLUMNS = ("kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp")
