#!/usr/bin/env bash
# toolcalls local against its peers (a plain Python loop, a Bytewax 0.21 dataflow) on one generated
# input, interleaved; prints the table of benches/README.md, "Peers".
#
#   benches/peers/run.sh
#
# Environment: EVENTS (500000), SEED (42), ROUNDS (3); TOOLCALLS_BIN to time a given binary instead
# of building target/release/toolcalls; TOOLCALLS_ARGS, extra arguments for `toolcalls local`
# (e.g. "--threads 2" once it exists); KEEP=1 keeps the temporary directory (input and outputs).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
events="${EVENTS:-500000}"
seed="${SEED:-42}"
rounds="${ROUNDS:-3}"

"$here/setup.sh"
py="$here/.venv/bin/python"

if [ -n "${TOOLCALLS_BIN:-}" ]; then
    bin="$(realpath "$TOOLCALLS_BIN")"
else
    (cd "$root" && cargo build --release --locked --quiet --bin toolcalls)
    bin="$root/target/release/toolcalls"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/toolcalls-peers.XXXXXX")"
if [ "${KEEP:-}" = 1 ]; then
    echo "run.sh: keeping $work"
else
    trap 'rm -rf "$work"' EXIT
fi

"$py" "$here/gen.py" --events "$events" --seed "$seed" --out "$work/events.jsonl" 2> "$work/gen.log"
cat "$work/gen.log"
calls="$("$py" -c 'import json, sys; print(json.loads(sys.stdin.read().split("gen.py: ", 1)[1])["calls"])' < "$work/gen.log")"

# The generator writes the ADK checksum of id-less calls itself: check a sample against toolcalls.
"$py" - "$work/events.jsonl" "$bin" <<'EOF'
import json, subprocess, sys
checked = 0
for line in open(sys.argv[1], encoding="utf-8"):
    ev = json.loads(line)
    if ev["kind"] == "announce" and "checksum" in ev:
        out = subprocess.run([sys.argv[2], "checksum", ev["tool"], json.dumps(ev["args"])],
                             check=True, capture_output=True, text=True).stdout.split()[0]
        if out != ev["checksum"]:
            sys.exit("run.sh: gen.py's checksum %s of %s differs from toolcalls' %s" % (ev["checksum"], line, out))
        checked += 1
        if checked == 20:
            break
print("run.sh: %d generated checksums equal toolcalls checksum's" % checked)
EOF

echo "run.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "${TOOLCALLS_BIN:-}" ]; then
    built="$bin as given, built $(date -u -r "$bin" +%Y-%m-%dT%H:%MZ)"
else
    built="built from tree $(cd "$root" && git rev-parse --short HEAD)$(cd "$root" && git diff --quiet HEAD -- . || echo ' (+ uncommitted changes)')"
fi
echo "run.sh: $("$bin" --version 2>/dev/null || echo toolcalls) $built, TOOLCALLS_ARGS='${TOOLCALLS_ARGS:-}'; $("$py" --version), bytewax $("$py" -c 'import importlib.metadata as m; print(m.version("bytewax"))')"
"$py" "$here/bench.py" --input "$work/events.jsonl" --work "$work" --toolcalls "$bin" \
    --python "$py" --rounds "$rounds" --calls "$calls" --toolcalls-args "${TOOLCALLS_ARGS:-}"
