//! Progress bars on the terminal for the long jobs (`place`, `compare`), drawn on stderr only when
//! it is a terminal, so that piped output and Python notebooks stay clean.

use crate::error::{Error, Result};

/// The progress bar layout of `compare` and `place`.
pub const BAR: &str = "{bar:30} {pos}/{len} {elapsed} {msg}";

/// A progress bar of `len` steps drawn as `template` (indicatif's syntax).
pub fn progress_bar(len: u64, template: &str) -> Result<indicatif::ProgressBar> {
    let style = indicatif::ProgressStyle::with_template(template)
        .map_err(|e| Error::serialise("a progress bar", e))?;
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(style);
    Ok(bar)
}

/// [`progress_bar`] when `show`, else a bar that draws nothing.
pub(super) fn bar_if(show: bool, len: u64) -> Result<indicatif::ProgressBar> {
    match show {
        true => progress_bar(len, BAR),
        false => Ok(indicatif::ProgressBar::hidden()),
    }
}
