#!/usr/bin/env python3
"""Runs toolcalls local and its peers on one input, interleaved, and prints the table.

Called by run.sh (which generates the input and builds toolcalls); see benches/README.md, "Peers".
Each round runs every command once, in an order that rotates from round to round (and reverses
on odd rounds), so that no command always runs first or right after the same neighbour. Wall time
is measured around the process; user and system CPU are the child's own (os.wait4).

Usage: bench.py --input FILE --work DIR --toolcalls BIN --python VENV_PYTHON
                [--rounds 3] [--calls N] [--toolcalls-args "..."]
"""

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def commands(a):
    inp = a.input
    out = lambda name: os.path.join(a.work, name + ".out.jsonl")  # noqa: E731
    flow = lambda o: "bytewax_flow:get_flow(%r, %r)" % (inp, o)  # noqa: E731
    return [
        ("toolcalls local", "toolcalls",
         [a.toolcalls, "local", "-o", out("toolcalls")] + shlex.split(a.toolcalls_args) + [inp]),
        ("plain Python", "plain", [a.python, os.path.join(HERE, "plain.py"), inp, out("plain")]),
        ("Bytewax, 1 worker", "bytewax1",
         [a.python, "-m", "bytewax.run", "-w", "1", flow(out("bytewax1"))]),
        ("Bytewax, 2 workers", "bytewax2",
         [a.python, "-m", "bytewax.run", "-w", "2", flow(out("bytewax2"))]),
        ("Python json.loads of every line", "jsonloads",
         [a.python, "-c",
          "import json, sys\nfor line in open(sys.argv[1], encoding='utf-8'): json.loads(line)",
          inp]),
    ]


def run(argv, log):
    with open(log, "w") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, cwd=HERE, stdout=err, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit("bench.py: %s exited %d; its output:\n%s" % (argv, code, open(log).read()))
    return wall, ru.ru_utime, ru.ru_stime


def settle(out):
    """Puts every command in the state of the first round before it is timed: its output of the
    round before is removed, so that it writes a new file rather than cutting one the size of its
    output (on ext4 that costs the truncation and a flush of the new file at close: about 0.15 s
    for toolcalls' 317 MB, see benches/README.md, "Peers"), and what earlier commands wrote is
    flushed to disk now, not by the kernel during the run."""
    if os.path.exists(out):
        os.remove(out)
    os.sync()


def count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--input", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--toolcalls", required=True)
    p.add_argument("--python", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int)
    p.add_argument("--toolcalls-args", default="")
    a = p.parse_args()
    cmds = commands(a)
    events = count_lines(a.input)
    size = os.path.getsize(a.input)
    times = {name: [] for _, name, _ in cmds}
    lines = {}
    for rnd in range(a.rounds):
        order = cmds[rnd % len(cmds):] + cmds[:rnd % len(cmds)]
        if rnd % 2:
            order.reverse()
        for label, name, argv in order:
            settle(os.path.join(a.work, name + ".out.jsonl"))
            wall, user, sys_ = run(argv, os.path.join(a.work, name + ".log"))
            times[name].append((wall, user, sys_))
            print("round %d  %-32s wall %7.2f s  user %7.2f s  sys %5.2f s"
                  % (rnd + 1, label, wall, user, sys_), flush=True)
            if name == "jsonloads":
                continue
            n = count_lines(os.path.join(a.work, name + ".out.jsonl"))
            if lines.setdefault(name, n) != n:
                sys.exit("bench.py: %s wrote %d lines, %d in an earlier round" % (name, n, lines[name]))
        if rnd == 0:
            # The join results must agree before their times mean anything.
            cmp = [sys.executable, os.path.join(HERE, "compare.py"),
                   os.path.join(a.work, "toolcalls.out.jsonl")]
            cmp += ["%s=%s" % (n, os.path.join(a.work, n + ".out.jsonl"))
                    for _, n, _ in cmds if n not in ("toolcalls", "jsonloads")]
            if a.calls is not None:
                cmp += ["--calls", str(a.calls)]
            if subprocess.run(cmp).returncode != 0:
                sys.exit("bench.py: the joins differ; no table")
    for _, name, _ in cmds:
        if name != "jsonloads":
            print("%s: %s" % (name, open(os.path.join(a.work, name + ".log")).read().strip()))

    med = {n: tuple(statistics.median(t[i] for t in ts) for i in range(3)) for n, ts in times.items()}
    base_wall, base_user = med["toolcalls"][0], med["toolcalls"][1]
    print()
    print("%d events, %.1f MB (%d bytes/event), %d rounds, medians (min–max of wall):"
          % (events, size / 1e6, round(size / events), a.rounds))
    print()
    print("| command | wall s | user CPU s | sys s | events/s (wall) | wall ÷ toolcalls | user CPU ÷ toolcalls |")
    print("|---|---|---|---|---|---|---|")
    for label, name, _ in cmds:
        wall, user, sys_ = med[name]
        walls = [t[0] for t in times[name]]
        print("| %s | %.2f (%.2f–%.2f) | %.2f | %.2f | %s | %s | %s |" % (
            label, wall, min(walls), max(walls), user, sys_, "{:,.0f} K".format(events / wall / 1e3),
            "1" if name == "toolcalls" else "%.1f ×" % (wall / base_wall),
            "1" if name == "toolcalls" else "%.1f ×" % (user / base_user)))
    # The VM's speed drifts between rounds more than within one, so each command's wall time over
    # toolcalls' in the same round is a steadier figure than the ratio of the medians.
    print()
    print("Wall time ÷ toolcalls' in the same round:")
    for label, name, _ in cmds:
        if name == "toolcalls":
            continue
        ratios = [t[0] / b[0] for t, b in zip(times[name], times["toolcalls"])]
        print("- %s: %s (median %.1f ×)" % (
            label, ", ".join("%.1f ×" % r for r in ratios), statistics.median(ratios)))


if __name__ == "__main__":
    main()
