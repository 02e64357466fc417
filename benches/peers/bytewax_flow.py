"""The announce/completion join as a Bytewax 0.21 dataflow.

The same join as plain.py, written as a Bytewax user writes it: a FileSource of lines, `map`
json.loads, `key_on` the session, one `stateful` operator whose per-session logic does the join
(by call id, else by checksum, oldest pending first; repeats dropped; early results wait), `map`
json.dumps, a FileSink. At the end of the input each session's logic reports its counts, which a
`reduce_final` sums into one summary line on stdout.

Run (one worker; -w 2 for two worker threads in the process):

    python -m bytewax.run "bytewax_flow:get_flow('INPUT', 'OUTPUT')"
"""

import json
from collections import defaultdict, deque
from datetime import datetime

import bytewax.operators as op
from bytewax.connectors.files import FileSink, FileSource
from bytewax.connectors.stdio import StdOutSink
from bytewax.dataflow import Dataflow
from bytewax.operators import StatefulLogic


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


class SessionJoin(StatefulLogic):
    """The join state of one (source, session); emits ("record", dict) and, at EOF,
    ("summary", counts)."""

    def __init__(self, resume_state):
        if resume_state is None:
            resume_state = {
                "pending": {}, "waiting": {}, "done": set(),
                "pending_ck": defaultdict(deque), "waiting_ck": defaultdict(deque),
                "seen": set(),
                "counts": {"records": 0, "call_id": 0, "checksum": 0, "duplicates": 0, "bad": 0},
            }
        self.state = resume_state

    def on_item(self, ev):
        st = self.state
        counts = st["counts"]
        kind = ev.get("kind")
        if kind != "announce" and kind != "completion":
            return ([], StatefulLogic.RETAIN)
        call_id = ev.get("callId")
        joined = None
        if call_id is not None:
            if call_id in st["done"]:
                counts["duplicates"] += 1
                return ([], StatefulLogic.RETAIN)
            pending, waiting = st["pending"], st["waiting"]
            if kind == "announce":
                if call_id in pending:
                    counts["duplicates"] += 1
                elif call_id in waiting:
                    joined = (ev, waiting.pop(call_id))
                else:
                    pending[call_id] = ev
            else:
                if call_id in waiting:
                    counts["duplicates"] += 1
                elif call_id in pending:
                    joined = (pending.pop(call_id), ev)
                else:
                    waiting[call_id] = ev
            if joined is not None:
                st["done"].add(call_id)
                strategy = "call_id"
        else:
            ck = ev.get("checksum")
            if ck is None:
                counts["bad"] += 1
                return ([], StatefulLogic.RETAIN)
            if kind == "announce":
                rkey = (kind, ck, ev["time"])
            else:
                result = ev.get("result")
                if not isinstance(result, str):
                    result = json.dumps(result, sort_keys=True)
                rkey = (kind, ck, ev["time"], ev.get("isError"), result)
            if rkey in st["seen"]:
                counts["duplicates"] += 1
                return ([], StatefulLogic.RETAIN)
            st["seen"].add(rkey)
            if kind == "announce":
                q = st["waiting_ck"].get(ck)
                if q:
                    joined = (ev, q.popleft())
                else:
                    st["pending_ck"][ck].append(ev)
            else:
                q = st["pending_ck"].get(ck)
                if q:
                    joined = (q.popleft(), ev)
                else:
                    st["waiting_ck"][ck].append(ev)
            strategy = "checksum"
        if joined is None:
            return ([], StatefulLogic.RETAIN)
        counts["records"] += 1
        counts[strategy] += 1
        return ([("record", record(joined[0], joined[1], strategy))], StatefulLogic.RETAIN)

    def on_eof(self):
        st = self.state
        counts = dict(st["counts"])
        counts["unmatched_announces"] = len(st["pending"]) + sum(
            len(q) for q in st["pending_ck"].values())
        counts["unmatched_results"] = len(st["waiting"]) + sum(
            len(q) for q in st["waiting_ck"].values())
        return ([("summary", counts)], StatefulLogic.RETAIN)

    def snapshot(self):
        # Only taken when the flow runs with recovery (not in the benchmark); the state must
        # not change under the snapshot, hence the copy.
        import copy

        return copy.deepcopy(self.state)


def add_counts(a, b):
    return {k: a.get(k, 0) + b.get(k, 0) for k in set(a) | set(b)}


def format_summary(kv):
    _key, c = kv
    return ("bytewax_flow: %d records (call_id %d, checksum %d), %d duplicates dropped, "
            "unmatched: %d announces, %d results, %d bad lines"
            % (c["records"], c["call_id"], c["checksum"], c["duplicates"],
               c["unmatched_announces"], c["unmatched_results"], c["bad"]))


def get_flow(input_path, output_path):
    flow = Dataflow("toolcalls_join")
    lines = op.input("lines", flow, FileSource(input_path))
    events = op.map("parse", lines, json.loads)
    by_session = op.key_on("by_session", events, lambda ev: ev["source"] + "/" + ev["session"])
    joined = op.stateful("join", by_session, SessionJoin)
    split = op.branch("split", joined, lambda kv: kv[1][0] == "record")
    records = op.map_value("encode", split.trues, lambda tagged: json.dumps(tagged[1]))
    op.output("records", records, FileSink(output_path))
    counts = op.map("count", split.falses, lambda kv: ("all", kv[1][1]))
    total = op.reduce_final("total", counts, add_counts)
    op.output("summary", op.map("format", total, format_summary), StdOutSink())
    return flow
