//! The pipeline option against its closed forms: GPipe's (m + p − 1) stage times and bubble,
//! 1F1B's in-flight micro-batches on the first stage, an OOM exactly where the memory model puts
//! it, and the strategy file's pipeline field.

mod common;

use topoplace::cluster::{Cluster, parse_cluster};
use topoplace::compile::TaskRole;
use topoplace::cost::{CommModel, CostModel};
use topoplace::evaluate::{Evaluation, evaluate_strategy};
use topoplace::graph::{Graph, GraphBuilder, Op, Phase, Splittability};
use topoplace::problem::Problem;
use topoplace::sim::Order;
use topoplace::strategy::{
    AllReducePacking, BatchSplit, GroupDecision, HOROVOD_FUSION_BYTES, Pipeline, ReplicationOption,
    Schedule, Strategy, StrategyFile, parse_strategy,
};

const GPU: &str = "V100-SXM2-32GB";
const BATCH: u32 = 48;

/// `n` V100s (32 GB each) on one machine whose links cost nothing but bandwidth, as TOML.
fn cluster_toml(n: usize) -> String {
    format!(
        "name = \"t\"\n[[machine]]\nname = \"m\"\ngpu = \"{GPU}\"\ngpus = {n}\nintra_bandwidth = \"100 GB/s\"\nintra_latency = \"0 us\"\nnic = \"80 Gbps\"\n"
    )
}

fn cluster(n: usize) -> Cluster {
    parse_cluster(&cluster_toml(n), "<test>").unwrap()
}

/// An op taking exactly `us` on the test GPU at the full batch (linear in the batch).
fn timed(name: &str, phase: Phase, us: f64, out: f64) -> Op {
    let mut op = Op::new(0, name, "X", phase);
    op.profiled_us.insert(GPU.to_string(), us);
    op.output_bytes = out;
    op.split = Splittability::Concat;
    op
}

/// A uniform chain: an input, `layers` forward ops of `tf` µs each (output `act` bytes at the full
/// batch, read by the next forward op and by the op's own backward), and `layers` backward ops of
/// `tb` µs chained in reverse (outputs of zero bytes). Returns the graph and each op's layer (the
/// input is layer 0's).
fn chain(layers: usize, tf: f64, tb: f64, act: f64) -> (Graph, Vec<usize>) {
    let mut b = GraphBuilder::new();
    let mut layer_of = vec![0];
    let input = b.add_op(timed("input", Phase::Input, 0.0, 0.0));
    let mut prev = input;
    let mut forward = Vec::new();
    for l in 0..layers {
        let f = b.add_op(timed(&format!("f{l}"), Phase::Forward, tf, act));
        b.add_edge(prev, f, if prev == input { 0.0 } else { act });
        layer_of.push(l);
        forward.push(f);
        prev = f;
    }
    for l in (0..layers).rev() {
        let back = b.add_op(timed(&format!("b{l}"), Phase::Backward, tb, 0.0));
        b.add_edge(forward[l], back, act);
        if l + 1 < layers {
            b.add_edge(prev, back, 0.0);
        }
        layer_of.push(l);
        prev = back;
    }
    (b.finish("<test>", "chain", BATCH).unwrap(), layer_of)
}

/// `p` stages of equal layer counts, stage `s` on GPU `s`, under `schedule` with `m` micro-batches.
fn pipelined(g: &Graph, layer_of: &[usize], p: usize, m: u32, schedule: Schedule) -> Strategy {
    let per_stage = layer_of.iter().max().unwrap() / p + 1;
    let op_group: Vec<u32> = layer_of.iter().map(|&l| (l / per_stage) as u32).collect();
    let decisions = (0..p)
        .map(|s| GroupDecision {
            devices: vec![s],
            option: ReplicationOption::ModelParallel,
        })
        .collect();
    let mut s = Strategy::new("<test>", op_group, decisions, BatchSplit::Even, g.len(), p).unwrap();
    let stages: Vec<Vec<usize>> = (0..p).map(|s| vec![s]).collect();
    s.pipeline = Some(Pipeline::new("<test>", &stages, m, schedule, p, g.batch_size).unwrap());
    s
}

