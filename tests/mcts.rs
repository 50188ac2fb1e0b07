//! TAG's MCTS: optimal on problems small enough to enumerate, deterministic, never worse than
//! DP-NCCL, and the `place` command end to end.

mod common;
use common::binary as topoplace;
use common::{action_over, best_uniform_choice, testbed};

use topoplace::cluster::{Cluster, parse_cluster};
use topoplace::cost::CostModel;
use topoplace::evaluate::{Placement, evaluate};
use topoplace::graph::{Graph, GraphBuilder, Op, Phase, save_graph};
use topoplace::mcts::{
    GroupOrder, Mcts, MctsConfig, PACKINGS, SearchResult, SearchSplit, Shares, actions,
    build_strategy, metis_groups, ordered_groups, search,
};
use topoplace::placers::placer;
use topoplace::problem::Problem;
use topoplace::strategy::Reference;
use topoplace::zoo;

fn model(name: &str) -> Graph {
    zoo::build(name, &zoo::ZooOptions::default()).unwrap()
}

/// Two machines, each one device group: 2 V100s on NVLink and 2 P100s on PCIe, 10 Gbps apart
/// (slow enough that where ops go matters).
fn two_machines() -> Cluster {
    let text = "name = \"two\"\ninter_latency = \"20 us\"\n\
        [[machine]]\nname = \"a\"\ngpu = \"V100-32GB\"\ngpus = 2\nintra_bandwidth = \"50 GB/s\"\nnic = \"10 Gbps\"\n\
        [[machine]]\nname = \"b\"\ngpu = \"P100-16GB\"\ngpus = 2\nintra_bandwidth = \"12 GB/s\"\nnic = \"10 Gbps\"\n";
    parse_cluster(text, "<test>").unwrap()
}

/// The tree alone, as TAG runs it (no polish): these tests are about the tree; the polish and
/// its start from the best data parallelism are tested in `tests/baselines.rs`.
fn config(iterations: usize, seed: u64) -> MctsConfig {
    MctsConfig {
        iterations,
        seed,
        polish: 0,
        ..MctsConfig::default()
    }
}

/// The fastest fitting time over every complete strategy (12^groups choices, each with both
/// packings).
fn enumerate_best(p: &Problem, op_group: &[u32]) -> f64 {
    let acts = actions(p.cluster);
    let groups = op_group.iter().map(|&g| g as usize + 1).max().unwrap();
    let mut choice = vec![0u16; groups];
    let mut best = f64::INFINITY;
    loop {
        for packing in PACKINGS {
            let s = build_strategy(
                op_group,
                &acts,
                &choice,
                packing,
                Shares::EVEN,
                p.cluster.devices.len(),
            )
            .unwrap();
            let e = evaluate(p, &Placement::plain(s, "")).unwrap();
            if e.result.oom.is_empty() {
                best = best.min(e.report.iteration_us);
            }
        }
        // Odometer over the choices.
        let mut i = 0;
        while i < groups {
            choice[i] += 1;
            if (choice[i] as usize) < acts.len() {
                break;
            }
            choice[i] = 0;
            i += 1;
        }
        if i == groups {
            return best;
        }
    }
}

#[test]
fn two_device_groups_give_twelve_actions_dp_first() {
    let c = two_machines();
    let acts = actions(&c);
    assert_eq!(acts.len(), 3 * 4);
    assert_eq!(acts[0].devices, vec![0, 1, 2, 3]);
    assert_eq!(acts[0].option.name(), "all-reduce");
    // The TAG testbed has 7 device groups: every subset.
    assert_eq!(actions(&testbed()).len(), 127 * 4);
}

/// Budget for the enumeration test: 58% of the 12^3 = 1728 complete strategies. (With uniform
/// priors some problems need more: vgg16 on this cluster needs about 900 leaves for seed 0, and
/// alexnet reaches the optimum within 800 for only some seeds, stopping 3% short otherwise.)
const SMALL_BUDGET: usize = 1000;

