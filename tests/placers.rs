//! Baseline placers: honest memory claims, list schedules checked against the simulator, brute
//! force on tiny graphs, MCMC determinism, and the `compare` command end to end.

mod common;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use topoplace::cluster::{Cluster, load_cluster, parse_cluster};
use topoplace::cost::CostModel;
use topoplace::evaluate::{Placement, evaluate};
use topoplace::graph::{Graph, GraphBuilder, Op, Phase};
use topoplace::placers::{Budget, names, placer, registry};
use topoplace::problem::Problem;
use topoplace::strategy::{BatchSplit, GroupDecision, Reference, ReplicationOption, Strategy};
use topoplace::zoo;

const GPU: &str = "V100-SXM2-32GB";
const LIST_SCHEDULERS: &[&str] = &[
    "m-topo",
    "m-etf",
    "m-sct",
    "heft",
    "dpos",
    "order-place",
    "adjusting",
    "quickp",
];

fn config(name: &str) -> Cluster {
    load_cluster(format!(
        "{}/configs/{name}.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// `n` V100s on one machine (100 GB/s) or on `n` machines (10 GB/s NICs); optional memory cap.
fn cluster(n: usize, one_machine: bool, memory: Option<&str>) -> Cluster {
    let memory = memory.map_or(String::new(), |m| format!("memory = \"{m}\"\n"));
    let text = if one_machine {
        format!(
            "name = \"t\"\n[[machine]]\nname = \"m\"\ngpu = \"{GPU}\"\ngpus = {n}\nintra_bandwidth = \"100 GB/s\"\nintra_latency = \"5 us\"\nnic = \"80 Gbps\"\n{memory}"
        )
    } else {
        format!(
            "name = \"t\"\ninter_latency = \"20 us\"\n[[machine]]\nname = \"m\"\ngpu = \"{GPU}\"\ngpus = 1\nintra_bandwidth = \"100 GB/s\"\nnic = \"80 Gbps\"\ncount = {n}\n{memory}"
        )
    };
    parse_cluster(&text, "<test>").unwrap()
}

/// A random forward-only DAG of `n` ops with known times on the test GPU (10–100 µs) and
/// tensors of up to 4 MB; every op after the first has at least one input.
fn random_dag(rng: &mut StdRng, n: usize) -> Graph {
    let mut b = GraphBuilder::new();
    for i in 0..n {
        let mut op = Op::new(i as u64, format!("op{i}"), "MatMul", Phase::Forward);
        op.profiled_us
            .insert(GPU.to_string(), rng.random_range(10.0..100.0));
        op.output_bytes = rng.random_range(0.0..4e6);
        let v = b.add_op(op);
        if i > 0 {
            let first = rng.random_range(0..i);
            b.add_edge(first, v, b.op(first).output_bytes);
            for u in 0..i {
                if u != first && rng.random_bool(0.3) {
                    b.add_edge(u, v, b.op(u).output_bytes);
                }
            }
        }
    }
    b.finish("<test>", "dag", 1).unwrap()
}

fn model(name: &str) -> Graph {
    zoo::build(name, &zoo::ZooOptions::default()).unwrap()
}

fn budget() -> Budget {
    Budget {
        steps: 20,
        seconds: None,
        seed: 7,
        deadline: None,
    }
}

/// Whether any GPU runs out of memory, and the simulated iteration time.
fn judge(p: &Problem, placement: &Placement) -> (bool, f64) {
    let e = evaluate(p, placement).unwrap();
    (!e.result.oom.is_empty(), e.report.iteration_us)
}

#[test]
fn registry_names_are_unique_and_unknown_names_list_them() {
    let mut n = names();
    assert!(n.len() >= 10);
    n.sort_unstable();
    n.dedup();
    assert_eq!(n.len(), registry().len());
    let err = placer("no-such-method").err().unwrap().to_string();
    assert!(err.contains("no-such-method") && err.contains("heft") && err.contains("m-sct"));
}

#[test]
fn a_fit_claim_is_confirmed_by_the_simulator() {
    let cost = CostModel::default();
    let clusters = [
        config("tag-testbed"),
        config("celeritas-4xv100"),
        // Small GPUs: list schedulers must spread memory or admit OOM.
        cluster(3, true, Some("1 GiB")),
    ];
    let mut claims = 0;
    for name in ["mlp", "resnet101", "transformer", "bert-small"] {
        let g = model(name);
        for c in &clusters {
            let p = Problem {
                graph: &g,
                cluster: c,
                cost: &cost,
            };
            for m in registry() {
                let placement = m.place(&p, &budget()).unwrap();
                let (oom, t) = judge(&p, &placement);
                assert!(t.is_finite() && t > 0.0, "{name} {}: {t}", m.name());
                if placement.fits == Some(true) {
                    claims += 1;
                    assert!(
                        !oom,
                        "{} claims {name} fits on {}, simulator says OOM",
                        m.name(),
                        c.name
                    );
                }
            }
        }
    }
    assert!(claims > 0, "no placer ever claimed a fit");
}

#[test]
fn memory_starved_list_schedules_are_reported_oom_not_crashed() {
    let cost = CostModel::default();
    let g = model("bert-small");
    let c = cluster(2, true, Some("0.01 GiB"));
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    for name in LIST_SCHEDULERS {
        let placement = placer(name).unwrap().place(&p, &budget()).unwrap();
        assert_eq!(placement.fits, Some(false), "{name}");
        let (oom, _) = judge(&p, &placement);
        assert!(oom, "{name}: 10 MiB per GPU cannot hold bert-small");
    }
}

/// Every op on one GPU: the strategy a list scheduler would produce for `devices`.
fn assignment_strategy(devices: &[usize], gpus: usize) -> Strategy {
    let decisions = (0..gpus)
        .map(|d| GroupDecision {
            devices: vec![d],
            option: ReplicationOption::ModelParallel,
        })
        .collect();
    let groups = devices.iter().map(|&d| d as u32).collect();
    Strategy::new(
        "<test>",
        groups,
        decisions,
        BatchSplit::Even,
        devices.len(),
        gpus,
    )
    .unwrap()
}

/// The best simulated (FIFO) time over all op → GPU assignments.
fn brute_force(p: &Problem) -> f64 {
    let (ops, gpus) = (p.graph.len(), p.cluster.devices.len());
    let mut best = f64::INFINITY;
    let mut devices = vec![0usize; ops];
    loop {
        let placement = Placement::plain(assignment_strategy(&devices, gpus), "");
        best = best.min(judge(p, &placement).1);
        // Next assignment in mixed-radix order.
        let mut i = 0;
        while i < ops && devices[i] + 1 == gpus {
            devices[i] = 0;
            i += 1;
        }
        if i == ops {
            return best;
        }
        devices[i] += 1;
    }
}

#[test]
fn list_schedules_on_tiny_graphs_match_the_simulator_and_brute_force_bounds_them() {
    let cost = CostModel::default();
    let mut rng = StdRng::seed_from_u64(11);
    let mut worst_gap: f64 = 0.0;
    let mut ratios = Vec::new();
    for case in 0..12 {
        let g = random_dag(&mut rng, 4 + case % 5);
        let c = cluster(2 + case % 2, case % 3 != 0, None);
        let p = Problem {
            graph: &g,
            cluster: &c,
            cost: &cost,
        };
        let best_assignment = brute_force(&p);
        let mut best_placer = f64::INFINITY;
        for m in registry() {
            let placement = m.place(&p, &budget()).unwrap();
            let (_, t) = judge(&p, &placement);
            best_placer = best_placer.min(t);
            if LIST_SCHEDULERS.contains(&m.name()) {
                let predicted = placement.predicted_us.unwrap();
                let gap = (t - predicted).abs() / predicted;
                eprintln!(
                    "case {case} {}: predicted {predicted:.1} simulated {t:.1}",
                    m.name()
                );
                // ETF and HEFT plan links and GPUs the way the simulator runs them, so their
                // schedules are exact; m-TOPO's topological walk books links out of time order
                // (up to 12.5% off on these cases since GPUs' ports are links too).
                let tolerance = if m.name() == "m-topo" { 0.15 } else { 1e-9 };
                assert!(
                    gap <= tolerance,
                    "case {case} {}: predicted {predicted} simulated {t}",
                    m.name()
                );
                worst_gap = worst_gap.max(gap);
                // The same assignment, judged FIFO, is one the brute force tried.
                let fifo = Placement::plain(placement.strategy.clone(), "");
                assert!(best_assignment <= judge(&p, &fifo).1 + 1e-6, "{}", m.name());
            }
        }
        ratios.push(best_placer / best_assignment);
        // The placers (with their execution orders) get within 20% of the best assignment.
        eprintln!("case {case}: best placer {best_placer:.1} brute force {best_assignment:.1}");
    }
    eprintln!("worst |simulated - predicted| / predicted: {worst_gap:.3}");
    eprintln!("best placer / brute force: {ratios:.3?}");
    // Measured at this seed: the best placer is optimal on 11 of 12 graphs, 1.32x on the other.
    assert!(ratios.iter().all(|&r| r <= 1.5), "{ratios:?}");
    let optimal = ratios.iter().filter(|&&r| r <= 1.0 + 1e-9).count();
    assert!(optimal >= 10, "{ratios:?}");
}

#[test]
fn mcmc_is_deterministic_per_seed_and_never_worse_than_its_dp_start() {
    let cost = CostModel::default();
    let g = model("resnet101");
    let c = config("celeritas-4xv100");
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let mcmc = placer("mcmc").unwrap();
    let a = mcmc.place(&p, &budget()).unwrap();
    let b = mcmc.place(&p, &budget()).unwrap();
    assert_eq!(a.strategy, b.strategy);
    let dp = Placement::plain(Reference::Dp.strategy(&g, &c), "");
    let (dp_oom, dp_t) = judge(&p, &dp);
    let (oom, t) = judge(&p, &a);
    assert!(!dp_oom && !oom);
    assert!(t <= dp_t * (1.0 + 1e-9), "mcmc {t} vs its start {dp_t}");
}

#[test]
fn compare_writes_csv_markdown_and_charts_and_rejects_bad_methods() {
    let dir = common::scratch("baselines-compare");
    let a = dir.join("two.toml");
    let b = dir.join("three.toml");
    std::fs::write(&a, cluster(2, true, None).to_toml()).unwrap();
    std::fs::write(&b, cluster(3, false, None).to_toml()).unwrap();
    let out = dir.join("out");
    let clusters = format!("{},{}", a.display(), b.display());
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_topoplace"))
        .args([
            "compare",
            "--models",
            "mlp",
            "--clusters",
            &clusters,
            "--methods",
            "all",
        ])
        .args(["--budget", "5", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let run = common::succeeded(run);
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let methods = names().len();
    assert_eq!(csv.lines().count(), 1 + 2 * methods, "{csv}");
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(md.contains("| mlp | ") && md.contains("heft"));
    assert_eq!(String::from_utf8_lossy(&run.stdout), md);
    for stem in ["two", "three"] {
        let svg = std::fs::read_to_string(out.join(format!("mlp_{stem}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") && svg.matches("<rect").count() == methods);
    }
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_topoplace"))
        .args(["compare", "--models", "mlp", "--clusters", &clusters])
        .args(["--methods", "heft,nonsense", "--out"])
        .arg(dir.join("bad"))
        .output()
        .unwrap();
    // An unknown method is a usage error, like clap's own: exit 2, naming the valid ones.
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("--methods") && err.contains("nonsense") && err.contains("m-etf"));
    assert!(!dir.join("bad").exists());
}

/// `compare --batch` runs every model at that batch: DP-NCCL on an MLP at twice the batch takes
/// longer, and a batch of 0 is refused naming the flag.
#[test]
fn compare_runs_models_at_the_batch_asked_for() {
    let dir = common::scratch("baselines-compare-batch");
    let two = dir.join("two.toml");
    std::fs::write(&two, cluster(2, true, None).to_toml()).unwrap();
    let time_at = |batch: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_topoplace"))
            .args(["compare", "--models", "mlp", "--clusters"])
            .arg(&two)
            .args(["--methods", "dp-nccl", "--json", "--batch", batch, "--out"])
            .arg(dir.join(format!("out{batch}")))
            .output()
            .unwrap();
        (out.status.code(), out.stdout, out.stderr)
    };
    let rows = |stdout: &[u8]| -> f64 {
        let v: serde_json::Value = serde_json::from_slice(stdout).unwrap();
        v[0]["iteration_ms"].as_f64().unwrap()
    };
    let (code, small, _) = time_at("32");
    assert_eq!(code, Some(0));
    let (code, large, _) = time_at("64");
    assert_eq!(code, Some(0));
    assert!(
        rows(&large) > rows(&small),
        "{} vs {}",
        rows(&large),
        rows(&small)
    );
    let (code, _, err) = time_at("0");
    assert_ne!(code, Some(0));
    assert!(String::from_utf8_lossy(&err).contains("--batch"));
}

/// Longest chain of `weight(op)` plus `edge_cost(bytes)` along its edges.
fn longest_chain(g: &Graph, weight: impl Fn(usize) -> f64, edge_cost: impl Fn(f64) -> f64) -> f64 {
    let mut best = vec![0.0f64; g.len()];
    for op in g.topological_order() {
        let before = g
            .in_edges(op)
            .iter()
            .map(|&e| g.edges()[e])
            .map(|edge| best[edge.src] + edge_cost(edge.bytes))
            .fold(0.0, f64::max);
        best[op] = before + weight(op);
    }
    best.into_iter().fold(0.0, f64::max)
}

#[test]
fn dpos_meets_fastt_theorem_1_on_random_dags() {
    // ω_DPOS ≤ 2·ω_opt + C_max, checked against a lower bound of ω_opt (so the check is at
    // least as strict): ω_opt ≥ max(longest compute chain, total work / #GPUs).
    let cost = CostModel::default();
    let mut rng = StdRng::seed_from_u64(5);
    let dpos = placer("dpos").unwrap();
    let mut tightest: f64 = 0.0;
    for case in 0..20 {
        let g = random_dag(&mut rng, 10 + 5 * (case % 6));
        let c = cluster(2 + case % 3, case % 2 == 0, None);
        let p = Problem {
            graph: &g,
            cluster: &c,
            cost: &cost,
        };
        let gpu = &c.devices[0].gpu;
        let w = |op: usize| cost.compute_time_us(g.op(op), gpu, 1.0);
        let n = c.devices.len();
        let worst_transfer = |bytes: f64| {
            (0..n)
                .flat_map(|a| (0..n).map(move |b| (a, b)))
                .filter(|(a, b)| a != b)
                .map(|(a, b)| c.transfer_us(a, b, bytes))
                .fold(0.0, f64::max)
        };
        let chain = longest_chain(&g, w, |_| 0.0);
        let work: f64 = (0..g.len()).map(w).sum();
        let opt_lower = chain.max(work / n as f64);
        let c_max = longest_chain(&g, |_| 0.0, worst_transfer);
        let placement = dpos.place(&p, &budget()).unwrap();
        let omega = placement.predicted_us.unwrap();
        let (_, simulated) = judge(&p, &placement);
        let bound = 2.0 * opt_lower + c_max;
        assert!(omega <= bound + 1e-6, "case {case}: ω {omega} > {bound}");
        assert!(
            simulated <= bound + 1e-6,
            "case {case}: simulated {simulated} > {bound}"
        );
        tightest = tightest.max(omega / bound);
    }
    eprintln!("largest ω / (2·ω_opt lower bound + C_max): {tightest:.3}");
}

#[test]
fn gradient_buckets_span_per_tensor_to_packed() {
    use topoplace::strategy::AllReducePacking;
    let cost = CostModel::default();
    let g = model("resnet101");
    let c = config("tag-testbed");
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let time = |packing| {
        let mut s = Reference::Dp.strategy(&g, &c);
        s.allreduce = packing;
        judge(&p, &Placement::plain(s, "")).1
    };
    let packed = time(AllReducePacking::Packed);
    let per_tensor = time(AllReducePacking::PerTensor);
    // One bucket holding everything is the packed AllReduce; one-byte buckets are per tensor.
    assert!((time(AllReducePacking::Buckets(u64::MAX)) - packed).abs() <= 1e-6 * packed);
    assert!((time(AllReducePacking::Buckets(1)) - per_tensor).abs() <= 1e-6 * per_tensor);
    // Horovod's 64 MiB buckets beat both on the 16-GPU testbed: fewer latency terms than per
    // tensor, overlap with the backward pass unlike packed.
    let horovod = placer("horovod").unwrap().place(&p, &budget()).unwrap();
    let fused = judge(&p, &horovod).1;
    assert!(
        fused < packed && fused < per_tensor,
        "{fused} {packed} {per_tensor}"
    );
}

#[test]
fn adjusting_placement_is_no_slower_than_order_place() {
    // Celeritas proves each adjustment keeps or shortens the schedule; the simulator agrees on
    // every zoo model on the paper's own cluster (4 V100s on PCIe), and on these TAG models.
    // Adjusting's own plan is no longer than Order-Place's either: with contention-free earliest
    // starts (but contended finish times) Inception-v3 planned 917 ms against 490 and ran 1030.
    let cost = CostModel::default();
    let cases = zoo::NAMES
        .iter()
        .map(|&name| (name, "celeritas-4xv100"))
        .chain([("resnet101", "tag-testbed"), ("transformer", "tag-testbed")]);
    for (name, cluster_name) in cases {
        let g = model(name);
        let c = config(cluster_name);
        let p = Problem {
            graph: &g,
            cluster: &c,
            cost: &cost,
        };
        let place = |m: &str| placer(m).unwrap().place(&p, &budget()).unwrap();
        let (order, adjusting) = (place("order-place"), place("adjusting"));
        let (planned_order, planned_adjusting) =
            (order.predicted_us.unwrap(), adjusting.predicted_us.unwrap());
        assert!(
            planned_adjusting <= planned_order * (1.0 + 1e-9),
            "{name} on {cluster_name}: planned {planned_adjusting} > {planned_order}"
        );
        let (order, adjusting) = (judge(&p, &order).1, judge(&p, &adjusting).1);
        assert!(
            adjusting <= order * (1.0 + 1e-9),
            "{name} on {cluster_name}: {adjusting} > {order}"
        );
    }
}

#[test]
fn horovod_strategy_survives_a_json_round_trip_with_its_buckets() {
    use topoplace::strategy::{load_strategy, save_strategy};
    let cost = CostModel::default();
    let g = model("mlp");
    let c = config("celeritas-4xv100");
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let s = placer("horovod")
        .unwrap()
        .place(&p, &budget())
        .unwrap()
        .strategy;
    let dir = common::scratch("baselines-roundtrip");
    let path = dir.join("horovod.json");
    save_strategy(&s, None, &g, &c.name, &path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"buckets\": 67108864"), "{text}");
    assert!(!text.contains("priority"), "{text}");
    assert_eq!(
        load_strategy(&path, &g, c.devices.len()).unwrap().strategy,
        s
    );
}

/// Batch shares are decided per group: a group given the other shares gets them in the compiled
/// graph (speed-proportional over a V100 and a P100 while its neighbour splits evenly), keeps
/// them through a strategy file, and giving it the strategy's own shares again drops the
/// override.
#[test]
fn a_groups_own_batch_shares_reach_the_compiled_ops_and_its_file() {
    use topoplace::compile::{CompileOptions, compile};
    use topoplace::strategy::{load_strategy, save_strategy};
    let cost = CostModel::default();
    let g = model("mlp");
    let c = config("tag-testbed");
    let fast = c
        .devices
        .iter()
        .position(|d| d.gpu.name.starts_with("V100"))
        .unwrap();
    let slow = c
        .devices
        .iter()
        .position(|d| d.gpu.name.starts_with("P100"))
        .unwrap();
    let pair = vec![fast.min(slow), fast.max(slow)];
    let decision = GroupDecision {
        devices: pair.clone(),
        option: ReplicationOption::AllReduce,
    };
    let op_group: Vec<u32> = (0..g.len()).map(|op| (2 * op >= g.len()) as u32).collect();
    let even = Strategy::new(
        "<test>",
        op_group.clone(),
        vec![decision.clone(), decision],
        BatchSplit::Even,
        g.len(),
        c.devices.len(),
    )
    .unwrap();
    let mut mixed = even.clone();
    mixed.set_split(1, BatchSplit::Proportional);
    assert_eq!(mixed.split_of(0), BatchSplit::Even);
    assert_eq!(mixed.split_of(1), BatchSplit::Proportional);

    let compiled = compile(
        &Problem::new(&g, &c, &cost),
        &mixed,
        CompileOptions::FIFO_EVERY_REPLICA,
    );
    let speed: Vec<f64> = pair.iter().map(|&d| c.devices[d].gpu.fp32_tflops).collect();
    let proportional: Vec<f64> = speed
        .iter()
        .map(|s| s / speed.iter().sum::<f64>())
        .collect();
    let mut seen = [false; 2];
    for (op, &group) in op_group.iter().enumerate() {
        let shares = &compiled.op_shares[op];
        if shares.iter().all(|&x| x == 1.0) {
            continue; // not split by batch (parameters, optimizer steps)
        }
        let want = if group == 0 {
            vec![0.5, 0.5]
        } else {
            proportional.clone()
        };
        assert_eq!(shares.len(), 2, "op {op}");
        for (got, want) in shares.iter().zip(&want) {
            assert!(
                (got - want).abs() < 1e-12,
                "op {op} of group {group}: {shares:?} vs {want:?}"
            );
        }
        seen[group as usize] = true;
    }
    assert_eq!(seen, [true, true], "both groups hold batch-split ops");

    let dir = common::scratch("baselines-group-shares");
    let path = dir.join("mixed.json");
    save_strategy(&mixed, None, &g, &c.name, &path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text.matches("\"batch_split\": \"proportional\"").count(),
        1,
        "{text}"
    );
    let loaded = load_strategy(&path, &g, c.devices.len()).unwrap().strategy;
    assert_eq!(loaded, mixed);

    mixed.set_split(1, BatchSplit::Even);
    assert_eq!(mixed, even);
}

/// A list schedule's execution order travels with its strategy file: loaded back, it simulates
/// to the same time as the placement did, and a wrong-length order names the field.
#[test]
fn a_list_schedules_priorities_survive_a_json_round_trip() {
    use topoplace::strategy::{load_strategy, save_strategy};
    let cost = CostModel::default();
    let g = model("mlp");
    let c = config("tag-testbed");
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let placement = placer("heft").unwrap().place(&p, &budget()).unwrap();
    let order = placement.order.clone().expect("HEFT plans an order");
    let dir = common::scratch("baselines-priority");
    let path = dir.join("heft.json");
    save_strategy(&placement.strategy, Some(&order), &g, &c.name, &path).unwrap();
    let loaded = load_strategy(&path, &g, c.devices.len()).unwrap();
    // serde_json parses decimals to within an ulp, not always exactly.
    let read = loaded.priority.clone().expect("the file keeps the order");
    assert_eq!(read.len(), order.len());
    for (a, b) in read.iter().zip(&order) {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{a} vs {b}");
    }
    let again = Placement {
        order: loaded.priority,
        ..Placement::plain(loaded.strategy, "")
    };
    let ((oom_a, a), (oom_b, b)) = (judge(&p, &again), judge(&p, &placement));
    assert_eq!(oom_a, oom_b);
    assert!((a - b).abs() <= 1e-9 * b, "{a} vs {b}");

    let text = std::fs::read_to_string(&path).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["priority"].as_array_mut().unwrap().pop();
    std::fs::write(&path, json.to_string()).unwrap();
    let err = load_strategy(&path, &g, c.devices.len()).unwrap_err();
    assert!(err.to_string().contains("priority"), "{err}");
}

#[test]
fn os_dpos_keeps_only_splits_that_shorten_dpos() {
    let cost = CostModel::default();
    let c = config("tag-testbed");
    let mut improved = 0;
    for name in ["vgg19", "bert-small", "resnet101"] {
        let g = model(name);
        let p = Problem {
            graph: &g,
            cluster: &c,
            cost: &cost,
        };
        let time = |m: &str| judge(&p, &placer(m).unwrap().place(&p, &budget()).unwrap());
        let ((dpos_oom, dpos), (oom, split)) = (time("dpos"), time("os-dpos"));
        assert!(!dpos_oom && !oom);
        assert!(split <= dpos, "{name}: {split} > {dpos}");
        if split < dpos {
            improved += 1;
        }
    }
    assert!(improved > 0, "no split ever helped");
}

/// The search never loses to the heuristics nor to `local-search`: it falls back to a
/// heuristic's placement (list schedules with their execution order) when nothing found is
/// faster, and it polishes from `dp-subset` as `local-search` does (with the same polish budget),
/// also from the best heuristic and the tree's best. Not by construction against
/// `local-search`: a walk whose pace cannot catch a faster start it cannot move to (a pipeline, a
/// list schedule) is given up, where `local-search`, which has no such starts, walks on. `mcmc`
/// is printed, not asserted.
#[test]
fn tag_is_never_slower_than_a_heuristic_or_local_search() {
    use topoplace::mcts::DEFAULT_POLISH;
    use topoplace::placers::heuristics::HEURISTICS;
    let cost = CostModel::default();
    let budget = Budget {
        steps: 100,
        seconds: None,
        seed: 0,
        deadline: None,
    };
    let polish = Budget {
        steps: DEFAULT_POLISH,
        ..budget
    };
    for (name, cluster_name) in [
        ("mlp", "tag-testbed"),
        ("alexnet", "tag-testbed"),
        ("mlp", "quickp-fat-tree-4"),
        ("alexnet", "moirai-intra"),
        ("vgg19", "tag-testbed"),
    ] {
        let (g, c) = (model(name), config(cluster_name));
        let p = Problem {
            graph: &g,
            cluster: &c,
            cost: &cost,
        };
        // `None` where a placer has nothing to offer (no pipeline on a batch no micro-batch
        // count cuts).
        let time = |m: &str, budget: &Budget| match placer(m).unwrap().place(&p, budget) {
            Err(topoplace::error::Error::Search(topoplace::error::SearchError::NoPipeline {
                ..
            })) => None,
            placement => Some(judge(&p, &placement.unwrap())),
        };
        let (tag_oom, tag) = time("tag", &budget).unwrap();
        assert!(!tag_oom, "{name} on {cluster_name}: tag runs out of memory");
        let mut others: Vec<(&str, Budget)> = HEURISTICS.iter().map(|&m| (m, budget)).collect();
        others.push(("local-search", polish));
        for (other, b) in others {
            let Some((oom, t)) = time(other, &b) else {
                continue;
            };
            assert!(
                oom || tag <= t * (1.0 + 1e-9),
                "{name} on {cluster_name}: tag {tag:.1} µs, {other} {t:.1} µs"
            );
        }
        let (_, mcmc) = time("mcmc", &budget).unwrap();
        eprintln!("{name} on {cluster_name}: tag {tag:.1} µs, mcmc {mcmc:.1} µs");
    }
}

/// `dp-subset`'s bound-ordered enumeration finds the same best as trying every subset, every
/// share and every packing (and the single fastest GPU), with fewer simulations.
#[test]
fn dp_subset_pruning_finds_the_brute_force_best() {
    use topoplace::data_parallel::{PACKINGS, best_data_parallel};
    let cost = CostModel::default();
    let c = config("tag-testbed");
    for name in ["alexnet", "mlp"] {
        let g = model(name);
        let p = Problem {
            graph: &g,
            cluster: &c,
            cost: &cost,
        };
        let time = |s: Strategy| {
            let e = evaluate(&p, &Placement::plain(s, "")).unwrap();
            if e.result.oom.is_empty() {
                e.report.iteration_us
            } else {
                f64::INFINITY
            }
        };
        let mut brute = time(Reference::Single.strategy(&g, &c));
        let mut tried = 1;
        let groups = c.groups.len();
        for mask in 1u32..(1 << groups) {
            let devices: Vec<usize> = (0..groups)
                .filter(|&i| mask >> i & 1 == 1)
                .flat_map(|i| c.groups[i].devices.clone())
                .collect();
            for split in [BatchSplit::Even, BatchSplit::Proportional] {
                for packing in PACKINGS {
                    let decision = GroupDecision {
                        devices: {
                            let mut d = devices.clone();
                            d.sort_unstable();
                            d
                        },
                        option: ReplicationOption::AllReduce,
                    };
                    let mut s = Strategy::uniform(g.len(), decision, split);
                    s.allreduce = packing;
                    brute = brute.min(time(s));
                    tried += 1;
                }
            }
        }
        let best = best_data_parallel(&p).unwrap();
        assert!(
            (best.time_us - brute).abs() <= 1e-9 * brute,
            "{name}: pruned {} vs brute force {brute}",
            best.time_us
        );
        assert!(
            best.simulated < tried / 4,
            "{name}: {} of {tried}",
            best.simulated
        );
    }
}

/// `compare` runs `tag` first and gives `mcmc` and `local-search` its wall-clock time, saying so;
/// without `tag` they take the budget's steps.
#[test]
fn compare_gives_the_searches_tags_time_and_says_so() {
    use topoplace::placers::compare::{parse_methods, run};
    let models = vec![("mlp".to_string(), model("mlp"))];
    let clusters = vec![("t".to_string(), cluster(2, true, None))];
    let rows = run(
        &models,
        &clusters,
        &parse_methods("mcmc,local-search,tag").unwrap().placers,
        &budget(),
        &CostModel::default(),
        |_| {},
    );
    let names: Vec<&str> = rows.iter().map(|r| r.method.as_str()).collect();
    assert_eq!(
        names,
        ["mcmc", "local-search", "tag"],
        "rows keep the given order"
    );
    let tag_s = rows[2].search_s;
    for r in &rows[..2] {
        assert_eq!(r.budget, format!("equal time: {tag_s:.2} s (tag's)"));
    }
    assert_eq!(rows[2].budget, "20 steps");
    let alone = run(
        &models,
        &clusters,
        &parse_methods("mcmc").unwrap().placers,
        &budget(),
        &CostModel::default(),
        |_| {},
    );
    assert_eq!(alone[0].budget, "20 steps");
}

/// The list schedulers honour a deadline (what keeps `place --time` within its limit on a
/// thousand GPUs, where one schedule takes tens of seconds): one already past fails each of
/// `place`'s heuristics that builds a schedule; those that do not (data parallelism, METIS)
/// place as without it, but for `dp-subset`, which tries no GPU subset past its deadline.
#[test]
fn list_schedulers_give_up_at_their_deadline() {
    use topoplace::error::{Error, SearchError};
    use topoplace::placers::heuristics::HEURISTICS;
    let g = model("alexnet");
    let c = config("tag-testbed");
    let cost = CostModel::default();
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let past = Budget {
        deadline: Some(std::time::Instant::now()),
        ..budget()
    };
    let mut gave_up = Vec::new();
    for &name in HEURISTICS {
        let m = placer(name).unwrap();
        let unhurried = m.place(&p, &budget()).unwrap();
        match m.place(&p, &past) {
            Err(Error::Search(SearchError::OutOfTime)) => gave_up.push(name),
            // The bar every method is measured against always answers: past its deadline, with
            // the fastest GPU alone, which it scores before trying any subset.
            Ok(placement) if name == "dp-subset" => {
                assert_eq!(placement.note, "single fastest GPU");
                assert_ne!(unhurried.note, placement.note);
            }
            Ok(placement) => assert_eq!(placement.strategy, unhurried.strategy, "{name}"),
            Err(e) => panic!("{name}: {e}"),
        }
    }
    // Five forms of data parallelism and METIS build none; the nine list schedulers and the
    // pipeline planner do.
    assert_eq!(gave_up.len(), HEURISTICS.len() - 6, "{gave_up:?}");
    assert!(gave_up.contains(&"heft") && gave_up.contains(&"quickp"));
}

/// Past its time limit's allowance (10% + 1 s) TAG gives no plan rather than a late one: with the
/// limit long spent before the search starts, the first simulation is given up. `place` says
/// why; the `tag` placer's row says it ran out of time. (A 2·10⁵-op graph on 16 GPUs needs a
/// second per simulation, and `place --time 0.1` on it ran 2.4 s.)
#[test]
fn tag_gives_no_plan_past_its_allowance() {
    let long_ago = std::time::Instant::now() - std::time::Duration::from_secs(60);
    let cluster = format!("{}/configs/tag-testbed.toml", env!("CARGO_MANIFEST_DIR"));
    let mut r = topoplace::api::PlaceRequest::new("mlp", &cluster);
    r.policy = "none";
    r.time = Some(0.1);
    r.started = long_ago;
    let Err(e) = topoplace::api::place(&r, |_| {}) else {
        panic!("a plan past the allowance");
    };
    let text = e.to_string();
    assert!(
        text.contains("within --time 0.1 s") && text.contains("give it more --time"),
        "{text}"
    );
    r.started = std::time::Instant::now();
    assert!(topoplace::api::place(&r, |_| {}).is_ok(), "a plan in time");

    let cost = CostModel::default();
    let (g, c) = (model("mlp"), config("tag-testbed"));
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let spent = Budget {
        seconds: Some(0.1),
        deadline: Some(long_ago),
        ..Budget::default()
    };
    let placed = placer("tag-pure").unwrap().place(&p, &spent);
    assert!(
        matches!(
            placed,
            Err(topoplace::error::Error::Search(
                topoplace::error::SearchError::OutOfTime
            ))
        ),
        "{placed:?}"
    );
}
