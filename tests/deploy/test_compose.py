"""Checks of docker-compose.yaml, .env.example and the image's Dockerfile, without Docker.

The compose file is validated against the Compose specification's JSON schema as shipped in
compose-go (the library `docker compose` loads files with); `make compose-schema` fetches it into
.local/compose-spec.json with Go's module tooling, so this module never touches the network.
`make compose-loader` also builds compose-go's loader into .local/bin/compose-config: the file is
loaded as `docker compose config` would (interpolation, merge keys, validation, normalization).
The other tests pin down what the project needs from the stack: where the code and the lakehouse
are mounted, loopback-only ports, healthchecks and start order, the warm engine (the spark-connect
service) and the Spark connection to it, the Airflow metadata DB and executor, UI auth, and an .env
template without secrets.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import shlex
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import pytest
import yaml
from jsonschema import Draft202012Validator

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yaml"
ENV_EXAMPLE = REPO / ".env.example"
SCHEMA_FILE = REPO / ".local" / "compose-spec.json"
LOADER = REPO / ".local" / "bin" / "compose-config"
DOCKER_DIR = REPO / "include" / "docker"

AIRFLOW_SERVICES = {
    "airflow-init",
    "airflow-api-server",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
}
SPARK_SERVICES = {"spark-master", "spark-worker"}
ENGINE = "spark-connect"  # the warm engine: a Spark Connect server, the tasks are its clients
TASK_RUNNERS = {"airflow-scheduler"}  # LocalExecutor: the tasks run in the scheduler's container
TOOL_SERVICES = {"generator"}  # on demand (a compose profile), writes the landing zone
LAKEHOUSE_SERVICES = AIRFLOW_SERVICES | SPARK_SERVICES | {ENGINE} | TOOL_SERVICES
ONE_SHOT_SERVICES = {"airflow-init"} | TOOL_SERVICES
PROJECT_FOLDERS = ("dags", "jobs", "include")
# The project folders each kind of service needs: the DAGs and the jobs' paths are read by Airflow,
# the jobs and the lakehouse package are run by the Spark driver and executors.
NEEDED_FOLDERS = {
    **{name: {"dags", "jobs", "include"} for name in AIRFLOW_SERVICES},
    **{name: {"jobs", "include"} for name in SPARK_SERVICES},
    ENGINE: {"include"},  # the foreachBatch functions' Python workers import `lakehouse`
    "generator": {"include"},
}
PLACEHOLDER = "change-me"
SECRET_NAME = re.compile(r"PASSWORD|SECRET|FERNET|TOKEN|PRIVATE|(^|_)KEY$")
GO_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")

# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?error}, ${NAME?error}, ${NAME:+alt},
# ${NAME+alt}, $NAME and the $$ escape: the Compose interpolation syntax.
INTERPOLATION = re.compile(
    r"\$(?:(?P<escaped>\$)"
    r"|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^{}]*))?\}"
    r"|(?P<named>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<invalid>))"
)


# ---- Loading -----------------------------------------------------------------------------------


@functools.cache
def raw_compose() -> dict:
    """docker-compose.yaml as YAML (merge keys resolved), before variable interpolation."""
    return yaml.safe_load(COMPOSE_FILE.read_text())


@functools.cache
def env_example() -> dict[str, str]:
    """KEY=VALUE pairs of .env.example."""
    pairs = {}
    for number, line in enumerate(ENV_EXAMPLE.read_text().splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep, f".env.example line {number} is not KEY=VALUE: {line!r}"
        assert key not in pairs, f".env.example sets {key} twice"
        pairs[key.strip()] = value.strip()
    return pairs


def interpolate(value, env: dict[str, str]):
    """``value`` (any YAML node) with Compose's variable interpolation applied from ``env``."""
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match) -> str:
        if match["escaped"]:
            return "$"
        if match["invalid"] is not None and not match["braced"] and not match["named"]:
            raise AssertionError(f"invalid interpolation in {value!r}")
        name = match["braced"] or match["named"]
        op, arg, current = match["op"], match["arg"], env.get(name)
        if op in (":-", ":?", ":+"):
            current = current or None  # the colon forms treat empty as unset
        if op in (":-", "-"):
            return arg if current is None else current
        if op in (":?", "?"):
            if current is None:
                raise AssertionError(f"{name} is required ({arg})")
            return current
        if op in (":+", "+"):
            return "" if current is None else arg
        return current or ""

    return INTERPOLATION.sub(substitute, value)


@functools.cache
def compose() -> dict:
    """docker-compose.yaml as `docker compose` sees it with .env copied from .env.example."""
    return interpolate(raw_compose(), env_example())


def load_schema() -> dict:
    """The Compose spec schema fetched by `make compose-schema`; fails (not skips) without it."""
    if not SCHEMA_FILE.is_file():
        pytest.fail(
            f"{SCHEMA_FILE.relative_to(REPO)} is missing: run `make compose-schema` "
            "(it fetches the Compose spec JSON schema from compose-go with `go mod download`)."
        )
    return json.loads(SCHEMA_FILE.read_text())


