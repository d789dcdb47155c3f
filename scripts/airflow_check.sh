#!/usr/bin/env bash
# Load the Airflow DAGs (airflow/*.py) in a real DagBag, in a virtualenv of their own.
#
# Airflow and its Databricks / Spark providers live in build/airflow-venv, never in .venv: the
# Spark provider pulls `pyspark-client`, which would replace the project's pyspark. Installed from
# PyPI with pinned versions (Airflow's constraint files are not published on PyPI); reinstalled only
# when the pins below change. The install is time-boxed ($AIRFLOW_INSTALL_TIMEOUT seconds, default
# 900) and fails with the tail of its log; the time it took is printed.
#
#   bash scripts/airflow_check.sh            (or: make test-airflow)
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${AIRFLOW_VENV:-build/airflow-venv}"
PYTHON="${PYTHON:-python3}"
INSTALL_TIMEOUT="${AIRFLOW_INSTALL_TIMEOUT:-900}"
REQUIREMENTS=(
  "apache-airflow==3.3.2"
  "apache-airflow-providers-databricks==7.23.0"
  "apache-airflow-providers-apache-spark==6.3.4"
  "pytest>=8"
)
LOG=build/logs/airflow-install.log
STAMP="$VENV/.installed-$(printf '%s\n' "${REQUIREMENTS[@]}" | cksum | cut -d' ' -f1)"
mkdir -p build/logs

if [ ! -f "$STAMP" ]; then
  echo "airflow: installing ${REQUIREMENTS[*]} into $VENV (log: $LOG)"
  began=$(date +%s)
  rm -rf "$VENV"
  if ! timeout "$INSTALL_TIMEOUT" bash -c '
        set -e
        "$1" -m venv "$2"
        "$2/bin/python" -m pip install --quiet --upgrade pip
        "$2/bin/python" -m pip install --quiet "${@:3}"' _ "$PYTHON" "$VENV" "${REQUIREMENTS[@]}" >"$LOG" 2>&1; then
    tail -n 40 "$LOG" >&2
    echo "airflow: FAILED to install the Airflow virtualenv within ${INSTALL_TIMEOUT}s (full log: $LOG)" >&2
    exit 1
  fi
  touch "$STAMP"
  echo "airflow: virtualenv installed in $(( $(date +%s) - began ))s"
fi

# A throwaway AIRFLOW_HOME: loading DAGs writes config and logs there, never into ~/airflow.
AIRFLOW_HOME="$(mktemp -d "${TMPDIR:-/tmp}/lakecdc-airflow-home.XXXXXX")"
trap 'rm -rf "$AIRFLOW_HOME"' EXIT
export AIRFLOW_HOME AIRFLOW__CORE__LOAD_EXAMPLES=False AIRFLOW__CORE__DAGS_FOLDER="$PWD/airflow"
# The project's pytest options ignore tests/airflow (the main run has no Airflow); run it here.
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -o addopts="-ra --strict-markers" tests/airflow "$@"
