//! Running this executable as a child process, and reading what it prints.

use std::process::Command;

use topoplace::error::{Error, Result};

/// A command running this executable (benchmarks measure it in child processes).
pub(super) fn this_executable() -> Result<Command> {
    let exe = std::env::current_exe().map_err(|e| Error::Io {
        path: "the topoplace executable".into(),
        source: e,
    })?;
    Ok(Command::new(exe))
}

/// Run `command` to its end; its stdout, or its stderr as an error naming `what`.
pub(super) fn stdout_of(mut command: Command, what: &str) -> Result<Vec<u8>> {
    let out = command.output().map_err(|e| Error::Io {
        path: what.into(),
        source: e,
    })?;
    if !out.status.success() {
        // The child's own `error: ` prefix would follow ours.
        let stderr = String::from_utf8_lossy(&out.stderr);
        let message = stderr.trim();
        let message = message.strip_prefix("error: ").unwrap_or(message);
        return Err(bench(format!("{what}: {message}")));
    }
    Ok(out.stdout)
}

pub(super) fn bench(message: String) -> Error {
    Error::Bench(message)
}
