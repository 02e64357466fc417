#!/usr/bin/env python3
"""Seeded generator of realistic v1 events for the peer comparison (benches/README.md, "Peers").

Writes N v1 events (default 500,000) as JSON lines, exactly as `toolcalls local` reads them, in
delivery order. The mix imitates `crates/workload` and the traffic of agent frameworks:

- four sources over many interleaved sessions: `claude-code` (`toolu_…` ids) and `codex`
  (`call_…` ids) — about 80 % of the calls — and `gemini-cli` and `adk`, whose calls carry no id:
  their announces and completions carry the ADK checksum of `{tool, args}` instead (the ADK bus
  reports only the checksum), so they are joined by checksum;
- realistic arguments and results (Bash commands, file reads, greps, edits, fetches; results of
  source-like text with quotes, tabs and newlines), about 500 bytes an event;
- repeats: 10 % of announces delivered twice (half of the copies after the result), 5 % of results
  delivered twice — byte-identical lines, as at-least-once delivery repeats them;
- early results: 10 % of results delivered before their announce;
- identical id-less calls: 15 % of the id-less calls after the first of a turn repeat the tool
  and arguments of the previous id-less call of their turn (same checksum and result, their own
  times; results in call order), as agents re-run a command;
- 5 % of the calls fail (`isError`).

Every call is completed, so every call should end as one joined record. The same seed always gives
the same bytes. The checksum is `sha256(canonicalStringify({tool, args}))` as the project computes
it (docs/ARCHITECTURE.md, "The checksum"): for the plain objects of strings and integers generated
here that is `json.dumps(..., sort_keys=True, separators=(",", ":"), ensure_ascii=False)`;
run.sh checks a sample of them with `toolcalls checksum`.

Usage: gen.py [--events N] [--seed S] [--sessions K] [--out FILE]   (stdout by default)
Prints a summary of what it wrote on stderr.
"""

import argparse
import hashlib
import json
import random
import sys
from datetime import datetime, timezone

# 2026-05-10T10:00:00Z, where the generated sessions start (as crates/workload).
BASE_MS = 1_778_407_200_000

# (source, share of sessions, calls carry ids, id prefix)
SOURCES = [
    ("claude-code", 55, True, "toolu_01"),
    ("codex", 25, True, "call_"),
    ("gemini-cli", 10, False, None),
    ("adk", 10, False, None),
]

DIRS = ["src", "src/core", "src/io", "crates/model/src", "crates/core/src/correlator", "tests",
        "lib", "app/components", "app/api", "scripts", "docs", "internal/store"]
STEMS = ["main", "lib", "config", "handler", "session", "parser", "encoder", "index", "client",
         "server", "cache", "queue", "router", "schema", "worker", "metrics", "auth", "utils"]
EXTS = [".rs", ".py", ".ts", ".go", ".md", ".toml", ".json"]
IDENTS = ["request", "response", "buffer", "offset", "session_id", "call_id", "payload", "items",
          "config", "state", "result", "error", "handler", "records", "pending", "checksum"]
WORDS = ["the", "call", "result", "session", "pending", "record", "input", "output", "error",
         "value", "first", "last", "turn", "tool", "agent", "stream", "event", "order", "time"]
COMMANDS = [
    "cargo test -p {crate} --lib -- {ident} --nocapture",
    "git diff --stat HEAD~{n} -- {dir}",
    "rg -n \"fn {ident}\" {dir} | head -50",
    "python3 -m pytest tests/test_{stem}.py -k {ident} -q",
    "ls -la {dir} && wc -l {dir}/{stem}{ext}",
    "npm run build -- --filter {stem} 2>&1 | tail -20",
    "go test ./internal/{stem}/... -run Test{Ident} -count=1",
    "git log --oneline -n {n} -- {dir}/{stem}{ext}",
    "find {dir} -name '*{ext}' -newer Cargo.lock | xargs grep -l '{ident}'",
]
URLS = ["https://docs.rs/serde_json/latest/serde_json/{ident}/index.html",
        "https://developer.mozilla.org/en-US/docs/Web/JavaScript/Reference/{Ident}",
        "https://github.com/example/{stem}/issues/{n}",
        "https://pkg.go.dev/encoding/json#{Ident}"]


