//! Compile + simulate of the reference data-parallel strategy, the unit of work of every search
//! step: BERT-Large on TAG's cloud cluster (32 GPUs) and VGG19 on TAG's testbed (16 GPUs).
//! Run: `cargo bench --bench simulate`.

use criterion::{Criterion, criterion_group, criterion_main};
use std::path::Path;
use topoplace::cluster::load_cluster;
use topoplace::compile::{CompileOptions, compile};
use topoplace::cost::CostModel;
use topoplace::problem::Problem;
use topoplace::sim::{Order, Simulator};
use topoplace::strategy::Reference;
use topoplace::zoo::{ZooOptions, build};

fn compile_and_simulate(c: &mut Criterion) {
    let cost = CostModel::default();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut group = c.benchmark_group("compile+simulate dp");
    group.sample_size(10);
    for (model, config) in [
        ("bert-large", "configs/tag-cloud.toml"),
        ("vgg19", "configs/tag-testbed.toml"),
    ] {
        let graph = build(model, &ZooOptions::default()).unwrap();
        let cluster = load_cluster(root.join(config)).unwrap();
        let strategy = Reference::Dp.strategy(&graph, &cluster);
        let mut sim = Simulator::new();
        group.bench_function(format!("{model} on {}", cluster.name), |b| {
            b.iter(|| {
                let p = Problem::new(&graph, &cluster, &cost);
                let mut compiled = compile(&p, &strategy, CompileOptions::FIFO_BY_CLASS);
                sim.run(&mut compiled.exec, Order::Fifo).unwrap().makespan
            })
        });
    }
    group.finish();
}

criterion_group!(benches, compile_and_simulate);
criterion_main!(benches);
