//! TAG's GNN policy: outputs sized by the problem, gradients that match finite differences, a
//! training step that learns, determinism and save/load, relabelling invariance, and the
//! `place --policy FILE` / `policy init` commands.

mod common;
use common::binary as topoplace;
use common::{action_over, best_uniform_choice, scratch, testbed};

use burn::module::Param;
use burn::optim::AdamConfig;
use burn::prelude::*;

use std::time::{Duration, Instant};
use topoplace::cluster::Cluster;
use topoplace::cost::CostModel;
use topoplace::evaluate::{Placement, evaluate};
use topoplace::gnn::features::{
    DEV_FEATURES, EDGE_FEATURES, EdgeList, Feedback, OP_FEATURES, OPTIONS,
};
use topoplace::gnn::{
    GnnConfig, GnnModel, GnnPolicy, HeteroGraph, Slice, VertexPriors, adam_step, cross_entropy,
    to_vec,
};
use topoplace::graph::Graph;
use topoplace::mcts::{
    Mcts, MctsConfig, Shares, actions, build_strategy, lift_priors, metis_groups, search_with,
};
use topoplace::problem::Problem;
use topoplace::strategy::{AllReducePacking, GroupDecision};
use topoplace::zoo;

fn small() -> GnnConfig {
    GnnConfig {
        width: 16,
        heads: 2,
        layers: 4,
    }
}

/// A deterministic generator for synthetic graphs (splitmix64).
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn features(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.unit()).collect()
    }
}

/// A random heterogeneous graph with `ops` op groups and `devs` device groups, op group `next`
/// to decide, shaped like the ones the search builds (op chain plus random skips, all device
/// pairs, all op–device pairs).
fn synthetic(ops: usize, devs: usize, seed: u64) -> HeteroGraph {
    let mut r = Gen(seed);
    let mut op_op = EdgeList::default();
    for a in 0..ops {
        let mut targets = vec![];
        if a + 1 < ops {
            targets.push(a + 1);
        }
        if ops > 2 && r.below(3) == 0 {
            targets.push(r.below(ops));
        }
        for b in targets.into_iter().filter(|&b| b != a) {
            push(&mut op_op, a, b, r.features(EDGE_FEATURES));
            push(&mut op_op, b, a, r.features(EDGE_FEATURES));
        }
    }
    let mut dev_dev = EdgeList::default();
    for a in 0..devs {
        for b in (0..devs).filter(|&b| b != a) {
            push(&mut dev_dev, a, b, r.features(EDGE_FEATURES));
        }
    }
    let mut op_dev = EdgeList::default();
    for a in 0..ops {
        for b in 0..devs {
            let placed = if r.below(2) == 0 { 1.0 } else { 0.0 };
            push(&mut op_dev, a, b, vec![placed, r.unit(), 0.0]);
        }
    }
    HeteroGraph {
        op_features: r.features(ops * OP_FEATURES),
        dev_features: r.features(devs * DEV_FEATURES),
        op_op,
        dev_dev,
        op_dev,
    }
}

fn push(e: &mut EdgeList, a: usize, b: usize, f: Vec<f32>) {
    e.src.push(a as u32);
    e.dst.push(b as u32);
    e.features.extend(f);
}

/// Every non-empty subset of `devs` device groups with every option (MCTS's action space up to
/// 8 device groups).
fn all_slices(devs: usize) -> Vec<Slice> {
    let mut out = vec![];
    for mask in 1u32..(1 << devs) {
        for option in 0..OPTIONS {
            out.push(Slice {
                placement: (0..devs).map(|j| (mask >> j & 1) as f32).collect(),
                option,
            });
        }
    }
    out
}

fn assert_distribution(p: &[f32], n: usize) {
    assert_eq!(p.len(), n);
    assert!(p.iter().all(|x| x.is_finite() && *x >= 0.0), "{p:?}");
    let sum: f64 = p.iter().map(|&x| x as f64).sum();
    assert!((sum - 1.0).abs() < 1e-5, "sum {sum}");
}

#[test]
fn one_set_of_weights_scores_problems_of_any_size() {
    let policy = GnnPolicy::init(small(), 3).unwrap();
    for devs in 1..=8 {
        let slices = all_slices(devs);
        for ops in [5, 23, 60] {
            let g = synthetic(ops, devs, (ops * 10 + devs) as u64);
            let group = (ops * 7 + devs) % ops;
            let p = policy.priors(&g, group, &slices);
            assert_distribution(&p, slices.len());
        }
    }
}

