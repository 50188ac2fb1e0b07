//! Files in and out: reading text (gunzipped when compressed, a byte-order mark dropped),
//! writing atomically, and parsing TOML with errors that name the file and the field.

use crate::error::{Error, InputError, Result};

/// The most any input file may hold, decompressed: far above any graph, cluster, strategy or
/// policy (a 50,000-op graph is tens of MB), and a stop for `--model /dev/zero` or a gzip bomb,
/// which would otherwise be read until memory runs out.
pub const MAX_INPUT_BYTES: u64 = 1 << 30;

/// The bytes `reader` yields, refused past [`MAX_INPUT_BYTES`]; `expected` bytes are reserved up
/// front (a file's size: a graph of tens of megabytes is then read without regrowing).
fn read_capped(reader: impl std::io::Read, expected: u64) -> std::io::Result<Vec<u8>> {
    read_at_most(reader, expected, MAX_INPUT_BYTES)
}

/// [`read_capped`] with the cap `most` (a test's own).
fn read_at_most(reader: impl std::io::Read, expected: u64, most: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::with_capacity(expected.min(most) as usize + 1);
    reader.take(most + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > most {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "more than 1 GiB: not an input file (an endless pipe?)",
        ));
    }
    Ok(bytes)
}

/// The bytes of the file at `path`, at most [`MAX_INPUT_BYTES`] of them (an I/O error past
/// that, so callers name the file as for any read failure).
pub fn read_bounded(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileTypeExt;
    let file = open_for_reading(path)?;
    let meta = file.metadata()?;
    // `/dev/zero` or `/dev/urandom` filled a gigabyte for ten seconds before it was refused; a
    // pipe (`<(zcat g.json.gz)`) is read as it comes.
    let kind = meta.file_type();
    if kind.is_char_device() || kind.is_block_device() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "is a device, not a file",
        ));
    }
    // A pipe says 0: it grows as it is read.
    read_capped(file, meta.len())
}

/// How long a named pipe may stay without a writer before its read is given up: opening one
/// that no process opens for writing blocks for ever.
const PIPE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// `path` opened for reading. A pipe (a `mkfifo` file, or `<(zcat g.json.gz)`) is opened on a
/// thread of its own and given up after [`PIPE_WAIT`] without a writer; that thread stays
/// blocked in `open` until a writer comes or the process ends.
fn open_for_reading(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    open_within(path, PIPE_WAIT)
}

/// [`open_for_reading`] with a pipe given up after `wait`.
fn open_within(
    path: &std::path::Path,
    wait: std::time::Duration,
) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::FileTypeExt;
    if !std::fs::metadata(path)?.file_type().is_fifo() {
        return std::fs::File::open(path);
    }
    let owned = path.to_path_buf();
    crate::interrupt::answer_within(wait, move || std::fs::File::open(owned)).unwrap_or_else(|| {
        Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "is a pipe no process opened for writing within {} s",
                wait.as_secs_f64()
            ),
        ))
    })
}

/// The bytes of `path`; a failure names the file.
pub(crate) fn read_file(path: &std::path::Path) -> Result<Vec<u8>> {
    read_bounded(path).map_err(|e| Error::io(path.display().to_string(), e))
}

/// Read a UTF-8 text file, gunzipped when it starts with the gzip magic bytes (so `x.json.gz` and
/// a compressed file without the suffix both work); a leading byte-order mark (editors on Windows
/// write one) is dropped.
pub fn read_text_file(path: &std::path::Path) -> Result<String> {
    let shown = path.display().to_string();
    let bytes = read_bounded(path).map_err(|e| Error::io(&shown, e))?;
    let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
        read_capped(
            flate2::read::MultiGzDecoder::new(&bytes[..]),
            4 * bytes.len() as u64,
        )
        .map_err(|e| Error::io(format!("{shown} (gzip)"), e))?
    } else {
        bytes
    };
    let text = String::from_utf8(bytes)
        .map_err(|e| InputError::new(&shown, "", format!("not UTF-8 text: {e}")))?;
    Ok(strip_bom(text))
}

