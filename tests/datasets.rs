//! The zoo graphs committed under datasets/zoo are exactly what the generators produce today, so
//! people reading the files read the models the tool uses.

use std::path::Path;
use topoplace::graph::load_graph;
use topoplace::zoo::{NAMES, ZooOptions, build};

#[test]
fn committed_zoo_graphs_match_the_generators() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/zoo");
    for name in NAMES {
        for variant in [name.to_string(), format!("{name}-inference")] {
            let path = dir.join(format!("{variant}.json"));
            let file = load_graph(&path)
                .unwrap_or_else(|e| panic!("{e} (regenerate with `topoplace zoo export`)"));
            let built = build(&variant, &ZooOptions::default()).unwrap();
            assert_eq!(file.name, built.name);
            assert_eq!(file.batch_size, built.batch_size);
            assert!(
                file.ops() == built.ops(),
                "{variant}: ops differ; run `topoplace zoo export`"
            );
            assert!(file.edges() == built.edges(), "{variant}: edges differ");
            assert!(
                file.gradients() == built.gradients(),
                "{variant}: gradient links differ"
            );
        }
    }
}
