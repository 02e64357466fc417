//! What the fixture tests (`fixtures.rs`, `golden.rs`) share: where the real recordings are.

use std::path::PathBuf;

/// Real recordings kept outside the project (see `../shared/fixtures/SOURCES.md`).
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/fixtures");

/// The fixtures folder, or `None` (with the reason printed) when it is missing outside CI.
pub fn fixtures() -> Option<PathBuf> {
    let dir = PathBuf::from(FIXTURES);
    if dir.is_dir() {
        return Some(dir);
    }
    let why = format!(
        "fixtures folder {} is missing (the shared fixtures live beside the workspace)",
        dir.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{why}; CI is set, so this is a failure");
    }
    println!("skipped: {why}");
    None
}
