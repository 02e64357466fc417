//! The files `ingest --follow` watches, found again at every poll: a file named as it is (even
//! before it exists), every transcript-like file under a directory (`*.jsonl`, `*.json`,
//! `*.ndjson`, at any depth: Claude Code subagent files included), and the files a glob matches
//! (`*`, `?`, `[abc]` within a name, `**` for any number of directories).

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What one `PATH` argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A file, or a path that does not exist yet: whatever is made there — a file, or a
    /// directory then searched as [`Target::Dir`] is — is followed.
    File(PathBuf),
    /// A directory, searched at every depth.
    Dir(PathBuf),
    /// A glob: a directory without wildcards, and the pattern of the rest, by path component.
    Glob { base: PathBuf, parts: Vec<String> },
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::File(p) | Target::Dir(p) => write!(f, "{}", p.display()),
            Target::Glob { base, parts } => {
                write!(f, "{}", base.join(parts.join("/")).display())
            }
        }
    }
}

/// Extensions of the files a directory is searched for.
const EXTENSIONS: [&str; 3] = ["jsonl", "json", "ndjson"];

impl Target {
    /// What `arg` names: a path that exists is that path, even when its name holds `*`, `?` or
    /// `[` (a directory called `proj[1]`); otherwise such characters make it a glob.
    pub fn of(arg: &Path) -> Target {
        let text = arg.to_string_lossy();
        if text.contains(['*', '?', '[']) && !arg.exists() {
            let mut base = PathBuf::new();
            let mut parts = Vec::new();
            for c in arg.components() {
                let s = c.as_os_str().to_string_lossy();
                if parts.is_empty() && !s.contains(['*', '?', '[']) {
                    base.push(c);
                } else {
                    parts.push(s.into_owned());
                }
            }
            if base.as_os_str().is_empty() {
                base.push(".");
            }
            return Target::Glob { base, parts };
        }
        if arg.is_dir() {
            Target::Dir(arg.to_owned())
        } else {
            Target::File(arg.to_owned())
        }
    }
}

/// What one look at the targets found.
#[derive(Debug, Default)]
pub struct Found {
    /// Every file the targets name now, each once, sorted.
    pub files: Vec<PathBuf>,
    /// Paths that could not be looked at, with why: a directory under the targets that cannot
    /// be searched (the files in it are not among `files`), a file named on its own that cannot
    /// be looked up. A path removed meanwhile is not one of them.
    pub unreadable: Vec<(PathBuf, std::io::Error)>,
    /// The directories searched (device, inode), each searched once: a linked directory may
    /// lead back to one above it.
    searched: HashSet<(u64, u64)>,
}

/// Every file the targets name now, and the directories that could not be searched; the
/// directories `skip` names (device, inode) are not searched.
pub fn files(targets: &[Target], skip: &[(u64, u64)]) -> Found {
    let mut found = Found {
        searched: skip.iter().copied().collect(),
        ..Found::default()
    };
    for t in targets {
        match t {
            Target::File(p) => match std::fs::metadata(p) {
                Ok(m) if m.is_dir() => walk(p, &mut |_| true, &mut transcript_like, &mut found),
                Ok(m) if m.is_file() => found.files.push(p.clone()),
                // Named on its own, so said: what is read from a FIFO or a device once is gone,
                // and cannot be read again from its start as following needs.
                Ok(_) => found.unreadable.push((
                    p.clone(),
                    std::io::Error::other(
                        "not a regular file (a FIFO, socket or device): --follow reads files it can read again from their start; pipe into `toolcalls ingest -` instead",
                    ),
                )),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => found.unreadable.push((p.clone(), e)),
            },
            Target::Dir(d) => walk(d, &mut |_| true, &mut transcript_like, &mut found),
            Target::Glob { base, parts } => {
                let names = |p: &Path| -> Option<Vec<String>> {
                    let rest = p.strip_prefix(base).ok()?;
                    Some(
                        rest.components()
                            .map(|c| c.as_os_str().to_string_lossy().into_owned())
                            .collect(),
                    )
                };
                walk(
                    base,
                    // Only the directories a match can lie under: `/usr/x-*.jsonl` looks in
                    // /usr, not through all of it, at every poll.
                    &mut |d| names(d).is_some_and(|n| may_hold_a_match(parts, &n)),
                    &mut |p| names(p).is_some_and(|n| matches_path(parts, &n)),
                    &mut found,
                )
            }
        }
    }
    found.files.sort();
    found.files.dedup();
    found.unreadable.sort_by(|a, b| a.0.cmp(&b.0));
    found.unreadable.dedup_by(|a, b| a.0 == b.0);
    found
}

/// Whether a file found in a directory is one to follow: not hidden, of a transcript extension.
fn transcript_like(p: &Path) -> bool {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
    !name.starts_with('.') && EXTENSIONS.contains(&ext)
}

