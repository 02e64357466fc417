//! Scratch directories for the system tests.
//!
//! A test's directory is removed when the test ends, so runs leave nothing behind in the
//! temporary directory; a test that fails keeps its directory and says where it is, because what
//! the binary wrote there (outputs, checkpoints, logs) is what explains the failure.

use std::ops::Deref;
use std::path::Path;

/// A fresh directory, named `toolcalls-<name>-…` in the temporary directory.
pub struct Scratch(tempfile::TempDir);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = tempfile::Builder::new()
            .prefix(&format!("toolcalls-{name}-"))
            .tempdir()
            .unwrap_or_else(|e| panic!("creating a scratch directory for {name}: {e}"));
        Scratch(dir)
    }
}

impl Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.disable_cleanup(true);
            eprintln!("kept {} for the failed test", self.0.path().display());
        }
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.path().as_os_str()
    }
}