#[test]
fn uniform_mcts_finds_the_enumerated_optimum() {
    let cost = CostModel::default();
    let c = two_machines();
    let mut beats_start = 0;
    for name in ["mlp", "vgg16"] {
        let g = model(name);
        let p = Problem {
            graph: &g,
            cluster: &c,
            cost: &cost,
        };
        let op_group = metis_groups(&p, 3, 0).unwrap();
        assert!(op_group.iter().all(|&x| x < 3));
        let optimum = enumerate_best(&p, &op_group);
        // The search starts from data parallelism under the better packing; count the cases
        // where the optimum beats every uniform strategy (the start among them), so the test
        // is not won at iteration 0 or at depth 1.
        let start = enumerate_best(&p, &vec![0; op_group.len()]);
        if optimum < start * 0.999 {
            beats_start += 1;
        }
        for seed in 0..2 {
            // The enumeration has no SFB, so neither may the search's result.
            let no_sfb = MctsConfig {
                sfb_check: false,
                ..config(SMALL_BUDGET, seed)
            };
            let found = Mcts::new(p, op_group.clone(), no_sfb)
                .unwrap()
                .run(|_| {})
                .unwrap();
            assert!(found.fits);
            assert!(found.simulated <= SMALL_BUDGET + 1);
            let t = found.iteration_us();
            assert!(
                (t - optimum).abs() <= 1e-9 * optimum,
                "{name} seed {seed}: MCTS {t} vs optimum {optimum}"
            );
        }
    }
    assert_eq!(
        beats_start, 2,
        "the optimum should not be the starting point"
    );
}

/// The tree alone over `op_group`, without the SFB check, after `iterations` leaves.
/// The actions that replicate with each of `options` over one device group alone, option by
/// option: the order of the search's seeds.
fn each_group_alone(c: &Cluster, options: &[&str]) -> Vec<u16> {
    let mut out = Vec::new();
    for option in options {
        out.extend(c.groups.iter().map(|g| action_over(c, option, &g.devices)));
    }
    out
}

fn tree_alone(p: Problem, op_group: &[u32], iterations: usize) -> SearchResult {
    let no_sfb = MctsConfig {
        sfb_check: false,
        ..config(iterations, 0)
    };
    let search = Mcts::new(p, op_group.to_vec(), no_sfb).unwrap();
    search.run(|_| {}).unwrap()
}

/// The first leaves are data parallelism inside each device group alone (AllReduce, then a
/// parameter server): with a budget of exactly those leaves, the search returns the best of
/// them and of its start, as simulating each by hand gives (a case where one group alone beats
/// the start); a budget of two spends both on the AllReduce seeds.
#[test]
fn the_first_leaves_are_each_device_groups_data_parallelism() {
    let cost = CostModel::default();
    let c = two_machines();
    let g = model("vgg16");
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let op_group = metis_groups(&p, 3, 0).unwrap();
    let alone = |option: &str| -> Vec<u16> {
        let each = c
            .groups
            .iter()
            .map(|grp| action_over(&c, option, &grp.devices));
        each.collect()
    };
    let (allreduce, ps) = (alone("all-reduce"), alone("ps"));
    let start = best_uniform_choice(&p, &op_group, &[0]);
    let seeds: Vec<u16> = [&allreduce[..], &ps[..], &[0]].concat();
    let by_hand = best_uniform_choice(&p, &op_group, &seeds);
    assert!(
        by_hand < start * 0.99,
        "a device group alone must beat the start, or the test proves nothing"
    );
    let four = tree_alone(p, &op_group, 4);
    assert_eq!(four.iterations, 4);
    assert!((four.iteration_us() - by_hand).abs() <= 1e-9 * by_hand);
    let by_hand = best_uniform_choice(&p, &op_group, &[&allreduce[..], &[0]].concat());
    let two = tree_alone(p, &op_group, 2).iteration_us();
    assert!((two - by_hand).abs() <= 1e-9 * by_hand);
}

