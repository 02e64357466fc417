#!/usr/bin/env bash
# The processor benchmark (issue 3 item 11), every part, in release mode; see README.md beside this
# file for the results and how to read them.
#
#   benches/processor/run.sh                 # everything: memory, restore, e2e, broker-restore, latency
#   benches/processor/run.sh e2e             # one part (memory | restore | e2e | broker-restore | latency)
#   CALLS=100000 ROUNDS=1 benches/processor/run.sh e2e    # a smaller input
#   GRACES=default benches/processor/run.sh e2e           # the default correlation graces
#   ONLY=processor-eos,copy-eos benches/processor/run.sh e2e   # some of the four e2e runs
#   TIMELINE=100 ONLY=processor-eos benches/processor/run.sh e2e  # what a processor run waits on
#   ALIGN_WAIT_MS=0 ONLY=processor-eos benches/processor/run.sh e2e  # input in arrival order
#   RATE=20000 SECONDS_LIVE=10 COMMIT_INTERVAL_MS=20 benches/processor/run.sh latency  # live traffic
#   SMOKE=1 benches/processor/run.sh         # every part, debug build, tiny inputs, no idle wait:
#                                            # checks that the bench runs and passes its own checks
#                                            # (scripts/test.sh does this); its rates mean nothing
#
# Installs Tansu (scripts/install-test-deps.sh, into .tools/), starts one broker on a free
# 127.0.0.1 port with the memory storage engine, and stops it on exit, however the script exits.
# Every part runs under `timeout`; the whole script takes a few minutes on 2 cores.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

parts=("$@")
if [ ${#parts[@]} -eq 0 ]; then parts=(memory restore e2e broker-restore latency); fi
CALLS="${CALLS:-200000}"
ROUNDS="${ROUNDS:-3}"
PARTITIONS="${PARTITIONS:-4}"
GRACES="${GRACES:-long}"
RATE="${RATE:-20000}"
SECONDS_LIVE="${SECONDS_LIVE:-10}"
SMOKE="${SMOKE:-}"
# Sizes of the parts that take no environment variable.
MEMORY_CALLS=500000 RESTORE_CALLS=300000 RESTORE_ROUNDS=3 SAMPLES=2
profile=(--profile bench)
if [ -n "$SMOKE" ]; then
  # The same code paths and checks on inputs small enough for a debug build: a test that the bench
  # still works, not a measurement.
  CALLS=5000 ROUNDS=1 RATE=2000 SECONDS_LIVE=3
  MEMORY_CALLS=20000 RESTORE_CALLS=20000 RESTORE_ROUNDS=1 SAMPLES=1
  profile=(--profile dev)
fi

log() { echo "run.sh: $*" >&2; }

log "tree: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' + uncommitted changes')"
log "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg)"

# The machine may be shared: before each part wait (at most QUIET_WAIT seconds) until the other
# processes leave it idle; every measured interval also reports the CPU other processes took.
cpu_ticks() { awk '/^cpu / {print $2+$3+$4+$7+$8+$9, $5+$6}' /proc/stat; }
wait_quiet() {
  if [ -n "$SMOKE" ]; then return; fi
  local deadline=$((SECONDS + ${QUIET_WAIT:-300})) b1 i1 b2 i2 busy
  while :; do
    read -r b1 i1 < <(cpu_ticks); sleep 3; read -r b2 i2 < <(cpu_ticks)
    busy=$(( 100 * (b2 - b1) / ((b2 - b1) + (i2 - i1) + 1) ))
    if [ "$busy" -le 15 ]; then log "machine quiet (${busy}% busy)"; return; fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "WARNING: other processes keep the machine ${busy}% busy; measuring anyway (see the CPU lines)"
      return
    fi
    log "machine ${busy}% busy with other processes; waiting"
    sleep 7
  done
}

bench() {
  timeout 900 cargo bench --quiet --locked "${profile[@]}" -p toolcalls-benches --bench processor -- "$@"
}

if [ -n "$SMOKE" ]; then
  log "SMOKE=1: debug build, tiny inputs; this checks that the bench works, its rates mean nothing"
else
  log "building (release, bench profile)"
fi
cargo bench --quiet --locked "${profile[@]}" -p toolcalls-benches --bench processor --no-run

tansu_pid=""
stop_broker() {
  if [ -n "$tansu_pid" ] && kill -0 "$tansu_pid" 2>/dev/null; then
    log "stopping tansu (pid $tansu_pid)"
    kill "$tansu_pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$tansu_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$tansu_pid" 2>/dev/null || true
    wait "$tansu_pid" 2>/dev/null || true
  fi
  tansu_pid=""
}
# The brokers' logs are kept when the run fails, to say why; a run that passes removes them.
broker_logs=()
finish() {
  local status=$?
  stop_broker
  if [ "$status" -eq 0 ] && [ "${#broker_logs[@]}" -gt 0 ]; then rm -f "${broker_logs[@]}"; fi
}
trap finish EXIT
trap 'exit 130' INT TERM

start_broker() {
  local tansu port
  tansu="$(scripts/install-test-deps.sh | tail -n 1)"
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  broker_log="${TMPDIR:-/tmp}/tansu-bench-$port.log"
  broker_logs+=("$broker_log")
  "$tansu" broker --listener-url "tcp://127.0.0.1:$port" --advertised-listener-url "tcp://127.0.0.1:$port" \
    --storage-engine memory://tansu/ >"$broker_log" 2>&1 &
  tansu_pid=$!
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
    sleep 0.1
  done
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    log "tansu did not accept connections on 127.0.0.1:$port (log: $broker_log)"
    exit 1
  fi
  brokers="127.0.0.1:$port"
  log "tansu (pid $tansu_pid) on $brokers, log $broker_log"
}

for part in "${parts[@]}"; do
  log "== $part"
  wait_quiet
  case "$part" in
    memory)
      for v in bare args idless; do bench memory --calls "$MEMORY_CALLS" --variant "$v"; done
      ;;
    restore)
      bench restore --calls "$RESTORE_CALLS" --rounds "$RESTORE_ROUNDS"
      ;;
    e2e)
      # A fresh broker: nothing from the other parts in its memory.
      start_broker
      bench e2e --brokers "$brokers" --calls "$CALLS" --partitions "$PARTITIONS" --rounds "$ROUNDS" --graces "$GRACES" --broker-pid "$tansu_pid" \
        ${ONLY:+--only "$ONLY"} ${TIMELINE:+--timeline "$TIMELINE"} ${ALIGN_WAIT_MS:+--align-wait-ms "$ALIGN_WAIT_MS"}
      stop_broker
      ;;
    broker-restore)
      start_broker
      bench broker-restore --brokers "$brokers" --calls "$CALLS" --partitions "$PARTITIONS" --samples "$SAMPLES" --broker-pid "$tansu_pid"
      stop_broker
      ;;
    latency)
      start_broker
      bench latency --brokers "$brokers" --rate "$RATE" --seconds "$SECONDS_LIVE" --partitions "$PARTITIONS" \
        ${COMMIT_INTERVAL_MS:+--commit-interval-ms "$COMMIT_INTERVAL_MS"}
      stop_broker
      ;;
    *)
      log "unknown part $part (memory | restore | e2e | broker-restore | latency)"
      exit 2
      ;;
  esac
done