/// Every regular file under `dir` that `keep` accepts, through symbolic links to files and to
/// the directories `descend` accepts (a directory reached twice is searched once). A directory
/// that cannot be read is noted in `found`, and searched again at the next look.
fn walk(
    dir: &Path,
    descend: &mut dyn FnMut(&Path) -> bool,
    keep: &mut dyn FnMut(&Path) -> bool,
    found: &mut Found,
) {
    match std::fs::metadata(dir) {
        Ok(m) => {
            if !found.searched.insert((m.dev(), m.ino())) {
                return;
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        // Said by the read below.
        Err(_) => {}
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            found.unreadable.push((dir.to_owned(), e));
            return;
        }
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                found.unreadable.push((dir.to_owned(), e));
                return;
            }
        };
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let kind = if kind.is_symlink() {
            match std::fs::metadata(&path) {
                Ok(m) => m.file_type(),
                // A link to nothing (yet).
                Err(_) => continue,
            }
        } else {
            kind
        };
        if kind.is_dir() {
            if descend(&path) {
                walk(&path, descend, keep, found);
            }
        } else if kind.is_file() && keep(&path) {
            found.files.push(path);
        }
    }
}

/// Whether path components `names` match the pattern components `parts` (`**` matches any number
/// of components).
fn matches_path(parts: &[String], names: &[String]) -> bool {
    match parts.split_first() {
        None => names.is_empty(),
        Some((p, rest)) if p == "**" => {
            (0..=names.len()).any(|skip| matches_path(rest, &names[skip..]))
        }
        Some((p, rest)) => match names.split_first() {
            Some((n, more)) => matches_name(p.as_bytes(), n.as_bytes()) && matches_path(rest, more),
            None => false,
        },
    }
}

/// Whether a directory at path components `names` (under the glob's base) may hold a file that
/// matches the pattern components `parts`: its path is a match of their start, with a component
/// left for what is in it (or a `**`).
fn may_hold_a_match(parts: &[String], names: &[String]) -> bool {
    match (parts.split_first(), names.split_first()) {
        (None, _) => false,
        (Some((p, _)), _) if p == "**" => true,
        (Some(_), None) => true,
        (Some((p, rest)), Some((n, more))) => {
            matches_name(p.as_bytes(), n.as_bytes()) && may_hold_a_match(rest, more)
        }
    }
}

