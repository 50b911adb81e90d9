"""The lakehouse on object storage (an ``s3a://`` root): connector and commit settings."""

from __future__ import annotations


def spark_conf() -> dict[str, str]:
    """Settings a driver needs for the lakehouse's storage (none for a local root)."""
    return {}