def rfc3339(ms):
    """Milliseconds since the epoch as RFC 3339 UTC with milliseconds."""
    dt = datetime.fromtimestamp(ms // 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + ".%03dZ" % (ms % 1000)


def checksum(tool, args):
    canonical = json.dumps({"tool": tool, "args": args}, sort_keys=True,
                           separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class Gen:
    def __init__(self, rng):
        self.r = rng

    def pick(self, xs):
        return xs[self.r.randrange(len(xs))]

    def path(self):
        return "/repo/%s/%s%s" % (self.pick(DIRS), self.pick(STEMS), self.pick(EXTS))

    def fill(self, template):
        ident = self.pick(IDENTS)
        return template.format(
            crate=self.pick(["toolcalls-core", "toolcalls-model", "toolcalls"]),
            ident=ident, Ident=ident.title().replace("_", ""), dir=self.pick(DIRS),
            stem=self.pick(STEMS), ext=self.pick(EXTS), n=self.r.randrange(2, 40))

    def sentence(self, lo, hi):
        return " ".join(self.pick(WORDS) for _ in range(self.r.randrange(lo, hi)))

    def code_line(self, i):
        a, b = self.pick(IDENTS), self.pick(IDENTS)
        forms = [
            '    let {a} = {b}.get("{a}").ok_or("missing {a}")?;',
            "    if {a}.len() > {n} {{\n\t\treturn Err(Error::TooLarge({a}.len()));\n    }}",
            "    // {s}",
            '    println!("{{}}: {{:?}}", "{b}", {a});',
            "    {a}.push_str(\"\\\\n\");",
            "def {a}(self, {b}):\n        return self._{b}[\"{a}\"]",
        ]
        return self.pick(forms).format(a=a, b=b, n=i, s=self.sentence(3, 9))

    def call(self):
        """A tool, its arguments and its (successful) result text."""
        tool = self.pick(["Bash", "Read", "Read", "Grep", "Edit", "WebFetch"])
        r = self.r
        if tool == "Bash":
            args = {"command": self.fill(self.pick(COMMANDS)),
                    "description": self.sentence(6, 16), "timeout": 120000}
            lines = ["running %d tests" % r.randrange(1, 200)]
            lines += ["test %s::%s ... ok" % (self.pick(STEMS), self.pick(IDENTS))
                      for _ in range(r.randrange(4, 12))]
            lines.append("test result: ok. %d passed; 0 failed; finished in %.2fs"
                         % (r.randrange(1, 200), r.random() * 9))
            out = "\n".join(lines)
        elif tool == "Read":
            args = {"file_path": self.path(), "offset": r.randrange(1, 400), "limit": 200}
            out = "\n".join("%6d\t%s" % (n, self.code_line(n))
                            for n in range(1, r.randrange(5, 14)))
        elif tool == "Grep":
            args = {"pattern": "fn %s|%s\\(" % (self.pick(IDENTS), self.pick(IDENTS)),
                    "path": "/repo/" + self.pick(DIRS), "glob": "*" + self.pick(EXTS),
                    "output_mode": "content", "-n": True}
            out = "\n".join("%s:%d:%s" % (self.path(), r.randrange(1, 900), self.code_line(n))
                            for n in range(r.randrange(3, 8)))
        elif tool == "Edit":
            a = self.code_line(1)
            args = {"file_path": self.path(), "old_string": a,
                    "new_string": a.replace("let", "let mut", 1) + "\n" + self.code_line(2)}
            out = "The file %s has been updated. Here's the result of running `cat -n`:\n%s" % (
                args["file_path"], "\n".join("%6d\t%s" % (n, self.code_line(n)) for n in range(3)))
        else:
            args = {"url": self.fill(self.pick(URLS)), "prompt": "Summarise: " + self.sentence(8, 20)}
            out = "# %s\n\n%s.\n\n%s. \u2014 \"%s\"" % (self.sentence(2, 5), self.sentence(20, 40),
                                                      self.sentence(10, 30), self.sentence(2, 6))
        return tool, args, out

    def error(self, tool):
        return "Exit code %d\n%s failed: %s" % (self.r.randrange(1, 3), tool, self.sentence(5, 14))


def generate(events, seed, n_sessions):
    r = random.Random(seed)
    g = Gen(r)
    sessions = []
    weights = []
    for source, share, with_ids, prefix in SOURCES:
        k = max(1, n_sessions * share // 100)
        for i in range(k):
            sessions.append({
                "source": source, "with_ids": with_ids, "prefix": prefix,
                "name": "%s-%04d-%08x" % (source, i, r.getrandbits(32)),
                "clock": BASE_MS + len(sessions) * 7, "turn": 0, "in_turn": 0, "limit": 3,
                "last_idless": None,
            })
            weights.append(1)
    deliveries = []  # (delivery time, tiebreak, line)
    tick = 0
    calls = idless = dup_ann = dup_res = early = identical = failed_n = 0

    def deliver(at, line):
        nonlocal tick
        tick += 1
        deliveries.append((at, tick, line))

    def dump(obj):
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)

    while len(deliveries) < events:
        s = sessions[r.randrange(len(sessions))]
        s["clock"] += 20 + r.randrange(400)
        if s["in_turn"] >= s["limit"]:
            s["turn"] += 1
            s["in_turn"] = 0
            s["limit"] = 2 + r.randrange(6)
            s["last_idless"] = None
        s["in_turn"] += 1
        turn = "turn-%d" % s["turn"]
        with_id = s["with_ids"]
        is_identical = False
        if not with_id and s["last_idless"] is not None and r.randrange(100) < 15:
            tool, args, out, failed, last_done = s["last_idless"]
            is_identical = True
        else:
            tool, args, out = g.call()
            failed = r.randrange(100) < 5
            if failed:
                out = g.error(tool)
        created = s["clock"]
        done = created + 30 + r.randrange(2_000)
        if is_identical:
            # Its result comes after the previous identical call's, never in the same millisecond
            # (an id-less result saying the same thing at the same time is a repeat).
            done = max(done, last_done + 1 + r.randrange(200))
        base = {"v": 1, "kind": "announce", "source": s["source"], "session": s["name"],
                "turn": turn}
        announce = dict(base, time=rfc3339(created), tool=tool, args=args)
        completion = dict(base, kind="completion", time=rfc3339(done))
        if with_id:
            call_id = s["prefix"] + "%016x" % r.getrandbits(64)
            announce["callId"] = call_id
            completion["callId"] = call_id
        else:
            ck = checksum(tool, args)
            announce["checksum"] = ck
            completion["tool"] = tool
            completion["checksum"] = ck
            s["last_idless"] = (tool, args, out, failed, done)
            idless += 1
        completion["result"] = out
        completion["isError"] = failed
        completion["durationMs"] = done - created
        a_line, c_line = dump(announce), dump(completion)
        # Identical id-less calls get their results in call order (which of two identical calls a
        # result belongs to is then the same for every reader), and never early.
        is_early = not is_identical and r.randrange(100) < 10
        result_at = created - 1 if is_early else done
        deliver(created, a_line)
        deliver(result_at, c_line)
        if r.randrange(100) < 10:
            copy_at = (done + 1 + r.randrange(2_000)) if r.randrange(2) else \
                created + r.randrange(max(1, done - created))
            deliver(copy_at, a_line)
            dup_ann += 1
        if r.randrange(100) < 5:
            deliver(max(result_at, created) + 1 + r.randrange(3_000), c_line)
            dup_res += 1
        calls += 1
        early += is_early
        identical += is_identical
        failed_n += failed
    deliveries.sort()
    stats = {"events": len(deliveries), "calls": calls, "idless_calls": idless,
             "identical_idless_calls": identical, "repeated_announces": dup_ann,
             "repeated_results": dup_res, "early_results": early, "failed": failed_n,
             "sessions": len(sessions)}
    return [d[2] for d in deliveries], stats


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=500_000)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--sessions", type=int, default=400)
    p.add_argument("--out", default="-")
    a = p.parse_args()
    lines, stats = generate(a.events, a.seed, a.sessions)
    out = sys.stdout if a.out == "-" else open(a.out, "w", encoding="utf-8")
    size = 0
    for line in lines:
        out.write(line)
        out.write("\n")
        size += len(line.encode("utf-8")) + 1
    out.flush()
    stats["bytes"] = size
    stats["bytes_per_event"] = round(size / max(1, len(lines)))
    print("gen.py: " + json.dumps(stats), file=sys.stderr)


if __name__ == "__main__":
    main()