fn model(name: &str) -> Graph {
    zoo::build(name, &zoo::ZooOptions::default()).unwrap()
}

fn problem<'a>(graph: &'a Graph, cluster: &'a Cluster, cost: &'a CostModel) -> Problem<'a> {
    Problem {
        graph,
        cluster,
        cost,
    }
}

#[test]
fn the_search_takes_its_root_priors_from_the_gnn() {
    let (graph, cluster, cost) = (model("mlp"), testbed(), CostModel::default());
    let p = problem(&graph, &cluster, &cost);
    let op_group = metis_groups(&p, 8, 0).unwrap();
    let policy = GnnPolicy::init(small(), 0).unwrap();
    let search = Mcts::new(p, op_group, MctsConfig::default())
        .unwrap()
        .with_policy(&policy)
        .unwrap();
    let priors = search
        .root_priors()
        .expect("a policy gives the root priors");
    assert_eq!(priors.len(), search.actions().len());
    assert!((priors.iter().sum::<f64>() - 1.0).abs() < 1e-5);
    // Not uniform: the GNN does look at the actions.
    let (lo, hi) = priors
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
    assert!(hi > lo * 1.001, "{lo} {hi}");
    // Without a policy, uniform priors as before.
    let uniform = Mcts::new(p, metis_groups(&p, 8, 0).unwrap(), MctsConfig::default()).unwrap();
    assert!(uniform.root_priors().is_none());
}

/// Lifting gives each listed action the top prior and renormalises: the closed form on a small
/// case, and uniform priors stay uniform.
#[test]
fn lifting_gives_the_listed_actions_the_top_prior() {
    let mut p = vec![0.5, 0.3, 0.1, 0.1];
    lift_priors(&mut p, &[2]);
    let want = [0.5 / 1.4, 0.3 / 1.4, 0.5 / 1.4, 0.1 / 1.4];
    for (got, want) in p.iter().zip(want) {
        assert!((got - want).abs() < 1e-12, "{p:?}");
    }
    let mut uniform = vec![0.25; 4];
    lift_priors(&mut uniform, &[1, 3]);
    assert!(uniform.iter().all(|&x| (x - 0.25).abs() < 1e-12));
}