fn ideal() -> CostModel {
    CostModel {
        comm: CommModel::ideal(),
        ..CostModel::default()
    }
}

fn run(g: &Graph, c: &Cluster, s: &Strategy) -> Evaluation {
    let cost = ideal();
    let p = Problem {
        graph: g,
        cluster: c,
        cost: &cost,
    };
    evaluate_strategy(&p, s, Order::Fifo).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

/// Two machines of `gpus` V100s each (links inside at 100 GB/s), joined at `nic` with no latency.
fn two_machines(gpus: usize, nic: &str) -> Cluster {
    let text = format!(
        "name = \"two\"\ninter_latency = \"0 us\"\n[[machine]]\nname = \"m\"\ngpu = \"{GPU}\"\ngpus = {gpus}\nintra_bandwidth = \"100 GB/s\"\nnic = \"{nic}\"\ncount = 2\n"
    );
    parse_cluster(&text, "<test>").unwrap()
}

/// `pipeline-dp`'s placement of `g` on `c`.
fn pipeline_dp(g: &Graph, c: &Cluster, cost: &CostModel) -> topoplace::evaluate::Placement {
    let p = Problem {
        graph: g,
        cluster: c,
        cost,
    };
    topoplace::placers::placer("pipeline-dp")
        .unwrap()
        .place(&p, &topoplace::placers::Budget::default())
        .unwrap()
}

/// GPipe on a uniform chain over p identical GPUs: the iteration is (m + p − 1) stage times of
/// one micro-batch's forward and backward, each GPU idle (p − 1) / (m + p − 1) of it (the
/// bubble). 1F1B has the same bubble.
#[test]
fn gpipe_and_1f1b_take_m_plus_p_minus_1_stage_times() {
    let (tf, tb) = (30.0, 55.0);
    for (p, layers, m) in [(2, 4, 4), (4, 8, 8), (3, 6, 1), (4, 4, 3), (2, 6, 12)] {
        // No activation bytes: the closed form has free communication.
        let (g, layer_of) = chain(layers, tf, tb, 0.0);
        let c = cluster(p);
        let per_stage = (layers / p) as f64;
        let stage_us = per_stage * (tf + tb) / f64::from(m);
        let want = f64::from(m + p as u32 - 1) * stage_us;
        for schedule in Schedule::ALL {
            let e = run(&g, &c, &pipelined(&g, &layer_of, p, m, schedule));
            let got = e.report.iteration_us;
            assert!(
                close(got, want),
                "p {p} m {m} {schedule:?}: {got} vs {want}"
            );
            let bubble = f64::from(p as u32 - 1) / f64::from(m + p as u32 - 1);
            for d in &e.report.devices {
                assert!(
                    close(1.0 - d.busy_share, bubble),
                    "p {p} m {m} {schedule:?}: {} idle vs bubble {bubble}",
                    1.0 - d.busy_share
                );
            }
        }
    }
}

/// Peak activation memory of the first stage: GPipe keeps all m micro-batches in flight, 1F1B at
/// most p; the later stages of 1F1B keep p − s.
#[test]
fn peak_memory_counts_the_micro_batches_each_schedule_keeps_in_flight() {
    let act = 3.0 * 1024.0 * 1024.0;
    for (p, layers, m) in [(4, 8, 8), (2, 4, 8), (4, 4, 2), (3, 9, 6)] {
        let (g, layer_of) = chain(layers, 20.0, 40.0, act);
        let c = cluster(p);
        let per_stage = (layers / p) as f64;
        let per_micro_batch = per_stage * act / f64::from(m);
        for schedule in Schedule::ALL {
            let e = run(&g, &c, &pipelined(&g, &layer_of, p, m, schedule));
            for s in 0..p {
                let in_flight = schedule.in_flight(s, p, m);
                let want = f64::from(in_flight) * per_micro_batch;
                // A later stage also holds the activations received from the stage before, of
                // at most the micro-batches that stage has in flight.
                let got = e.result.peak_memory[s];
                let received = match s {
                    0 => 0.0,
                    _ => f64::from(schedule.in_flight(s - 1, p, m)) * act / f64::from(m),
                };
                assert!(
                    got >= want - 1e-6 && got <= want + received + 1e-6,
                    "p {p} m {m} {schedule:?} stage {s}: peak {got} vs {want} (+ received)"
                );
                if s == 0 {
                    assert!(
                        close(got, want),
                        "p {p} m {m} {schedule:?}: first stage peak {got} vs {want}"
                    );
                }
            }
        }
    }
}

/// A pipeline that does not fit is OOM exactly as the memory model says: 40 GB of activations on
/// the first stage at the full batch. With 8 micro-batches over 4 stages, GPipe keeps all 8 (40 GB
/// > 32 GB: OOM), 1F1B keeps 4 (20 GB: fits).
#[test]
fn a_pipeline_that_does_not_fit_is_oom_where_the_memory_model_says() {
    let (p, layers, m) = (4, 8, 8);
    let act = 20e9; // per forward op at the full batch; 2 layers per stage: 40 GB
    let (g, layer_of) = chain(layers, 20.0, 40.0, act);
    let c = cluster(p);
    let capacity = c.devices[0].memory_bytes;
    assert!(20e9 < capacity && capacity < 40e9, "{capacity}");
    let gpipe = run(&g, &c, &pipelined(&g, &layer_of, p, m, Schedule::GPipe));
    let devices: Vec<usize> = gpipe.report.oom.iter().map(|o| o.device).collect();
    assert!(devices.contains(&0), "{:?}", gpipe.report.oom);
    let oom = gpipe.report.oom.iter().find(|o| o.device == 0).unwrap();
    assert!(close(oom.peak_bytes, 40e9), "{}", oom.peak_bytes);
    let one_f_one_b = run(&g, &c, &pipelined(&g, &layer_of, p, m, Schedule::OneFOneB));
    assert!(
        one_f_one_b.report.oom.is_empty(),
        "{:?}",
        one_f_one_b.report.oom
    );
    assert!(close(one_f_one_b.result.peak_memory[0], 20e9));
}

/// The strategy file carries the pipeline and reads back the same strategy; a file without one
/// (every file before pipelines) has none; a micro-batch count that does not divide the batch is
/// refused, naming the field.
#[test]
fn strategy_files_carry_the_pipeline() {
    let (g, layer_of) = chain(4, 10.0, 20.0, 1e6);
    let s = pipelined(&g, &layer_of, 2, 4, Schedule::OneFOneB);
    let file = StrategyFile::from_strategy(&s, None, &g, "t");
    let text = serde_json::to_string(&file).unwrap();
    assert!(text.contains("\"schedule\":\"1f1b\""), "{text}");
    let back = parse_strategy(&text, "<file>", &g, 2).unwrap();
    assert_eq!(back.strategy, s);

    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    value.as_object_mut().unwrap().remove("pipeline");
    let plain = parse_strategy(&value.to_string(), "<file>", &g, 2).unwrap();
    assert_eq!(plain.strategy.pipeline, None);

    value["pipeline"] =
        serde_json::json!({"stages": [[0], [1]], "micro_batches": 5, "schedule": "gpipe"});
    let e = parse_strategy(&value.to_string(), "<file>", &g, 2).unwrap_err();
    assert_eq!(e.field, "pipeline.micro_batches", "{e}");
    value["pipeline"] =
        serde_json::json!({"stages": [[0]], "micro_batches": 4, "schedule": "gpipe"});
    let e = parse_strategy(&value.to_string(), "<file>", &g, 2).unwrap_err();
    assert!(e.message.contains("group 1 is in no stage"), "{e}");
}

/// A group without ops is refused in a file, naming it (it was taken); a strategy that has one (a
/// placer moved its last op away) is written without it, its pipeline stages renumbered, and
/// reads back.
#[test]
fn empty_groups_are_refused_in_files_and_left_out_of_them() {
    let (g, layer_of) = chain(4, 10.0, 20.0, 1e6);
    let s = pipelined(&g, &layer_of, 2, 4, Schedule::OneFOneB);
    let mut decisions = s.decisions().to_vec();
    decisions.insert(0, decisions[0].clone());
    let op_group: Vec<u32> = s.op_groups().iter().map(|&k| k + 1).collect();
    let mut with_empty =
        Strategy::new("<test>", op_group, decisions, BatchSplit::Even, g.len(), 2).unwrap();
    let stages = [vec![0, 1], vec![2]];
    with_empty.pipeline =
        Some(Pipeline::new("<test>", &stages, 4, Schedule::OneFOneB, 3, g.batch_size).unwrap());
    let text =
        serde_json::to_string(&StrategyFile::from_strategy(&with_empty, None, &g, "t")).unwrap();
    let back = parse_strategy(&text, "<file>", &g, 2).unwrap();
    assert_eq!(back.strategy, s);

    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    value["groups"][1]["ops"] = serde_json::json!([]);
    let e = parse_strategy(&value.to_string(), "s.json", &g, 2).unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.field.as_str()),
        ("s.json", "groups[1].ops"),
        "{e}"
    );
    assert!(e.message.contains("empty"), "{e}");
}

