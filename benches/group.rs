//! Op grouping on BERT-Large's training graph (5,230 ops), one benchmark per method with its
//! paper defaults (K = 60 for `metis` and `chunks`). Weights are TAG's: compute time on a
//! V100-32GB from the cost model. Run: `cargo bench --bench group`.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use topoplace::cluster::catalog::find_gpu;
use topoplace::cost::CostModel;
use topoplace::group::{group_by_name, method_names};
use topoplace::zoo::{ZooOptions, build};

fn grouping_methods(c: &mut Criterion) {
    let graph = build("bert-large", &ZooOptions::default()).unwrap();
    let gpu = find_gpu("V100-SXM2-32GB").unwrap();
    let cost = CostModel::default();
    let weights: Vec<f64> = graph
        .ops()
        .iter()
        .map(|op| cost.compute_time_us(op, gpu, 1.0))
        .collect();
    let mut group = c.benchmark_group(format!("group bert-large ({} ops)", graph.len()));
    // The slowest method takes milliseconds; ten samples keep the whole run well under a minute.
    group.sample_size(10);
    for &method in method_names() {
        group.bench_function(method, |b| {
            b.iter(|| {
                group_by_name(black_box(&graph), black_box(&weights), method, 60)
                    .unwrap()
                    .num_groups()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, grouping_methods);
criterion_main!(benches);
