//! SHA-256 checksums of the files the tool writes and reads back (policy files, training
//! checkpoints), so a corrupt or edited file is an error naming it, never silently used.

use sha2::{Digest, Sha256};

/// Lower-case hex SHA-256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A manifest line per file: `<sha256>  <name>`, lines sorted (the format of `sha256sum`, so
/// `sha256sum -c MANIFEST` checks it too).
pub(crate) fn manifest(files: &[(String, Vec<u8>)]) -> String {
    let mut lines: Vec<String> = files
        .iter()
        .map(|(name, bytes)| format!("{}  {name}\n", sha256_hex(bytes)))
        .collect();
    lines.sort();
    lines.concat()
}

/// Parse a manifest into (name, hex) pairs; `None` for a malformed line.
pub(crate) fn parse_manifest(text: &str) -> Option<Vec<(String, String)>> {
    text.lines()
        .map(|l| {
            let (hex, name) = l.split_once("  ")?;
            (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| (name.to_string(), hex.to_string()))
        })
        .collect()
}