/// With a policy, a device-group seed that simulates faster than the search's start gets the
/// policy's top prior at the root, and one that simulates slower keeps its own; every other
/// action keeps its ratio to the rest.
#[test]
fn seeds_faster_than_the_start_get_the_policys_top_prior() {
    let (graph, cluster, cost) = (model("vgg19"), testbed(), CostModel::default());
    let p = problem(&graph, &cluster, &cost);
    let op_group = metis_groups(&p, 8, 0).unwrap();
    let policy = GnnPolicy::init(small(), 0).unwrap();
    let config = MctsConfig {
        iterations: 40,
        sfb_check: false,
        ..MctsConfig::default()
    };
    let mut search = Mcts::new(p, op_group.clone(), config)
        .unwrap()
        .with_policy(&policy)
        .unwrap();
    let before = search.root_priors().unwrap().to_vec();
    search.run_with_targets(u32::MAX, |_| {}).unwrap();
    let after = search.root_priors().unwrap();
    let top = before.iter().copied().fold(0.0, f64::max);
    // The normaliser: the favourite keeps its prior before the division.
    let favourite = (0..before.len()).find(|&a| before[a] == top).unwrap();
    let k = after[favourite] / top;
    let lifted = |a: usize| before[a] < top && (after[a] - top * k).abs() < 1e-12;
    for a in (0..before.len()).filter(|&a| !lifted(a)) {
        assert!((after[a] - before[a] * k).abs() < 1e-12, "action {a}");
    }
    assert!((after.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    let start = best_uniform_choice(&p, &op_group, &[0]);
    let (mut faster, mut slower) = (0, 0);
    for group in &cluster.groups {
        for option in ["all-reduce", "ps"] {
            let seed = action_over(&cluster, option, &group.devices) as usize;
            let is_faster = best_uniform_choice(&p, &op_group, &[seed as u16]) < start;
            if before[seed] < top {
                assert_eq!(lifted(seed), is_faster, "{option} on {:?}", group.devices);
            }
            *(if is_faster { &mut faster } else { &mut slower }) += 1;
        }
    }
    assert!(
        faster > 0 && slower > 0,
        "both kinds of seed ({faster} faster, {slower} slower), or the test proves less"
    );
}

#[test]
fn a_gnn_guided_search_is_deterministic_and_never_loses_to_dp() {
    let (graph, cluster, cost) = (model("mlp"), testbed(), CostModel::default());
    let p = problem(&graph, &cluster, &cost);
    let policy = GnnPolicy::init(small(), 2).unwrap();
    let run = || {
        let config = MctsConfig {
            iterations: 48,
            seed: 5,
            ..MctsConfig::default()
        };
        search_with(&p, 6, config, Some(&policy), |_| {}).unwrap()
    };
    let (a, b) = (run(), run());
    assert_eq!(a.decisions, b.decisions);
    assert_eq!(a.iteration_us(), b.iteration_us());
    assert!(a.fits && a.dp_fits);
    assert!(
        a.iteration_us() <= a.dp_us,
        "{} > {}",
        a.iteration_us(),
        a.dp_us
    );
    assert_eq!(a.iterations, 48);
}

/// `p` grouped into METIS groups, its priors under `policy`, and the runtime feedback of data
/// parallelism over every GPU (every group on action 0).
fn data_parallel_vertex<'a>(
    p: &Problem,
    groups: usize,
    policy: &'a GnnPolicy,
) -> (usize, Vec<GroupDecision>, VertexPriors<'a>, Feedback) {
    let op_group = metis_groups(p, groups, 0).unwrap();
    let groups = op_group.iter().map(|&g| g as usize + 1).max().unwrap();
    let acts = actions(p.cluster);
    let vp = VertexPriors::new(policy, p, &op_group, &acts, 1000.0);
    let dp = build_strategy(
        &op_group,
        &acts,
        &vec![0; groups],
        AllReducePacking::Packed,
        Shares::EVEN,
        p.cluster.devices.len(),
    )
    .unwrap();
    let fb = vp.feedback(&evaluate(p, &Placement::plain(dp, "")).unwrap());
    (groups, acts, vp, fb)
}

/// Priors computed on the side thread equal those computed in place when there is time, and
/// are abandoned (`None`) when the deadline has passed before any forward pass could end.
#[test]
fn priors_until_a_deadline_are_the_priors_or_nothing() {
    let (graph, cluster, cost) = (model("mlp"), testbed(), CostModel::default());
    let p = problem(&graph, &cluster, &cost);
    let policy = GnnPolicy::init(small(), 0).unwrap();
    let (groups, _, vp, fb) = data_parallel_vertex(&p, 8, &policy);
    let choice = vec![0u16; groups];
    let inputs: Vec<_> = (0..3).map(|d| (vp.graph(&choice, d, &fb), d)).collect();
    let later = Instant::now() + Duration::from_secs(600);
    let priors = vp
        .priors_until(inputs.clone(), later)
        .expect("ten minutes suffice");
    for ((g, d), p) in inputs.iter().zip(&priors) {
        assert_eq!(p, &vp.priors_of(g, *d));
    }
    // Hundreds of forward passes cannot end before a deadline that has already passed.
    let many: Vec<_> = (0..512).map(|_| inputs[0].clone()).collect();
    assert!(vp.priors_until(many, Instant::now()).is_none());
}

#[test]
fn vertex_graphs_carry_table_1_features() {
    let (graph, cluster, cost) = (model("mlp"), testbed(), CostModel::default());
    let p = problem(&graph, &cluster, &cost);
    let policy = GnnPolicy::init(small(), 0).unwrap();
    let (groups, acts, vp, fb) = data_parallel_vertex(&p, 8, &policy);
    let mut choice = vec![0u16; groups];
    choice[1] = (acts.len() - 1) as u16;
    let g = vp.graph(&choice, 2, &fb);
    assert_eq!(g.ops(), groups);
    assert_eq!(g.devs(), cluster.groups.len());
    assert_eq!(g.op_dev.len(), groups * cluster.groups.len());
    assert_eq!(
        g.dev_dev.len(),
        cluster.groups.len() * (cluster.groups.len() - 1)
    );
    assert!(
        g.op_features
            .iter()
            .chain(&g.dev_features)
            .all(|x| x.is_finite())
    );
    let row = |i: usize| &g.op_features[i * OP_FEATURES..(i + 1) * OP_FEATURES];
    // Decided flags (index 10) for groups 0 and 1, the next flag (11) for group 2.
    assert_eq!((row(0)[10], row(1)[10], row(2)[10]), (1.0, 1.0, 0.0));
    assert_eq!((row(1)[11], row(2)[11]), (0.0, 1.0));
    // Group 0 on all GPUs with all-reduce (option one-hot at 3..7); group 1 on one group.
    assert_eq!(&row(0)[3..7], &[1.0, 0.0, 0.0, 0.0]);
    let placed = |i: usize| -> f32 {
        (0..cluster.groups.len())
            .map(|j| g.op_dev.features[(i * cluster.groups.len() + j) * EDGE_FEATURES])
            .sum()
    };
    assert_eq!(placed(0), cluster.groups.len() as f32);
    assert!(placed(1) >= 1.0 && placed(1) < cluster.groups.len() as f32);
    // Runtime feedback: DP keeps some GPU busy, so some device group is not idle all the time.
    assert!((0..g.devs()).any(|j| g.dev_features[j * DEV_FEATURES + 5] < 1.0));
}

/// Replaces one weight matrix of a model.
type SetWeight = fn(&mut GnnModel, Tensor<2>);

#[test]
fn gradients_match_finite_differences_and_adam_lowers_the_loss() {
    let device = Device::flex().autodiff();
    let cfg = GnnConfig {
        width: 8,
        heads: 2,
        layers: 4,
    };
    let g = synthetic(4, 2, 11);
    let slices = all_slices(2);
    let target: Vec<f32> = {
        let raw: Vec<f32> = (0..slices.len()).map(|i| (i % 5) as f32 + 0.5).collect();
        let sum: f32 = raw.iter().sum();
        raw.iter().map(|x| x / sum).collect()
    };
    let model = GnnModel::new(&cfg, 5, &device);
    let loss_of = |m: &GnnModel| -> f64 {
        cross_entropy(m, &g, 1, &slices, &target).into_scalar::<f32>() as f64
    };
    let loss = cross_entropy(&model, &g, 1, &slices, &target);
    let grads = loss.backward();

    // Three parameters: the decoder's score layer and the op- and device-group input layers,
    // whose gradients flow back through all four attention layers. f32 central differences
    // carry ~1e-5 of rounding noise at this step, hence the absolute slack.
    let checks: Vec<(&str, Tensor<2>, SetWeight)> = vec![
        ("score", model.score.weight.val(), |m, w| {
            m.score.weight = Param::from_tensor(w)
        }),
        ("op_in", model.op_in.weight.val(), |m, w| {
            m.op_in.weight = Param::from_tensor(w)
        }),
        ("dev_in", model.dev_in.weight.val(), |m, w| {
            m.dev_in.weight = Param::from_tensor(w)
        }),
    ];
    for (name, weight, set) in checks {
        let analytic = to_vec(weight.grad(&grads).expect("a gradient"));
        let values = to_vec(weight.clone().inner());
        let shape = weight.dims();
        // The five largest gradient entries.
        let mut order: Vec<usize> = (0..analytic.len()).collect();
        order.sort_by(|&a, &b| analytic[b].abs().total_cmp(&analytic[a].abs()));
        assert!(analytic[order[0]].abs() > 1e-4, "{name}: no gradient");
        let eps = 2e-2f32;
        for &k in &order[..5] {
            let at = |delta: f32| {
                let mut v = values.clone();
                v[k] += delta;
                let mut m = model.clone();
                set(
                    &mut m,
                    Tensor::<2>::from_data(TensorData::new(v, shape), &device),
                );
                loss_of(&m)
            };
            let numeric = (at(eps) - at(-eps)) / (2.0 * eps as f64);
            let a = analytic[k] as f64;
            assert!(
                (numeric - a).abs() <= 2e-5 + 5e-2 * a.abs(),
                "{name}[{k}]: autodiff {a}, finite difference {numeric}"
            );
        }
    }

    let before = loss_of(&model);
    let loss = cross_entropy(&model, &g, 1, &slices, &target);
    let stepped = adam_step(model, &mut AdamConfig::new().init(), loss, 1e-2);
    let after = loss_of(&stepped);
    assert!(after < before - 1e-4, "loss {before} → {after}");
}

#[test]
fn same_seed_same_priors_and_files_round_trip() {
    let g = synthetic(12, 3, 1);
    let slices = all_slices(3);
    let a = GnnPolicy::init(small(), 42).unwrap();
    let b = GnnPolicy::init(small(), 42).unwrap();
    let c = GnnPolicy::init(small(), 43).unwrap();
    let pa = a.priors(&g, 4, &slices);
    assert_eq!(pa, b.priors(&g, 4, &slices));
    assert_ne!(pa, c.priors(&g, 4, &slices));

    let dir = scratch("roundtrip");
    let file = dir.join("p.gnn");
    a.save(&file).unwrap();
    let loaded = GnnPolicy::load(&file).unwrap();
    assert_eq!(loaded.config, small());
    assert_eq!(pa, loaded.priors(&g, 4, &slices));
    // Copied across devices (as the trainer hands a GPU's weights to the CPU searches): exact,
    // whether the copy can take gradients or not.
    let cpu = topoplace::gnn::cpu();
    assert_eq!(pa, a.copied_to(&cpu).unwrap().priors(&g, 4, &slices));
    let trainable = a.copied_to(&cpu.clone().autodiff()).unwrap();
    assert_eq!(
        pa,
        trainable.copied_to(&cpu).unwrap().priors(&g, 4, &slices)
    );
    // And the file written from a copy is the original's, byte for byte (the trainer writes its
    // checkpoints from one).
    let copied = dir.join("copied.gnn");
    trainable.copied_to(&cpu).unwrap().save(&copied).unwrap();
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(&copied).unwrap()
    );
}

