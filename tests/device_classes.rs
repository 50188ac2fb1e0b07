//! Symmetric simulation: compiling one replica per class of alike devices gives the full
//! simulation's result to 1e-9 (iteration time, every GPU's and link's busy time, peak memory,
//! OOM verdicts, synchronisation time, TAG's feedback), on every strategy of a property test on
//! clusters of up to 16 GPUs; strategies that break the symmetry fall back to the full graph.

use proptest::prelude::*;
use topoplace::cluster::{Cluster, parse_cluster};
use topoplace::cost::CostModel;
use topoplace::evaluate::{
    Evaluation, Placement, Timing, busy_within, evaluate, evaluate_every_replica, evaluate_within,
    timing_within,
};
use topoplace::graph::Graph;
use topoplace::problem::Problem;
use topoplace::strategy::{
    AllReducePacking, BatchSplit, GroupDecision, Reference, ReplicationOption, Strategy,
};
use topoplace::zoo;

/// Two machine types over a NIC: `a` machines of 4 V100s and `b` machines of 4 T4s (≤ 16 GPUs),
/// with `memory` overriding the V100s' when given (to force OOM verdicts).
fn two_type_cluster(a: usize, b: usize, memory: Option<&str>) -> Cluster {
    let memory = memory.map_or(String::new(), |m| format!("memory = \"{m}\"\n"));
    let text = format!(
        "name = \"sym\"\ninter_latency = \"20 us\"\n\
         [[machine]]\nname = \"v\"\ngpu = \"V100-SXM2-32GB\"\ngpus = 4\ncount = {a}\n\
         intra_bandwidth = \"150 GB/s\"\nnic = \"100 Gbps\"\n{memory}\
         [[machine]]\nname = \"t\"\ngpu = \"T4\"\ngpus = 4\ncount = {b}\n\
         intra_bandwidth = \"16 GB/s\"\nnic = \"25 Gbps\"\n"
    );
    parse_cluster(&text, "<test>").unwrap()
}

fn model(name: &str, batch: Option<u32>) -> Graph {
    let opts = zoo::ZooOptions {
        batch_size: batch,
        ..Default::default()
    };
    zoo::build(name, &opts).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-9)
}

/// Everything the report says, compared between the two compilations.
fn agree(by_class: &Evaluation, every: &Evaluation) -> Result<(), String> {
    let (a, b) = (&by_class.report, &every.report);
    let pairs = [
        ("iteration", a.iteration_us, b.iteration_us),
        ("busiest GPU", a.max_device_busy_us, b.max_device_busy_us),
        ("sync", a.sync_busy_us, b.sync_busy_us),
    ];
    let devices = a.devices.iter().zip(&b.devices).flat_map(|(x, y)| {
        [
            ("GPU busy", x.busy_share, y.busy_share),
            ("peak memory", x.peak_memory_bytes, y.peak_memory_bytes),
        ]
    });
    let links = a
        .links
        .iter()
        .zip(&b.links)
        .map(|(x, y)| ("link busy", x.busy_share, y.busy_share));
    let feedback = a.op_groups.iter().zip(&b.op_groups).flat_map(|(x, y)| {
        [
            ("group makespan", x.makespan_us, y.makespan_us),
            (
                "idle before transfer",
                x.idle_before_transfer_us,
                y.idle_before_transfer_us,
            ),
        ]
    });
    let groups = a
        .device_groups
        .iter()
        .zip(&b.device_groups)
        .flat_map(|(x, y)| {
            [
                ("group peak", x.peak_memory_share, y.peak_memory_share),
                ("group idle", x.idle_share, y.idle_share),
            ]
        });
    for (what, x, y) in pairs
        .into_iter()
        .chain(devices)
        .chain(links)
        .chain(feedback)
        .chain(groups)
    {
        if !close(x, y) {
            return Err(format!("{what}: {x} by class vs {y} in full"));
        }
    }
    let verdict = |e: &Evaluation| -> Vec<(usize, u64)> {
        let oom = &e.report.oom;
        oom.iter()
            .map(|o| (o.device, o.peak_bytes.to_bits()))
            .collect()
    };
    if verdict(by_class) != verdict(every) {
        return Err(format!(
            "OOM {:?} by class vs {:?} in full",
            by_class.report.oom, every.report.oom
        ));
    }
    Ok(())
}

fn both(p: &Problem, placement: &Placement) -> (Evaluation, Evaluation) {
    (
        evaluate(p, placement).unwrap(),
        evaluate_every_replica(p, placement).unwrap(),
    )
}