/// A chain with a weight per layer: parameter → forward, forward → backward weight gradient →
/// Adam update. Layer `l`'s parameter, weight gradient and update are in layer `l`.
fn chain_with_weights(layers: usize, weight_bytes: f64) -> (Graph, Vec<usize>) {
    let mut b = GraphBuilder::new();
    let mut layer_of = vec![0];
    let input = b.add_op(timed("input", Phase::Input, 0.0, 0.0));
    let mut prev = input;
    let mut forward = Vec::new();
    for l in 0..layers {
        let mut w = Op::new(0, format!("w{l}"), "Variable", Phase::Parameter);
        w.output_bytes = weight_bytes;
        w.resident_bytes = weight_bytes;
        w.params = (weight_bytes / 4.0) as u64;
        let w = b.add_op(w);
        let f = b.add_op(timed(&format!("f{l}"), Phase::Forward, 30.0, 1e5));
        b.add_edge(w, f, weight_bytes);
        b.add_edge(prev, f, 1e5);
        layer_of.extend([l, l]);
        forward.push((w, f));
        prev = f;
    }
    for l in (0..layers).rev() {
        let (w, f) = forward[l];
        let back = b.add_op(timed(&format!("b{l}"), Phase::Backward, 50.0, 1e5));
        b.add_edge(f, back, 1e5);
        if l + 1 < layers {
            b.add_edge(prev, back, 1e5);
        }
        let mut grad = timed(&format!("g{l}"), Phase::Backward, 40.0, weight_bytes);
        grad.split = Splittability::Sum;
        let grad = b.add_op(grad);
        b.add_edge(f, grad, 1e5);
        if prev != f {
            b.add_edge(prev, grad, 1e5);
        }
        let mut adam = Op::new(0, format!("adam{l}"), "ApplyAdam", Phase::Optimizer);
        adam.output_bytes = weight_bytes;
        adam.resident_bytes = 2.0 * weight_bytes;
        adam.batch_scaled = Some(false);
        let adam = b.add_op(adam);
        b.add_gradient(grad, adam, weight_bytes);
        b.add_edge(w, adam, weight_bytes);
        layer_of.extend([l, l, l]);
        prev = back;
    }
    (b.finish("<test>", "weights", BATCH).unwrap(), layer_of)
}

