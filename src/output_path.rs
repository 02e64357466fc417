//! An output file that is also an input: `toolcalls local events.jsonl -o events.jsonl` would
//! empty the input as the output is created, before a line of it is read, and end with no error
//! and no records (and `ingest --follow --out` would follow what it writes). Refused before
//! anything is opened for writing.

use anyhow::bail;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Refuses `out` (given with `flag`) when it is an existing regular file that one of `inputs`
/// also names, by another path, a link or the same path. `-` (standard input or output) and
/// files that are not regular (`/dev/null`) are never refused.
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
    for input in inputs.iter().filter(|p| p.as_os_str() != "-") {
        let same = std::fs::metadata(input)
            .is_ok_and(|read| (read.dev(), read.ino()) == (written.dev(), written.ino()));
        if same {
            bail!(
                "{flag} {} is also an input ({}): the output would be written into what is being read; write it to another file",
                out.display(),
                input.display()
            );
        }
    }
    Ok(())
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