/// A strategy over the device groups in `mask` (at least one): every op in one group, or the
/// ops cut in two halves with `other_option` for the second.
fn strategy(
    g: &Graph,
    c: &Cluster,
    mask: u8,
    option: ReplicationOption,
    second: Option<(ReplicationOption, u8)>,
) -> Strategy {
    let pick = |mask: u8| -> Vec<usize> {
        let chosen: Vec<usize> = c
            .groups
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << (i % 8)) != 0)
            .flat_map(|(_, group)| group.devices.iter().copied())
            .collect();
        if chosen.is_empty() {
            c.groups[0].devices.clone()
        } else {
            let mut chosen = chosen;
            chosen.sort_unstable();
            chosen
        }
    };
    let first = GroupDecision {
        devices: pick(mask),
        option,
    };
    match second {
        None => Strategy::uniform(g.len(), first, BatchSplit::Even),
        Some((option, mask)) => {
            let half = g.len() / 2;
            let op_group = (0..g.len()).map(|op| u32::from(op >= half)).collect();
            let second = GroupDecision {
                devices: pick(mask),
                option,
            };
            Strategy::new(
                "<sym>",
                op_group,
                vec![first, second],
                BatchSplit::Even,
                g.len(),
                c.devices.len(),
            )
            .unwrap()
        }
    }
}