def load_with_compose_go(env_file: Path, *profiles: str) -> subprocess.CompletedProcess:
    """compose-go's loader on docker-compose.yaml with ``env_file`` as .env; fails without it."""
    if not os.access(LOADER, os.X_OK):
        pytest.fail(
            f"{LOADER.relative_to(REPO)} is missing: run `make compose-loader` "
            "(it builds include/docker/compose-config, compose-go's loader, with Go)."
        )
    return subprocess.run(
        [str(LOADER), str(COMPOSE_FILE), str(env_file), str(REPO), *profiles],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.environ.get("PATH", "")},
    )


def schema_errors(document: dict) -> list[str]:
    """Every schema violation of ``document``, as 'path: message' lines."""
    validator = Draft202012Validator(load_schema())
    return sorted(
        f"{'/'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}"
        for error in validator.iter_errors(document)
    )


def referenced_variables(node) -> set[str]:
    """Names of the variables a YAML node interpolates."""
    if isinstance(node, dict):
        return set().union(*(referenced_variables(v) for v in node.values()), set())
    if isinstance(node, list):
        return set().union(*(referenced_variables(v) for v in node), set())
    if isinstance(node, str):
        return {m["braced"] or m["named"] for m in INTERPOLATION.finditer(node) if not m["escaped"]}
    return set()


# ---- Accessors ---------------------------------------------------------------------------------


def services(doc: dict | None = None) -> dict[str, dict]:
    return (doc or compose())["services"]


def environment(service: dict) -> dict[str, str]:
    """A service's environment as a mapping (both Compose syntaxes)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


def mounts(service: dict) -> list[dict]:
    """A service's volumes in the long syntax (type, source, target, read_only)."""
    result = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, dict):
            result.append(volume)
            continue
        parts = volume.split(":")
        source, target = (parts[0], parts[1]) if len(parts) > 1 else (None, parts[0])
        kind = "bind" if source and source[0] in "./~" else "volume"
        read_only = len(parts) > 2 and "ro" in parts[2].split(",")
        result.append({"type": kind, "source": source, "target": target, "read_only": read_only})
    return result


def published_ports(service: dict) -> list[tuple[str | None, str | None, str]]:
    """(host ip, host port, container port) of each port of a service (both syntaxes)."""
    result = []
    for port in service.get("ports") or []:
        if isinstance(port, dict):
            result.append((port.get("host_ip"), port.get("published"), str(port["target"])))
            continue
        spec = str(port).split("/")[0]  # [IP:][HOST_PORT:]CONTAINER_PORT[/PROTOCOL]
        match = re.fullmatch(
            r"(?:(?:\[(?P<ip6>[^\]]+)\]|(?P<ip>\d+\.\d+\.\d+\.\d+)):)?(?:(?P<host>[\d-]*):)?(?P<ctr>[\d-]+)",
            spec,
        )
        assert match, f"cannot parse port {port!r}"
        result.append((match["ip6"] or match["ip"], match["host"], match["ctr"]))
    return result


def command(service: dict) -> list[str]:
    cmd = service.get("command") or []
    return shlex.split(cmd) if isinstance(cmd, str) else [str(part) for part in cmd]


def one_shot_services() -> set[str]:
    """Services that run to completion: no restart policy."""
    return {name for name, service in services().items() if service.get("restart", "no") == "no"}


def spark_master_url() -> str:
    """spark://HOST:PORT as the spark-master service's own command line defines it."""
    args = command(services()["spark-master"])
    assert "org.apache.spark.deploy.master.Master" in args, args
    host = args[args.index("--host") + 1]
    port = args[args.index("--port") + 1]
    assert host in {"spark-master", services()["spark-master"].get("hostname")}, (
        f"the master binds {host!r}, which other containers cannot resolve to it"
    )
    return f"spark://{host}:{port}"


# ---- The Compose specification -----------------------------------------------------------------


def test_schema_is_the_compose_spec():
    schema = load_schema()
    Draft202012Validator.check_schema(schema)
    assert schema.get("title") == "Compose Specification"
    assert "services" in schema["properties"]


def test_compose_file_matches_the_schema_as_written():
    assert schema_errors(raw_compose()) == []


def test_compose_file_matches_the_schema_after_interpolation():
    # `docker compose` validates after substituting variables: check that form too.
    assert schema_errors(compose()) == []


BROKEN = {
    "unknown top-level key": lambda doc: doc.update(servicez={}),
    "ports not a list": lambda doc: doc["services"]["kafka"].update(ports="not-a-list-item"),
    "unknown service key": lambda doc: doc["services"]["postgres"].update(imagee="postgres:17"),
    "bad depends_on condition": lambda doc: doc["services"]["spark-worker"]["depends_on"][
        "spark-master"
    ].update(condition="service_ready"),
    "unknown volume type": lambda doc: doc["services"]["kafka"]["volumes"][0].update(type="nfs"),
}


@pytest.mark.parametrize("breakage", BROKEN.values(), ids=BROKEN.keys())
def test_validator_rejects_a_broken_copy(breakage):
    broken = copy.deepcopy(raw_compose())
    breakage(broken)
    assert schema_errors(broken), (
        "the schema accepted a broken compose file: the validator is not validating"
    )


