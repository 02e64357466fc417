#!/usr/bin/env python3
"""Writes Claude Code transcripts into DIR as agents would, only much faster: FILES session files
grown side by side, CHUNK bytes appended to each in turn (whole lines and, half the time, half a
line), at RATE MB/s in all (or as fast as it can), until each holds COPIES back-to-back copies of
a real transcript with its own session id.
Prints the bytes written, the seconds it took and when it ended (Unix time) as JSON on stdout.

The transcript is read in place from ../shared/fixtures (the project does not copy it)."""
import argparse, json, os, sys, time

p = argparse.ArgumentParser()
p.add_argument("--dir", required=True)
p.add_argument("--fixture", required=True)
p.add_argument("--files", type=int, default=40)
p.add_argument("--copies", type=int, default=25)
p.add_argument("--chunk", type=int, default=64 * 1024)
p.add_argument("--rate", type=float, default=0, help="MB/s to write at (0: as fast as possible)")
a = p.parse_args()

text = open(a.fixture, encoding="utf-8").read()
first = json.loads(next(l for l in text.splitlines() if '"sessionId"' in l))
session = first["sessionId"]
files = []
for i in range(a.files):
    body = "".join(text.replace(session, "bench-%04d-%03d" % (i, c)) for c in range(a.copies))
    files.append([os.path.join(a.dir, "bench-%04d.jsonl" % i), body.encode(), 0])

start = time.monotonic()
written = 0
half = False
while any(pos < len(body) for _, body, pos in files):
    for f in files:
        path, body, pos = f
        if pos >= len(body):
            continue
        end = min(len(body), pos + a.chunk)
        nl = body.rfind(b"\n", pos, end)
        if nl >= pos and end < len(body):
            end = nl + 1
            if half:
                # Half of the next line too: the follower must hold it until it is complete.
                end = min(len(body), end + max(1, (body.find(b"\n", end) - end) // 2))
            half = not half
        with open(path, "ab") as out:
            out.write(body[pos:end])
        written += end - pos
        f[2] = end
        if a.rate > 0:
            # Paced: never ahead of RATE MB/s since the start.
            ahead = written / (a.rate * 1e6) - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
elapsed = time.monotonic() - start
json.dump({"bytes": written, "seconds": elapsed, "end": time.time(), "files": a.files}, sys.stdout)
print()