/// Two stages, each data-parallel over two GPUs: each weight gradient is accumulated over the
/// micro-batches and all-reduced once, after the last micro-batch's backward on its stage; the
/// trace names every copy by its micro-batch.
#[test]
fn a_data_parallel_stage_synchronises_each_gradient_once_after_the_last_micro_batch() {
    let (layers, m) = (4, 4);
    let (g, layer_of) = chain_with_weights(layers, 4e6);
    let c = cluster(4);
    let op_group: Vec<u32> = layer_of.iter().map(|&l| (l / 2) as u32).collect();
    let decisions = vec![
        GroupDecision {
            devices: vec![0, 1],
            option: ReplicationOption::AllReduce,
        },
        GroupDecision {
            devices: vec![2, 3],
            option: ReplicationOption::AllReduce,
        },
    ];
    let mut s = Strategy::new("<t>", op_group, decisions, BatchSplit::Even, g.len(), 4).unwrap();
    s.pipeline =
        Some(Pipeline::new("<t>", &[vec![0], vec![1]], m, Schedule::OneFOneB, 2, BATCH).unwrap());
    let cost = ideal();
    let problem = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let placement = topoplace::evaluate::Placement::plain(s, "test");
    let e = topoplace::evaluate::evaluate_every_replica(&problem, &placement).unwrap();
    let compiled = &e.compiled;
    let expanded = &compiled.pipeline.as_ref().unwrap().graph;
    let exec = &compiled.exec;
    let name = |t: u32| topoplace::evaluate::summary::task_name(&g, compiled, t);
    let allreduces: Vec<u32> = (0..exec.len() as u32)
        .filter(|&t| compiled.roles[t as usize] == TaskRole::AllReduce)
        .collect();
    // One AllReduce per weight gradient (on the two GPUs of its stage, as one collective).
    let mut reduced: Vec<String> = allreduces.iter().map(|&t| name(t)).collect();
    reduced.sort();
    reduced.dedup();
    assert_eq!(reduced.len(), layers, "{reduced:?}");
    for &t in &allreduces {
        let op = compiled.op_of_label(exec.label(t));
        let grad_name = &g.op(op).name;
        assert!(grad_name.starts_with('g'), "{grad_name}");
        // After every micro-batch copy of the gradient, on every replica.
        for (i, x) in expanded.ops().iter().enumerate() {
            if x.name.starts_with(&format!("{grad_name}#mb")) {
                for r in compiled.tasks_of_op(i) {
                    assert!(e.result.end[r as usize] <= e.result.start[t as usize] + 1e-9);
                }
            }
        }
    }
    let names: Vec<String> = (0..exec.len() as u32).map(name).collect();
    for k in 0..m {
        assert!(names.iter().any(|n| n == &format!("f0#mb{k}")), "{names:?}");
    }
}