def test_compose_go_loads_the_stack():
    profiles = {
        profile for service in services().values() for profile in service.get("profiles", [])
    }
    result = load_with_compose_go(ENV_EXAMPLE, *sorted(profiles))
    assert result.returncode == 0, result.stderr
    project = yaml.safe_load(result.stdout)
    assert set(project["services"]) == set(raw_compose()["services"])
    # Normalized by compose itself: every published port is on the loopback interface.
    for name, service in project["services"].items():
        for port in service.get("ports") or []:
            assert port.get("host_ip") == "127.0.0.1", (name, port)
        for mount in service.get("volumes") or []:
            if mount["type"] == "bind":
                source = Path(mount["source"])
                assert source.is_relative_to(REPO) and source.exists(), (name, mount)
    # This module's own reading of the file agrees with compose's.
    for name in LAKEHOUSE_SERVICES:
        assert environment(project["services"][name]) == environment(services()[name]), name


def test_compose_go_requires_the_secrets(tmp_path):
    empty = tmp_path / "empty.env"
    empty.write_text("")
    result = load_with_compose_go(empty)
    assert result.returncode != 0
    for variable in (
        "POSTGRES_PASSWORD",
        "AIRFLOW_FERNET_KEY",
        "AIRFLOW_JWT_SECRET",
        "AIRFLOW_API_SECRET_KEY",
    ):
        assert f"required variable {variable} is missing" in result.stderr, result.stderr


def test_compose_loader_uses_the_schemas_compose_go_version():
    pinned = re.search(
        r"^COMPOSE_GO_VERSION\s*:=\s*(\S+)", (REPO / "include/make/compose.mk").read_text(), re.M
    )
    required = re.search(
        r"compose-spec/compose-go/v2 (v\S+)", (DOCKER_DIR / "compose-config/go.mod").read_text()
    )
    assert pinned and required and pinned[1] == required[1], (
        "one compose-go version for the schema and the loader"
    )


def test_interpolation_helper_follows_compose_rules():
    env = {"SET": "v", "EMPTY": ""}
    assert (
        interpolate("$${x} ${SET} $SET ${UNSET:-d} ${EMPTY:-d} ${EMPTY-d} ${SET:+a}", env)
        == "${x} v v d d  a"
    )
    with pytest.raises(AssertionError, match="UNSET is required"):
        interpolate("${UNSET:?set it}", env)


# ---- The stack the project needs ---------------------------------------------------------------


def test_airflow_and_spark_services_run_the_project_image():
    lakehouse_image = services()["airflow-scheduler"]["image"]
    built = {name for name, s in services().items() if s.get("image") == lakehouse_image}
    assert built == LAKEHOUSE_SERVICES
    for name in LAKEHOUSE_SERVICES:
        build = services()[name]["build"]
        assert build["context"] == "."
        assert (REPO / build["dockerfile"]).is_file(), f"{name}: no {build['dockerfile']}"


def test_airflow_3_components_are_all_there():
    commands = {name: command(services()[name]) for name in AIRFLOW_SERVICES}
    for component in ("api-server", "scheduler", "dag-processor", "triggerer"):
        assert any(cmd[:2] == ["airflow", component] for cmd in commands.values()), component
    assert not any("webserver" in cmd for cmd in commands.values()), "Airflow 3 has no webserver"
    assert commands["airflow-init"] == ["airflow-init"]
    init_script = (DOCKER_DIR / "airflow-init.sh").read_text()
    assert "airflow db migrate" in init_script


def test_project_folders_are_mounted_where_the_environment_points():
    for name in LAKEHOUSE_SERVICES:
        service = services()[name]
        env = environment(service)
        binds = {
            PurePosixPath(m["source"]).name: m
            for m in mounts(service)
            if m["type"] == "bind" and PurePosixPath(m["source"]).name in PROJECT_FOLDERS
        }
        assert NEEDED_FOLDERS[name] <= binds.keys(), (
            f"{name} lacks {NEEDED_FOLDERS[name] - binds.keys()}"
        )
        for folder, mount in binds.items():
            assert PurePosixPath(mount["source"]) == PurePosixPath(".", folder), (name, mount)
            assert mount.get("read_only"), f"{name} mounts {folder}/ writable"
        # The repository layout is mirrored under one root, so paths relative to a DAG or a job
        # (../jobs, ../include) hold in the containers as they do in the working tree.
        roots = {PurePosixPath(m["target"]).parent for m in binds.values()}
        assert len(roots) == 1, f"{name}: project folders under different roots {roots}"
        for folder, mount in binds.items():
            assert PurePosixPath(mount["target"]).name == folder, (name, mount)
        assert binds["include"]["target"] in env["PYTHONPATH"].split(":"), (
            f"{name}: PYTHONPATH {env['PYTHONPATH']!r} does not contain {binds['include']['target']}"
        )
        if "dags" in binds:
            assert env["AIRFLOW__CORE__DAGS_FOLDER"] == binds["dags"]["target"], name
        if "jobs" in binds:
            # lakehouse_airflow.macros.job_path(): where spark-submit finds jobs/<name>.py.
            assert env["LAKEHOUSE_JOBS_DIR"] == binds["jobs"]["target"], name


