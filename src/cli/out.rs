//! Printing to stdout that reports a failed write (a full disk, a device error) as one error
//! naming stdout, where `println!` panics. A reader that goes away (`| head`) ends the process
//! quietly instead: SIGPIPE keeps its default action (`main.rs`). A closed stdout (`>&-`) is
//! reopened on /dev/null by Rust's runtime before `main`, as a redirect to it would be.

use std::fmt;
use std::io::{self, Write};

use topoplace::error::{Error, Result};

/// `print!` that returns the write's failure.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::out::write(format_args!($($arg)*))
    };
}

/// `println!` that returns the write's failure.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::out::write_line(format_args!($($arg)*))
    };
}

/// Print to stderr with a newline, as `eprintln!` does, but without its panic when stderr cannot be
/// written (`2>/dev/full`, a closed pipe): a message nobody can read is dropped.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

/// A failed write to stdout, as the error every command reports.
pub fn stdout_error(e: io::Error) -> Error {
    Error::io("<stdout>", e)
}

/// Write `args` to stdout.
pub fn write(args: fmt::Arguments) -> Result<()> {
    io::stdout().lock().write_fmt(args).map_err(stdout_error)
}

/// Write `args` and a newline to stdout.
pub fn write_line(args: fmt::Arguments) -> Result<()> {
    let mut stdout = io::stdout().lock();
    stdout
        .write_fmt(args)
        .and_then(|()| stdout.write_all(b"\n"))
        .map_err(stdout_error)
}

/// Flush what stdout still buffers: a failure there is the last chance to report it.
pub fn flush() -> Result<()> {
    io::stdout().flush().map_err(stdout_error)
}
