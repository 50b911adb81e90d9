"""Zip the ``lakehouse`` package for ``spark-submit --py-files``: cluster executors import it from there.

Usage:
    python include/cluster/pyfiles.py [OUTPUT]        # default: build/lakehouse.zip

Only ``*.py`` files go in, under ``lakehouse/`` at the root of the zip, in sorted order with a
fixed timestamp: the same sources always give the same bytes, so a rebuild changes nothing that
Spark (or a diff) would notice.
"""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / "include" / "lakehouse"
DEFAULT_OUTPUT = ROOT / "build" / "lakehouse.zip"
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can hold


def build_zip(output: Path = DEFAULT_OUTPUT, package_dir: Path = PACKAGE_DIR) -> Path:
    """Write the zip of ``package_dir`` to ``output`` (atomically) and return ``output``."""
    files = sorted(p for p in package_dir.rglob("*.py") if "__pycache__" not in p.parts)
    if not (package_dir / "__init__.py").is_file():
        raise FileNotFoundError(f"{package_dir} is not a package (no __init__.py)")
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in files:
            info = zipfile.ZipInfo(
                f"{package_dir.name}/{path.relative_to(package_dir).as_posix()}", _EPOCH
            )
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, path.read_bytes())
    os.replace(partial, output)
    return output


if __name__ == "__main__":
    target = build_zip(Path(sys.argv[1]).absolute() if len(sys.argv) > 1 else DEFAULT_OUTPUT)
    print(f"pyfiles: {target}", file=sys.stderr)