def test_lakehouse_root_is_one_shared_volume_everywhere():
    roots = {
        name: environment(services()[name]).get("LAKEHOUSE_ROOT") for name in LAKEHOUSE_SERVICES
    }
    assert len(set(roots.values())) == 1, f"LAKEHOUSE_ROOT differs: {roots}"
    root = roots["airflow-scheduler"]
    assert root and root.startswith("/"), root
    volume_names = set()
    for name in LAKEHOUSE_SERVICES:
        at_root = [m for m in mounts(services()[name]) if m["target"] == root]
        assert len(at_root) == 1 and at_root[0]["type"] == "volume", f"{name}: no volume at {root}"
        assert not at_root[0].get("read_only"), f"{name}: {root} is read-only"
        volume_names.add(at_root[0]["source"])
    assert len(volume_names) == 1, f"different volumes at {root}: {volume_names}"
    assert volume_names <= set(compose().get("volumes") or {}), (
        "the lakehouse volume is not declared"
    )


def test_named_volumes_are_declared():
    declared = set(compose().get("volumes") or {})
    for name, service in services().items():
        for mount in mounts(service):
            if mount["type"] == "volume" and mount.get("source"):
                assert mount["source"] in declared, f"{name}: volume {mount['source']} not declared"


def test_jars_dir_is_the_same_everywhere():
    jar_dirs = {
        environment(services()[name]).get("LAKEHOUSE_JARS_DIR") for name in LAKEHOUSE_SERVICES
    }
    assert len(jar_dirs) == 1 and None not in jar_dirs, jar_dirs


def test_published_ports_bind_loopback_only():
    for name, service in services().items():
        assert service.get("network_mode") != "host", f"{name} uses the host network"
        for host_ip, host_port, container_port in published_ports(service):
            assert host_ip == "127.0.0.1", (
                f"{name}: port {container_port} published on {host_ip or 'all interfaces'}"
            )
            assert host_port, f"{name}: port {container_port} gets a random host port"
    # As written too: no variable may choose the interface.
    for name, service in raw_compose()["services"].items():
        for port in service.get("ports") or []:
            written = port.get("host_ip") if isinstance(port, dict) else str(port)
            assert written.startswith("127.0.0.1"), (name, port)


def test_long_running_services_have_healthchecks():
    one_shot = one_shot_services()
    assert one_shot == ONE_SHOT_SERVICES
    for name in TOOL_SERVICES:
        assert services()[name].get("profiles"), f"{name} must not start with `docker compose up`"
    for name, service in services().items():
        if name in one_shot:
            continue
        assert service.get("restart") in {"always", "unless-stopped", "on-failure"}, name
        check = service.get("healthcheck")
        assert check and not check.get("disable"), f"{name} has no healthcheck"
        assert check["test"] and check["test"][0] in {"CMD", "CMD-SHELL"}, (name, check["test"])
        for key in ("interval", "timeout", "start_period"):
            assert GO_DURATION.match(check[key]), f"{name}: healthcheck {key} {check[key]!r}"


def test_start_order_waits_on_health_and_init():
    one_shot = one_shot_services()
    for name, service in services().items():
        depends_on = service.get("depends_on") or {}
        assert isinstance(depends_on, dict), f"{name}: depends_on without conditions"
        for dependency, rule in depends_on.items():
            assert dependency in services(), f"{name} depends on unknown {dependency}"
            expected = (
                "service_completed_successfully" if dependency in one_shot else "service_healthy"
            )
            assert rule.get("condition") == expected, (name, dependency, rule)
    for name in AIRFLOW_SERVICES:
        assert "postgres" in services()[name]["depends_on"], name
        if name != "airflow-init":
            assert "airflow-init" in services()[name]["depends_on"], name
    assert "spark-master" in services()["airflow-scheduler"]["depends_on"]
    assert "spark-master" in services()["spark-worker"]["depends_on"]


def test_spark_workers_scale():
    worker = services()["spark-worker"]
    for fixed in ("container_name", "hostname"):
        assert fixed not in worker, f"spark-worker sets {fixed}: --scale spark-worker=3 would clash"
    assert not published_ports(worker), "a published host port clashes when the workers scale"
    assert spark_master_url() in command(worker)
    assert "org.apache.spark.deploy.worker.Worker" in command(worker)


def test_spark_addresses_are_reachable_between_containers():
    # 127.0.0.1 (right for the Makefile's local runs) would make the driver in the scheduler
    # container unreachable from the executors.
    for name in LAKEHOUSE_SERVICES:
        local_ip = environment(services()[name]).get("SPARK_LOCAL_IP")
        assert local_ip in (None, "") or not local_ip.startswith(("127.", "localhost")), (
            name,
            local_ip,
        )
    assert "SPARK_LOCAL_IP" not in (DOCKER_DIR / "Dockerfile").read_text().split("#")[0]


# ---- The warm engine (spark-connect) and the Airflow connection to it ---------------------------


def engine_port() -> str:
    """The port the engine service listens on (engine_server.py reads LAKEHOUSE_ENGINE_PORT)."""
    port = environment(services()[ENGINE])["LAKEHOUSE_ENGINE_PORT"]
    assert port.isdigit(), port
    return port


def engine_connection(name: str = "airflow-scheduler") -> dict:
    return json.loads(environment(services()[name])["AIRFLOW_CONN_SPARK_LAKEHOUSE"])


