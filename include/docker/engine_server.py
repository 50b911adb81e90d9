"""The compose stack's warm engine: `make engine-up`'s Spark Connect server, in the foreground.

Usage (docker-compose.yaml, service spark-connect): python /opt/ysb/include/docker/engine_server.py

The command is lakehouse_tools.engine's own (SparkConnectServer by spark-submit with the Delta and
Kafka jars of $LAKEHOUSE_JARS_DIR, the session defaults of lakehouse.spark, its log configuration,
$LAKEHOUSE_ENGINE_MASTER / _PORT / _MEMORY), so the stack's engine and the local one cannot drift
apart. What a container needs differently:

* it listens on every interface of the container ($LAKEHOUSE_ENGINE_BIND, default 0.0.0.0) rather
  than 127.0.0.1, so the Airflow scheduler's tasks reach it as spark-connect:$LAKEHOUSE_ENGINE_PORT
  on the stack's network (docker-compose.yaml publishes no port of it to the host);
* it runs as the container's main process (under tini), logging to stderr: Docker's restart policy
  supervises it rather than engine.py's supervisor, and `docker compose logs spark-connect` shows
  its log;
* SPARK_LOCAL_IP stays unset (engine.py sets 127.0.0.1 for the local engine only).

A client token, if any, reaches the server only by its environment (SPARK_CONNECT_AUTHENTICATE_TOKEN,
which Spark reads itself), never on this command line.
"""

from __future__ import annotations

import os
import sys

BIND_KEY = "spark.connect.grpc.binding.address"
LOCAL_BIND = f"{BIND_KEY}=127.0.0.1"


def command(bind: str | None = None) -> list[str]:
    """lakehouse_tools.engine's server command, listening on ``bind`` (default $LAKEHOUSE_ENGINE_BIND or 0.0.0.0)."""
    from lakehouse_tools.engine import server_command

    bind = bind or os.environ.get("LAKEHOUSE_ENGINE_BIND") or "0.0.0.0"
    args = server_command()
    if args.count(LOCAL_BIND) != 1:
        raise SystemExit(
            f"engine_server: lakehouse_tools.engine's command no longer has --conf {LOCAL_BIND}: {args}"
        )
    args[args.index(LOCAL_BIND)] = f"{BIND_KEY}={bind}"
    return args


def main() -> None:
    args = command()
    print(f"engine_server: {' '.join(args)}", file=sys.stderr, flush=True)
    os.execvp(args[0], args)


if __name__ == "__main__":
    main()
