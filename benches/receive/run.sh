#!/usr/bin/env bash
# The receiver benchmark: small Claude Code hook posts over keep-alive connections against
# `toolcalls receive` publishing to a real broker (Tansu, memory storage), every request answered
# only after the broker acknowledged its event. Results: benches/README.md, "Receiver".
#
#   benches/receive/run.sh                          # 256 connections, 10 s, after a 3 s warm-up
#   CONNECTIONS=128 SECONDS_RUN=20 benches/receive/run.sh
#
# Builds the binary and the load generator in release mode, installs Tansu
# (scripts/install-test-deps.sh), starts the broker and the receiver on free 127.0.0.1 ports and
# stops both on exit, however the script exits.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
CONNECTIONS="${CONNECTIONS:-256}"
SECONDS_RUN="${SECONDS_RUN:-10}"
PARTITIONS="${PARTITIONS:-6}"
log() { echo "run.sh: $*" >&2; }

tansu="$(scripts/install-test-deps.sh | tail -n1)"
cargo build --release --locked --bin toolcalls -p toolcalls >&2
cargo build --release --locked -p toolcalls-benches --example receive_load >&2
bin="$root/target/release/toolcalls"
load="$root/target/release/examples/receive_load"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

kport="$(free_port)"
"$tansu" broker --listener-url "tcp://127.0.0.1:$kport" --advertised-listener-url "tcp://127.0.0.1:$kport" \
  --storage-engine memory://tansu/ >"$work/tansu.log" 2>&1 &
pids+=($!)
brokers="127.0.0.1:$kport"
timeout 30 bash -c "until (exec 3<>/dev/tcp/127.0.0.1/$kport) 2>/dev/null; do sleep 0.1; done"
timeout 60 "$bin" topics create --brokers "$brokers" --partitions "$PARTITIONS" >&2

rport="$(free_port)"
"$bin" receive --brokers "$brokers" --listen "127.0.0.1:$rport" >"$work/receive.log" 2>&1 &
rpid=$!
pids+=($rpid)
timeout 60 bash -c "until grep -q 'listening on' '$work/receive.log'; do sleep 0.1; done"

log "tree: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' + uncommitted changes'); $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
timeout 60 "$load" --url "http://127.0.0.1:$rport" --connections "$CONNECTIONS" --seconds 3 >/dev/null
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
r0="$(cpu "$rpid")"; t0="$(cpu "${pids[0]}")"
timeout $((SECONDS_RUN + 60)) "$load" --url "http://127.0.0.1:$rport" --connections "$CONNECTIONS" --seconds "$SECONDS_RUN"
r1="$(cpu "$rpid")"; t1="$(cpu "${pids[0]}")"
hz="$(getconf CLK_TCK)"
log "CPU over the run: receiver $(( (r1 - r0) * 100 / hz / SECONDS_RUN ))% of a core, broker $(( (t1 - t0) * 100 / hz / SECONDS_RUN ))%"