/// After the device groups alone, the seeds try every GPU of one type together where that type
/// spans several device groups: here the two V100 machines, whose union beats each of them alone
/// and everything over all GPUs. A budget that reaches those seeds returns the union, as
/// simulating it by hand gives; one that stops at the device groups alone does not.
#[test]
fn the_seeds_then_try_each_gpu_type_across_its_device_groups() {
    let text = "name = \"three\"\ninter_latency = \"5 us\"\n\
        [[machine]]\nname = \"a\"\ngpu = \"V100-32GB\"\ngpus = 2\nintra_bandwidth = \"50 GB/s\"\nnic = \"100 Gbps\"\n\
        [[machine]]\nname = \"b\"\ngpu = \"P100-16GB\"\ngpus = 2\nintra_bandwidth = \"12 GB/s\"\nnic = \"100 Gbps\"\n\
        [[machine]]\nname = \"c\"\ngpu = \"V100-32GB\"\ngpus = 2\nintra_bandwidth = \"50 GB/s\"\nnic = \"100 Gbps\"\n";
    let c = parse_cluster(text, "<test>").unwrap();
    let cost = CostModel::default();
    let g = model("resnet50");
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let op_group = metis_groups(&p, 3, 0).unwrap();
    let over = |option: &str, devices: &[usize]| action_over(&c, option, devices);
    let alone = each_group_alone(&c, &["all-reduce", "ps"]);
    let v100s = [over("all-reduce", &[0, 1, 4, 5]), over("ps", &[0, 1, 4, 5])];
    let before = best_uniform_choice(&p, &op_group, &[&alone[..], &[0]].concat());
    let with_types = best_uniform_choice(&p, &op_group, &[&alone[..], &v100s[..], &[0]].concat());
    assert!(
        with_types < before * 0.99,
        "the V100s together must beat every seed before them, or the test proves nothing"
    );
    let eight = tree_alone(p, &op_group, 8).iteration_us();
    assert!((eight - with_types).abs() <= 1e-9 * with_types);
    let six = tree_alone(p, &op_group, 6).iteration_us();
    assert!((six - before).abs() <= 1e-9 * before);
}

#[test]
fn same_seed_same_strategy() {
    let cost = CostModel::default();
    let g = model("resnet101");
    let c = testbed();
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let run = |seed| search(&p, 60, config(64, seed), |_| {}).unwrap();
    let (a, b) = (run(3), run(3));
    assert_eq!(a.strategy, b.strategy);
    assert_eq!(a.iteration_us(), b.iteration_us());
    assert_eq!(a.beat_dp_at, b.beat_dp_at);
}

#[test]
fn never_worse_than_dp_nccl_when_it_fits() {
    let cost = CostModel::default();
    let c = testbed();
    for name in ["mlp", "vgg19", "transformer"] {
        let g = model(name);
        let p = Problem {
            graph: &g,
            cluster: &c,
            cost: &cost,
        };
        let dp = placer("dp-nccl")
            .unwrap()
            .place(&p, &Default::default())
            .unwrap();
        let dp = evaluate(&p, &dp).unwrap();
        assert!(dp.result.oom.is_empty(), "{name}: DP-NCCL should fit");
        // A tiny budget: the incumbent must still be at least DP-NCCL.
        let found = search(&p, 60, config(8, 0), |_| {}).unwrap();
        assert!(found.fits);
        assert_eq!(found.dp_us, dp.report.iteration_us, "{name}");
        assert!(found.iteration_us() <= dp.report.iteration_us, "{name}");
    }
}

