//! GNN cost on TAG's testbed (7 device groups, 508 actions) with vgg19 (46 op groups) and
//! resnet101 (60 op groups): one forward pass
//! (criterion), and a printed table of MCTS iterations per second with the GNN's priors against
//! uniform priors (one run each; the ratio is what matters).

use std::time::Instant;

use criterion::Criterion;
use topoplace::cluster::load_cluster;
use topoplace::cost::CostModel;
use topoplace::evaluate::{Placement, evaluate};
use topoplace::gnn::{GnnConfig, GnnPolicy, VertexPriors};
use topoplace::mcts::{
    DEFAULT_GROUPS, MctsConfig, Shares, actions, build_strategy, metis_groups, search_with,
};
use topoplace::problem::Problem;
use topoplace::strategy::AllReducePacking;
use topoplace::zoo;

/// The graph the search builds for the start vertex of `model` on the testbed (DP-NCCL
/// everywhere, group 1 next), with its slices and the pieces to rebuild it.
fn start_graph(model: &str, policy: &GnnPolicy) {
    let graph = zoo::build(model, &zoo::ZooOptions::default()).unwrap();
    let cluster = testbed();
    let cost = CostModel::default();
    let p = Problem {
        graph: &graph,
        cluster: &cluster,
        cost: &cost,
    };
    let op_group = metis_groups(&p, DEFAULT_GROUPS, 0).unwrap();
    let groups = op_group.iter().map(|&g| g as usize + 1).max().unwrap();
    let acts = actions(&cluster);
    let dp_choice = vec![0u16; groups];
    let dp = build_strategy(
        &op_group,
        &acts,
        &dp_choice,
        AllReducePacking::Packed,
        Shares::EVEN,
        cluster.devices.len(),
    )
    .unwrap();
    let e = evaluate(&p, &Placement::plain(dp, "")).unwrap();
    let vp = VertexPriors::new(policy, &p, &op_group, &acts, e.report.iteration_us);
    let feedback = vp.feedback(&e);
    let g = vp.graph(&dp_choice, 1, &feedback);
    let slices = topoplace::gnn::features::slices(&cluster, &acts);
    println!(
        "{model} on tag-testbed: {} op groups, {} device groups, {} actions, {} op-op / {} dev-dev / {} op-dev edges",
        g.ops(),
        g.devs(),
        acts.len(),
        g.op_op.len(),
        g.dev_dev.len(),
        g.op_dev.len()
    );
    let mut c = Criterion::default().sample_size(20).configure_from_args();
    c.bench_function(&format!("gnn_forward_{model}_testbed"), |b| {
        b.iter(|| policy.priors(&g, 1, &slices))
    });
    c.bench_function(&format!("gnn_features_and_forward_{model}_testbed"), |b| {
        b.iter(|| vp.priors(&dp_choice, 1, &feedback))
    });
}

fn testbed() -> topoplace::cluster::Cluster {
    load_cluster(format!(
        "{}/configs/tag-testbed.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// MCTS iterations per second with uniform priors and with the GNN's, one run each.
fn mcts_rates(model: &str, policy: &GnnPolicy, iterations: usize) {
    let graph = zoo::build(model, &zoo::ZooOptions::default()).unwrap();
    let cluster = testbed();
    let cost = CostModel::default();
    let p = Problem {
        graph: &graph,
        cluster: &cluster,
        cost: &cost,
    };
    let mut rates = vec![];
    for (name, policy) in [("uniform", None), ("gnn", Some(policy))] {
        let config = MctsConfig {
            iterations,
            seed: 0,
            ..MctsConfig::default()
        };
        let began = Instant::now();
        let found = search_with(&p, DEFAULT_GROUPS, config, policy, |_| {}).unwrap();
        let seconds = began.elapsed().as_secs_f64();
        rates.push(found.iterations as f64 / seconds);
        println!(
            "mcts {model} {name:>8}: {} iterations in {seconds:.2} s = {:.1} it/s, best {:.1} ms",
            found.iterations,
            found.iterations as f64 / seconds,
            found.iteration_us() / 1e3
        );
    }
    println!(
        "mcts {model} gnn / uniform iterations per second: {:.3}",
        rates[1] / rates[0]
    );
}

fn main() {
    let policy = GnnPolicy::init(GnnConfig::default(), 0).unwrap();
    // vgg19 has too few ops for 60 METIS groups (46); resnet101 gets the full 60.
    for model in ["vgg19", "resnet101"] {
        start_graph(model, &policy);
    }
    Criterion::default().configure_from_args().final_summary();
    for model in ["vgg19", "resnet101"] {
        mcts_rates(model, &policy, 200);
    }
}