/// Whether one name matches one pattern component: `*` any run of bytes, `?` one byte, `[abc]`,
/// `[a-z]` and `[!a]` one byte of (or not of) a set.
fn matches_name(p: &[u8], n: &[u8]) -> bool {
    match p.first() {
        None => n.is_empty(),
        Some(b'*') => (0..=n.len()).any(|i| matches_name(&p[1..], &n[i..])),
        Some(b'?') => !n.is_empty() && matches_name(&p[1..], &n[1..]),
        Some(b'[') => {
            let Some(end) = p.iter().skip(2).position(|&b| b == b']').map(|i| i + 2) else {
                return n.first() == Some(&b'[') && matches_name(&p[1..], &n[1..]);
            };
            let Some(&c) = n.first() else {
                return false;
            };
            let (negate, set) = match p[1] {
                b'!' | b'^' => (true, &p[2..end]),
                _ => (false, &p[1..end]),
            };
            let mut hit = false;
            let mut i = 0;
            while i < set.len() {
                if i + 2 < set.len() && set[i + 1] == b'-' {
                    hit |= (set[i]..=set[i + 2]).contains(&c);
                    i += 3;
                } else {
                    hit |= set[i] == c;
                    i += 1;
                }
            }
            hit != negate && matches_name(&p[end + 1..], &n[1..])
        }
        Some(&b) => n.first() == Some(&b) && matches_name(&p[1..], &n[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, path: &str) -> bool {
        let parts: Vec<String> = pattern.split('/').map(str::to_owned).collect();
        let names: Vec<String> = path.split('/').map(str::to_owned).collect();
        matches_path(&parts, &names)
    }

    #[test]
    fn globs_match_names_and_directories() {
        assert!(m("**/rollout-*.jsonl", "2025/10/20/rollout-a.jsonl"));
        assert!(m("**/rollout-*.jsonl", "rollout-a.jsonl"));
        assert!(!m("**/rollout-*.jsonl", "2025/rollout-a.json"));
        assert!(m("*/chats/session-*.json", "abc/chats/session-1.json"));
        assert!(!m("*/chats/session-*.json", "abc/x/chats/session-1.json"));
        assert!(m("a?[0-9][!x].json", "ab7y.json"));
        assert!(!m("a?[0-9][!x].json", "ab7x.json"));
    }

    #[test]
    fn a_directory_gives_its_transcripts_at_every_depth() {
        let dir = std::env::temp_dir().join(format!("toolcalls-scan-{}", std::process::id()));
        let sub = dir.join("proj/s1/subagents");
        std::fs::create_dir_all(&sub).unwrap();
        for f in [
            "proj/s1.jsonl",
            "proj/s1/subagents/agent-a.jsonl",
            "proj/notes.txt",
            "proj/.tmp.json",
        ] {
            std::fs::write(dir.join(f), "{}\n").unwrap();
        }
        let got = files(&[Target::of(&dir)], &[]).files;
        assert_eq!(
            got,
            [
                dir.join("proj/s1/subagents/agent-a.jsonl"),
                dir.join("proj/s1.jsonl")
            ],
            "sorted by component"
        );
        let glob = dir.join("**/agent-*.jsonl");
        assert_eq!(
            files(&[Target::of(&glob)], &[]).files,
            [sub.join("agent-a.jsonl")]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_path_made_a_directory_after_the_start_is_searched() {
        let dir = std::env::temp_dir().join(format!("toolcalls-scan-late-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let target = Target::of(&dir);
        assert!(files(std::slice::from_ref(&target), &[]).files.is_empty());
        std::fs::create_dir_all(dir.join("proj")).unwrap();
        std::fs::write(dir.join("proj/s1.jsonl"), "{}\n").unwrap();
        std::fs::write(dir.join("proj/notes.txt"), "x").unwrap();
        assert_eq!(files(&[target], &[]).files, [dir.join("proj/s1.jsonl")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_that_cannot_be_searched_is_named_one_removed_is_not() {
        let dir = tempfile::tempdir().unwrap();
        // A directory target that is now a file cannot be searched (as root, whom permissions
        // do not stop, this is the way to fail a search; tests/follow_metrics.rs drops root's
        // capabilities to show a directory without permissions).
        let file = dir.path().join("was-a-directory");
        std::fs::write(&file, "x").unwrap();
        let found = files(
            &[
                Target::Dir(file.clone()),
                Target::Dir(dir.path().join("gone")),
            ],
            &[],
        );
        assert!(found.files.is_empty());
        assert_eq!(found.unreadable.len(), 1, "{:?}", found.unreadable);
        assert_eq!(found.unreadable[0].0, file);
    }

    /// A path named on its own that holds no regular file (here a socket; a FIFO alike) is
    /// said, not passed over; one found in a directory is not a transcript and is passed over.
    #[test]
    fn a_named_path_that_is_no_regular_file_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s.jsonl");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let found = files(&[Target::of(&socket)], &[]);
        assert!(found.files.is_empty());
        assert_eq!(found.unreadable.len(), 1, "{:?}", found.unreadable);
        assert!(found.unreadable[0]
            .1
            .to_string()
            .contains("not a regular file"));
        let found = files(&[Target::Dir(dir.path().to_owned())], &[]);
        assert!(found.files.is_empty() && found.unreadable.is_empty());
    }

    fn dir_id(p: &Path) -> (u64, u64) {
        let m = std::fs::metadata(p).unwrap();
        (m.dev(), m.ino())
    }

    /// A glob looks only in the directories a match can lie under: `*/x.jsonl` searches the
    /// base's directories, not what is below them; `**` searches everything.
    #[test]
    fn a_glob_searches_only_where_a_match_can_lie() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path();
        for d in ["a", "b/deep/er"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("a/x.jsonl"), "").unwrap();
        std::fs::write(base.join("b/deep/er/x.jsonl"), "").unwrap();
        let glob = Target::of(&base.join("*/x.jsonl"));
        let found = files(std::slice::from_ref(&glob), &[]);
        assert_eq!(found.files, [base.join("a/x.jsonl")]);
        assert!(found.searched.contains(&dir_id(&base.join("b"))));
        assert!(
            !found.searched.contains(&dir_id(&base.join("b/deep"))),
            "pruned"
        );

        let any = Target::of(&base.join("**/x.jsonl"));
        let found = files(std::slice::from_ref(&any), &[]);
        assert_eq!(
            found.files,
            [base.join("a/x.jsonl"), base.join("b/deep/er/x.jsonl")]
        );
        assert!(found.searched.contains(&dir_id(&base.join("b/deep/er"))));
    }

    /// A path that exists is that path, whatever characters its name holds; one that does not
    /// is a glob.
    #[test]
    fn a_path_that_exists_is_no_glob() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("proj[1]");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("a.jsonl"), "").unwrap();
        assert_eq!(Target::of(&dir), Target::Dir(dir.clone()));
        assert_eq!(
            Target::of(&dir.join("a.jsonl")),
            Target::File(dir.join("a.jsonl"))
        );
        let found = files(&[Target::of(&dir)], &[]);
        assert_eq!(found.files, [dir.join("a.jsonl")]);
        assert!(matches!(
            Target::of(&root.path().join("proj[2]/a.jsonl")),
            Target::Glob { .. }
        ));
    }
}