#[test]
fn place_writes_a_strategy_that_simulate_reproduces() {
    let dir = common::scratch("place");
    let file = dir.join("s.json");
    let trace = dir.join("t.json");
    let placed = topoplace()
        .args([
            "place",
            "--model",
            "mlp",
            "--cluster",
            "tag-testbed",
            "--budget",
            "50",
        ])
        .args(["--seed", "2", "--json", "--out"])
        .arg(&file)
        .arg("--trace")
        .arg(&trace)
        .output()
        .unwrap();
    let summary = common::json_of(placed);
    assert!(
        std::fs::read_to_string(&trace)
            .unwrap()
            .contains("traceEvents")
    );
    let cluster = format!("{}/configs/tag-testbed.toml", env!("CARGO_MANIFEST_DIR"));
    let simulated = topoplace()
        .args([
            "simulate",
            "--model",
            "mlp",
            "--cluster",
            &cluster,
            "--json",
        ])
        .arg("--strategy")
        .arg(&file)
        .output()
        .unwrap();
    let sim = common::json_of(simulated);
    let placed_us = summary["iteration_us"].as_f64().unwrap();
    assert_eq!(sim["iteration_us"].as_f64().unwrap(), placed_us);
    assert_eq!(
        sim["dp_iteration_us"].as_f64().unwrap(),
        summary["dp_nccl_us"].as_f64().unwrap()
    );
    let bad = topoplace()
        .args(["place", "--model", "mlp", "--cluster", "tag-testbed"])
        .args(["--policy", "gnn.json"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("GNN"));
}

/// A small graph whose one parameter (100 GiB) fits on no GPU.
fn too_big() -> Graph {
    let mut b = GraphBuilder::new();
    for i in 0..8u64 {
        let mut op = Op::new(i, format!("op{i}"), "MatMul", Phase::Forward);
        op.flops = 1e9;
        op.output_bytes = 1e6;
        if i == 3 {
            op.resident_bytes = 100.0 * (1u64 << 30) as f64;
        }
        let v = b.add_op(op);
        if i > 0 {
            b.add_edge(v - 1, v, 1e6);
        }
    }
    b.finish("<test>", "too-big", 1).unwrap()
}

#[test]
fn a_model_that_fits_nowhere_fails_cleanly() {
    let dir = common::scratch("big");
    let graph = dir.join("big.json");
    save_graph(&too_big(), &graph).unwrap();
    let run = topoplace()
        .args([
            "place",
            "--cluster",
            "tag-testbed",
            "--budget",
            "20",
            "--model",
        ])
        .arg(&graph)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("does not fit"), "{err}");
}

/// The extended search space: with `SearchSplit::Auto` the search starts from the faster of
/// even and speed-proportional data parallelism, so on TAG's testbed (where DP-NCCL-P beats
/// DP-NCCL for BERT-Small) it is never slower than DP-NCCL-P under either packing.
#[test]
fn auto_split_starts_from_the_faster_data_parallelism() {
    let cost = CostModel::default();
    let c = testbed();
    let g = model("bert-small");
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let dpp = Reference::DpP.strategy(&g, &c);
    let dpp_best = PACKINGS
        .iter()
        .map(|&packing| {
            let mut s = dpp.clone();
            s.allreduce = packing;
            evaluate(&p, &Placement::plain(s, ""))
                .unwrap()
                .report
                .iteration_us
        })
        .fold(f64::INFINITY, f64::min);
    let even = search(&p, 60, config(8, 0), |_| {}).unwrap();
    let auto = MctsConfig {
        batch_split: SearchSplit::Auto,
        ..config(8, 0)
    };
    let auto = search(&p, 60, auto, |_| {}).unwrap();
    assert!(
        even.iteration_us() > dpp_best,
        "the case must need the extension"
    );
    assert!(auto.iteration_us() <= dpp_best * (1.0 + 1e-12));
    // The reward's reference is still DP-NCCL with even shares.
    assert_eq!(auto.dp_us, even.dp_us);
}

/// `GroupOrder::Impact` decides parameter-heavy groups earlier: on VGG19 over TAG's testbed the
/// group holding the first fully-connected layer's 103M weights moves towards the root, and the
/// grouping itself (which ops share a group) is the same as in compute order.
#[test]
fn impact_order_moves_parameter_heavy_groups_up() {
    let cost = CostModel::default();
    let c = testbed();
    let g = model("vgg19");
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let compute = ordered_groups(&p, 60, 0, GroupOrder::Compute).unwrap();
    let impact = ordered_groups(&p, 60, 0, GroupOrder::Impact).unwrap();
    assert_eq!(compute, metis_groups(&p, 60, 0).unwrap());
    let fc = (0..g.len())
        .max_by(|&a, &b| g.ops()[a].params.cmp(&g.ops()[b].params))
        .unwrap();
    assert!(g.ops()[fc].params > 100_000_000);
    assert!(
        impact[fc] < compute[fc],
        "rank {} under impact vs {} under compute",
        impact[fc],
        compute[fc]
    );
    assert_eq!(
        impact[fc], 0,
        "the largest weight matrix dominates VGG19's sync"
    );
    // Same partition: ops together under one order are together under the other.
    let mut pairs = std::collections::HashMap::new();
    for (op, (&a, &b)) in compute.iter().zip(&impact).enumerate() {
        assert_eq!(*pairs.entry(a).or_insert(b), b, "op {op}");
    }
}

