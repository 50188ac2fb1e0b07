//! What ships with the tool, embedded in the binary: the cluster configs of `configs/` and the
//! policy `models/tag-default.gnn`. An installed `topoplace` (`cargo install --path .`) then finds
//! them by name wherever it runs, exactly as `cargo run` does in the repository.

/// Every config of `configs/`, by name (the file name without `.toml`), in name order.
pub const CONFIGS: &[(&str, &str)] = &[
    (
        "celeritas-4xv100",
        include_str!("../configs/celeritas-4xv100.toml"),
    ),
    (
        "fastt-2x4xv100",
        include_str!("../configs/fastt-2x4xv100.toml"),
    ),
    ("fastt-8xv100", include_str!("../configs/fastt-8xv100.toml")),
    (
        "hetero-a100-40-v100",
        include_str!("../configs/hetero-a100-40-v100.toml"),
    ),
    (
        "hetero-a100-v100",
        include_str!("../configs/hetero-a100-v100.toml"),
    ),
    (
        "hetero-h100-a100",
        include_str!("../configs/hetero-h100-a100.toml"),
    ),
    ("mixed-1024", include_str!("../configs/mixed-1024.toml")),
    ("moirai-inter", include_str!("../configs/moirai-inter.toml")),
    ("moirai-intra", include_str!("../configs/moirai-intra.toml")),
    (
        "quickp-fat-tree-2",
        include_str!("../configs/quickp-fat-tree-2.toml"),
    ),
    (
        "quickp-fat-tree-4",
        include_str!("../configs/quickp-fat-tree-4.toml"),
    ),
    (
        "quickp-fat-tree-6",
        include_str!("../configs/quickp-fat-tree-6.toml"),
    ),
    ("tag-cloud", include_str!("../configs/tag-cloud.toml")),
    ("tag-sfb", include_str!("../configs/tag-sfb.toml")),
    ("tag-testbed", include_str!("../configs/tag-testbed.toml")),
];

/// Where the shipped policy lives in the repository (and how messages name it).
pub const SHIPPED_POLICY: &str = "models/tag-default.gnn";

/// The bytes of the shipped policy.
pub const SHIPPED_POLICY_BYTES: &[u8] = include_bytes!("../models/tag-default.gnn");

/// Where the shipped layout policy (the hybrid layout tree's priors) lives in the repository.
pub const SHIPPED_LAYOUT_POLICY: &str = "models/layout-default.policy";

/// The bytes of the shipped layout policy.
pub const SHIPPED_LAYOUT_POLICY_BYTES: &[u8] = include_bytes!("../models/layout-default.policy");

/// The TOML text of the shipped config called `name`.
pub(crate) fn config(name: &str) -> Option<&'static str> {
    CONFIGS
        .iter()
        .find(|(shipped, _)| *shipped == name)
        .map(|&(_, text)| text)
}

/// The names of the shipped configs.
pub fn config_names() -> Vec<&'static str> {
    CONFIGS.iter().map(|&(name, _)| name).collect()
}
