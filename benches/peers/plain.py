#!/usr/bin/env python3
"""The announce/completion join as a plain Python loop: the peer a user writes first.

Reads v1 events (JSON lines, as gen.py writes them and `toolcalls local` reads them), joins each
completion to its announce inside (source, session) by call id, else by checksum (oldest pending
call with that checksum first), drops repeated events, lets results that arrive before their
announce wait for it, and writes one JSON line per joined call. Prints a summary on stderr.

Usage: plain.py INPUT OUTPUT
"""

import json
import sys
from collections import defaultdict, deque
from datetime import datetime


def duration_ms(start, end):
    a = datetime.fromisoformat(start)
    b = datetime.fromisoformat(end)
    return round((b - a).total_seconds() * 1000)


def record(ann, comp, strategy):
    return {
        "source": ann["source"],
        "session": ann["session"],
        "turn": ann.get("turn"),
        "callId": ann.get("callId"),
        "checksum": ann.get("checksum") or comp.get("checksum"),
        "tool": ann["tool"],
        "args": ann.get("args"),
        "result": comp.get("result"),
        "isError": comp.get("isError", False),
        "phase": "Failed" if comp.get("isError") else "Succeeded",
        "createdAt": ann["time"],
        "completedAt": comp["time"],
        "durationMs": duration_ms(ann["time"], comp["time"]),
        "strategy": strategy,
    }


def main():
    src, dst = sys.argv[1], sys.argv[2]
    # Per (source, session, call id): pending announces, waiting completions, joined ids.
    pending = {}
    waiting = {}
    done = set()
    # Per (source, session, checksum): pending announces / waiting completions, oldest first.
    pending_ck = defaultdict(deque)
    waiting_ck = defaultdict(deque)
    seen = set()  # id-less events already applied (their repeats are dropped)
    records = duplicates = bad = 0
    by_strategy = {"call_id": 0, "checksum": 0}
    with open(src, encoding="utf-8") as inp, open(dst, "w", encoding="utf-8") as out:
        for line in inp:
            try:
                ev = json.loads(line)
                kind = ev["kind"]
                scope = (ev["source"], ev["session"])
            except (ValueError, KeyError, TypeError):
                bad += 1
                continue
            if kind != "announce" and kind != "completion":
                continue
            call_id = ev.get("callId")
            joined = None
            if call_id is not None:
                key = scope + (call_id,)
                if key in done:
                    duplicates += 1
                    continue
                if kind == "announce":
                    if key in pending:
                        duplicates += 1
                    elif key in waiting:
                        joined = (ev, waiting.pop(key))
                    else:
                        pending[key] = ev
                else:
                    if key in waiting:
                        duplicates += 1
                    elif key in pending:
                        joined = (pending.pop(key), ev)
                    else:
                        waiting[key] = ev
                if joined is not None:
                    done.add(key)
                    strategy = "call_id"
            else:
                ck = ev.get("checksum")
                if ck is None:
                    bad += 1
                    continue
                # An id-less event is a repeat when it says the same thing at the same time.
                if kind == "announce":
                    rkey = scope + (kind, ck, ev["time"])
                else:
                    result = ev.get("result")
                    if not isinstance(result, str):
                        result = json.dumps(result, sort_keys=True)
                    rkey = scope + (kind, ck, ev["time"], ev.get("isError"), result)
                if rkey in seen:
                    duplicates += 1
                    continue
                seen.add(rkey)
                key = scope + (ck,)
                if kind == "announce":
                    q = waiting_ck.get(key)
                    if q:
                        joined = (ev, q.popleft())
                    else:
                        pending_ck[key].append(ev)
                else:
                    q = pending_ck.get(key)
                    if q:
                        joined = (q.popleft(), ev)
                    else:
                        waiting_ck[key].append(ev)
                strategy = "checksum"
            if joined is not None:
                out.write(json.dumps(record(joined[0], joined[1], strategy)))
                out.write("\n")
                records += 1
                by_strategy[strategy] += 1
    unmatched_announces = len(pending) + sum(len(q) for q in pending_ck.values())
    unmatched_results = len(waiting) + sum(len(q) for q in waiting_ck.values())
    print("plain.py: %d records (call_id %d, checksum %d), %d duplicates dropped, "
          "unmatched: %d announces, %d results, %d bad lines"
          % (records, by_strategy["call_id"], by_strategy["checksum"], duplicates,
             unmatched_announces, unmatched_results, bad), file=sys.stderr)


if __name__ == "__main__":
    main()