/// `bench gnn` times the graph the search scores its root from: the same priors as the root's.
#[test]
fn the_benchmarked_start_graph_is_the_search_roots() {
    let (graph, cluster, cost) = (model("mlp"), testbed(), CostModel::default());
    let p = problem(&graph, &cluster, &cost);
    let policy = GnnPolicy::init(small(), 3).unwrap();
    let start = topoplace::mcts::start_graph(&p, 8, &policy).unwrap();
    let search = Mcts::new(p, metis_groups(&p, 8, 0).unwrap(), MctsConfig::default())
        .unwrap()
        .with_policy(&policy)
        .unwrap();
    assert_eq!(start.next_group, 0);
    assert_eq!(start.slices.len(), search.actions().len());
    let priors: Vec<f64> = policy
        .priors(&start.graph, start.next_group, &start.slices)
        .into_iter()
        .map(f64::from)
        .collect();
    assert_eq!(Some(priors.as_slice()), search.root_priors());
}

/// Relabel op groups by `perm` (old i → new perm[i]).
fn permute_ops(g: &HeteroGraph, perm: &[usize]) -> HeteroGraph {
    let n = g.ops();
    let mut op_features = vec![0.0; g.op_features.len()];
    for i in 0..n {
        op_features[perm[i] * OP_FEATURES..(perm[i] + 1) * OP_FEATURES]
            .copy_from_slice(&g.op_features[i * OP_FEATURES..(i + 1) * OP_FEATURES]);
    }
    let map = |e: &EdgeList, src: bool, dst: bool| EdgeList {
        src: e
            .src
            .iter()
            .map(|&x| if src { perm[x as usize] as u32 } else { x })
            .collect(),
        dst: e
            .dst
            .iter()
            .map(|&x| if dst { perm[x as usize] as u32 } else { x })
            .collect(),
        features: e.features.clone(),
    };
    HeteroGraph {
        op_features,
        dev_features: g.dev_features.clone(),
        op_op: map(&g.op_op, true, true),
        dev_dev: g.dev_dev.clone(),
        op_dev: map(&g.op_dev, true, false),
    }
}

