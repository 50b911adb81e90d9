"""Where every table, checkpoint and landing folder lives: one home for paths and settings.

Everything hangs off one root folder (``LAKEHOUSE_ROOT``) so a test, the demo and a cluster
deployment differ only in that variable (or the ``--lakehouse-root`` argument of a job).
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from lakehouse import catalog, object_storage
from lakehouse.catalog import TableSpec
from lakehouse.errors import ConfigError
from lakehouse.files import lake_path, write_atomic

__all__ = ["EngineSettings", "Lakehouse", "Table", "engine_settings", "jar_paths"]


@dataclass(frozen=True)
class Table:
    """A live table: its declaration (``spec``) and where it is stored in one lakehouse.

    Its name, task, layer and grain are its own; the rest of its declaration is ``table.spec``
    (``table.spec.upstream``, ``table.spec.transform``). ``lakehouse.table(name)`` makes one (once
    per name and lakehouse); a scratch copy elsewhere is
    ``dataclasses.replace(table, path=..., checkpoint_root=...)``.
    """

    spec: TableSpec
    path: str
    checkpoint_root: str
    # The lakehouse it belongs to: where its upstream and side tables are (None for a table built
    # by hand in a test).
    lakehouse: Lakehouse | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.spec.name

    # What names the live table and addresses it in event time; the rest of its declaration
    # is ``table.spec``.
    @property
    def task(self) -> str:
        return self.spec.task

    @property
    def layer(self) -> str:
        return self.spec.layer

    @property
    def grain(self):
        return self.spec.grain

    def upstream_tables(self) -> list[Table]:
        """The live tables this table's transform reads, in argument order."""
        return [self.lakehouse.table(name) for name in self.spec.upstream]

    def side(self, role: str) -> Table:
        """The live side table of ``role`` written by this table's query (e.g. its quarantine)."""
        return catalog.side(self.spec, role).at(self.lakehouse)

    def written_by_its_task(self) -> list[Table]:
        """This table and its side tables: what its task's query writes."""
        return [spec.at(self.lakehouse) for spec in catalog.written_by_task(self.spec)]

    def checkpoint(self, generation: int | None = None) -> str:
        """Checkpoint folder of a generation (default: the current one; a full refresh starts a new one)."""
        if generation is None:
            generation = self.current_generation()
        return f"{self.checkpoint_root}/gen={generation}"

    @property
    def _generation_file(self):
        return lake_path(self.checkpoint_root) / "CURRENT"

    def current_generation(self) -> int:
        """The checkpoint generation the table's streaming writer uses now (0 until a full refresh)."""
        try:
            return int(json.loads(self._generation_file.read_text())["generation"])
        except FileNotFoundError:
            return 0

    def start_new_generation(self) -> int:
        """Move to the next checkpoint generation; the old checkpoint folder is kept as it is."""
        generation = self.current_generation() + 1
        write_atomic(self._generation_file, json.dumps({"generation": generation}))
        return generation


@dataclass(frozen=True)
class Lakehouse:
    """All locations of the lakehouse under one root: a local folder or ``s3a://bucket/prefix``."""

    root: str

    @classmethod
    def from_env(cls, root: str | None = None) -> Lakehouse:
        """The lakehouse at ``root``, or at ``$LAKEHOUSE_ROOT``; fails fast when neither is set."""
        root = root or os.environ.get("LAKEHOUSE_ROOT")
        if not root:
            raise ConfigError(
                'No lakehouse root: set LAKEHOUSE_ROOT (e.g. `eval "$(make -s env)"`) '
                "or pass --lakehouse-root."
            )
        if object_storage.is_object_store(root):
            return cls(root=root.rstrip("/"))
        return cls(root=str(Path(root).absolute()))

    # Landing zone: written by the generator (or any producer), read by bronze and the dimension.
    def landing(self, relative: str) -> str:
        """A path in the landing zone, e.g. a table's declared ``source``."""
        return f"{self.root}/landing/{relative}"

    @property
    def landing_events(self) -> str:
        return self.landing("events")

    @property
    def landing_campaigns(self) -> str:
        return self.landing("campaigns/campaigns.csv")

    def table(self, name: str) -> Table:
        """The live catalog table named ``layer.table`` (e.g. ``silver.ad_events``) of this
        lakehouse: one object per name, looked up in the catalog once."""
        return _live_table(self, name)


@cache
def _live_table(lakehouse: Lakehouse, name: str) -> Table:
    spec = catalog.get(name)  # an unknown name fails here, listing the known ones
    layer, table = name.split(".")
    return Table(
        spec=spec,
        path=f"{lakehouse.root}/tables/{layer}/{table}",
        checkpoint_root=f"{lakehouse.root}/checkpoints/{layer}/{table}",
        lakehouse=lakehouse,
    )


def jars_dir() -> Path:
    """Where ``make jars`` puts the JVM jars (``LAKEHOUSE_JARS_DIR`` overrides it)."""
    return Path(
        os.environ.get("LAKEHOUSE_JARS_DIR") or Path(__file__).resolve().parents[2] / ".jars"
    )


def jar_paths(root: str | None = None) -> list[str]:
    """The Delta (and Kafka) jars fetched by ``make jars``, and the S3 ones (``make s3-jars``) when
    the lakehouse ``root`` (default ``$LAKEHOUSE_ROOT``) is on object storage; fails fast when
    they are missing."""
    jars = sorted(glob.glob(f"{jars_dir()}/*.jar"))
    if not any("delta-spark" in Path(j).name for j in jars):
        raise ConfigError(
            f"No Delta jars in {jars_dir()}: run `make jars` (or set LAKEHOUSE_JARS_DIR)."
        )
    if object_storage.root_is_object_store(root):
        s3_jars = sorted(glob.glob(f"{jars_dir()}/s3/*.jar"))
        object_storage.require_jars(s3_jars)
        jars += s3_jars
    return jars


@dataclass(frozen=True)
class EngineSettings:
    """Where the warm engine (a Spark Connect server, ``make engine-up``) listens, and its client token."""

    port: int
    token: str | None
    url: str  # what a client connects to, token included

    @property
    def display_url(self) -> str:
        """The URL without its token (for logs and messages)."""
        return self.url.split(";token=")[0].split("/;")[0]


def engine_settings() -> EngineSettings:
    """The engine's settings: ``$LAKEHOUSE_ENGINE_URL`` if set, else localhost on ``$LAKEHOUSE_ENGINE_PORT``.

    The token (``$LAKEHOUSE_ENGINE_TOKEN``) goes with a ``localhost`` URL: the Connect client sends
    a token without TLS only to a host named localhost.
    """
    port = int(os.environ.get("LAKEHOUSE_ENGINE_PORT") or 15002)
    token = os.environ.get("LAKEHOUSE_ENGINE_TOKEN") or None
    url = os.environ.get("LAKEHOUSE_ENGINE_URL") or f"sc://localhost:{port}/" + (
        f";token={token}" if token else ""
    )
    return EngineSettings(port=port, token=token, url=url)
