//! Generated, realistic input for the benchmarks.
//!
//! A mix shaped after the fixtures: many sessions, calls announced and completed in pairs with
//! native ids, about 20 % of calls without ids (results carry the tool name, half of them the
//! arguments too, as hook payloads do), about 10 % repeated emissions, and about 15 % of results
//! arriving before their announce.

use serde_json::json;

/// A tiny deterministic generator (xorshift), so every run measures the same bytes.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const TOOLS: [&str; 6] = ["Read", "Bash", "Edit", "Grep", "Glob", "WebFetch"];

fn args(rng: &mut Rng, tool: &str) -> serde_json::Value {
    let n = rng.below(40);
    match tool {
        "Read" => {
            json!({"file_path": format!("/home/dev/projects/toolcalls/crates/core/src/module_{n}.rs"), "offset": n * 10, "limit": 200})
        }
        "Bash" => {
            json!({"command": format!("cargo test -p toolcalls-core --test rules -- case_{n}"), "description": "Run the rule tests", "timeout": 120000})
        }
        "Edit" => {
            json!({"file_path": format!("/home/dev/projects/toolcalls/src/lib_{n}.rs"), "old_string": "let x = 1;", "new_string": "let x = 2;", "replace_all": false})
        }
        "Grep" => {
            json!({"pattern": format!("fn handle_{n}"), "path": "/home/dev/projects/toolcalls", "output_mode": "files_with_matches", "-i": true})
        }
        "Glob" => json!({"pattern": format!("**/*_{n}.rs"), "path": "/home/dev/projects"}),
        _ => {
            json!({"url": format!("https://docs.example.com/page/{n}"), "prompt": "Summarise the API section"})
        }
    }
}

fn result(rng: &mut Rng) -> String {
    let lines = 3 + rng.below(8);
    (0..lines)
        .map(|i| format!("{i:>4}\tfn example_{i}() -> Result<(), Error> {{ Ok(()) }}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn time(ms: u64) -> String {
    let s = ms / 1000;
    format!(
        "2026-05-10T{:02}:{:02}:{:02}.{:03}Z",
        10 + s / 3600 % 12,
        s / 60 % 60,
        s % 60,
        ms % 1000
    )
}

/// `n` calls as v1 JSON lines, in arrival order (about 2.1 events per call).
pub fn mix(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(seed);
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(n * 22 / 10);
    let mut held: Vec<Vec<u8>> = Vec::new();
    for i in 0..n {
        let session = format!("session-{:04}", rng.below(200));
        let turn = format!("turn-{}", i / 8);
        let tool = TOOLS[rng.below(TOOLS.len() as u64) as usize];
        let args = args(&mut rng, tool);
        let with_id = !rng.chance(20);
        let id = format!("toolu_01{:022}", i);
        let at = 1_000 * i as u64;
        let mut announce = json!({"v": 1, "kind": "announce", "source": "claude-code", "session": session, "turn": turn,
            "time": time(at), "tool": tool, "args": args});
        let mut completion = json!({"v": 1, "kind": "completion", "source": "claude-code", "session": session, "turn": turn,
            "time": time(at + 150 + rng.below(500)), "result": result(&mut rng), "isError": rng.chance(5)});
        if with_id {
            announce["callId"] = json!(id);
            completion["callId"] = json!(id);
        } else {
            completion["tool"] = json!(tool);
            if rng.chance(50) {
                completion["args"] = args.clone();
            }
        }
        let a = serde_json::to_vec(&announce).unwrap();
        let c = serde_json::to_vec(&completion).unwrap();
        let early = rng.chance(15);
        if early {
            out.push(c.clone());
        }
        out.push(a.clone());
        if with_id && rng.chance(5) {
            out.push(a); // a re-emitted announce
        }
        if !early {
            held.push(c.clone());
        }
        if with_id && rng.chance(5) {
            held.push(c); // an at-least-once repeat of the result
        }
        // Results of earlier calls trickle in a few announces later.
        while held.len() > 3 || (!held.is_empty() && rng.chance(40)) {
            out.push(held.remove(0));
        }
    }
    out.extend(held);
    out
}