/// `pipeline-dp` on a uniform chain over two single-GPU machines: the dynamic programme cuts it in
/// the middle, picks the most micro-batches that divide the batch (the bubble shrinks with them;
/// profiled times carry no launch overhead here), and its simulated time is the closed form.
#[test]
fn pipeline_dp_balances_a_uniform_chain_and_meets_the_closed_form() {
    let c = two_machines(1, "100 Gbps");
    let (layers, tf, tb) = (8, 30.0, 50.0);
    let (g, layer_of) = chain(layers, tf, tb, 0.0);
    let placement = pipeline_dp(&g, &c, &ideal());
    let s = &placement.strategy;
    let pipeline = s.pipeline.as_ref().expect("a pipeline");
    assert_eq!(pipeline.stages(), 2);
    let m = pipeline.micro_batches;
    assert_eq!(m, 24, "the most micro-batches dividing {BATCH} up to 32");
    // Layers 0-3 on one stage, 4-7 on the other.
    for (op, &l) in layer_of.iter().enumerate().skip(1) {
        let stage = pipeline.stage_of(s.group_of(op));
        let first = pipeline.stage_of(s.group_of(1));
        assert_eq!(stage == first, l < layers / 2, "op {op} of layer {l}");
    }
    let e = run(&g, &c, s);
    let stage_us = (layers / 2) as f64 * (tf + tb) / f64::from(m);
    let want = f64::from(m + 1) * stage_us;
    assert!(
        close(e.report.iteration_us, want),
        "{} vs {want}",
        e.report.iteration_us
    );
}

