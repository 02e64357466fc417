#!/usr/bin/env bash
# The long fuzz run: every fuzz test of the workspace, optimised (`--profile fuzz`, Cargo.toml), for
# SECONDS each (default 600), all at once — ten minutes of wall clock for the default — then a
# summary.
#
#   scripts/fuzz.sh            # 10 minutes
#   scripts/fuzz.sh 60         # one minute
#   TOOLCALLS_FUZZ_SEED=7 scripts/fuzz.sh   # another sequence of inputs (the default is fixed)
#
# The tests (a bounded run of each is part of scripts/test.sh):
#   crates/model/tests/fuzz.rs        event decoding (mutated v1 events), and their redaction
#   crates/adapters/tests/fuzz.rs     every adapter, then the core and the record encoder
#   crates/core/tests/fuzz_local.rs   local mode's path for v1 events, then the record encoder
#   crates/core/tests/fuzz_restore.rs the restore from a damaged changelog, then more events
#   tests/fuzz_local.rs               the `toolcalls local` binary, one process per case
#   tests/fuzz_audit.rs               `toolcalls audit` of mutated records files and inputs
#   tests/audit_sweep.rs              `toolcalls audit` of generated genuine runs (clean), and of
#                                     their records with one record taken out (found)
#   src/receive/fuzz.rs               `toolcalls receive`'s readers of hook, v1 and OTLP bodies
#                                     (generated protobuf requests too, some compressed), in process
#   src/follow/fuzz.rs                `ingest --follow` on files written in pieces, cut and written
#                                     again, restarted: what it delivers against a whole read
# Each prints `fuzz NAME: N cases in S s, 0 panics`; a panic fails the test with the seed of its
# case and the path of the saved input.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

secs="${1:-600}"
export TOOLCALLS_FUZZ_SECS="$secs"
unset TOOLCALLS_FUZZ_CASES
log_dir="${TMPDIR:-/tmp}/toolcalls-fuzz-logs"
mkdir -p "$log_dir"

tests=(
  "-p toolcalls-model --test fuzz"
  "-p toolcalls-adapters --test fuzz"
  "-p toolcalls-core --test fuzz_local"
  "-p toolcalls-core --test fuzz_restore"
  "-p toolcalls --test fuzz_local"
  "-p toolcalls --test fuzz_audit"
  "-p toolcalls --test audit_sweep"
  "-p toolcalls --bin toolcalls receive::fuzz"
  "-p toolcalls --bin toolcalls follow::fuzz"
)

echo "==> building the fuzz tests (--profile fuzz)" >&2
for t in "${tests[@]}"; do
  # shellcheck disable=SC2086
  cargo test --profile fuzz --locked $t --no-run
done

echo "==> fuzzing for ${secs} s (logs in $log_dir)" >&2
pids=()
for i in "${!tests[@]}"; do
  # shellcheck disable=SC2086
  cargo test --profile fuzz --locked ${tests[$i]} -- --nocapture >"$log_dir/$i.log" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    echo "FAILED: cargo test --profile fuzz ${tests[$i]} (log: $log_dir/$i.log)" >&2
    status=1
  fi
done
grep -h '^fuzz ' "$log_dir"/*.log || true
exit "$status"
