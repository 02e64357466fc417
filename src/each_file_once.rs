//! Input files named more than once — the same path twice, or two paths of one file (a link,
//! overlapping globs) — are read once: read twice, every event would be its own repeat, and the
//! records' provenance, which names files by path, could not tell the two readings apart.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// `files` with every file after its first naming left out, each said on stderr by `command`.
/// `-` (standard input) and paths that cannot be looked up are kept as they are: reading them
/// says what is wrong.
pub fn each_file_once(command: &str, files: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut seen: Vec<((u64, u64), PathBuf)> = Vec::with_capacity(files.len());
    let mut kept = Vec::with_capacity(files.len());
    for path in files {
        let identity = (path.as_os_str() != "-")
            .then(|| std::fs::metadata(&path).ok())
            .flatten()
            .filter(std::fs::Metadata::is_file)
            .map(|m| (m.dev(), m.ino()));
        if let Some(identity) = identity {
            if let Some((_, first)) = seen.iter().find(|(i, _)| *i == identity) {
                crate::say::say!(
                    "toolcalls {command}: {} is {} again; read once",
                    path.display(),
                    if *first == path {
                        "named".to_owned()
                    } else {
                        format!("the file {} names", first.display())
                    }
                );
                continue;
            }
            seen.push((identity, path.clone()));
        }
        kept.push(path);
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_named_twice_or_through_a_link_is_kept_once() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
        std::fs::write(&a, "{}\n").unwrap();
        std::fs::write(&b, "{}\n").unwrap();
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&a, &link).unwrap();
        let missing = dir.path().join("missing.jsonl");
        let kept = each_file_once(
            "local",
            vec![
                a.clone(),
                b.clone(),
                a.clone(),
                link,
                "-".into(),
                missing.clone(),
                missing.clone(),
            ],
        );
        assert_eq!(kept, [a, b, "-".into(), missing.clone(), missing]);
    }
}
