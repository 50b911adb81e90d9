"""The scenarios' data: landing hours from the project's generator, and empty lakehouses over them.

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

from lakehouse.config import Lakehouse
from lakehouse_tools.generator import write_campaigns, write_hours

DATA_START = datetime(2026, 11, 1, 0, tzinfo=UTC)  # fixed hours: the same bytes on every run
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
    def start_time(self) -> datetime:
        return datetime.fromisoformat(self.start)

    @property
    def end_time(self) -> datetime:
        return self.start_time + timedelta(hours=self.hours)


def write_hour(root: str, start: datetime, eps: float, files_per_hour: int) -> int:
    """Generate the producer hour ``start`` into the landing zone of ``root``; the lines written."""
    (manifest,) = write_hours(Lakehouse(root), start, 1, eps, SEED, files_per_hour=files_per_hour)
    return manifest.lines


def dataset_for(data_dir: Path, events: int, files_per_hour: int = 16) -> Dataset:
    """About ``events`` landing lines (generated, or reused): hours of at most ~2M events each,
    generated two at a time."""
    hours = max(1, math.ceil(events / 2_000_000))
    eps = round(events / hours / 3600, 3)
    files = files_per_hour if events >= 200_000 else 4
    root = data_dir.absolute() / f"h{hours}-eps{eps:g}-f{files}-{DATA_START:%Y%m%dT%H}"
    root.mkdir(parents=True, exist_ok=True)
    write_campaigns(Lakehouse(str(root)), SEED)
    starts = [DATA_START + timedelta(hours=i) for i in range(hours)]
    with ProcessPoolExecutor(max_workers=min(2, hours)) as pool:
        lines = sum(
            pool.map(write_hour, [str(root)] * hours, starts, [eps] * hours, [files] * hours)
        )
    return Dataset(str(root), DATA_START.isoformat(), hours, eps, files, lines)


def landed(work: Path, start: datetime, hours: int, eps: float, seed: int, **options) -> tuple:
    """A fresh lakehouse at ``work`` with the campaigns and ``hours`` producer hours from ``start``
    landed: (the lakehouse, the hours' manifests)."""
    shutil.rmtree(work, ignore_errors=True)
    lakehouse = Lakehouse(root=str(work))
    write_campaigns(lakehouse, seed=seed)
    return lakehouse, write_hours(lakehouse, start, hours, eps, seed, **options) if hours else []


def fresh_lakehouse(path: Path, dataset: Dataset) -> Lakehouse:
    """An empty lakehouse at ``path`` whose landing zone is the dataset's (a symlink, not a copy)."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    (path / "landing").symlink_to(Path(dataset.root) / "landing", target_is_directory=True)
    return Lakehouse(str(path))
