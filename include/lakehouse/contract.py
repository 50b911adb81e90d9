"""The event contract: what a producer promises about a YSB ad event (Spark-free, shared by every layer)."""

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

# Where a Kafka record came from, kept in bronze (null for rows read from landing files).
KAFKA_LINEAGE_COLUMNS = ("kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp")