/// `text` without a leading UTF-8 byte-order mark.
fn strip_bom(text: String) -> String {
    match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    }
}

/// Write a file atomically: to a temporary sibling, then rename, so a crash or a refused input
/// never leaves a half-written output behind. Errors name `path`, the file asked for.
///
/// Only a regular file is replaced. A symbolic link is followed, and its target is written
/// atomically, so the link stays; a dangling link's target is created, as `echo > link` would.
/// A device, pipe or socket (`--out /dev/stdout`) is written through, because renaming over it
/// would replace the node with a regular file.
pub fn write_atomic(path: &std::path::Path, contents: &[u8]) -> Result<()> {
    write_all_atomic(&[(path, contents)])
}

/// Write several files as one: every regular file is first written to its temporary sibling and
/// every device or pipe written through, and only when all of that succeeded are the regular
/// files renamed into place. A full disk or a failing `--trace /dev/full` thus leaves every
/// regular output as it was. (Two devices cannot be taken back: the first stays written.)
pub fn write_all_atomic(files: &[(&std::path::Path, &[u8])]) -> Result<()> {
    for &(path, _) in files {
        refuse_directory_form(path)?;
    }
    let targets = files
        .iter()
        .map(|&(path, _)| resolve(path, MAX_LINKS).map_err(|e| shown_as(e, &shown(path))))
        .collect::<Result<Vec<_>>>()?;
    let mut staged: Vec<(std::path::PathBuf, &std::path::Path, &std::path::Path)> = Vec::new();
    let written = (targets.iter().zip(files)).try_for_each(|(target, &(path, contents))| {
        match target {
            Target::Through(node) => std::fs::write(node, contents),
            Target::Replace(file) => {
                let tmp = temporary_sibling(file);
                staged.push((tmp.clone(), file, path));
                std::fs::write(&tmp, contents)
            }
        }
        .map_err(|e| Error::io(shown(path), e))
    });
    if let Err(e) = written {
        for (tmp, _, _) in &staged {
            let _ = std::fs::remove_file(tmp);
        }
        return Err(e);
    }
    for (at, (tmp, file, path)) in staged.iter().enumerate() {
        if let Err(e) = std::fs::rename(tmp, file) {
            for (tmp, _, _) in &staged[at..] {
                let _ = std::fs::remove_file(tmp);
            }
            return Err(Error::io(shown(path), e));
        }
    }
    Ok(())
}

/// Links followed before a chain is called a loop (Linux's own limit).
const MAX_LINKS: u32 = 40;

/// Where the bytes for a path go once its links are followed.
enum Target {
    /// A device, pipe or socket, written in place.
    Through(std::path::PathBuf),
    /// A regular file (or none yet), replaced by a rename; its directory exists.
    Replace(std::path::PathBuf),
}

fn shown(path: &std::path::Path) -> String {
    path.display().to_string()
}

/// The final target of `path`, following at most `links_left` symbolic links; the directory of a
/// regular file is created.
fn resolve(path: &std::path::Path, links_left: u32) -> Result<Target> {
    let shown = shown(path);
    // What the kernel reaches through every link: a device, pipe or socket is written through
    // the path as given. `/dev/stdout` into a pipe is a link to `/proc/self/fd/1`, whose target
    // reads `pipe:[N]`, a name no directory holds, so it cannot be followed link by link.
    if std::fs::metadata(path).is_ok_and(|meta| !meta.is_file() && !meta.is_dir()) {
        return Ok(Target::Through(path.to_path_buf()));
    }
    // A link to a regular file (or to nothing yet): the file at its end is the one replaced.
    if std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink()) {
        if links_left == 0 {
            let looped = std::io::Error::other("too many levels of symbolic links");
            return Err(Error::io(&shown, looped));
        }
        let target = std::fs::read_link(path).map_err(|e| Error::io(&shown, e))?;
        let target = match path.parent() {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target,
        };
        return resolve(&target, links_left - 1);
    }
    // Found now, before any file of a set is renamed into place: the rename over a directory
    // would fail after the others had replaced theirs.
    if path.is_dir() {
        return Err(InputError::new(&shown, "", "is a directory, not a file").into());
    }
    let dir = output_dir(path)?;
    let file_name = path
        .file_name()
        .ok_or_else(|| InputError::new(&shown, "", "not a file path"))?;
    Ok(Target::Replace(dir.join(file_name)))
}

