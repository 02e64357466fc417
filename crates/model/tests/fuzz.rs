//! Fuzzing event decoding: mutated v1 events (the README's example session, the schema examples,
//! one event of every kind) must never panic `Event::decode`, must decode to the event serde's
//! derived decoder alone gives (or be refused where it refuses them), and what decodes must encode
//! (as serde_json writes it) and decode again to the same event, with a checksum and a lossy tree for its arguments and result,
//! and the canonical text of each, read straight from its text, must be the one its tree gives;
//! where the scope peek names a source and session, they are the event's.
//! Redacted as the producers redact it, an event must still encode and decode again, keep the
//! checksum its arguments gave it, and be left alone by the same rules a second time.
//!
//! A bounded run is part of `cargo test`; `TOOLCALLS_FUZZ_SECS=600 scripts/fuzz.sh` is the long
//! run (see `support/fuzz.rs` for the knobs).

#[path = "support/fuzz.rs"]
mod fuzz;

use std::path::Path;

use toolcalls_model::canonical::{canonical_string, write_canonical_text};
use toolcalls_model::checksum::{checksum_of_encoded, checksum_of_json, Checksum};
use toolcalls_model::redact::Redaction;
use toolcalls_model::{Event, EventBody, Json};

fn workspace_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The v1 events to start from: every line of `examples/session.jsonl`, every schema example of
/// an event, and one event of every kind.
fn corpus() -> Vec<Vec<u8>> {
    let mut corpus = fuzz::v1_events();
    if let Ok(text) = std::fs::read(workspace_root().join("examples/session.jsonl")) {
        corpus.extend(
            text.split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .map(<[u8]>::to_vec),
        );
        corpus.push(text);
    }
    for dir in ["schemas/examples/valid", "schemas/examples/invalid"] {
        for path in fuzz::files_under(&workspace_root().join(dir)) {
            if let Ok(bytes) = std::fs::read(&path) {
                corpus.push(bytes);
            }
        }
    }
    corpus
}

/// `dead_letter`: also redact the message as a dead letter when it is refused.
fn check_event(bytes: &[u8], dead_letter: bool) {
    // `decode` reads most messages without serde's derived decoder: it must agree with it.
    assert_eq!(
        Event::decode(bytes).ok(),
        serde_json::from_slice::<Event>(bytes).ok(),
        "decode and the derived decoder disagree on {}",
        String::from_utf8_lossy(bytes)
    );
    let event = match Event::decode(bytes) {
        Ok(event) => event,
        Err(e) => {
            // The reason is a bounded label and the message renders.
            assert!(!e.reason().is_empty());
            let _ = e.to_string();
            if dead_letter {
                check_dead_letter(bytes);
            }
            return;
        }
    };
    // Local mode splits lines by this peek before decoding them: it must name the event's scope.
    if let Some((source, session)) = Event::peek_scope(bytes) {
        assert_eq!(
            (&*source, &*session),
            (event.source.as_str(), event.session.as_str()),
            "the scope peek misreads {}",
            String::from_utf8_lossy(bytes)
        );
    }
    let encoded = event.encode();
    assert_eq!(
        encoded,
        serde_json::to_vec(&event).unwrap(),
        "encode writes what serde_json writes"
    );
    let again = Event::decode(&encoded).unwrap_or_else(|e| {
        panic!(
            "a decoded event does not decode again after encoding ({e}): {}",
            String::from_utf8_lossy(&encoded)
        )
    });
    assert_eq!(again, event, "encode then decode changed the event");
    let (tool, args, result): (Option<&str>, Option<&Json>, Option<&Json>) = match &event.body {
        EventBody::Announce(a) => (Some(&a.tool), a.args.as_ref(), None),
        EventBody::Completion(c) => (c.tool.as_deref(), c.args.as_ref(), c.result.as_ref()),
        EventBody::Approval(a) => (a.tool.as_deref(), a.args.as_ref(), None),
        EventBody::HookDecision(h) => (h.tool.as_deref(), h.args.as_ref(), None),
        _ => (None, None, None),
    };
    let tool = tool.unwrap_or("t");
    let _ = checksum_of_json(tool, args);
    for json in [args, result].into_iter().flatten() {
        // The canonical text read straight from the text is the one written from the tree.
        if let Ok(value) = json.try_to_value() {
            let mut from_text = String::new();
            write_canonical_text(json.as_str(), &mut from_text).unwrap_or_else(|e| {
                panic!("no canonical text ({e}) for {}", json.as_str());
            });
            assert_eq!(
                from_text,
                canonical_string(&value),
                "canonical text of {}",
                json.as_str()
            );
        }
    }
    if let Some(args) = args {
        let _ = args.to_value();
        // As encoded arguments too (what the adapters do with OpenAI's strings).
        let _ = checksum_of_encoded(tool, args.as_str());
        if let Ok(serde_json::Value::String(s)) = args.try_to_value() {
            let _ = checksum_of_encoded(tool, &s);
        }
    }
    if let Some(result) = result {
        let _ = result.to_value();
    }
    check_redacted(&event);
}

