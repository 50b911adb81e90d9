"""Tables by name: the metastore every driver registers the catalog's tables in."""

from __future__ import annotations


def spark_conf() -> dict[str, str]:
    """Settings a driver needs to find the metastore (none yet: Spark's in-memory catalog)."""
    return {}
