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
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(bench(format!("{what}: {}", child_failure(&stderr))));
    }
    Ok(out.stdout)
}

/// What a failed child said, in one line: its error without its own `error: ` prefix (ours comes
/// first), or the first line of an abort (an allocation failure prints a backtrace after it,
/// which is not for the user).
fn child_failure(stderr: &str) -> String {
    let lines = || stderr.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines()
        .find(|l| l.starts_with("error: "))
        .or_else(|| lines().next());
    match first {
        Some(line) if line.starts_with("memory allocation of") => {
            format!("ran out of memory ({line})")
        }
        Some(line) => line.strip_prefix("error: ").unwrap_or(line).to_string(),
        None => "failed and said nothing".to_string(),
    }
}

pub(super) fn bench(message: String) -> Error {
    Error::Bench(message)
}

#[cfg(test)]
mod tests {
    use super::child_failure;

    #[test]
    fn a_child_failure_is_told_in_one_line() {
        let abort = "memory allocation of 2045491200 bytes failed\n   0: std::backtrace\n   1: x\n";
        assert_eq!(
            child_failure(abort),
            "ran out of memory (memory allocation of 2045491200 bytes failed)"
        );
        let refused = "warning: thin batch\nerror: m.toml: layers: 0\n";
        assert_eq!(child_failure(refused), "m.toml: layers: 0");
        assert_eq!(child_failure(""), "failed and said nothing");
    }
}