/// The checksum the processor joins `event` by: the one it names, else its tool's and arguments'.
fn joined_by(event: &Event) -> Option<Checksum> {
    let (tool, args, checksum) = match &event.body {
        EventBody::Announce(a) => (Some(a.tool.as_str()), a.args.as_ref(), &a.checksum),
        EventBody::Completion(c) => (c.tool.as_deref(), c.args.as_ref(), &c.checksum),
        EventBody::Approval(a) => (a.tool.as_deref(), a.args.as_ref(), &a.checksum),
        EventBody::HookDecision(h) => (h.tool.as_deref(), h.args.as_ref(), &h.checksum),
        _ => return None,
    };
    checksum.clone().or_else(|| {
        let (tool, args) = (tool?, args?);
        Some(checksum_of_json(tool, Some(args)))
    })
}

thread_local! {
    static RULES: Redaction = Redaction::new(
        &["/a".into(), "/0".into(), "/x/y".into(), "/password".into()],
        &["[a-z]{3}".into(), "\\d+".into()],
    )
    .expect("valid rules");
}

thread_local! {
    /// The pointers of [`RULES`], and patterns that match now and then rather than everywhere:
    /// a dead letter is redacted whole, and `[a-z]{3}` over a mutated 100 KB line costs more
    /// than the rest of the case.
    static DEAD_LETTER_RULES: Redaction = Redaction::new(
        &["/a".into(), "/0".into(), "/x/y".into(), "/password".into()],
        &["[0-9]{5,}".into(), "ud8[0-9a-f]{2}".into(), "tool".into()],
    )
    .expect("valid rules");
}

/// A message refused as an event, redacted as the processor redacts a dead letter: once redacted,
/// the rules change nothing more in it.
fn check_dead_letter(bytes: &[u8]) {
    DEAD_LETTER_RULES.with(|rules| {
        if let Some(redacted) = rules.dead_letter(bytes) {
            if let Some(again) = rules.dead_letter(&redacted) {
                assert_eq!(
                    String::from_utf8_lossy(&again),
                    String::from_utf8_lossy(&redacted),
                    "a redacted dead letter changed when redacted again"
                );
            }
        }
    });
}

fn check_redacted(event: &Event) {
    RULES.with(|rules| {
        let mut redacted = event.clone();
        rules.apply_event(&mut redacted);
        assert_eq!(
            joined_by(&redacted),
            joined_by(event),
            "redaction changed the checksum the call joins by"
        );
        let encoded = redacted.encode();
        let again = Event::decode(&encoded).unwrap_or_else(|e| {
            panic!(
                "a redacted event does not decode ({e}): {}",
                String::from_utf8_lossy(&encoded)
            )
        });
        assert_eq!(again, redacted, "a redacted event changed through its JSON");
        let mut twice = redacted.clone();
        rules.apply_event(&mut twice);
        assert_eq!(
            joined_by(&twice),
            joined_by(event),
            "redacting again changed the checksum"
        );
    });
}

#[test]
fn event_decode_never_panics() {
    let corpus = corpus();
    assert!(corpus.len() > 20, "the corpus is missing files");
    let odd = fuzz::odd_values();
    let budget = fuzz::Budget::from_env(3000);
    fuzz::run(
        "event_decode",
        &budget,
        |rng, _| {
            let base = rng.pick(&corpus).clone();
            fuzz::mutate(rng, &base, &corpus, &odd)
        },
        |input| {
            // Each line as one message (how the processor and local mode read them), and the
            // whole input as one.
            for line in input.split(|&b| b == b'\n') {
                check_event(line, true);
            }
            check_event(input, true);
        },
    );
}

#[test]
fn odd_values_in_every_field_never_panic() {
    // Every field of every kind of event, set to every odd value: no luck needed.
    let odd = fuzz::odd_values();
    let mut cases = 0;
    for event in fuzz::v1_events() {
        let value: serde_json::Value = serde_json::from_slice(&event).unwrap();
        let serde_json::Value::Object(map) = &value else {
            unreachable!()
        };
        for key in map.keys() {
            for odd in &odd {
                let mut m = map.clone();
                m.insert(key.clone(), serde_json::Value::String("\u{1}P\u{1}".into()));
                let text =
                    serde_json::Value::Object(m)
                        .to_string()
                        .replacen(r#""\u0001P\u0001""#, odd, 1);
                check_event(text.as_bytes(), true);
                cases += 1;
            }
        }
    }
    println!("odd values in every field: {cases} events, 0 panics");
}