/// The directory `path` will be written in, created if missing; refused when a file stands
/// where a directory must be.
fn output_dir(path: &std::path::Path) -> Result<std::path::PathBuf> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    if let Some(file) = dir.ancestors().find(|a| a.is_file()) {
        return Err(InputError::new(
            path.display().to_string(),
            "",
            format!(
                "cannot write here: {} is a file, not a directory",
                file.display()
            ),
        )
        .into());
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
    Ok(dir.to_path_buf())
}

/// Where `dir`, a directory to be created or written into, is blocked: the first of it and its
/// ancestors that exists and is not a directory (a file, or a link to nothing).
pub fn blocked_dir(dir: &std::path::Path) -> Option<&std::path::Path> {
    let mut blocked = None;
    for a in dir.ancestors().filter(|a| !a.as_os_str().is_empty()) {
        if std::fs::symlink_metadata(a).is_ok() && !a.is_dir() {
            blocked = Some(a);
        }
    }
    blocked
}

/// [`std::fs::create_dir_all`], with a path that exists and is not a directory named as such
/// (the system's error is "File exists").
pub fn create_dir(dir: &std::path::Path) -> Result<()> {
    if let Some(blocked) = blocked_dir(dir) {
        let message = if blocked == dir {
            "exists and is not a directory".to_string()
        } else {
            format!(
                "cannot be made: {} exists and is not a directory",
                blocked.display()
            )
        };
        return Err(InputError::new(dir.display().to_string(), "", message).into());
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))
}

/// A hidden name next to the output for the write before the rename.
/// The temporary file beside `file` that is renamed over it.
fn temporary_sibling(file: &std::path::Path) -> std::path::PathBuf {
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    file.with_file_name(format!(".{name}.tmp{}", std::process::id()))
}

