#!/usr/bin/env bash
# A release build of the `toolcalls` binary optimised with a profile of its own runs (profile-guided
# optimisation): an instrumented build runs a training workload, LLVM merges what it counted, and
# the second build lays out and inlines the code by those counts.
#
#   scripts/build-pgo.sh          # prints the path of the binary: target/pgo/optimised/release/toolcalls
#
# Training workload: `toolcalls local` (one thread and every core) on 200,000 events of
# benches/peers/gen.py with seed 7 (the benches use seed 42), and every native format through its
# adapter on the real recordings in ../shared/fixtures when they are there. It does not run the
# processor (`toolcalls run` needs a broker): its correlator, event reader and record encoder are
# the ones local mode runs and are trained, its Kafka and runtime code is laid out without counts,
# as code that never ran. The release binary of `cargo build --release` stays the one to ship for
# the processor (its bench built this way ran no faster: benches/processor/README.md); see
# benches/README.md, "Peers", for what this build gains in local mode.
#
# Needs `llvm-profdata` of the LLVM version rustc is built with (`rustc -vV`); as root with apt it
# installs Debian's `llvm-<major>` when missing. Environment: PGO_EVENTS (200000), PGO_DIR
# (target/pgo). Two release builds with the release profile's LTO: about 14 minutes from scratch on 2 cores.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"
dir="${PGO_DIR:-$root/target/pgo}"
events="${PGO_EVENTS:-200000}"
say() { echo "build-pgo.sh: $*" >&2; }

llvm_major="$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')"
profdata="llvm-profdata-$llvm_major"
if ! command -v "$profdata" > /dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
        say "installing Debian's llvm-$llvm_major for $profdata"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "llvm-$llvm_major" > /dev/null
    else
        say "needs $profdata (rustc is built with LLVM $llvm_major): install llvm-$llvm_major, then run again"
        exit 1
    fi
fi

mkdir -p "$dir"
say "1/4 building the instrumented binary"
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$dir/profiles" \
    cargo build --release --locked --quiet --bin toolcalls --target-dir "$dir/instrumented"
trainee="$dir/instrumented/release/toolcalls"
# The build scripts the build ran were instrumented too: only the training counts.
rm -rf "$dir/profiles"

say "2/4 running the training workload"
python3 benches/peers/gen.py --events "$events" --seed 7 --out "$dir/train.jsonl" 2> /dev/null
"$trainee" local --threads 1 -q -o "$dir/train-records.jsonl" "$dir/train.jsonl"
"$trainee" local -q -o /dev/null "$dir/train.jsonl"
# The bundled example has one bad line, on purpose: its message is not news here.
"$trainee" local -q -o /dev/null examples/session.jsonl 2> /dev/null
fixtures="$root/../shared/fixtures"
if [ -d "$fixtures" ]; then
    for file in "$fixtures"/*/*; do
        case "$file" in *.md) continue ;; esac
        for ids in "" --drop-ids; do
            "$trainee" local --format auto $ids -q -o /dev/null "$file"
        done
    done
else
    say "no $fixtures: training without the native formats"
fi

say "3/4 merging the profiles"
"$profdata" merge -o "$dir/toolcalls.profdata" "$dir/profiles"

say "4/4 building with the profile"
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-use=$dir/toolcalls.profdata" \
    cargo build --release --locked --quiet --bin toolcalls --target-dir "$dir/optimised"
binary="$dir/optimised/release/toolcalls"

# The profile changes how the code is laid out, never what it does: the same records as the
# instrumented binary wrote for the same input.
"$binary" local --threads 1 -q -o "$dir/check-records.jsonl" "$dir/train.jsonl"
if ! cmp -s "$dir/train-records.jsonl" "$dir/check-records.jsonl"; then
    say "the optimised binary's records differ from the instrumented binary's on $dir/train.jsonl"
    exit 1
fi
rm -f "$dir/train.jsonl" "$dir/train-records.jsonl" "$dir/check-records.jsonl"
say "done; the same records as the instrumented build"
echo "$binary"