/// Relabel device groups by `perm`, and the slices' placements with them.
fn permute_devs(g: &HeteroGraph, slices: &[Slice], perm: &[usize]) -> (HeteroGraph, Vec<Slice>) {
    let m = g.devs();
    let mut dev_features = vec![0.0; g.dev_features.len()];
    for j in 0..m {
        dev_features[perm[j] * DEV_FEATURES..(perm[j] + 1) * DEV_FEATURES]
            .copy_from_slice(&g.dev_features[j * DEV_FEATURES..(j + 1) * DEV_FEATURES]);
    }
    let relabel = |v: &[u32]| v.iter().map(|&x| perm[x as usize] as u32).collect();
    let graph = HeteroGraph {
        op_features: g.op_features.clone(),
        dev_features,
        op_op: g.op_op.clone(),
        dev_dev: EdgeList {
            src: relabel(&g.dev_dev.src),
            dst: relabel(&g.dev_dev.dst),
            features: g.dev_dev.features.clone(),
        },
        op_dev: EdgeList {
            src: g.op_dev.src.clone(),
            dst: relabel(&g.op_dev.dst),
            features: g.op_dev.features.clone(),
        },
    };
    let slices = slices
        .iter()
        .map(|s| {
            let mut placement = vec![0.0; m];
            for j in 0..m {
                placement[perm[j]] = s.placement[j];
            }
            Slice {
                placement,
                option: s.option,
            }
        })
        .collect();
    (graph, slices)
}

