#!/usr/bin/env bash
# The Airflow UI for local use: api-server, scheduler, dag-processor and triggerer, all bound to
# 127.0.0.1, each in its own process group. Ctrl-C (or SIGTERM to this script) stops them all,
# with a bounded wait and SIGKILL for any that hang (a LocalExecutor scheduler has been seen to).
# Run through `make airflow-ui`, which sets AIRFLOW_HOME and the rest of the environment.
set -euo pipefail

port="${AIRFLOW_UI_PORT:-8080}"
logs="$AIRFLOW_HOME/logs/components"
mkdir -p "$logs"
export AIRFLOW__API__HOST=127.0.0.1
export AIRFLOW__API__PORT="$port"
export AIRFLOW__API__BASE_URL="http://127.0.0.1:$port"
export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="http://127.0.0.1:$port/execution/"
# The default SimpleAuthManager: one admin user, its generated password in the file below.
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS:-admin:admin}"

pids=()
stop_all() {
  trap - INT TERM EXIT
  echo "stopping Airflow components ..."
  for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  for _ in $(seq 1 20); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.5
  done
  for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
}
trap stop_all INT TERM EXIT

for component in "api-server --host 127.0.0.1 --port $port" scheduler dag-processor triggerer; do
  name="${component%% *}"
  setsid airflow $component > "$logs/$name.log" 2>&1 &
  pids+=("$!")
  echo "started airflow $name (pid $!, log $logs/$name.log)"
done

for _ in $(seq 1 60); do
  curl -fsS "http://127.0.0.1:$port/api/v2/monitor/health" > /dev/null 2>&1 && break
  sleep 1
done
echo "Airflow UI: http://127.0.0.1:$port  (user admin; password in $AIRFLOW_HOME/simple_auth_manager_passwords.json.generated)"
echo "Ctrl-C stops every component."
wait -n "${pids[@]}" || true
echo "an Airflow component exited; see $logs"