/// `simulate --strategy` runs a pipeline strategy file as the library does, and its Chrome trace
/// shows every stage's micro-batches (`f0#mb3`, `b3#mb0`).
#[test]
fn simulate_runs_a_pipeline_file_and_traces_each_micro_batch() {
    let dir = common::scratch("pipeline-cli");
    let (g, layer_of) = chain(4, 10.0, 20.0, 1e6);
    topoplace::graph::save_graph(&g, &dir.join("g.json")).unwrap();
    std::fs::write(dir.join("c.toml"), cluster_toml(2)).unwrap();
    let s = pipelined(&g, &layer_of, 2, 4, Schedule::GPipe);
    topoplace::strategy::save_strategy(&s, None, &g, "t", &dir.join("s.json")).unwrap();
    let out = common::binary()
        .arg("simulate")
        .arg("--model")
        .arg(dir.join("g.json"))
        .arg("--cluster")
        .arg(dir.join("c.toml"))
        .arg("--strategy")
        .arg(dir.join("s.json"))
        .arg("--trace")
        .arg(dir.join("t.json"))
        .arg("--json")
        .output()
        .unwrap();
    let report: serde_json::Value = common::json_of(out);
    let (c, cost) = (cluster(2), CostModel::default());
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let want = evaluate_strategy(&p, &s, Order::Fifo)
        .unwrap()
        .report
        .iteration_us;
    let got = report["iteration_us"].as_f64().unwrap();
    assert!((got - want).abs() <= 1e-6 * want, "{got} vs {want}");
    let trace = std::fs::read_to_string(dir.join("t.json")).unwrap();
    for name in ["f0#mb0", "f0#mb3", "b3#mb0", "b0#mb3"] {
        assert!(trace.contains(name), "{name} missing from the trace");
    }
}

/// A chain whose first and last layers share one weight (as a language model ties its embedding
/// and output layer): each use contributes a gradient, summed once per iteration for one update.
fn tied_chain(layers: usize, tied_bytes: f64) -> Graph {
    let (act, tf, tb) = (1e5, 3000.0, 5000.0);
    let mut b = GraphBuilder::new();
    let mut w = Op::new(0, "tied", "Variable", Phase::Parameter);
    w.output_bytes = tied_bytes;
    w.resident_bytes = tied_bytes;
    w.params = (tied_bytes / 4.0) as u64;
    let w = b.add_op(w);
    let mut prev = b.add_op(timed("input", Phase::Input, 0.0, act));
    let mut forward = Vec::new();
    for l in 0..layers {
        let f = b.add_op(timed(&format!("f{l}"), Phase::Forward, tf, act));
        b.add_edge(prev, f, act);
        if l == 0 || l + 1 == layers {
            b.add_edge(w, f, tied_bytes);
        }
        forward.push(f);
        prev = f;
    }
    let mut parts = Vec::new();
    for l in (0..layers).rev() {
        let back = b.add_op(timed(&format!("b{l}"), Phase::Backward, tb, act));
        b.add_edge(forward[l], back, act);
        if prev != forward[l] {
            b.add_edge(prev, back, act);
        }
        if l == 0 || l + 1 == layers {
            let mut part = timed(&format!("gtied{l}"), Phase::Backward, tb, tied_bytes);
            part.split = Splittability::Sum;
            let part = b.add_op(part);
            b.add_edge(forward[l], part, act);
            if prev != forward[l] {
                b.add_edge(prev, part, act);
            }
            parts.push(part);
        }
        prev = back;
    }
    let mut sum = timed("gtied", Phase::Backward, 10.0, tied_bytes);
    sum.split = Splittability::Sum;
    sum.batch_scaled = Some(false);
    let sum = b.add_op(sum);
    for part in parts {
        b.add_edge(part, sum, tied_bytes);
    }
    let mut adam = Op::new(0, "adam", "ApplyAdam", Phase::Optimizer);
    adam.output_bytes = tied_bytes;
    adam.resident_bytes = 2.0 * tied_bytes;
    adam.batch_scaled = Some(false);
    let adam = b.add_op(adam);
    b.add_gradient(sum, adam, tied_bytes);
    b.add_edge(w, adam, tied_bytes);
    b.finish("<test>", "tied", BATCH).unwrap()
}