fn assert_close(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() < 1e-5, "{x} vs {y}");
    }
}

#[test]
fn relabelling_groups_relabels_the_priors() {
    let policy = GnnPolicy::init(small(), 9).unwrap();
    let g = synthetic(10, 4, 2);
    let slices = all_slices(4);
    let base = policy.priors(&g, 3, &slices);

    let perm: Vec<usize> = (0..10).map(|i| (i * 3 + 1) % 10).collect();
    let relabelled = permute_ops(&g, &perm);
    assert_close(&base, &policy.priors(&relabelled, perm[3], &slices));

    let dperm = [2, 0, 3, 1];
    let (relabelled, moved) = permute_devs(&g, &slices, &dperm);
    assert_close(&base, &policy.priors(&relabelled, 3, &moved));
    // And the relabelling matters: scoring the unmoved slices differs.
    let other = policy.priors(&relabelled, 3, &slices);
    assert!(base.iter().zip(&other).any(|(a, b)| (a - b).abs() > 1e-6));
}

#[test]
fn place_with_a_policy_file_is_deterministic() {
    let dir = scratch("place");
    let policy = dir.join("untrained.gnn");
    let init = topoplace()
        .args([
            "policy", "init", "--seed", "1", "--width", "16", "--heads", "2", "--out",
        ])
        .arg(&policy)
        .output()
        .unwrap();
    common::succeeded(init);
    assert_eq!(GnnPolicy::load(&policy).unwrap().config, small());
    let place = |out: &str| {
        let file = dir.join(out);
        let run = topoplace()
            .args(["place", "--model", "mlp", "--cluster", "tag-testbed"])
            .args(["--budget", "40", "--groups", "8", "--seed", "3", "--json"])
            .arg("--policy")
            .arg(&policy)
            .arg("--out")
            .arg(&file)
            .output()
            .unwrap();
        let summary = common::json_of(run);
        assert!(
            summary["policy"]
                .as_str()
                .unwrap()
                .ends_with("untrained.gnn")
        );
        std::fs::read_to_string(file).unwrap()
    };
    assert_eq!(place("a.json"), place("b.json"));
    let text = topoplace()
        .args(["place", "--model", "mlp", "--cluster", "tag-testbed"])
        .args(["--budget", "8", "--groups", "4", "--policy"])
        .arg(&policy)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("GNN priors from"));
}