/// Whether [`write_atomic`] will be able to write `path`, checked before long work so that a bad
/// output path fails at once, not after the work: the directory is made, and an existing target
/// opened for writing (without truncating it) or a temporary sibling created and removed; a
/// directory where the file should be is refused.
pub fn check_writable(path: &std::path::Path) -> Result<()> {
    refuse_directory_form(path)?;
    let shown = path.display().to_string();
    // The probe beside a directory would succeed, and the write after the work then fail,
    // with the command's other outputs already replaced.
    if path.is_dir() {
        return Err(InputError::new(&shown, "", "is a directory, not a file").into());
    }
    if path.exists() {
        return std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map(drop)
            .map_err(|e| Error::io(&shown, e));
    }
    let dir = output_dir(path)?;
    let file_name = path
        .file_name()
        .ok_or_else(|| InputError::new(&shown, "", "not a file path"))?;
    let probe = temporary_sibling(&dir.join(file_name));
    std::fs::write(&probe, b"").map_err(|e| Error::io(&shown, e))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Refuses a file path written as a directory (`out/`, `out/.`): the bytes would go to a file
/// named `out`, not into the folder the user meant.
fn refuse_directory_form(path: &std::path::Path) -> Result<()> {
    let text = path.as_os_str().to_string_lossy();
    let last = text
        .rsplit(['/', std::path::MAIN_SEPARATOR])
        .next()
        .unwrap_or("");
    if matches!(last, "" | "." | "..") {
        let message = "names a directory (it ends in a separator or a dot), not a file";
        return Err(InputError::new(shown(path), "", message).into());
    }
    Ok(())
}

/// Whether `a` and `b` name one existing file, by whatever paths (links and `..` resolved).
pub fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Whether two output paths name one destination by whatever spellings (`f` and `./f`, a link
/// and its target, `d/../f`), the file existing or not: a file that is not there yet is named by
/// its resolved folder and its name.
pub fn same_destination(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (resolved_destination(a), resolved_destination(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

fn resolved_destination(path: &std::path::Path) -> Option<std::path::PathBuf> {
    if let Ok(existing) = path.canonicalize() {
        return Some(existing);
    }
    let name = path.file_name()?;
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.canonicalize().ok()?,
        _ => std::env::current_dir().ok()?,
    };
    Some(folder.join(name))
}

/// `e`, an I/O error about a link's target, told about `shown` (the link the user named).
fn shown_as(e: Error, shown: &str) -> Error {
    match e {
        Error::Io { source, .. } => Error::io(shown, source),
        other => other,
    }
}

/// Deserialise TOML text into `T`; `source` names the file in errors, which give the field's path
/// and, for syntax errors, the line and column, all on one line.
pub(crate) fn parse_toml<T: serde::de::DeserializeOwned>(
    text: &str,
    source: &str,
) -> Result<T, InputError> {
    let de = toml::Deserializer::parse(text)
        .map_err(|e| InputError::new(source, "", toml_syntax_message(text, &e)))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        let field = if field == "." { String::new() } else { field };
        let message = one_line(e.into_inner().message());
        let message = name_a_datetime(text, &field, message);
        InputError::new(source, field, message)
    })
}

/// Deserialise JSON text holding one value into `T`; `source` names the file in errors, which give
/// the field's path. Text after the value is refused: a file with two objects, or one object and
/// junk, is not the file the user meant.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    text: &str,
    source: &str,
) -> Result<T, InputError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        let field = if field == "." { String::new() } else { field };
        InputError::new(source, field, e.into_inner().to_string())
    })?;
    de.end().map_err(|e| {
        let at = format!("line {} column {}", e.line(), e.column());
        InputError::new(source, "", format!("text after the JSON value at {at}"))
    })?;
    Ok(value)
}

/// The path (`torch.model`, `ops[3].name`) of the first object key given twice in JSON `text`;
/// `None` when there is none or the text is no JSON (its parser says why).
pub(crate) fn repeated_key(text: &str) -> Option<String> {
    use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
    /// Walks a value below `path`, noting the first repeated key in `found`.
    struct Walk<'a> {
        path: String,
        found: &'a mut Option<String>,
    }
    impl<'de> DeserializeSeed<'de> for Walk<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Walk<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut seen = std::collections::HashSet::new();
            while let Some(key) = map.next_key::<String>()? {
                let path = match self.path.is_empty() {
                    true => key.clone(),
                    false => format!("{}.{key}", self.path),
                };
                if self.found.is_none() && !seen.insert(key) {
                    *self.found = Some(path.clone());
                }
                map.next_value_seed(Walk {
                    path,
                    found: self.found,
                })?;
            }
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let mut i = 0;
            loop {
                let path = format!("{}[{i}]", self.path);
                let seed = Walk {
                    path,
                    found: self.found,
                };
                if seq.next_element_seed(seed)?.is_none() {
                    return Ok(());
                }
                i += 1;
            }
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    }
    let mut found = None;
    let mut de = serde_json::Deserializer::from_str(text);
    let walk = Walk {
        path: String::new(),
        found: &mut found,
    };
    walk.deserialize(&mut de).ok()?;
    found
}

/// The deserialiser sees a TOML date or time as a map ("invalid type: map, expected i64"): say
/// what the value at `field` is when it is one.
fn name_a_datetime(text: &str, field: &str, message: String) -> String {
    let Some(rest) = message.strip_prefix("invalid type: map") else {
        return message;
    };
    let Ok(root) = text.parse::<toml::Table>() else {
        return message;
    };
    match value_at(&toml::Value::Table(root), field) {
        Some(toml::Value::Datetime(when)) => format!("invalid type: date-time {when}{rest}"),
        _ => message,
    }
}

