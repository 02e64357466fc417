#!/usr/bin/env bash
# The follower benchmark: how fast `toolcalls ingest --follow` (release build) delivers Claude Code
# transcripts appended as fast as a writer can append them. Results: benches/README.md,
# "Follower".
#
#   benches/follow/run.sh                 # 40 files of 25 copies of a real transcript (~200 MB),
#                                         # appended at 50 MB/s in all
#   RATE=0 benches/follow/run.sh          # appended as fast as the writer can
#   FILES=1 COPIES=100 RATE=5 benches/follow/run.sh   # one file growing to ~20 MB at 5 MB/s
#
# The follower writes the events to a file (`--out`), so the figure is the follower's own cost:
# scanning, reading, parsing (a transcript's stream parses only what was appended), digesting,
# checkpointing. Publishing to Kafka adds the producer's cost (see "Receiver" for its rate).
# Reads the transcript from ../shared/fixtures in place.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
FILES="${FILES:-40}"
COPIES="${COPIES:-25}"
FIXTURE="${FIXTURE:-$root/../shared/fixtures/claude-code/agentcmd-full-session-four.jsonl}"
POLL="${POLL:-100ms}"
RATE="${RATE:-50}"
[ -f "$FIXTURE" ] || { echo "run.sh: $FIXTURE is missing (the shared fixtures sit beside the project)" >&2; exit 1; }
cargo build --release --locked --bin toolcalls -p toolcalls >&2
bin="$root/target/release/toolcalls"
work="$(mktemp -d)"
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/sessions" "$work/cp"

# What a one-shot ingest of the finished files gives: the count to wait for.
python3 "$root/benches/follow/write.py" --dir "$work/expect" --fixture "$FIXTURE" --files 1 --copies "$COPIES" >/dev/null 2>&1 || {
  mkdir -p "$work/expect"; python3 "$root/benches/follow/write.py" --dir "$work/expect" --fixture "$FIXTURE" --files 1 --copies "$COPIES" >/dev/null; }
per_file="$("$bin" ingest --format claude-code --out - "$work/expect"/*.jsonl 2>/dev/null | wc -l)"
expected=$((per_file * FILES))

"$bin" ingest --follow --format claude-code --poll-interval "$POLL" --checkpoint-dir "$work/cp" \
  --out "$work/out.jsonl" "$work/sessions" 2>"$work/follow.log" &
pid=$!
start=$(date +%s.%N)
python3 "$root/benches/follow/write.py" --dir "$work/sessions" --fixture "$FIXTURE" --files "$FILES" --copies "$COPIES" --rate "$RATE" >"$work/write.json"
deadline=$(( $(date +%s) + 600 ))
while :; do
  n=$( [ -f "$work/out.jsonl" ] && wc -l <"$work/out.jsonl" || echo 0 )
  [ "$n" -ge "$expected" ] && break
  [ "$(date +%s)" -lt "$deadline" ] || { echo "run.sh: the follower delivered $n of $expected events in 600 s" >&2; exit 1; }
  sleep 0.05
done
end=$(date +%s.%N)
ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat")
hz=$(getconf CLK_TCK)
python3 - "$work/write.json" "$start" "$end" "$ticks" "$hz" "$expected" "$n" "$RATE" <<'PY'
import json, sys
w = json.load(open(sys.argv[1]))
start, end, ticks, hz, expected, n = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
mb = w["bytes"] / 1e6
wall = end - start
cpu = ticks / hz
print(f"{w['files']} files, {mb:.1f} MB appended in {w['seconds']:.2f} s by the writer (rate {sys.argv[8]} MB/s, 0 = unpaced); "
      f"{n} events delivered ({expected} expected), the last {end - w['end']:.2f} s after the last byte was written")
print(f"follower: {mb / wall:.1f} MB/s of wall time; {cpu:.2f} s of CPU = {cpu / wall:.2f} of a core over the run, {mb / cpu:.1f} MB per CPU second")
PY