#[cfg(not(feature = "wgpu"))]
#[test]
fn the_wgpu_device_needs_the_feature() {
    // `place`, training and the GNN benchmark refuse it alike, before anything is written.
    let dir = scratch("wgpu-train");
    let out = dir.join("run");
    let runs: [&[&str]; 3] = [
        &["place", "--model", "mlp", "--cluster", "tag-testbed"],
        &["train", "--config", "training/smoke.toml", "--out"],
        &[
            "bench",
            "gnn",
            "--models",
            "mlp",
            "--clusters",
            "tag-testbed",
        ],
    ];
    for args in runs {
        let mut command = topoplace();
        command.args(args);
        if args[0] == "train" {
            command.arg(&out);
        }
        let run = command.args(["--gnn-device", "wgpu"]).output().unwrap();
        // A usage error at the flag, before any work.
        assert_eq!(run.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(stderr.contains("--features wgpu"), "{stderr}");
        assert!(stderr.contains("--gnn-device"), "{stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
    }
    assert!(!out.exists());
}

#[test]
fn bad_policy_files_are_named_errors() {
    let dir = scratch("bad");
    let garbage = dir.join("garbage.gnn");
    std::fs::write(&garbage, b"not a policy at all").unwrap();
    let truncated = dir.join("truncated.gnn");
    let good = dir.join("good.gnn");
    GnnPolicy::init(small(), 0).unwrap().save(&good).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let missing = dir.join("missing.gnn");
    // 1,000 bytes overwritten in the weights: the checksum catches what the format would not.
    let corrupt = dir.join("corrupt.gnn");
    let mut flipped = bytes.clone();
    let mid = bytes.len() / 2;
    for b in &mut flipped[mid..mid + 1000] {
        *b ^= 0x5a;
    }
    std::fs::write(&corrupt, &flipped).unwrap();
    // A file of the format before checksums is refused with the command that upgrades it.
    let old = dir.join("old.gnn");
    let body = &bytes[bytes.iter().position(|&b| b == b'\n').unwrap() + 1..];
    let body = &body[body.iter().position(|&b| b == b'\n').unwrap() + 1..];
    let mut v1 = b"topoplace-gnn 1\n".to_vec();
    v1.extend_from_slice(body);
    std::fs::write(&old, &v1).unwrap();
    let e = GnnPolicy::load(&corrupt).unwrap_err().to_string();
    assert!(e.contains("checksum") && e.lines().count() == 1, "{e}");
    let e = GnnPolicy::load(&old).unwrap_err().to_string();
    assert!(e.contains("policy upgrade"), "{e}");
    let upgrade = topoplace()
        .args(["policy", "upgrade"])
        .arg(&old)
        .output()
        .unwrap();
    assert!(upgrade.status.success());
    assert_eq!(
        std::fs::read(&old).unwrap(),
        bytes,
        "the same file as written today"
    );
    // Damaged files of the old format are refused, not vouched for by a new checksum: bytes
    // flipped in the weights, a tail zeroed as a crash while writing leaves it, and a block
    // zeroed inside the weights.
    let mut flipped_v1 = v1.clone();
    let mid = v1.len() / 2;
    for b in &mut flipped_v1[mid..mid + 1000] {
        *b ^= 0x5a;
    }
    let mut zeroed_v1 = v1.clone();
    let tail = v1.len() - 4096;
    zeroed_v1[tail..].fill(0);
    let mut appended_v1 = v1.clone();
    appended_v1.extend_from_slice(b"trailing bytes of another file");
    let mut block_v1 = v1.clone();
    block_v1[mid..mid + 256].fill(0);
    for (name, damaged) in [
        ("flipped", flipped_v1),
        ("zeroed", zeroed_v1),
        ("zeroed block", block_v1),
        ("appended", appended_v1),
    ] {
        let path = dir.join(format!("old-{name}.gnn"));
        std::fs::write(&path, &damaged).unwrap();
        let run = topoplace()
            .args(["policy", "upgrade"])
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains(&*path.to_string_lossy()), "{stderr}");
        assert!(
            stderr.contains("not upgraded") || stderr.contains("weights:"),
            "{stderr}"
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            damaged,
            "{name}: left as it was"
        );
    }
    for file in [&garbage, &truncated, &missing, &corrupt] {
        let run = topoplace()
            .args([
                "place",
                "--model",
                "mlp",
                "--cluster",
                "tag-testbed",
                "--policy",
            ])
            .arg(file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(&*file.to_string_lossy()), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// The device groups' speed feature is each GPU's matrix-product peak in the step's precision,
/// relative to the cluster's fastest: the FP32 peaks in TAG's FP32 (what the shipped policy was
/// trained on), TF32's on Ampere where the V100 has none, the 16-bit tensor cores' in fp16.
#[test]
fn device_speed_features_follow_the_precision() {
    use topoplace::cluster::find_gpu;
    use topoplace::precision::Precision;
    let cluster = topoplace::resolve::load_named_cluster("hetero-a100-v100", "--cluster").unwrap();
    let graph = model("mlp");
    let (a100, v100) = (
        find_gpu("A100-80GB").unwrap(),
        find_gpu("V100-SXM2-32GB").unwrap(),
    );
    let expected = [
        (Precision::Fp32, v100.fp32_tflops / a100.fp32_tflops),
        (
            Precision::Tf32,
            v100.fp32_tflops / (a100.tensor_tflops / 2.0),
        ),
        (Precision::Fp16, v100.tensor_tflops / a100.tensor_tflops),
    ];
    for (precision, v100_share) in expected {
        let cost = CostModel {
            precision,
            ..CostModel::default()
        };
        let p = problem(&graph, &cluster, &cost);
        let policy = GnnPolicy::init(small(), 0).unwrap();
        let (groups, _, vp, fb) = data_parallel_vertex(&p, 4, &policy);
        let g = vp.graph(&vec![0; groups], 0, &fb);
        for (j, group) in cluster.groups.iter().enumerate() {
            let speed = g.dev_features[j * DEV_FEATURES + 2];
            let want = if group.gpu.name == a100.name {
                1.0
            } else {
                assert_eq!(group.gpu.name, v100.name);
                v100_share
            };
            assert!(
                (f64::from(speed) - want).abs() < 1e-6,
                "{precision}: {} reads {speed}, expected {want}",
                group.gpu.name
            );
        }
    }
}

/// A policy file whose checksum holds but whose weights are not finite (a run that diverged
/// saved one) is refused on load, naming the file: every prior it gave was NaN.
#[test]
fn a_policy_with_non_finite_weights_is_refused() {
    let dir = scratch("nan-policy");
    let mut policy = GnnPolicy::init(small(), 0).unwrap();
    let w = policy.model.score.weight.val();
    let nan = Tensor::<2>::full(w.dims(), f32::NAN, &w.device());
    policy.model.score.weight = Param::from_tensor(nan);
    let path = dir.join("nan.gnn");
    policy.save(&path).unwrap();
    let e = GnnPolicy::load(&path).unwrap_err().to_string();
    assert!(
        e.contains(&*path.to_string_lossy()) && e.contains("weights") && e.contains("NaN"),
        "{e}"
    );
    let run = topoplace()
        .args(["place", "--model", "mlp", "--cluster", "tag-testbed"])
        .arg("--policy")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&*path.to_string_lossy()), "{stderr}");
}

/// A policy file whose config carries a key this build does not know is refused naming the
/// file and the key, even with a checksum that matches: the setting would be dropped silently.
#[test]
fn a_policy_config_with_an_unknown_key_is_refused() {
    use sha2::{Digest, Sha256};
    let dir = scratch("unknown-key-policy");
    let good = dir.join("good.gnn");
    GnnPolicy::init(small(), 0).unwrap().save(&good).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    // header \n sha256 <hex> \n config \n record
    let mut at = 0;
    let mut lines = Vec::new();
    for _ in 0..3 {
        let end = at + bytes[at..].iter().position(|&b| b == b'\n').unwrap();
        lines.push(&bytes[at..end]);
        at = end + 1;
    }
    let (header, config, record) = (lines[0], lines[2], &bytes[at..]);
    assert_eq!(config, br#"{"width":16,"heads":2,"layers":4}"#);
    // The file with another config line and a checksum that matches it.
    let with_config = |name: &str, config: &[u8]| {
        let mut body = config.to_vec();
        body.push(b'\n');
        body.extend_from_slice(record);
        let hex: String = Sha256::digest(&body)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut file = header.to_vec();
        file.extend_from_slice(format!("\nsha256 {hex}\n").as_bytes());
        file.extend_from_slice(&body);
        let path = dir.join(name);
        std::fs::write(&path, &file).unwrap();
        path
    };
    let unknown = with_config("unknown.gnn", br#"{"width":16,"heads":2,"layers":4,"x":1}"#);
    let e = GnnPolicy::load(&unknown).unwrap_err().to_string();
    assert!(
        e.contains(&*unknown.to_string_lossy()) && e.contains("unknown field `x`"),
        "{e}"
    );
    // A config the weights do not fit, or no network at all, is said in words, not in Rust's
    // debug form of the config and of every tensor's shape.
    for (name, config) in [
        ("zero.gnn", &br#"{"width":0,"heads":2,"layers":4}"#[..]),
        ("wider.gnn", br#"{"width":32,"heads":2,"layers":4}"#),
    ] {
        let path = with_config(name, config);
        let e = GnnPolicy::load(&path).unwrap_err().to_string();
        assert!(
            e.contains(&*path.to_string_lossy()) && !e.contains('{') && !e.contains("Shape"),
            "{e}"
        );
    }
    // The same bytes with the shipped config line load: only the key is refused.
    assert!(GnnPolicy::load(&good).is_ok());
}
