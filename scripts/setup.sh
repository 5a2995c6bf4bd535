#!/usr/bin/env bash
# Idempotent set-up: venv + Python packages + JVM jars. Safe to run on every `make` target;
# a second run with everything in place does no network I/O.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${VENV:-$ROOT/.venv}
PY=${PYTHON:-python3}
STAMP=$VENV/.sqlcdc-setup-stamp

need_pip=1
if [ -f "$STAMP" ] && [ "$STAMP" -nt pyproject.toml ]; then need_pip=0; fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating venv at $VENV"
  "$PY" -m venv "$VENV"
  need_pip=1
fi
if [ "$need_pip" = 1 ]; then
  echo "setup: installing Python packages (pyproject.toml [dev])"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -e ".[dev]"
fi

# JVM artifacts (src/sqlcdc/jars.txt) onto the venv Spark's classpath: the same `sqlcdc setup` an
# installed wheel uses, with .jars/ (git-ignored) as its cache.
"$VENV/bin/sqlcdc" setup --quiet --cache "$ROOT/.jars" \
  || { echo "setup: could not fetch the Spark JARs (is Maven Central reachable?)" >&2; exit 1; }
# The Kafka broker the tests start (its own JVM; build/kafka-broker.pom.xml): once, into .jars/kafka-broker/.
if [ ! -f .jars/kafka-broker/.complete ]; then
  echo "setup: fetching the Kafka test broker (kafka_2.13 + runtime closure) from Maven Central"
  mvn -q -B -f build/kafka-broker.pom.xml dependency:copy-dependencies >/dev/null \
    || { echo "setup: could not fetch the Kafka broker with Maven (is Maven Central reachable?)" >&2; exit 1; }
  touch .jars/kafka-broker/.complete
fi
if [ "$need_pip" = 1 ]; then touch "$STAMP"; fi