/// The value at a serde path (`machine[0].gpus`) of a TOML document.
fn value_at<'a>(root: &'a toml::Value, path: &str) -> Option<&'a toml::Value> {
    let mut at = root;
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        let mut parts = segment.split('[');
        let key = parts.next()?;
        if !key.is_empty() {
            at = at.get(key)?;
        }
        for index in parts {
            at = at.get(index.strip_suffix(']')?.parse::<usize>().ok()?)?;
        }
    }
    Some(at)
}

/// "malformed TOML at line 2, column 11: unclosed array table, expected `]`", on one line: the
/// CLI prints every error as a single line.
fn toml_syntax_message(text: &str, e: &toml::de::Error) -> String {
    let place = e.span().map(|span| {
        let before = &text[..span.start.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        format!(" at line {line}, column {column}")
    });
    format!(
        "malformed TOML{}: {}",
        place.unwrap_or_default(),
        one_line(e.message())
    )
}

fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_key_is_found_with_its_path() {
        assert_eq!(
            repeated_key(r#"{"a": 1, "b": {"c": 1, "c": 2}}"#).as_deref(),
            Some("b.c")
        );
        let nested = r#"{"ops": [{"x": 1}, {"x": 1, "y": [], "x": 2}]}"#;
        assert_eq!(repeated_key(nested).as_deref(), Some("ops[1].x"));
        assert_eq!(repeated_key(r#"{"a": {"b": 1}, "c": {"b": 2}}"#), None);
        assert_eq!(repeated_key("[1, 2"), None);
    }

    /// A named pipe nobody writes to is given up after the wait (a plain `open` never returned);
    /// one with a writer is read to the writer's end.
    #[test]
    fn one_destination_is_recognised_by_every_spelling() {
        let dir = std::env::temp_dir().join(format!("topoplace-dest-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let file = dir.join("out.json");
        let dotted = dir.join("sub/../out.json");
        // Not there yet: the same folder and name.
        assert!(same_destination(&file, &dotted));
        assert!(!same_destination(&file, &dir.join("other.json")));
        std::fs::write(&file, "x").unwrap();
        let link = dir.join("alias.json");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(same_destination(&file, &link) && same_destination(&dotted, &link));
        assert!(!same_destination(&file, &dir.join("sub")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_pipe_without_a_writer_is_given_up() {
        let dir = std::env::temp_dir().join(format!("topoplace-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = |name: &str| {
            let path = dir.join(name);
            let _ = std::fs::remove_file(&path);
            let made = std::process::Command::new("mkfifo")
                .arg(&path)
                .status()
                .unwrap();
            assert!(made.success());
            path
        };
        // The given-up open stays blocked on its own thread: the second pipe is another one.
        let (lonely, written) = (fifo("lonely"), fifo("written"));
        let refused = open_within(&lonely, std::time::Duration::from_millis(50)).unwrap_err();
        assert!(
            refused.to_string().contains("no process opened"),
            "{refused}"
        );
        let writer = {
            let written = written.clone();
            std::thread::spawn(move || std::fs::write(written, b"{}"))
        };
        let file = open_within(&written, std::time::Duration::from_secs(600)).unwrap();
        assert_eq!(read_capped(file, 0).unwrap(), b"{}");
        writer.join().unwrap().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// An endless reader is cut at the cap, one byte past it telling it from a file that
    /// exactly fills it; a device path is refused before any read.
    #[test]
    fn endless_input_is_cut_at_the_cap_and_devices_refused() {
        let endless = read_at_most(std::io::repeat(7), 0, 1024).unwrap_err();
        assert!(endless.to_string().contains("more than 1 GiB"), "{endless}");
        assert_eq!(
            read_at_most(&[7u8; 1024][..], 1024, 1024).unwrap().len(),
            1024
        );
        let device = read_bounded(std::path::Path::new("/dev/zero")).unwrap_err();
        assert!(device.to_string().contains("is a device"), "{device}");
    }
}
