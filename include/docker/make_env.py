"""Write .env from .env.example, replacing every ``change-me`` with a fresh random secret.

Usage: python include/docker/make_env.py [.env.example] [.env]

Never overwrites an existing .env: secrets already in use (the Postgres password lives in the
database volume, the Fernet key encrypts stored connections) must not change behind one's back.
"""

from __future__ import annotations

import base64
import os
import secrets
import sys
from pathlib import Path

PLACEHOLDER = "change-me"


def secret_for(key: str) -> str:
    """A random value fit for ``key``: a Fernet key where Airflow expects one, else url-safe text."""
    if key.endswith("FERNET_KEY"):
        return base64.urlsafe_b64encode(os.urandom(32)).decode()
    # Letters, digits, '-' and '_' only: the Postgres password goes into a database URL.
    # 64 bytes: the JWT secret signs HMAC-SHA512 tokens, which want a key at least that long.
    return secrets.token_urlsafe(64)


def render(template: str) -> str:
    """The template with each ``KEY=change-me`` line given a random value."""
    lines = []
    for line in template.splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith("#") and value.strip() == PLACEHOLDER:
            line = f"{key}={secret_for(key.strip())}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    template = Path(argv[1] if len(argv) > 1 else ".env.example")
    target = Path(argv[2] if len(argv) > 2 else ".env")
    if target.exists():
        print(
            f"{target} exists; not overwriting it (delete it first to start over).", file=sys.stderr
        )
        return 0
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as stream:
        stream.write(render(template.read_text()))
    print(f"wrote {target} from {template} with random secrets")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