/// Two machines of `gpus` GPUs joined at 1 Gbps, a 12-layer chain whose ends share a 400 MB
/// weight, and the default cost model.
fn tied_over_slow_link(gpus: usize) -> (Cluster, Graph, CostModel) {
    (
        two_machines(gpus, "1 Gbps"),
        tied_chain(12, 400e6),
        CostModel::default(),
    )
}

/// `pipeline-dp` on a model whose ends share a weight, over two machines joined by a slow link
/// (its layers' compute worth pipelining over it, 96 ms against 0.8 ms per micro-batch sent):
/// it wraps the pipeline round one machine (first and last stage there, the middle on the
/// other), so the tied weight and its gradient never cross the slow link; only activations do.
#[test]
fn pipeline_dp_keeps_a_tied_weight_inside_one_machine() {
    let (c, g, cost) = tied_over_slow_link(2);
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let placement = pipeline_dp(&g, &c, &cost);
    let s = &placement.strategy;
    let pipeline = s.pipeline.as_ref().expect("a pipeline");
    let stages = pipeline.stage_groups();
    let machine_of = |stage: &[usize]| {
        let devices = &s.decision(stage[0]).devices;
        c.devices[devices[0]].group
    };
    let (first, last) = (&stages[0], &stages[stages.len() - 1]);
    assert!(stages.len() >= 3, "{}", placement.note);
    assert_eq!(machine_of(first), machine_of(last), "{}", placement.note);
    assert!(
        stages[1..stages.len() - 1]
            .iter()
            .all(|st| machine_of(st) != machine_of(first)),
        "{}",
        placement.note
    );
    // The 400 MB weight over 1 Gbps alone would take 3.2 s each way; the wrapped pipeline takes
    // a small fraction of one crossing.
    let e = evaluate_strategy(&p, s, Order::Fifo).unwrap();
    assert!(
        e.report.iteration_us < 0.5 * 3.2e6,
        "{}",
        e.report.iteration_us
    );
}

/// A wrapped pipeline has a folded twin (its first and last stages both on the whole machine
/// instead of a half each), and `pipeline-dp` simulates both: on the tied chain its result is no
/// slower than the other variant of the same cut, built here by hand.
#[test]
fn pipeline_dp_weighs_the_wrapped_pipeline_against_its_folded_twin() {
    let (c, g, cost) = tied_over_slow_link(4);
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let chosen = pipeline_dp(&g, &c, &cost).strategy;
    let stages = chosen.pipeline.as_ref().expect("a pipeline").stage_groups();
    let (first, last) = (stages[0][0], stages[stages.len() - 1][0]);
    let ends = |s: &Strategy| {
        (
            s.decision(first).devices.clone(),
            s.decision(last).devices.clone(),
        )
    };
    let (a, b) = ends(&chosen);
    let folded = a == b;
    let machine = c.groups[c.devices[a[0]].group].devices.clone();
    let mut decisions = chosen.decisions().to_vec();
    if folded {
        let half = machine.len() / 2;
        decisions[first].devices = machine[..half].to_vec();
        decisions[last].devices = machine[half..].to_vec();
    } else {
        assert!(
            a.iter().all(|d| !b.contains(d)),
            "wrapped halves are disjoint"
        );
        decisions[first].devices = machine.clone();
        decisions[last].devices = machine.clone();
    }
    let mut other = Strategy::new(
        "<test>",
        chosen.op_groups().to_vec(),
        decisions,
        chosen.batch_split,
        g.len(),
        c.num_devices(),
    )
    .unwrap();
    other.allreduce = chosen.allreduce;
    other.pipeline = chosen.pipeline.clone();
    assert_eq!(ends(&other).0 == ends(&other).1, !folded);
    let time = |s: &Strategy| evaluate_strategy(&p, s, Order::Fifo).unwrap();
    let (t, u) = (time(&chosen), time(&other));
    assert!(t.result.oom.is_empty());
    assert!(
        t.report.iteration_us <= u.report.iteration_us * (1.0 + 1e-12) || !u.result.oom.is_empty(),
        "chosen {} (folded: {folded}) vs its twin {}",
        t.report.iteration_us,
        u.report.iteration_us
    );
}