def test_engine_runs_the_connect_server_of_engine_py(tmp_path):
    engine = services()[ENGINE]
    include = next(
        m["target"] for m in mounts(engine) if PurePosixPath(m["source"] or "").name == "include"
    )
    args = command(engine)
    script = PurePosixPath(args[-1])
    assert args[:-1] == ["python"] and script.is_relative_to(include), args
    assert (REPO / "include" / script.relative_to(include)).is_file(), f"{script}: not in include/"
    # Its command, as the container would build it: the service's environment, this checkout's
    # paths, fake jars, and a token in the environment that must not reach the command line.
    env = environment(engine)
    jars = tmp_path / "jars"
    jars.mkdir()
    for jar in (
        "delta-spark_2.13-4.0.0.jar",
        "delta-storage-4.0.0.jar",
        "spark-sql-kafka-0-10_2.13-4.2.0.jar",
    ):
        (jars / jar).write_bytes(b"")
    token = "token-that-must-stay-in-the-environment"
    run_env = {
        **env,
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": f"{REPO / 'include'}:{DOCKER_DIR}",
        "LAKEHOUSE_JARS_DIR": str(jars),
        "LAKEHOUSE_ENGINE_DIR": str(tmp_path / "engine"),
        "SPARK_CONNECT_AUTHENTICATE_TOKEN": token,
        "LAKEHOUSE_ENGINE_TOKEN": token,
    }
    code = f"import json, {Path(script.name).stem} as s; print(json.dumps(s.command()))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    server = json.loads(result.stdout.strip().splitlines()[-1])
    # engine.py runs the spark-submit of its own SPARK_HOME (pyspark's package, linked).
    assert PurePosixPath(server[0]).name == "spark-submit" and server[
        server.index("--class") + 1
    ] == ("org.apache.spark.sql.connect.service.SparkConnectServer"), server
    master = server[server.index("--master") + 1]
    assert master == env["LAKEHOUSE_ENGINE_MASTER"], server
    assert re.fullmatch(r"local\[\d+\]", master) or master == spark_master_url(), master
    conf = dict(server[i + 1].split("=", 1) for i, arg in enumerate(server) if arg == "--conf")
    # Every interface of the container (the stack's network); the port the clients use.
    assert conf["spark.connect.grpc.binding.address"] == "0.0.0.0", conf
    assert conf["spark.connect.grpc.binding.port"] == engine_port(), conf
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension", conf
    assert {PurePosixPath(jar).name for jar in server[server.index("--jars") + 1].split(",")} == {
        jar.name for jar in jars.iterdir()
    }
    assert not any(token in arg for arg in server), "the token is on the server's command line"
    assert not any("token" in arg.lower() for arg in command(raw_compose()["services"][ENGINE]))


def test_engine_listens_inside_the_stack_network_only():
    engine = services()[ENGINE]
    assert engine.get("network_mode") in (None, "bridge"), engine.get("network_mode")
    assert not engine.get("networks"), "the engine must be on the stack's default network"
    for host_ip, _, container_port in published_ports(engine):
        assert host_ip == "127.0.0.1", (
            f"the engine's port {container_port} is published beyond the loopback"
        )
    assert [str(port) for port in engine.get("expose") or []] == [engine_port()]
    assert environment(engine)["LAKEHOUSE_ENGINE_BIND"] == "0.0.0.0"
    for fixed in ("SPARK_LOCAL_IP", "SPARK_CONNECT_AUTHENTICATE_TOKEN"):
        assert not environment(engine).get(fixed), f"{ENGINE}: {fixed} is set"


