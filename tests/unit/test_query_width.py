"""`lakehouse query` to a pipe: lines cut to a readable width, unless --wide (no JVM: delta-rs writes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from lakehouse.config import Lakehouse
from lakehouse.object_storage import write_delta
from lakehouse_tools.cli import PIPE_WIDTH

COMMAND = Path(sys.executable).parent / "lakehouse"
RAW_LINE = '{"event_id": "e-1", "note": "' + "x" * 380 + '"}'  # a quarantined line of 400 chars


def piped(lakehouse: Lakehouse, *args: str) -> list[str]:
    done = subprocess.run(
        [str(COMMAND), "query", *args, "--lakehouse-root", lakehouse.root],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_piped_table_is_cut_to_the_pipe_width_and_wide_keeps_values_whole(tmp_path):
    lakehouse = Lakehouse(root=str(tmp_path / "lakehouse"))
    rows = pa.Table.from_pylist(
        [{"reason": "malformed_json", "raw_line": RAW_LINE}],
        schema=pa.schema([("reason", pa.string()), ("raw_line", pa.string())]),
    )
    write_delta(lakehouse.table("silver.quarantine_ad_events").path, rows)
    sql = "select reason, raw_line from silver.quarantine_ad_events"

    lines = piped(lakehouse, sql)
    assert max(map(len, lines)) <= PIPE_WIDTH, lines
    cut_line = RAW_LINE[: PIPE_WIDTH - len("malformed_json  ") - 1] + "…"
    assert lines == [
        "reason          raw_line",
        "-" * 14 + "  " + "-" * (PIPE_WIDTH - 16),
        f"malformed_json  {cut_line}",
        "(1 row)",
        f"(cut to {PIPE_WIDTH} characters a line: --wide shows every value whole, or --json)",
    ]
    assert piped(lakehouse, sql, "--wide")[2] == f"malformed_json  {RAW_LINE}"
    # A table that fits is shown as it is, with no note.
    assert piped(lakehouse, "select reason from silver.quarantine_ad_events") == [
        "reason",
        "--------------",
        "malformed_json",
        "(1 row)",
    ]
