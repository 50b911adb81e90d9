"""DDL schemas read without Spark: the DAG reads the catalog at parse time, so no pyspark here."""

from __future__ import annotations

import re
from dataclasses import dataclass

from lakehouse.errors import CatalogError

# DDL type names -> Spark's JSON type names (the types the tables use; extend as needed).
_TYPES = {
    "STRING": "string",
    "BIGINT": "long",
    "INT": "integer",
    "DOUBLE": "double",
    "BOOLEAN": "boolean",
    "DATE": "date",
    "TIMESTAMP": "timestamp",
    "BINARY": "binary",
}


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # DDL, e.g. BIGINT or MAP<STRING, BIGINT>
    nullable: bool = True


def parse_columns(ddl: str) -> tuple[Column, ...]:
    """The columns of a DDL schema (``name TYPE [NOT NULL], ...``), parsed without Spark."""
    parts, depth, current = [], 0, ""
    for char in ddl:
        depth += char in "<(" and 1 or char in ">)" and -1 or 0
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    columns = []
    for part in filter(str.strip, parts):
        match = re.fullmatch(
            r"\s*(\w+)\s+(.+?)(\s+NOT\s+NULL)?\s*", part, flags=re.IGNORECASE | re.DOTALL
        )
        if not match:
            raise CatalogError(
                f"Cannot read column {part.strip()!r} of schema {ddl!r}: expected 'name TYPE [NOT NULL]'"
            )
        columns.append(Column(match[1], re.sub(r"\s+", " ", match[2].upper()), not match[3]))
    return tuple(columns)


def column_names(ddl: str) -> tuple[str, ...]:
    """The column names of a DDL schema, in order."""
    return tuple(column.name for column in parse_columns(ddl))


def json_type(ddl_type: str):
    """A DDL type as Spark's JSON schema type (what ``StructType.fromJson`` reads)."""
    map_type = re.fullmatch(r"MAP<\s*(.+?)\s*,\s*(.+?)\s*>", ddl_type)
    if map_type:
        key, value = map_type.groups()
        return {
            "type": "map",
            "keyType": json_type(key),
            "valueType": json_type(value),
            "valueContainsNull": True,
        }
    if ddl_type not in _TYPES:
        raise CatalogError(
            f"Unsupported column type {ddl_type!r}; the catalog knows {', '.join(_TYPES)} and MAP<,>"
        )
    return _TYPES[ddl_type]