def test_engine_shares_the_lakehouse_and_the_package_with_the_tasks():
    # LocalExecutor: the tasks (the engine's clients) run in the scheduler's container. The job's
    # checkpoint lock and batch notes are files both it and the engine's Python workers read.
    engine, scheduler = services()[ENGINE], services()["airflow-scheduler"]
    assert environment(scheduler)["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    root = environment(scheduler)["LAKEHOUSE_ROOT"]
    assert environment(engine)["LAKEHOUSE_ROOT"] == root

    def at_root(service: dict) -> list[tuple]:
        return [
            (m["type"], m["source"], bool(m.get("read_only")))
            for m in mounts(service)
            if m["target"] == root
        ]

    assert at_root(engine) == at_root(scheduler) == [("volume", "lakehouse", False)]
    include = {
        m["target"] for m in mounts(scheduler) if PurePosixPath(m["source"] or "").name == "include"
    }
    assert include == {
        m["target"] for m in mounts(engine) if PurePosixPath(m["source"] or "").name == "include"
    }
    assert include <= set(environment(engine)["PYTHONPATH"].split(":")), environment(engine)[
        "PYTHONPATH"
    ]


def test_engine_is_supervised_and_its_health_is_a_query():
    engine = services()[ENGINE]
    assert engine.get("restart") in {"always", "unless-stopped"}, engine.get("restart")
    check = " ".join(engine["healthcheck"]["test"])
    assert "check_engine(" in check or ".remote(" in check, f"not a Spark Connect query: {check}"
    assert re.search(rf"sc://localhost:{engine_port()}\b", check), check
    assert not engine.get("profiles"), "the engine must start with `docker compose up`"
    # The services whose tasks use it start after it is healthy.
    for name in AIRFLOW_SERVICES:
        if engine_connection(name)["conn_type"] == "spark_connect" and name in TASK_RUNNERS:
            rule = services()[name]["depends_on"].get(ENGINE)
            assert rule == {"condition": "service_healthy"}, (name, rule)


def test_spark_connection_is_the_engine_without_token_or_tls():
    values = {
        environment(services()[name])["AIRFLOW_CONN_SPARK_LAKEHOUSE"] for name in AIRFLOW_SERVICES
    }
    assert len(values) == 1, values
    conn = engine_connection()  # the JSON form (a URI of a spark:// master would fall back to yarn)
    assert conn["conn_type"] == "spark_connect", conn
    assert conn["host"] == ENGINE and str(conn["port"]) == engine_port(), conn
    # pyspark sends a token only over TLS to any host but "localhost", and the engine has no TLS:
    # no token and no use_ssl, and nothing that would give the clients one.
    assert not conn.get("password") and not conn.get("login"), conn
    assert not (conn.get("extra") or {}).get("use_ssl"), conn
    for name in AIRFLOW_SERVICES | {ENGINE}:
        assert "SPARK_CONNECT_AUTHENTICATE_TOKEN" not in environment(services()[name]), name
    assert "spark.connect.authenticate.token" not in COMPOSE_FILE.read_text()


def test_spark_connection_is_plaintext_grpc_in_the_provider_and_pyspark(tmp_path):
    # The provider's URL of the compose connection, and the channel pyspark's client builds for
    # it: a plain one. The same URL with a token would take TLS (the reason there is none): if
    # pyspark ever changes that, this test says so. In a subprocess: this process imports no Airflow.
    raw = environment(services()["airflow-scheduler"])["AIRFLOW_CONN_SPARK_LAKEHOUSE"]
    code = """
import json, grpc
from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
from pyspark.sql.connect.client.core import DefaultChannelBuilder
used = []
for kind in ("ssl", "local"):
    real = getattr(grpc, f"{kind}_channel_credentials")
    def record(*args, _kind=kind, _real=real, **kwargs):
        used.append(_kind)
        return _real(*args, **kwargs)
    setattr(grpc, f"{kind}_channel_credentials", record)
def credentials(url):
    used.clear()
    DefaultChannelBuilder(url).toChannel().close()
    return list(used)
url = SparkConnectHook("spark_lakehouse").get_connection_url()
host = DefaultChannelBuilder(url).host
print(json.dumps({
    "url": url, "host": host, "plain": credentials(url),
    "token": credentials(url.rstrip("/") + "/;token=t"),
    "token_localhost": credentials("sc://localhost:15002/;token=t"),
}))
"""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_SPARK_LAKEHOUSE": raw,
    }
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["url"] == f"sc://{ENGINE}:{engine_port()}/", seen
    assert seen["host"] == ENGINE
    assert seen["plain"] == [], f"the client would not use a plain channel: {seen}"
    assert seen["token"] == ["ssl"] and seen["token_localhost"] == ["local"], seen


def test_kafka_address_is_the_brokers_internal_listener():
    # NAME://HOST:PORT (listener names such as PLAINTEXT_HOST are no URL schemes).
    advertised = [
        tuple(listener.partition("://")[2].rsplit(":", 1))
        for listener in environment(services()["kafka"])["KAFKA_ADVERTISED_LISTENERS"].split(",")
    ]
    internal = {f"{host}:{port}" for host, port in advertised if host == "kafka"}
    assert internal, advertised
    for name in LAKEHOUSE_SERVICES:
        bootstrap = environment(services()[name]).get("KAFKA_BOOTSTRAP_SERVERS")
        assert bootstrap and set(bootstrap.split(",")) <= internal, (name, bootstrap, internal)
    from_host = [(host, port) for host, port in advertised if host == "127.0.0.1"]
    published = [(ip, port) for ip, port, _ in published_ports(services()["kafka"])]
    assert from_host == published, "the host listener must advertise the published address"


