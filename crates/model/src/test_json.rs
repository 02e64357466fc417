//! What the property and edge tests of the readers of JSON text (`canonical_direct`,
//! `jsonscan`) feed them.

use proptest::prelude::*;

/// Texts that are JSON but odd, or close to JSON and not it.
pub(crate) const ODD_TEXTS: &[&str] = &[
    "[]",
    "{}",
    "[{}]",
    "\"\"",
    "0",
    "-0",
    "1.",
    "01",
    "[1,]",
    "{\"a\":1,}",
    "{\"a\" 1}",
    "[1 2]",
    "\"a\nb\"",
    "\"\\x\"",
    "\"\\u12\"",
    "\"\\u12G4\"",
    "tru",
    "nul",
    "[",
    "",
    "  ",
    "1 2",
    "{\"a\":1}x",
    "\"unterminated",
    "\"\\",
    "-",
    "1e",
    "1e+",
    ".5",
];

/// Any JSON value, with keys whose UTF-16 order differs from their UTF-8 order and strings
/// with every character JSON must escape.
pub(crate) fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let key = prop_oneof![
        "[a-e]{0,3}",
        Just("\u{1F600}".to_owned()),
        Just("\u{FB01}".to_owned()),
        Just("é".to_owned())
    ];
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(|n| serde_json::json!(n)),
        any::<u64>().prop_map(|n| serde_json::json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| serde_json::json!(f)),
        "(\\PC|[\"\\\\/\u{0}-\u{1f}\u{7f}\u{2028}])*".prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|entries| serde_json::Value::Object(entries.into_iter().collect())),
        ]
    })
}

/// The compact or the pretty text of `value`.
pub(crate) fn spelled(value: &serde_json::Value, pretty: bool) -> String {
    if pretty {
        serde_json::to_string_pretty(value).unwrap()
    } else {
        serde_json::to_string(value).unwrap()
    }
}
