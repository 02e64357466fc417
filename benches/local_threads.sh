#!/usr/bin/env bash
# `toolcalls local` on every core: the same generated input with --threads 1 and --threads 2,
# interleaved, several rounds; prints each run and the ratio of the medians (benches/README.md,
# "Local mode on every core").
#
#   benches/local_threads.sh
#
# Environment: EVENTS (500000), SEED (42), ROUNDS (5), THREADS (2: the count compared with 1);
# TOOLCALLS_BIN to time a given binary instead of building target/release/toolcalls; INPUT to
# time an existing v1 file instead of generating one; KEEP=1 keeps the temporary directory.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
events="${EVENTS:-500000}"
seed="${SEED:-42}"
rounds="${ROUNDS:-5}"
threads="${THREADS:-2}"

if [ -n "${TOOLCALLS_BIN:-}" ]; then
    bin="$(realpath "$TOOLCALLS_BIN")"
    built="$bin as given, built $(date -u -r "$bin" +%Y-%m-%dT%H:%MZ)"
else
    (cd "$root" && cargo build --release --locked --quiet --bin toolcalls)
    bin="$root/target/release/toolcalls"
    built="built from tree $(cd "$root" && git rev-parse --short HEAD)$(cd "$root" && git diff --quiet HEAD -- . || echo ' (+ uncommitted changes)')"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/toolcalls-local-threads.XXXXXX")"
if [ "${KEEP:-}" = 1 ]; then
    echo "local_threads.sh: keeping $work"
else
    trap 'rm -rf "$work"' EXIT
fi
if [ -n "${INPUT:-}" ]; then
    input="$(realpath "$INPUT")"
else
    input="$work/events.jsonl"
    python3 "$here/peers/gen.py" --events "$events" --seed "$seed" --out "$input"
fi

echo "local_threads.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg); $built"
echo "local_threads.sh: input $input, $(wc -l < "$input") lines, $(du -m "$input" | cut -f1) MB"
# Warm the page cache, so that the first run reads no more from disk than the others.
cat "$input" > /dev/null

python3 - "$bin" "$input" "$work" "$rounds" "$threads" <<'PY'
import os, resource, statistics, subprocess, sys, time
binary, inp, work, rounds, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
runs = {"1": [], threads: []}
summaries = {}
for r in range(rounds):
    for t in ("1", threads):
        out = os.path.join(work, "out.%s.jsonl" % t)
        # Every run writes a new file, untimed as in the first round: cutting the one the round
        # before wrote costs a fixed time (the kernel frees its pages; ext4 flushes the file at
        # close), a larger share of the faster run's (benches/README.md, "Peers", 2026-11-28).
        if os.path.exists(out):
            os.remove(out)
        os.sync()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        p = subprocess.run([binary, "local", "--threads", t, "-o", out, inp],
                           stderr=subprocess.PIPE, text=True, check=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        runs[t].append((wall, cpu))
        summaries[t] = p.stderr
        print("round %d  --threads %s  %6.2f s wall  %6.2f s CPU  load %s"
              % (r + 1, t, wall, cpu, open("/proc/loadavg").read().split()[0]), flush=True)
if summaries["1"] != summaries[threads]:
    sys.exit("local_threads.sh: the summaries differ:\n%s\n%s" % (summaries["1"], summaries[threads]))
same = open(os.path.join(work, "out.1.jsonl"), "rb").read() == open(os.path.join(work, "out.%s.jsonl" % threads), "rb").read()
print("local_threads.sh: summaries equal; outputs %s" % ("byte for byte equal" if same else "differ in order (end of input)"))
print(summaries["1"], end="")
med = {t: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for t, v in runs.items()}
ratios = [a[0] / b[0] for a, b in zip(runs["1"], runs[threads])]
events = int(summaries["1"].split("toolcalls local: ", 1)[1].split()[0])
print("| threads | wall s (median of %d) | CPU s | events/s |" % rounds)
print("|---|---|---|---|")
for t in ("1", threads):
    print("| %s | %.2f | %.2f | %.0f K |" % (t, med[t][0], med[t][1], events / med[t][0] / 1000))
print("**--threads %s ÷ --threads 1: %.2f × (median wall); per round %s**"
      % (threads, med["1"][0] / med[threads][0], ", ".join("%.2f" % r for r in ratios)))
# The two runs of a round are timed one after the other, so their ratio is the one the VM's
# changes of speed between rounds disturb least.
print("median of the per-round ratios: %.2f ×" % statistics.median(ratios))
# Other processes on the machine only ever add time: the fastest round of each is the one they
# disturbed least.
fastest = {t: min(w for w, _ in v) for t, v in runs.items()}
print("fastest rounds: %.2f s and %.2f s, %.2f ×"
      % (fastest["1"], fastest[threads], fastest["1"] / fastest[threads]))
PY
