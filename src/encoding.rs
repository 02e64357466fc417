//! Input files in an encoding other than UTF-8, told by their byte order mark: refused whole,
//! with the encoding named and the way to convert it, rather than read as lines that would every
//! one be a bad line (docs/ADAPTERS.md, "Rules every adapter follows").

use anyhow::bail;
use toolcalls_model::bom;

/// Refuses file `name` when `start` (its first bytes, four are enough) begins with the byte
/// order mark of UTF-16 or UTF-32.
pub fn refuse_foreign(name: &str, start: &[u8]) -> anyhow::Result<()> {
    if let Some(said) = foreign(name, start) {
        bail!("{said}");
    }
    Ok(())
}

/// What is said of file `name` when `start` begins with the byte order mark of UTF-16 or UTF-32.
pub fn foreign(name: &str, start: &[u8]) -> Option<String> {
    bom::foreign(start).map(|encoding| {
        format!(
            "{name} is {encoding} text (it starts with that encoding's byte order mark); toolcalls reads UTF-8: convert it first, e.g. `iconv -f {encoding} -t UTF-8`"
        )
    })
}