/// TAG's SFB double check on the result: for VGG19 on the testbed the fully-connected layers'
/// gradients are far larger than their sufficient factors at 6 samples per GPU, so the checked
/// result is strictly faster and sets `sfb`; the check never makes a result slower.
#[test]
fn sfb_double_check_keeps_only_what_pays() {
    let cost = CostModel::default();
    let c = testbed();
    for (name, pays) in [("vgg19", true), ("mlp", false)] {
        let g = model(name);
        let p = Problem {
            graph: &g,
            cluster: &c,
            cost: &cost,
        };
        // Data parallelism over all 16 GPUs (the start), where SFB pays: the first leaves stay
        // with it rather than each machine alone.
        let wide = MctsConfig {
            seed_device_groups: false,
            ..config(8, 0)
        };
        let without = MctsConfig {
            sfb_check: false,
            ..wide.clone()
        };
        let plain = search(&p, 60, without, |_| {}).unwrap();
        let checked = search(&p, 60, wide, |_| {}).unwrap();
        assert!(checked.iteration_us() <= plain.iteration_us(), "{name}");
        assert_eq!(!checked.strategy.sfb_duplicated.is_empty(), pays, "{name}");
        if pays {
            assert!(
                checked.iteration_us() < plain.iteration_us() * 0.95,
                "{name}"
            );
        }
    }
}

/// The tree as an episode (`mcts::Environment`): every group on action 0 with one packed
/// AllReduce and even shares is DP-NCCL itself, so its time is DP-NCCL's to the bit and its
/// reward 0; on a problem small enough to enumerate, the best complete episode's reward is the
/// search's best, DP-NCCL's time over the best time less one.
#[test]
fn an_all_dp_episode_is_dp_nccl_and_the_best_episode_is_the_enumerated_best() {
    use topoplace::mcts::Environment;
    use topoplace::strategy::{AllReducePacking, BatchSplit};
    let (g, c, cost) = (model("mlp"), two_machines(), CostModel::default());
    let p = Problem::new(&g, &c, &cost);
    let dp_us = evaluate(&p, &Placement::plain(Reference::Dp.strategy(&g, &c), ""))
        .unwrap()
        .report
        .iteration_us;
    let packed = Some(AllReducePacking::Packed);
    let mut env = Environment::new(&p, 2, BatchSplit::Even, packed).unwrap();
    assert_eq!(env.dp_us(), dp_us);
    let first = env.reset(&p).unwrap();
    assert_eq!((first.group, first.graph.ops()), (0, env.groups()));
    let mut last = None;
    for step in 0..env.groups() {
        let t = env.step(&p, 0).unwrap();
        assert_eq!(
            t.observation.as_ref().map(|o| o.group),
            (step + 1 < env.groups()).then_some(step + 1)
        );
        last = Some(t);
    }
    let last = last.unwrap();
    assert_eq!(last.iteration_us, dp_us);
    assert_eq!(last.reward, 0.0);
    assert!(env.step(&p, 0).is_err(), "a finished episode takes no step");

    // Every complete episode of the two groups under the tree's packings, against brute force.
    let mut env = Environment::new(&p, 2, BatchSplit::Even, None).unwrap();
    let n = env.actions().len();
    let mut best_reward = f64::NEG_INFINITY;
    let mut best_us = f64::INFINITY;
    for a in 0..n {
        for b in 0..n {
            env.reset(&p).unwrap();
            env.step(&p, a).unwrap();
            let t = env.step(&p, b).unwrap();
            if t.fits {
                best_us = best_us.min(t.iteration_us);
            }
            best_reward = best_reward.max(t.reward);
        }
    }
    assert!(
        best_us < dp_us,
        "some placement of mlp beats DP-NCCL on two machines"
    );
    assert!((best_reward - (dp_us / best_us - 1.0)).abs() < 1e-12);
    env.reset(&p).unwrap();
    assert!(
        env.step(&p, n).is_err(),
        "an action past the last is refused"
    );
}

