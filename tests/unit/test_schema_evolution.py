"""A declaration that gained nullable columns at the end is taken in place; any other change is refused with the fix."""

from __future__ import annotations

import dataclasses
import json

import pytest

from lakehouse import catalog
from lakehouse.errors import ConfigError
from lakehouse.schema_evolution import added_columns

HOURLY = catalog.get("gold.campaign_hourly")


def fields_of(spec) -> list[dict]:
    """The schema fields Delta's log records for a table created from ``spec``."""
    return json.loads(spec.spark_schema().json())["fields"]


def declared(spec, schema: str):
    return dataclasses.replace(spec, schema=schema)


def test_an_unchanged_declaration_adds_nothing():
    assert added_columns(fields_of(HOURLY), HOURLY) == ()


def test_a_new_nullable_column_at_the_end_is_added():
    wider = declared(HOURLY, HOURLY.schema + ", revenue DOUBLE")
    assert [(c.name, c.type) for c in added_columns(fields_of(HOURLY), wider)] == [
        ("revenue", "DOUBLE")
    ]


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        (HOURLY.schema + ", revenue DOUBLE NOT NULL", "revenue DOUBLE NOT NULL"),
        (
            HOURLY.schema.replace("distinct_users BIGINT", "distinct_users INT"),
            "distinct_users INT",
        ),
        (HOURLY.schema.replace("distinct_users", "users"), "users BIGINT"),
        (HOURLY.schema.replace(", ctr DOUBLE", ""), "ctr DOUBLE"),
    ],
    ids=["not null", "retyped", "renamed", "dropped"],
)
def test_any_other_change_is_refused_naming_it_and_the_full_refresh(schema, said):
    with pytest.raises(ConfigError) as refused:
        added_columns(fields_of(HOURLY), declared(HOURLY, schema))
    message = str(refused.value)
    assert said in message and "full_refresh=gold" in message and "Nothing was written" in message


def test_the_schema_is_read_from_the_newest_checkpoint_and_the_commits_after_it(tmp_path):
    """A table's schema comes from its checkpoint and the commits after it, not from every commit
    log retention keeps: an older commit's metaData (here unreadable on purpose) is never read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lakehouse import delta_log

    log = tmp_path / "_delta_log"
    log.mkdir()
    fields = fields_of(HOURLY)
    metadata = {"id": "t", "schemaString": json.dumps({"type": "struct", "fields": fields})}
    (log / f"{0:020d}.json").write_text('not json, "metaData" mentioned\n')  # before the checkpoint
    pq.write_table(pa.table({"metaData": [metadata]}), log / f"{1:020d}.checkpoint.parquet")
    (log / "_last_checkpoint").write_text(json.dumps({"version": 1, "size": 1}))
    (log / f"{2:020d}.json").write_text(json.dumps({"commitInfo": {"operation": "WRITE"}}) + "\n")
    assert delta_log.schema_fields(str(tmp_path)) == fields
    changed = {**metadata, "schemaString": json.dumps({"type": "struct", "fields": fields[:2]})}
    (log / f"{3:020d}.json").write_text(json.dumps({"metaData": changed}) + "\n")
    assert delta_log.schema_fields(str(tmp_path)) == fields[:2]
