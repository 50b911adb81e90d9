"""The project's own errors: what is wrong and what to fix, never a traceback a user has to read."""

from __future__ import annotations


class ConfigError(RuntimeError):
    """A setting, argument or declaration is missing or wrong; the message says what to fix."""


class CatalogError(ConfigError):
    """A table declaration is inconsistent; the message names the table and what to fix."""
