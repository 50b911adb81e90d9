"""The benchmark's data: landing hours from the project's generator, and empty lakehouses over them.

Data is generated into ``.local/bench/data`` and kept between runs (an hour already there is not
generated again: the generator is deterministic for the fixed hours and seed below).
"""

from __future__ import annotations

import math
import shutil
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.ysb.measuring import size_label
from lakehouse.config import Lakehouse
from lakehouse_tools.generator import write_campaigns, write_hours

# Fixed event hours, so a dataset is the same bytes on every run (the generator is deterministic).
DATA_START = datetime(2026, 11, 1, 0, tzinfo=UTC)
GROWTH_START = datetime(2026, 11, 10, 0, tzinfo=UTC)
SEED = 7


@dataclass(frozen=True)
class Dataset:
    """Generated landing data: ``hours`` producer hours from ``start`` at ``eps`` events/s."""

    root: str
    start: str
    hours: int
    eps: float
    files_per_hour: int
    lines: int = 0

    @property
    def label(self) -> str:
        return size_label(self.lines)

    @property
    def start_time(self) -> datetime:
        return datetime.fromisoformat(self.start)

    @property
    def end_time(self) -> datetime:
        return self.start_time + timedelta(hours=self.hours)


def write_hour(root: str, start: datetime, eps: float, files_per_hour: int) -> int:
    """Generate the producer hour ``start`` into the landing zone of ``root``; the lines written."""
    (manifest,) = write_hours(Lakehouse(root), start, 1, eps, SEED, files_per_hour=files_per_hour)
    return manifest.lines


def ensure_dataset(
    data_dir: Path,
    hours: int,
    eps: float,
    files_per_hour: int,
    start: datetime = DATA_START,
    workers: int = 2,
) -> Dataset:
    """Generate (or reuse) ``hours`` hours at ``eps`` under ``data_dir``; hours run in parallel processes."""
    root = data_dir.absolute() / f"h{hours}-eps{eps:g}-f{files_per_hour}-{start:%Y%m%dT%H}"
    root.mkdir(parents=True, exist_ok=True)
    write_campaigns(Lakehouse(str(root)), SEED)
    starts = [start + timedelta(hours=i) for i in range(hours)]
    if workers > 1 and hours > 1:
        with ProcessPoolExecutor(max_workers=min(workers, hours)) as pool:
            lines = sum(
                pool.map(
                    write_hour, [str(root)] * hours, starts, [eps] * hours, [files_per_hour] * hours
                )
            )
    else:
        lines = sum(write_hour(str(root), s, eps, files_per_hour) for s in starts)
    return Dataset(str(root), start.isoformat(), hours, eps, files_per_hour, lines)


def dataset_for(data_dir: Path, events: int, files_per_hour: int = 16) -> Dataset:
    """About ``events`` landing lines: hours of at most ~2M events (556 events/s) each."""
    hours = max(1, math.ceil(events / 2_000_000))
    eps = round(events / hours / 3600, 3)
    return ensure_dataset(data_dir, hours, eps, files_per_hour if events >= 200_000 else 4)


def fresh_lakehouse(path: Path, dataset: Dataset) -> Lakehouse:
    """An empty lakehouse at ``path`` whose landing zone is the dataset's (a symlink, not a copy)."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    (path / "landing").symlink_to(Path(dataset.root) / "landing", target_is_directory=True)
    return Lakehouse(str(path))