def test_airflow_uses_postgres_and_the_local_executor():
    postgres_env = environment(services()["postgres"])
    for name in AIRFLOW_SERVICES:
        env = environment(services()[name])
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor", name
        url = urlsplit(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
        assert url.scheme in {"postgresql", "postgresql+psycopg2"}, (name, url.scheme)
        assert url.hostname == "postgres" and "postgres" in services(), name
        assert url.username == postgres_env["POSTGRES_USER"], name
        assert url.password == postgres_env["POSTGRES_PASSWORD"], name
        assert url.path == f"/{postgres_env['POSTGRES_DB']}", name
    assert "psycopg2" in (DOCKER_DIR / "Dockerfile").read_text(), (
        "the image lacks the Postgres driver"
    )


def test_airflow_components_share_secrets_and_the_execution_api():
    api = services()["airflow-api-server"]
    api_port = command(api)[command(api).index("--port") + 1]
    shared = (
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL",
        "AIRFLOW__API_AUTH__JWT_SECRET",
        "AIRFLOW__API__SECRET_KEY",
        "AIRFLOW__CORE__FERNET_KEY",
    )
    for key in shared:
        values = {environment(services()[name]).get(key) for name in AIRFLOW_SERVICES}
        assert len(values) == 1 and None not in values and "" not in values, f"{key}: {values}"
    url = urlsplit(environment(api)["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"])
    assert (url.hostname, str(url.port), url.path) == (
        "airflow-api-server",
        api_port,
        "/execution/",
    )


def test_ui_auth_is_on():
    for name in AIRFLOW_SERVICES:
        env = environment(services()[name])
        manager = env.get("AIRFLOW__CORE__AUTH_MANAGER", "")
        assert manager.endswith(("SimpleAuthManager", "FabAuthManager")), (name, manager)
        if manager.endswith("SimpleAuthManager"):
            all_admins = env.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "False")
            assert all_admins.lower() in {"false", "0"}, f"{name}: everyone is admin, no login"
            users = env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(",")
            roles = dict(entry.split(":")[:2] for entry in users)
            assert "admin" in roles.values() and set(roles.values()) <= {
                "viewer",
                "user",
                "op",
                "admin",
            }, roles
    # The passwords file: written by airflow-init from .env, read by the api-server.
    api_env = environment(services()["airflow-api-server"])
    passwords_file = PurePosixPath(api_env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])
    holders = {}
    for name in ("airflow-init", "airflow-api-server"):
        holders[name] = {
            m["source"]
            for m in mounts(services()[name])
            if m["type"] == "volume" and passwords_file.is_relative_to(m["target"])
        }
        assert holders[name], f"{name}: {passwords_file} is not on a volume"
    assert holders["airflow-init"] == holders["airflow-api-server"]
    raw_init_env = environment(raw_compose()["services"]["airflow-init"])
    for key in ("AIRFLOW_ADMIN_PASSWORD", "AIRFLOW_VIEWER_PASSWORD"):
        assert re.fullmatch(r"\$\{\w+:\?[^}]*\}", raw_init_env[key]), (
            f"{key} must be required from .env"
        )


