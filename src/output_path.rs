//! An output file that is also an input: `toolcalls local events.jsonl -o events.jsonl` would
//! empty the input as the output is created, before a line of it is read, and end with no error
//! and no records (and `ingest --follow --out` would follow what it writes). Refused before
//! anything is opened for writing.

use anyhow::bail;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Refuses `out` (given with `flag`) when it is an existing regular file that one of `inputs`
/// also names, by another path, a link or the same path, or that standard input reads when an
/// input is `-` or there is none (`toolcalls local -o events.jsonl < events.jsonl`). `-`
/// (standard output) and files that are not regular (`/dev/null`) are never refused.
pub fn refuse_an_input(flag: &str, out: &Path, inputs: &[PathBuf]) -> anyhow::Result<()> {
    if out.as_os_str() == "-" {
        return Ok(());
    }
    let Ok(written) = std::fs::metadata(out) else {
        return Ok(()); // a file still to be created is none of the inputs
    };
    if !written.is_file() {
        return Ok(());
    }
    let same =
        |read: &std::fs::Metadata| (read.dev(), read.ino()) == (written.dev(), written.ino());
    let reads_stdin = inputs.is_empty() || inputs.iter().any(|p| p.as_os_str() == "-");
    if reads_stdin && stdin_metadata().is_some_and(|read| same(&read)) {
        bail!(
            "{flag} {} is also the input (standard input reads it): the output would be written into what is being read; write it to another file",
            out.display()
        );
    }
    for input in inputs.iter().filter(|p| p.as_os_str() != "-") {
        if std::fs::metadata(input).is_ok_and(|read| same(&read)) {
            bail!(
                "{flag} {} is also an input ({}): the output would be written into what is being read; write it to another file",
                out.display(),
                input.display()
            );
        }
    }
    Ok(())
}

/// What standard input is, read through a duplicate of its descriptor; none when it is closed.
fn stdin_metadata() -> Option<std::fs::Metadata> {
    let fd = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    std::fs::File::from(fd).metadata().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_is_refused_as_the_output_by_any_of_its_names() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("events.jsonl");
        std::fs::write(&input, "{}\n").unwrap();
        let link = dir.path().join("link.jsonl");
        std::fs::hard_link(&input, &link).unwrap();
        let other = dir.path().join("records.jsonl");
        std::fs::write(&other, "").unwrap();
        let inputs = [PathBuf::from("-"), input.clone()];
        for out in [&input, &link, &dir.path().join("./events.jsonl")] {
            let e = refuse_an_input("-o", out, &inputs).unwrap_err().to_string();
            assert!(e.contains("is also an input"), "{e}");
        }
        for out in [
            &other,
            &dir.path().join("new.jsonl"),
            Path::new("-"),
            Path::new("/dev/null"),
        ] {
            refuse_an_input("-o", out, &inputs).unwrap();
        }
        refuse_an_input("-o", Path::new("/dev/null"), &[PathBuf::from("/dev/null")]).unwrap();
        // The input is untouched.
        assert_eq!(std::fs::read(&input).unwrap(), b"{}\n");
    }
}