/// DP-NCCL, DP-NCCL-P and DP with buckets over every GPU are simulated by class, and exactly.
#[test]
fn data_parallelism_is_simulated_one_gpu_per_class_and_exactly() {
    let cost = CostModel::default();
    let c = two_type_cluster(2, 2, None);
    for name in ["mlp", "alexnet", "bert-small"] {
        let g = model(name, None);
        let p = Problem {
            graph: &g,
            cluster: &c,
            cost: &cost,
        };
        let mut bucketed = Reference::Dp.strategy(&g, &c);
        bucketed.allreduce = AllReducePacking::Buckets(16 << 20);
        for s in [
            Reference::Dp.strategy(&g, &c),
            Reference::DpP.strategy(&g, &c),
            bucketed,
        ] {
            let (by_class, every) = both(&p, &Placement::plain(s, ""));
            let classes = by_class.compiled.classes.as_ref();
            assert!(classes.is_some(), "{name}: DP has two classes of GPUs");
            assert!(by_class.report.tasks * 4 < every.report.tasks, "{name}");
            agree(&by_class, &every).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}

/// V100s with too little memory for AlexNet at batch 4,096 under DP: both say OOM, on the
/// same GPUs with the same peaks.
#[test]
fn out_of_memory_verdicts_agree() {
    let cost = CostModel::default();
    let c = two_type_cluster(2, 1, Some("1 GiB"));
    let g = model("alexnet", Some(4096));
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let placement = Placement::plain(Reference::Dp.strategy(&g, &c), "");
    let (by_class, every) = both(&p, &placement);
    assert!(by_class.compiled.classes.is_some());
    assert!(
        !every.report.oom.is_empty(),
        "the 1 GiB V100s are out of memory"
    );
    agree(&by_class, &every).unwrap();
    // The timing a search reads says so too, from the representatives' simulation.
    let timing = timing_within(&p, &placement, f64::INFINITY).unwrap();
    assert_eq!(timing.map(|t| t.fits), Some(false));
}

/// A parameter server over several GPUs pushes to and pulls from particular devices: the
/// compiler goes straight to the full graph (no class attempt) and the result is the full one's.
#[test]
fn a_parameter_server_over_several_gpus_is_compiled_in_full_at_once() {
    let cost = CostModel::default();
    let c = two_type_cluster(2, 1, None);
    let g = model("transformer", Some(64));
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    for (mask, classes) in [(0b001, false), (0b011, false)] {
        let s = strategy(&g, &c, mask, ReplicationOption::Ps, None);
        let (by_class, every) = both(&p, &Placement::plain(s, ""));
        assert_eq!(by_class.compiled.classes.is_some(), classes);
        assert_eq!(by_class.report.tasks, every.report.tasks);
        agree(&by_class, &every).unwrap();
    }
}

/// A simulation with a limit gives the full evaluation when the iteration is within it and
/// nothing when it is past, for strategies simulated by class and in full alike.
#[test]
fn an_evaluation_within_a_limit_is_the_evaluation_or_nothing() {
    let cost = CostModel::default();
    let c = two_type_cluster(1, 1, None);
    let g = model("alexnet", Some(64));
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    for option in [ReplicationOption::AllReduce, ReplicationOption::Ps] {
        let placement = Placement::plain(strategy(&g, &c, 0b11, option, None), "");
        let full = evaluate(&p, &placement).unwrap();
        let time = full.report.iteration_us;
        let at = evaluate_within(&p, &placement, time).unwrap();
        let at = at.expect("within a limit equal to its time");
        agree(&at, &full).unwrap();
        assert_eq!(at.report.tasks, full.report.tasks);
        let below = evaluate_within(&p, &placement, time * (1.0 - 1e-9)).unwrap();
        assert!(below.is_none(), "{option:?}: past the limit");
        let timing = Timing {
            iteration_us: time,
            fits: !full.report.is_oom(),
        };
        let within = timing_within(&p, &placement, time).unwrap();
        assert_eq!(within, Some(timing));
        let below = timing_within(&p, &placement, time * (1.0 - 1e-9)).unwrap();
        assert_eq!(below, None);
        // Each GPU's busy time, copied from its representative without expanding the result.
        let (t, busy) = busy_within(&p, &placement, time)
            .unwrap()
            .expect("within a limit equal to its time");
        assert_eq!(t, timing);
        assert_eq!(busy, full.result.busy[..c.num_devices()].to_vec());
        let below = busy_within(&p, &placement, time * (1.0 - 1e-9)).unwrap();
        assert!(below.is_none(), "{option:?}: past the limit");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_strategy_simulates_the_same_by_class_and_in_full(
        model_pick in 0usize..3,
        machines in (1usize..3, 1usize..3),
        mask in 1u8..16,
        // AllReduce (index 0) half the time, one group two thirds of the time: the strategies
        // that keep the classes; the rest exercise the fall-back.
        option in prop_oneof![3 => Just(0usize), 1 => 1usize..4],
        second in proptest::option::weighted(0.33, (0usize..4, 1u8..16)),
        proportional in any::<bool>(),
        packing in 0usize..3,
    ) {
        let cost = CostModel::default();
        let c = two_type_cluster(machines.0, machines.1, None);
        let g = model(["mlp", "alexnet", "transformer"][model_pick], Some(64));
        let p = Problem { graph: &g, cluster: &c, cost: &cost };
        let second = second.map(|(o, m)| (ReplicationOption::ALL[o], m));
        let mut s = strategy(&g, &c, mask, ReplicationOption::ALL[option], second);
        if proportional {
            s.batch_split = BatchSplit::Proportional;
        }
        s.allreduce = [
            AllReducePacking::PerTensor,
            AllReducePacking::Packed,
            AllReducePacking::Buckets(8 << 20),
        ][packing];
        let (by_class, every) = both(&p, &Placement::plain(s, ""));
        prop_assert!(agree(&by_class, &every).is_ok(), "{:?}", agree(&by_class, &every));
    }

    /// Within a limit, any strategy (by class or in full, with the compiler's bound from the
    /// layouts and the simulator's) is simulated to its time when the limit is at least that,
    /// and given up when below.
    #[test]
    fn any_strategy_within_a_limit_is_its_time_or_nothing(
        model_pick in 0usize..3,
        machines in (1usize..3, 1usize..3),
        mask in 1u8..16,
        option in 0usize..4,
        second in proptest::option::weighted(0.5, (0usize..4, 1u8..16)),
        proportional in any::<bool>(),
        ratio in 0.3f64..1.5,
    ) {
        let cost = CostModel::default();
        let c = two_type_cluster(machines.0, machines.1, None);
        let g = model(["mlp", "alexnet", "transformer"][model_pick], Some(64));
        let p = Problem { graph: &g, cluster: &c, cost: &cost };
        let second = second.map(|(o, m)| (ReplicationOption::ALL[o], m));
        let mut s = strategy(&g, &c, mask, ReplicationOption::ALL[option], second);
        if proportional {
            s.batch_split = BatchSplit::Proportional;
        }
        let placement = Placement::plain(s, "");
        let time = evaluate(&p, &placement).unwrap().report.iteration_us;
        for limit in [time, time * (1.0 + 1e-9), time * ratio] {
            let within = timing_within(&p, &placement, limit).unwrap();
            prop_assert_eq!(within.is_some(), limit >= time, "limit {} time {}", limit, time);
        }
    }
}