def test_init_refuses_placeholder_secrets(tmp_path):
    env = {**environment(services()["airflow-init"]), "PATH": os.environ.get("PATH", "")}
    result = subprocess.run(
        ["bash", str(DOCKER_DIR / "airflow-init.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0
    assert "placeholder" in result.stderr and "make compose-env" in result.stderr, result.stderr


# ---- .env.example and secrets ------------------------------------------------------------------


def test_env_example_defines_every_variable_the_compose_file_uses():
    used = referenced_variables(raw_compose())
    defined = set(env_example())
    assert used - defined == set(), f"add to .env.example: {sorted(used - defined)}"
    unused = {key for key in defined - used if not key.startswith("COMPOSE_")}
    assert unused == set(), (
        f".env.example sets variables docker-compose.yaml never reads: {sorted(unused)}"
    )


def test_compose_variables_do_not_clash_with_the_makefiles_exports():
    # `make compose-up` runs docker compose with the Makefile's exported environment, which
    # takes precedence over .env in interpolation.
    makefiles = [REPO / "Makefile", *sorted((REPO / "include" / "make").glob("*.mk"))]
    exported = {
        name
        for makefile in makefiles
        for name in re.findall(r"^export\s+([A-Za-z_][A-Za-z0-9_]*)", makefile.read_text(), re.M)
    }
    assert referenced_variables(raw_compose()) & exported == set()


def test_env_example_holds_no_real_secrets():
    for key, value in env_example().items():
        if SECRET_NAME.search(key):
            assert value == PLACEHOLDER, (
                f".env.example {key} must be the placeholder {PLACEHOLDER!r}"
            )


def test_compose_file_holds_no_literal_secrets():
    # Interpolated with a marker per variable, a secret must consist of markers only.
    markers = {name: f"VAR{name}VAR" for name in referenced_variables(raw_compose())}
    only_markers = re.compile(r"(VAR\w+?VAR)+")
    for name, service in interpolate(raw_compose(), markers)["services"].items():
        for key, value in environment(service).items():
            if SECRET_NAME.search(key) and not key.endswith("_FILE"):
                assert only_markers.fullmatch(value), (
                    f"{name}: {key} is a literal, not a ${{VARIABLE}}"
                )
            if key.endswith("SQL_ALCHEMY_CONN"):
                password = urlsplit(value).password
                assert password and only_markers.fullmatch(password), (
                    f"{name}: {key} has a literal password"
                )


def test_make_env_fills_every_placeholder(tmp_path):
    sys.path.insert(0, str(DOCKER_DIR))
    try:
        import make_env
    finally:
        sys.path.remove(str(DOCKER_DIR))
    from cryptography.fernet import Fernet

    target = tmp_path / ".env"
    assert make_env.main(["make_env.py", str(ENV_EXAMPLE), str(target)]) == 0
    assert target.stat().st_mode & 0o077 == 0, ".env must be readable by its owner only"
    first = target.read_text()
    make_env.main(["make_env.py", str(ENV_EXAMPLE), str(target)])
    assert target.read_text() == first, "an existing .env was overwritten"
    loaded = load_with_compose_go(target)
    assert loaded.returncode == 0, loaded.stderr
    rendered = make_env.render(ENV_EXAMPLE.read_text())
    assert rendered != make_env.render(ENV_EXAMPLE.read_text()), "secrets are not random"
    assert not re.search(rf"^\w+={PLACEHOLDER}$", rendered, re.M)
    values = dict(
        line.split("=", 1) for line in rendered.splitlines() if line and not line.startswith("#")
    )
    assert values.keys() == env_example().keys()
    Fernet(values["AIRFLOW_FERNET_KEY"])  # a valid key
    for key, value in values.items():
        if SECRET_NAME.search(key):
            assert re.fullmatch(r"[A-Za-z0-9_=-]{32,}", value), key
        else:
            assert value == env_example()[key], key


# ---- The image ---------------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of include/docker/Dockerfile, continuation lines joined."""
    lines = (DOCKER_DIR / "Dockerfile").read_text().splitlines()
    logical = re.sub(
        r"\\\n", " ", "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    )
    return [
        (parts[0].upper(), parts[1] if len(parts) > 1 else "")
        for parts in (line.strip().split(None, 1) for line in logical.splitlines())
        if parts
    ]


def test_dockerfile_installs_the_pinned_packages_and_the_jars():
    runs = " ".join(args for instruction, args in dockerfile_instructions() if instruction == "RUN")
    pips = re.findall(r"pip install [^&]*", runs)
    assert any(
        re.search(r"-r \S*/ysb/requirements\.txt", pip)
        and re.search(r"-c \S*constraints\.txt", pip)
        for pip in pips
    ), f"the project's requirements are not installed with its constraints: {pips}"
    # Every stage's installs are pinned (the S3 server's own venv, the commit store's pyspark).
    for pip in pips:
        assert "constraints.txt" in pip, pip
    # Every jar POM of the repository (Delta, Spark's Kafka source) is fetched by Maven.
    assert (
        "mvn " in runs
        and "dependency:copy-dependencies" in runs
        and "-DexcludeTransitive=true" in runs
    )
    copies = [args for instruction, args in dockerfile_instructions() if instruction == "COPY"]
    assert any(args.split()[0].rstrip("/") == "include/jars" for args in copies), (
        "include/jars/ is not copied"
    )
    for pom in sorted((REPO / "include" / "jars").glob("*pom*.xml")):
        assert pom.name in runs, (
            f"the Dockerfile does not fetch the jars of include/jars/{pom.name}"
        )
    # Object storage: S3A and the SDK into the jars dir's s3/ (config.jar_paths), and the
    # project's commit store compiled from its source, as `make s3-jars` does.
    assert "-f s3/pom.xml" in runs and "-DoutputDirectory=/jars/s3" in runs
    assert "javac" in runs and "/jars/s3/lakehouse-s3-commit-store.jar" in runs
    # The engine's OpenLineage task parent (lineage on), compiled as `make lineage-jars` does.
    assert "/jars/openlineage-task-parent.jar" in runs
    assert re.search(r"openjdk-(17|21)-jre", runs), "Spark 4.2 needs Java 17 or 21"
    # The engine's server class ships in pyspark's own jars: the build checks that it is there.
    assert re.search(r"pyspark\b.*jars/spark-connect_2\.13-\*\.jar", runs), (
        "no check of the Connect server jar"
    )


def test_dockerfile_environment_matches_compose():
    env_args = " ".join(
        args for instruction, args in dockerfile_instructions() if instruction == "ENV"
    )
    image_env = dict(re.findall(r"(\w+)=(\S+)", env_args))
    compose_env = environment(services()["airflow-scheduler"])
    keys = (
        "LAKEHOUSE_ROOT",
        "LAKEHOUSE_JARS_DIR",
        "LAKEHOUSE_JOBS_DIR",
        "PYTHONPATH",
        "AIRFLOW__CORE__DAGS_FOLDER",
        "AIRFLOW_HOME",
    )
    for key in keys:
        assert image_env.get(key) == compose_env[key], key


def test_dockerfile_python_matches_the_makefile():
    makefile_python = re.search(
        r"^PYTHON\s*\?=\s*python(\d+\.\d+)", (REPO / "Makefile").read_text(), re.M
    )
    base = re.search(r"python:(\d+\.\d+)", (DOCKER_DIR / "Dockerfile").read_text())
    assert makefile_python and base, "no Python version in the Makefile or the Dockerfile"
    assert makefile_python[1] == base[1], "constraints.txt is resolved for the Makefile's Python"


def test_dockerfile_copies_only_what_the_context_has():
    ignored = [
        line.strip()
        for line in (DOCKER_DIR / "Dockerfile.dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert {".env", ".git", ".venv", ".jars"} <= set(ignored), (
        "local secrets or caches would enter the image"
    )
    for instruction, args in dockerfile_instructions():
        if instruction != "COPY" or "--from=" in args:
            continue
        sources = [word for word in args.split() if not word.startswith("--")][:-1]
        for source in sources:
            assert (REPO / source).exists(), f"COPY {source}: not in the repository"
            excluded = any(fnmatch(source.rstrip("/"), pattern) for pattern in ignored)
            assert not excluded, f"COPY {source}: excluded by Dockerfile.dockerignore"
