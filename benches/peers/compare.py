#!/usr/bin/env python3
"""Checks that toolcalls and the peers joined the same calls.

Reads the records `toolcalls local` wrote and the JSON lines of plain.py / bytewax_flow.py, keeps
the joined calls (toolcalls: phase Succeeded or Failed; the peers write only joined calls), and
compares them as sets of (source, session, call id — or the checksum for an id-less call —,
announce time, result time, isError): the same calls, each paired with the same result.

Usage: compare.py TOOLCALLS_OUT NAME=PEER_OUT... [--calls N]
Exit 1 on any difference (the first few are printed).
"""

import json
import sys
from collections import Counter


def toolcalls_keys(path):
    keys = Counter()
    other = Counter()
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            st = r["status"]
            if st["phase"] not in ("Succeeded", "Failed"):
                other[st["phase"]] += 1
                continue
            md = r["metadata"]
            cid = r.get("streamId")
            keys[(md["source"], md["session"], cid, None if cid else r.get("checksum"),
                  r["createdAt"], st["completedAt"], st.get("isError", False))] += 1
    return keys, other


def peer_keys(path):
    keys = Counter()
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            cid = r.get("callId")
            keys[(r["source"], r["session"], cid, None if cid else r.get("checksum"),
                  r["createdAt"], r["completedAt"], r.get("isError", False))] += 1
    return keys


def main():
    args = sys.argv[1:]
    calls = None
    if "--calls" in args:
        i = args.index("--calls")
        calls = int(args[i + 1])
        del args[i:i + 2]
    ours, other = toolcalls_keys(args[0])
    n = sum(ours.values())
    ok = True
    print("compare: toolcalls %d joined records%s" % (
        n, "" if not other else " (and %s)" % dict(other)))
    if calls is not None and n != calls:
        print("compare: toolcalls joined %d calls, the generator made %d" % (n, calls))
        ok = False
    for spec in args[1:]:
        name, path = spec.split("=", 1)
        theirs = peer_keys(path)
        missing = ours - theirs
        extra = theirs - ours
        same = not missing and not extra
        print("compare: %s %d joined records, %s" % (
            name, sum(theirs.values()),
            "the same calls and pairs" if same else
            "%d missing, %d extra against toolcalls" % (sum(missing.values()), sum(extra.values()))))
        for k in list(missing)[:3]:
            print("  missing in %s: %s" % (name, k))
        for k in list(extra)[:3]:
            print("  extra in %s: %s" % (name, k))
        ok = ok and same
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
