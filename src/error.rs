//! One error type for every bad input the tool can meet.
//!
//! Users feed the tool files they wrote or exported themselves; when one is wrong the message must
//! say which file and which field, so every input error carries both.

use std::fmt;

/// A problem with something the user gave us: which file (or `<zoo>`/`<cli>` for built-in
/// sources), which field inside it, and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct InputError {
    pub file: String,
    pub field: String,
    pub message: String,
}

impl InputError {
    pub fn new(
        file: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        InputError {
            file: file.into(),
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}: {}: {}", self.file, self.field, self.message)
        }
    }
}

impl std::error::Error for InputError {}

/// Every error the library returns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Input(#[from] InputError),
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// Reject NaN, infinities and negative numbers in a size, time or rate.
pub fn check_non_negative(file: &str, field: &str, value: f64) -> Result<(), InputError> {
    if value.is_nan() {
        Err(InputError::new(file, field, "is NaN"))
    } else if value.is_infinite() {
        Err(InputError::new(
            file,
            field,
            format!("is infinite ({value})"),
        ))
    } else if value < 0.0 {
        Err(InputError::new(
            file,
            field,
            format!("is negative ({value})"),
        ))
    } else {
        Ok(())
    }
}

/// Like [`check_non_negative`], and zero is refused too (bandwidths, capacities, peak rates).
pub fn check_positive(file: &str, field: &str, value: f64) -> Result<(), InputError> {
    check_non_negative(file, field, value)?;
    if value == 0.0 {
        return Err(InputError::new(file, field, "must be greater than zero"));
    }
    Ok(())
}

/// The bytes of `path`; a failure names the file.
pub fn read_file(path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io(path.display().to_string(), e))
}

/// Write a file atomically: to a temporary sibling, then rename, so a crash or a refused input
/// never leaves a half-written output behind.
pub fn write_atomic(path: &std::path::Path, contents: &[u8]) -> Result<()> {
    let shown = path.display().to_string();
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
    let file_name = path
        .file_name()
        .ok_or_else(|| Error::Other(format!("{shown}: not a file path")))?;
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        file_name.to_string_lossy(),
        std::process::id()
    ));
    std::fs::write(&tmp, contents).map_err(|e| Error::io(tmp.display().to_string(), e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(shown.clone(), e)
    })
}

/// Deserialise TOML text into `T`; `source` names the file in errors, which give the field's path
/// and, for syntax errors, the line and column, all on one line.
pub fn parse_toml<T: serde::de::DeserializeOwned>(
    text: &str,
    source: &str,
) -> Result<T, InputError> {
    let de = toml::Deserializer::parse(text)
        .map_err(|e| InputError::new(source, "", toml_syntax_message(text, &e)))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        let field = if field == "." { String::new() } else { field };
        InputError::new(source, field, one_line(e.into_inner().message()))
    })
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
