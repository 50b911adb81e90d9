#!/usr/bin/env bash
# One-shot setup before the long-running Airflow services start (compose service airflow-init):
# refuse placeholder secrets, migrate the metadata DB, write the UI users' passwords.
#
# UI auth is Airflow's SimpleAuthManager: the users and roles come from
# AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS, their passwords from the JSON file
# AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE, written here from .env on every start (so a
# changed password in .env takes effect on the next `docker compose up`). The FAB auth manager
# cannot be installed under constraints.txt (apache-airflow-providers-fab needs sqlalchemy<2).
set -euo pipefail

fail() { echo "airflow-init: $*" >&2; exit 1; }

for var in AIRFLOW__CORE__FERNET_KEY AIRFLOW__API__SECRET_KEY AIRFLOW__API_AUTH__JWT_SECRET \
           AIRFLOW_ADMIN_USERNAME AIRFLOW_ADMIN_PASSWORD AIRFLOW_VIEWER_USERNAME AIRFLOW_VIEWER_PASSWORD \
           AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE; do
    value="${!var:-}"
    [[ -n "${value}" ]] || fail "${var} is empty: set it in .env (\`make compose-env\` writes one)."
    [[ "${value}" != *change-me* ]] \
        || fail "${var} is still the .env.example placeholder: \`make compose-env\` generates real values."
done
[[ "${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN:-}" != *change-me* ]] \
    || fail "POSTGRES_PASSWORD is still the .env.example placeholder: \`make compose-env\` generates one."

echo "airflow-init: migrating the metadata database"
airflow db migrate

echo "airflow-init: writing the UI passwords to ${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE}"
python - <<'PY'
import json
import os

path = os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
passwords = {
    os.environ["AIRFLOW_ADMIN_USERNAME"]: os.environ["AIRFLOW_ADMIN_PASSWORD"],
    os.environ["AIRFLOW_VIEWER_USERNAME"]: os.environ["AIRFLOW_VIEWER_PASSWORD"],
}
configured = {
    entry.split(":")[0].strip()
    for entry in os.environ.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "").split(",")
    if entry.strip()
}
if missing := configured - passwords.keys():
    raise SystemExit(f"airflow-init: no password in .env for UI user(s) {sorted(missing)}")
# Written to a temporary file and renamed, readable by this user only.
tmp = f"{path}.tmp"
fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "w") as stream:
    json.dump(passwords, stream)
os.replace(tmp, path)
PY
echo "airflow-init: done"
