//! The Python package (`python/`, docs/python.md), installed as a user installs it: a virtual
//! environment, `pip install .` (maturin builds the native module with this cargo build's target
//! directory), then its pytest suite, which checks the package against this build's `topoplace`
//! binary. Needs python3 with venv and pip, and PyPI for maturin and pytest on the first run.

use std::path::{Path, PathBuf};
use std::process::Command;

fn run(what: &str, command: &mut Command) {
    let status = command
        .status()
        .unwrap_or_else(|e| panic!("{what}: could not start: {e}"));
    assert!(status.success(), "{what} failed: {status}");
}

/// The cargo target directory this test was built in (`target/release/topoplace` → `target`).
fn target_dir(cli: &Path) -> PathBuf {
    cli.parent()
        .and_then(Path::parent)
        .expect("the binary lies in <target>/<profile>/")
        .to_path_buf()
}

#[test]
fn the_python_package_installs_and_its_tests_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cli = Path::new(env!("CARGO_BIN_EXE_topoplace"));
    let target = target_dir(cli);
    let venv = target.join("python-venv");
    let bin = venv.join("bin");
    let python = bin.join("python");
    // maturin's build hook runs the `maturin` executable by name: the venv's, first on PATH.
    let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH entries join");
    if !python.exists() {
        run(
            "python3 -m venv",
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
        );
    }
    run(
        "pip install maturin pytest",
        Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "maturin>=1.5,<2",
            "pytest>=7",
        ]),
    );
    run(
        "pip install . (the package, built by maturin)",
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-build-isolation",
                "--force-reinstall",
                "--no-deps",
                ".",
            ])
            .current_dir(root)
            .env("PATH", &path)
            .env("CARGO_TARGET_DIR", &target),
    );
    run(
        "pytest python/tests",
        Command::new(&python)
            .args([
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "python/tests",
            ])
            .current_dir(root)
            .env("TOPOPLACE_CLI", cli),
    );
}