/// `pipeline-dp` keeps the fastest way to pack its stages' gradients: its plan under each of
/// the packings data parallelism tries is no faster than the one returned, and the note says
/// which it is.
#[test]
fn pipeline_dp_keeps_the_fastest_gradient_packing() {
    // Many small gradients: each AllReduce's fixed cost (the default communication model's)
    // makes one per gradient slower than one per stage.
    let (g, _) = chain_with_weights(24, 1e4);
    let c = two_machines(2, "10 Gbps");
    let cost = CostModel::default();
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let chosen = pipeline_dp(&g, &c, &cost);
    assert!(chosen.strategy.pipeline.is_some(), "{}", chosen.note);
    let time = |s: &Strategy| {
        evaluate_strategy(&p, s, Order::Fifo)
            .unwrap()
            .report
            .iteration_us
    };
    let kept = time(&chosen.strategy);
    let words = [
        (AllReducePacking::PerTensor, "one AllReduce per gradient"),
        (AllReducePacking::Packed, "gradients in one AllReduce"),
        (
            AllReducePacking::Buckets(HOROVOD_FUSION_BYTES),
            "MiB buckets",
        ),
    ];
    let mut faster_than_some = false;
    for (k, said) in words {
        let mut other = chosen.strategy.clone();
        other.allreduce = k;
        let t = time(&other);
        assert!(
            kept <= t * (1.0 + 1e-12),
            "{k:?}: {t} beats the kept {kept}"
        );
        faster_than_some |= kept < t * (1.0 - 1e-9);
        if k == chosen.strategy.allreduce {
            assert!(chosen.note.ends_with(said), "{}", chosen.note);
        }
    }
    assert!(faster_than_some, "the packings differ on this chain");
    assert_ne!(
        chosen.strategy.allreduce,
        AllReducePacking::PerTensor,
        "the plans are made per tensor; here another packing is faster"
    );
}

/// The planner's worked example (docs/baselines.md): BERT-large at batch 32 on TAG's cloud, where
/// the estimates simulated its best plan only under 1F1B. The plan returned is a pipeline over
/// more than one machine, and its stages run no faster under the other schedule with the same cut.
#[test]
fn pipeline_dp_weighs_its_plan_under_the_other_schedule() {
    let path = format!("{}/configs/tag-cloud.toml", env!("CARGO_MANIFEST_DIR"));
    let c = topoplace::cluster::load_cluster(&path).unwrap();
    let opts = topoplace::zoo::ZooOptions {
        batch_size: Some(32),
        ..Default::default()
    };
    let g = topoplace::zoo::build("bert-large", &opts).unwrap();
    let cost = CostModel::default();
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let chosen = pipeline_dp(&g, &c, &cost).strategy;
    let pipeline = chosen.pipeline.clone().expect("a pipeline");
    let machines: std::collections::BTreeSet<usize> = chosen
        .decisions()
        .iter()
        .flat_map(|d| d.devices.iter().map(|&x| c.devices[x].machine))
        .collect();
    assert!(machines.len() > 1, "{machines:?}");
    let schedule = Schedule::ALL
        .into_iter()
        .find(|&s| s != pipeline.schedule)
        .unwrap();
    let mut other = chosen.clone();
    let mut flipped = pipeline;
    flipped.schedule = schedule;
    other.pipeline = Some(flipped);
    let time = |s: &Strategy| {
        evaluate_strategy(&p, s, Order::Fifo)
            .unwrap()
            .report
            .iteration_us
    };
    let (kept, flipped) = (time(&chosen), time(&other));
    assert!(
        kept <= flipped,
        "{schedule:?} {flipped} beats the kept {kept}"
    );
}
