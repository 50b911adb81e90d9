#!/usr/bin/env bash
# The Airflow UI for local use: api-server, scheduler, dag-processor and triggerer, each in its own
# process group. Ctrl-C (or SIGTERM to this script) stops them all, with a bounded wait and SIGKILL
# for any that hang (a LocalExecutor scheduler has been seen to).
# Run through `make airflow-ui [PORT=8081]`, which sets AIRFLOW_HOME and the rest of the environment.
#
# The port: PORT, else Airflow's own AIRFLOW__API__PORT, else 8080. Only the api-server listens,
# on 127.0.0.1: the scheduler and the triggerer run without their log servers (which would bind
# every interface on 8793/8794, and collide with a second clone's), since the api-server reads the
# task logs from $AIRFLOW_HOME/logs on this machine. A second clone needs only another PORT.
set -euo pipefail

port="${PORT:-${AIRFLOW__API__PORT:-8080}}"
logs="$AIRFLOW_HOME/logs/components"
mkdir -p "$logs"
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
  echo "Port $port on 127.0.0.1 is in use (another clone's Airflow UI?): choose another, e.g. make airflow-ui PORT=$((port + 1))" >&2
  exit 1
fi
export AIRFLOW__API__HOST=127.0.0.1
export AIRFLOW__API__PORT="$port"
export AIRFLOW__API__BASE_URL="http://127.0.0.1:$port"
export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="http://127.0.0.1:$port/execution/"
# LocalExecutor forks `parallelism` workers up front (Airflow's default 32, idle on a 2-core
# machine); four task slots are plenty for an hourly run beside a small backfill here.
export AIRFLOW__CORE__PARALLELISM="${AIRFLOW__CORE__PARALLELISM:-4}"
# A run in flight when this script stopped is resumed by the next start: the new scheduler resets
# the tasks the stopped one had started and runs them again. It looks for them every 30 s
# (Airflow's default: 5 minutes, a long wait after a restart).
export AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL="${AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL:-30}"
# The default SimpleAuthManager: one admin user, its generated password in the file below.
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS:-admin:admin}"

pids=()
stopping=0
# The process groups in the components' sessions (each component is a session leader, by setsid).
# A task runner leaves its component's process group but not its session: stopping the groups
# alone left running tasks behind, holding their checkpoint's lock, so the next start's try was
# refused and waited for its retry.
session_groups() {
  ps -e -o sid=,pgid= | awk -v sids=" ${pids[*]} " 'index(sids, " " $1 " ") { print $2 }' | sort -u
}

stop_all() {
  trap - INT TERM EXIT
  stopping=1
  echo "stopping Airflow components ..."
  local groups
  groups=$(session_groups)  # before the first signal: a task runner may outlive its component
  for group in "${pids[@]}" $groups; do kill -TERM -- "-$group" 2>/dev/null || true; done
  for _ in $(seq 1 20); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.5
  done
  for group in "${pids[@]}" $groups; do kill -KILL -- "-$group" 2>/dev/null || true; done
}
trap stop_all INT TERM EXIT

start() {
  local name="${1%% *}"
  setsid airflow $1 > "$logs/$name.log" 2>&1 &
  pids+=("$!")
  echo "started airflow $name (pid $!, log $logs/$name.log)"
}

# The api-server first, and the rest once it answers: the scheduler starts the latest hourly run
# at once, and its tasks talk to the api-server (the execution API); started together, the
# first task (preflight) failed its first try with "Connection refused".
start "api-server --host 127.0.0.1 --port $port"
for _ in $(seq 1 120); do
  curl -fsS "http://127.0.0.1:$port/api/v2/monitor/health" > /dev/null 2>&1 && break
  kill -0 "${pids[0]}" 2>/dev/null || { echo "the api-server exited; see $logs/api-server.log"; exit 1; }
  sleep 1
done
# The api-server builds its execution API (Cadwyn's versioned routes, ~2.5 s) on the first request
# to it: made here, or the first task of the first run would wait for it.
curl -fsS --max-time 120 "http://127.0.0.1:$port/execution/health" > /dev/null || true
for component in "scheduler --skip-serve-logs" dag-processor "triggerer --skip-serve-logs"; do start "$component"; done
echo "Airflow UI: http://127.0.0.1:$port  (user admin; password in $AIRFLOW_HOME/simple_auth_manager_passwords.json.generated)"
echo "Ctrl-C stops every component."
wait -n "${pids[@]}" || true
if [ "$stopping" = 1 ]; then
  echo "Airflow stopped."
else
  echo "An Airflow component exited by itself; stopping the others. See its log in $logs" >&2
fi
