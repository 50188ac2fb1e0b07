//! What ships inside the binary: every config of `configs/` and the shipped policy, byte for
//! byte, so an installed `topoplace` finds them by name wherever it runs.

mod common;

use std::path::Path;
use std::process::Command;

use topoplace::assets;
use topoplace::gnn::GnnPolicy;
use topoplace::resolve::load_named_cluster;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_shipped_config_is_embedded_as_it_is_on_disk() {
    let mut on_disk: Vec<(String, String)> = std::fs::read_dir(repo().join("configs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().to_string();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    on_disk.sort();
    let embedded: Vec<(String, String)> = assets::CONFIGS
        .iter()
        .map(|&(name, text)| (name.to_string(), text.to_string()))
        .collect();
    assert_eq!(embedded, on_disk, "src/assets.rs lists configs/ exactly");
}

#[test]
fn the_embedded_policy_is_the_shipped_file() {
    let file = std::fs::read(repo().join(assets::SHIPPED_POLICY)).unwrap();
    assert_eq!(assets::SHIPPED_POLICY_BYTES, file.as_slice());
    let embedded = GnnPolicy::shipped().unwrap();
    let loaded = GnnPolicy::load(&repo().join(assets::SHIPPED_POLICY)).unwrap();
    assert_eq!(embedded.config, loaded.config);
}

#[test]
fn a_shipped_config_is_found_by_name_and_an_unknown_name_lists_them() {
    let c = load_named_cluster("tag-testbed", "--cluster").unwrap();
    assert_eq!(c.name, "tag-testbed");
    let e = load_named_cluster("no-such-cluster", "--cluster")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no-such-cluster") && e.contains("tag-cloud") && e.contains("--cluster:"),
        "{e}"
    );
}

/// The binary run from a directory without `configs/` or `models/` (as an installed binary is)
/// prints what it prints in the repository.
#[test]
fn the_binary_needs_no_checkout_to_find_its_assets() {
    let elsewhere = common::scratch("assets");
    let run = |dir: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_topoplace"))
            .args(["simulate", "--model", "mlp", "--cluster", "tag-testbed"])
            .current_dir(dir)
            .output()
            .unwrap();
        let out = common::succeeded(out);
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(run(&elsewhere), run(repo()));
    let policy = Command::new(env!("CARGO_BIN_EXE_topoplace"))
        .args([
            "place",
            "--model",
            "mlp",
            "--cluster",
            "tag-testbed",
            "--budget",
            "8",
            "--json",
        ])
        .current_dir(&elsewhere)
        .output()
        .unwrap();
    let summary = common::json_of(policy);
    assert!(
        summary["policy"]
            .as_str()
            .unwrap()
            .contains(assets::SHIPPED_POLICY),
        "{summary}"
    );
}
