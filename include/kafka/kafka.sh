#!/usr/bin/env bash
# A single-node Apache Kafka broker (KRaft, combined broker + controller, 127.0.0.1 only) run from
# the jars `make kafka-jars` copies into .kafka/libs.
#
#   kafka.sh start    format the storage if needed, start in the background, wait until it serves
#   kafka.sh stop     SIGTERM the broker's process group, wait, then SIGKILL it
#   kafka.sh status   exit 0 if running, 3 if not
#   kafka.sh run      format if needed, then exec the broker in the foreground (tests use this;
#                     any further argument, such as --kafka-dir=DIR, is only a marker for ps)
#
# Settings (environment):
#   KAFKA_DIR              config, data, logs and pid file       (default: <repo>/.kafka)
#   KAFKA_LIBS             the broker's jars, whatever KAFKA_DIR (default: <repo>/.kafka/libs)
#   KAFKA_PORT             PLAINTEXT listener on 127.0.0.1        (default: 9092)
#   KAFKA_CONTROLLER_PORT  KRaft controller listener on 127.0.0.1 (default: 9093)
#   KAFKA_HEAP_OPTS        (default: -Xms128m -Xmx512m)
#   KAFKA_START_TIMEOUT / KAFKA_STOP_TIMEOUT  seconds            (default: 60 / 30)
#
# Layout under KAFKA_DIR: server.properties (rendered from server.properties.template),
# data/ (log.dirs + KRaft metadata), logs/server.log (log4j, warnings + start/stop lines),
# logs/kafka.out (the JVM's stdout/stderr), kafka.pid.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
KAFKA_DIR=${KAFKA_DIR:-$ROOT/.kafka}
KAFKA_LIBS=${KAFKA_LIBS:-$ROOT/.kafka/libs}
KAFKA_PORT=${KAFKA_PORT:-9092}
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-9093}
KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xms128m -Xmx512m}
KAFKA_START_TIMEOUT=${KAFKA_START_TIMEOUT:-60}
KAFKA_STOP_TIMEOUT=${KAFKA_STOP_TIMEOUT:-30}
JAVA=${JAVA:-java}

CONFIG=$KAFKA_DIR/server.properties
DATA_DIR=$KAFKA_DIR/data
LOG_DIR=$KAFKA_DIR/logs
PID_FILE=$KAFKA_DIR/kafka.pid
OUT_FILE=$LOG_DIR/kafka.out
STARTED_LINE='Kafka Server started'

JVM_OPTS=(
    -Djava.awt.headless=true
    -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError
    -Dkafka.logs.dir="$LOG_DIR"
    -Dlog4j2.configurationFile="$HERE/log4j2.properties"
)

die() { echo "kafka.sh: $*" >&2; exit 1; }