/// With `seed_one_gpu` the seeds end with one GPU of each device group (every op group
/// duplicated on its GPUs): in bf16 one H100 runs a BERT step faster than four of them on a slow
/// PCIe switch all-reduce its FP32 gradients, so that seed beats every other one and the tree
/// returns it after the seeds; without it the seeds return the best of the others.
#[test]
fn the_one_gpu_seeds_try_one_gpu_of_each_device_group() {
    use topoplace::autocast::autocast;
    use topoplace::precision::Precision;
    let text = "name = \"pcie\"\n\
        [[machine]]\nname = \"h\"\ngpu = \"H100-SXM-80GB\"\ngpus = 4\nintra_bandwidth = \"10 GB/s\"\nnic = \"100 Gbps\"\n\
        [[machine]]\nname = \"a\"\ngpu = \"A100-PCIe-40GB\"\ngpus = 4\nintra_bandwidth = \"10 GB/s\"\nnic = \"100 Gbps\"\n";
    let c = parse_cluster(text, "<test>").unwrap();
    let cost = CostModel {
        precision: Precision::Bf16,
        ..CostModel::default()
    };
    let g = autocast(&model("bert-small"), Precision::Bf16, "bert-small").unwrap();
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let others = [vec![0], each_group_alone(&c, &["all-reduce", "ps"])].concat();
    let one_gpu = each_group_alone(&c, &["duplicate"]);
    let op_group = metis_groups(&p, 3, 0).unwrap();
    let before = best_uniform_choice(&p, &op_group, &others);
    let with_one_gpu = best_uniform_choice(&p, &op_group, &[&others[..], &one_gpu[..]].concat());
    assert!(
        with_one_gpu < before * 0.9,
        "one H100 must beat every other seed, or the test proves nothing: {with_one_gpu} vs {before}"
    );
    // A budget of exactly the seeds: four without (AllReduce and a parameter server on each
    // machine), six with.
    let search = |seed_one_gpu: bool, leaves: usize| {
        let seeded = MctsConfig {
            sfb_check: false,
            seed_one_gpu,
            ..config(leaves, 0)
        };
        let mcts = Mcts::new(p, op_group.clone(), seeded).unwrap();
        mcts.run(|_| {}).unwrap().iteration_us()
    };
    assert!((search(true, 6) - with_one_gpu).abs() <= 1e-9 * with_one_gpu);
    assert!((search(false, 4) - before).abs() <= 1e-9 * before);
}

/// A one-GPU seed is simulated only when one GPU's op compute alone undercuts the fastest leaf
/// so far: on GPUs joined by NVLink in FP32, data parallelism over a machine is far faster than
/// any one of its GPUs, the one-GPU seeds are skipped, and the search with them asked for is the
/// search without them, leaf for leaf.
#[test]
fn one_gpu_seeds_that_cannot_win_are_not_simulated() {
    let text = "name = \"nvlink\"\n\
        [[machine]]\nname = \"h\"\ngpu = \"V100-SXM2-32GB\"\ngpus = 4\nintra_bandwidth = \"150 GB/s\"\nnic = \"100 Gbps\"\n\
        [[machine]]\nname = \"a\"\ngpu = \"P100-SXM2-16GB\"\ngpus = 4\nintra_bandwidth = \"150 GB/s\"\nnic = \"100 Gbps\"\n";
    let c = parse_cluster(text, "<test>").unwrap();
    let cost = CostModel::default();
    let g = model("vgg19");
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let op_group = metis_groups(&p, 3, 0).unwrap();
    let one_gpu = each_group_alone(&c, &["duplicate"]);
    let others = [vec![0], each_group_alone(&c, &["all-reduce", "ps"])].concat();
    let best_other = best_uniform_choice(&p, &op_group, &others);
    let one_gpu_best = best_uniform_choice(&p, &op_group, &one_gpu);
    assert!(
        one_gpu_best > 1.5 * best_other,
        "one GPU must lose clearly, or the test proves nothing: {one_gpu_best} vs {best_other}"
    );
    let search = |seed_one_gpu: bool| {
        let seeded = MctsConfig {
            sfb_check: false,
            seed_one_gpu,
            ..config(12, 0)
        };
        let result = Mcts::new(p, op_group.clone(), seeded)
            .unwrap()
            .run(|_| {})
            .unwrap();
        (result.seeds, result.iteration_us(), result.strategy.clone())
    };
    // AllReduce and a parameter server on each machine: four seeds either way.
    let (seeds, time, strategy) = search(true);
    assert_eq!(seeds, 4);
    assert_eq!((seeds, time, strategy), search(false));
}