port_open() {  # true if something accepts TCP connections on 127.0.0.1:$1
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

log_tail() {
    local f
    for f in "$LOG_DIR/server.log" "$OUT_FILE"; do
        [[ -s $f ]] && { echo "--- last lines of $f"; tail -n 40 "$f"; }
    done >&2
    return 0
}

running_pid() {  # prints the broker's pid if the pid file names a live broker of this KAFKA_DIR
    local pid
    [[ -f $PID_FILE ]] || return 1
    pid=$(<"$PID_FILE")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
    # A recycled pid must not be mistaken for the broker: check it is the JVM (or this script,
    # still formatting) started for this KAFKA_DIR; both name it on their command line.
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$KAFKA_DIR" || return 1
    echo "$pid"
}

configure() {
    compgen -G "$KAFKA_LIBS/kafka_2.13-*.jar" >/dev/null \
        || die "no broker jars in $KAFKA_LIBS: run 'make kafka-jars'"
    mkdir -p "$DATA_DIR" "$LOG_DIR"
    [[ -e $KAFKA_DIR/.gitignore ]] || printf '*\n' >"$KAFKA_DIR/.gitignore"
    sed -e "s#@KAFKA_PORT@#$KAFKA_PORT#g" \
        -e "s#@KAFKA_CONTROLLER_PORT@#$KAFKA_CONTROLLER_PORT#g" \
        -e "s#@KAFKA_DATA_DIR@#$DATA_DIR#g" \
        "$HERE/server.properties.template" >"$CONFIG"
    if [[ ! -f $DATA_DIR/meta.properties ]]; then
        # A cluster id is a Kafka Uuid: 16 random bytes, URL-safe base64 without padding.
        # Kafka's own Uuid.randomUuid never starts one with '-': the tool's parser would read
        # it as an option (1 id in 64 failed to format before this loop).
        local cluster_id=-
        while [[ $cluster_id == -* ]]; do
            cluster_id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
        done
        echo "kafka.sh: formatting $DATA_DIR (cluster id $cluster_id)"
        "$JAVA" -Xmx256m "${JVM_OPTS[@]}" -cp "$KAFKA_LIBS/*" kafka.tools.StorageTool \
            format --cluster-id="$cluster_id" --config "$CONFIG" --ignore-formatted
    fi
}

cmd_run() {
    configure
    # exec: the broker JVM keeps this pid, so the pid file and the process group stay valid.
    # KAFKA_DIR on the command line lets running_pid tell this broker from a recycled pid.
    # shellcheck disable=SC2086
    exec "$JAVA" $KAFKA_HEAP_OPTS "${JVM_OPTS[@]}" -Dysb.kafka.dir="$KAFKA_DIR" \
        -cp "$KAFKA_LIBS/*" kafka.Kafka "$CONFIG"
}

cmd_start() {
    local pid
    if pid=$(running_pid); then
        echo "kafka.sh: already running (pid $pid) on 127.0.0.1:$KAFKA_PORT"
        return 0
    fi
    port_open "$KAFKA_PORT" && die "127.0.0.1:$KAFKA_PORT is taken by another process"
    port_open "$KAFKA_CONTROLLER_PORT" && die "127.0.0.1:$KAFKA_CONTROLLER_PORT is taken by another process"
    mkdir -p "$LOG_DIR"
    # Only a start line written by this start counts: remember where server.log ends now.
    local offset=0
    [[ -f $LOG_DIR/server.log ]] && offset=$(stat -c %s "$LOG_DIR/server.log")
    # setsid: the broker leads its own process group (stop kills the whole group) and does not
    # die with the shell that started it. A background job of a non-interactive shell is not a
    # group leader, so setsid execs in place and $! is the broker's pid.
    setsid "$0" run --kafka-dir="$KAFKA_DIR" >"$OUT_FILE" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$PID_FILE"
    local start=$SECONDS
    while ((SECONDS - start < KAFKA_START_TIMEOUT)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$PID_FILE"
            log_tail
            die "the broker exited during startup (logs in $LOG_DIR)"
        fi
        if port_open "$KAFKA_PORT" && [[ -f $LOG_DIR/server.log ]] &&
            tail -c +$((offset + 1)) "$LOG_DIR/server.log" | grep -qF "$STARTED_LINE"; then
            echo "kafka.sh: broker up on 127.0.0.1:$KAFKA_PORT (pid $pid, $((SECONDS - start)) s, data in $DATA_DIR)"
            return 0
        fi
        sleep 0.5
    done
    log_tail
    cmd_stop >&2 || true
    die "the broker did not come up within ${KAFKA_START_TIMEOUT}s (logs in $LOG_DIR)"
}

cmd_stop() {
    local pid
    if ! pid=$(running_pid); then
        rm -f "$PID_FILE"
        echo "kafka.sh: not running"
        return 0
    fi
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    local start=$SECONDS
    while kill -0 "$pid" 2>/dev/null && ((SECONDS - start < KAFKA_STOP_TIMEOUT)); do
        sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
        # Only while the leader lives is the group id surely still the broker's.
        echo "kafka.sh: no clean stop within ${KAFKA_STOP_TIMEOUT}s: SIGKILL" >&2
        kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
        for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    fi
    rm -f "$PID_FILE"
    echo "kafka.sh: stopped (pid $pid, $((SECONDS - start)) s)"
}

cmd_status() {
    local pid
    if pid=$(running_pid); then
        echo "kafka.sh: running (pid $pid), bootstrap servers 127.0.0.1:$KAFKA_PORT, data in $DATA_DIR"
        return 0
    fi
    echo "kafka.sh: not running"
    return 3
}

case ${1:-} in
    run) cmd_run ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    *) echo "usage: $0 {start|stop|status|run}" >&2; exit 2 ;;
esac
