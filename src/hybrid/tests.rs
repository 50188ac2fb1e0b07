//! The hybrid simulator against closed forms: Megatron's tensor-parallel collectives per layer,
//! full recomputation's extra forward, and the ZeRO paper's model states summed over a group.

use crate::autocast::half_parameters;
use crate::cluster::{Cluster, parse_cluster};
use crate::cost::{CommModel, CostModel, ring_allreduce_time_us, tree_allreduce_time_us};
use crate::precision::Precision;
use crate::zoo::{Framework, ZooOptions, build};

use super::comm::{Ring, tp_bytes_per_layer_pass};
use super::memory::StateBytes;
use super::profile::Shard;
use super::*;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs()
}

fn dgx() -> Cluster {
    parse_cluster(
        "name = \"dgx\"\n[[machine]]\nname = \"a\"\ngpu = \"A100-80GB\"\ngpus = 8\n\
         intra_bandwidth = \"300 GB/s\"\ninterconnect = \"nvswitch\"\nnic = \"200 Gbps\"\n",
        "<test>",
    )
    .unwrap()
}

fn llama_1b(batch: u32) -> HybridModel {
    let opts = ZooOptions {
        batch_size: Some(batch),
        framework: Framework::Pytorch,
        seq: Some(256),
        ..ZooOptions::default()
    };
    let g = half_parameters(&build("llama-1b", &opts).unwrap(), Precision::Bf16, "t").unwrap();
    HybridModel::new(g, Precision::Bf16, [32, 8, 256], "t").unwrap()
}

fn one_stage(layers: usize, replicas: Vec<Vec<usize>>, batch: u32) -> HybridPlan {
    HybridPlan::one_f_one_b(
        batch,
        1,
        vec![Stage {
            layers: [0, layers],
            replicas,
            shares: None,
            sequence_parallel: false,
            zero: ZeroStage::None,
            recompute: Recompute::None,
        }],
    )
}

fn ideal_cost() -> CostModel {
    CostModel {
        precision: Precision::Bf16,
        comm: CommModel::ideal(),
        ..CostModel::default()
    }
}

#[test]
fn tensor_parallel_time_is_two_allreduces_per_layer_and_pass() {
    let (cluster, cost, model) = (dgx(), ideal_cost(), llama_1b(4));
    for t in [2usize, 4, 8] {
        for sp in [false, true] {
            let mut plan = one_stage(model.layers(), vec![(0..t).collect()], 4);
            plan.stages[0].sequence_parallel = sp;
            let r = estimate(&model, &cluster, &cost, &plan);
            let ring = Ring::over(&cluster, &(0..t).collect::<Vec<_>>(), 1);
            let act = model.profile.layer.input_bytes;
            let (b, lat) = (ring.bandwidth, ring.latency_us);
            // NCCL's faster of ring and tree for each AllReduce of b·s·h; under sequence
            // parallelism ring reduce-scatters and all-gathers, (t−1)/t·S/B + (t−1)·latency.
            let allreduce =
                ring_allreduce_time_us(act, t, b, lat).min(tree_allreduce_time_us(act, t, b, lat));
            let steps = (t - 1) as f64;
            let per_pass = if sp {
                4.0 * (steps / t as f64 * act / b + steps * lat)
            } else {
                2.0 * allreduce
            };
            if allreduce == ring_allreduce_time_us(act, t, b, lat) {
                let volume = tp_bytes_per_layer_pass(act, t, sp) / b;
                let latency = 4.0 * steps * lat;
                assert!(close(per_pass, volume + latency));
            }
            // Plus one AllReduce each for the vocabulary-parallel embedding and loss.
            let ends = 2.0 * allreduce;
            let expect = 2.0 * model.layers() as f64 * per_pass + ends;
            assert!(
                close(r.stages[0].tp_comm_us, expect),
                "t={t} sp={sp}: {} vs {expect}",
                r.stages[0].tp_comm_us
            );
        }
    }
}

/// Megatron-Core's `--tp-comm-overlap`: each pass's sequence-parallel collectives hide under that
/// pass's layer compute but for one chunk of t, so a layer exposes max(comm − compute, comm / t);
/// the embedding's and loss's collectives stay exposed. A plan asking for it without sequence
/// parallelism is refused, as Megatron refuses it.
#[test]
fn overlapped_tensor_parallel_time_exposes_what_compute_cannot_hide() {
    let (cluster, cost, model) = (dgx(), ideal_cost(), llama_1b(4));
    for t in [2usize, 4, 8] {
        let mut plan = one_stage(model.layers(), vec![(0..t).collect()], 4);
        plan.stages[0].sequence_parallel = true;
        let plain = estimate(&model, &cluster, &cost, &plan);
        plan.tp_comm_overlap = true;
        let hidden = estimate(&model, &cluster, &cost, &plan);
        let ring = Ring::over(&cluster, &(0..t).collect::<Vec<_>>(), 1);
        let act = model.profile.layer.input_bytes;
        let (b, lat) = (ring.bandwidth, ring.latency_us);
        let steps = (t - 1) as f64;
        let per_pass = 4.0 * (steps / t as f64 * act / b + steps * lat);
        let ends = 2.0
            * ring_allreduce_time_us(act, t, b, lat).min(tree_allreduce_time_us(act, t, b, lat));
        let layers = model.layers() as f64;
        let (p, h) = (&plain.stages[0], &hidden.stages[0]);
        // The compute of each pass: the plain pass less its collectives.
        let fwd = p.forward_us - layers * per_pass - ends / 2.0;
        let bwd = p.backward_us - layers * per_pass - ends / 2.0;
        let exposed = |compute: f64| (per_pass - compute / layers).max(per_pass / t as f64);
        let expect = layers * (exposed(fwd) + exposed(bwd)) + ends;
        assert!(
            close(h.tp_comm_us, expect),
            "t={t}: {} vs {expect}",
            h.tp_comm_us
        );
        assert!(h.tp_comm_us < p.tp_comm_us);
        assert!(close(
            h.forward_us,
            fwd + layers * exposed(fwd) + ends / 2.0
        ));
    }
    let mut plan = one_stage(model.layers(), vec![vec![0, 1]], 4);
    plan.tp_comm_overlap = true;
    let e = model.check(&plan, 8, "p.json").unwrap_err().to_string();
    assert!(
        e.contains("tp_comm_overlap") && e.contains("sequence_parallel"),
        "{e}"
    );
}

#[test]
fn full_recomputation_adds_one_forward_of_every_layer() {
    let (cluster, cost, model) = (dgx(), ideal_cost(), llama_1b(2));
    let plain = one_stage(model.layers(), vec![vec![0]], 2);
    let mut full = plain.clone();
    full.stages[0].recompute = Recompute::Full;
    let (a, b) = (
        estimate(&model, &cluster, &cost, &plain),
        estimate(&model, &cluster, &cost, &full),
    );
    let shard = Shard {
        share: 1.0,
        tp: 1,
        sequence_parallel: false,
    };
    let gpu = &cluster.devices[0].gpu;
    let layer = model
        .profile
        .layer
        .forward_us(&model.graph, &cost, gpu, shard);
    let extra = b.stages[0].backward_us - a.stages[0].backward_us;
    assert!(close(extra, model.layers() as f64 * layer), "{extra}");
    assert_eq!(a.stages[0].forward_us, b.stages[0].forward_us);
    // Only each layer's input is kept.
    let kept = b.stages[0].memory[0].activations;
    assert!(kept < a.stages[0].memory[0].activations / 5.0);
}

#[test]
fn zero_states_summed_over_the_group_are_the_papers() {
    let (cluster, cost, model) = (dgx(), ideal_cost(), llama_1b(8));
    let params: f64 = model.graph.ops().iter().map(|o| o.params as f64).sum();
    assert_eq!(model.states, StateBytes::MIXED_ADAM);
    for (zero, total_per_param) in [
        (ZeroStage::None, 8.0 * 16.0),
        (ZeroStage::Optimizer, 8.0 * 4.0 + 12.0),
        (ZeroStage::Gradients, 8.0 * 2.0 + 14.0),
        (ZeroStage::Parameters, 16.0),
    ] {
        let mut plan = one_stage(model.layers(), (0..8).map(|d| vec![d]).collect(), 8);
        plan.stages[0].zero = zero;
        let r = estimate(&model, &cluster, &cost, &plan);
        let sum: f64 = r.memory().map(|m| m.states.total()).sum();
        assert!(close(sum, total_per_param * params), "{zero:?}: {sum}");
    }
}

#[test]
fn plans_that_do_not_cover_the_model_are_refused() {
    let model = llama_1b(2);
    let mut plan = one_stage(model.layers() - 1, vec![vec![0]], 2);
    let e = model.check(&plan, 8, "p.json").unwrap_err();
    assert!(e.to_string().contains("stages"), "{e}");
    plan = one_stage(model.layers(), vec![vec![0, 1, 2]], 2);
    let e = model.check(&plan, 8, "p.json").unwrap_err();
    assert!(e.to_string().contains("tensor-parallel degree 3"), "{e}");
    plan = one_stage(model.layers(), vec![vec![0], vec![0]], 2);
    let e = model.check(&plan, 8, "p.json").unwrap_err();
    assert!(e.to_string().contains("used twice"), "{e}");
    plan = one_stage(model.layers(), vec![vec![0]], 4);
    assert!(
        model.check(&plan, 8, "p.json").is_err(),
        "micro-batch 4 on a graph built at 2"
    );
}

/// A replica must train on at least one whole sequence: four replicas of a one-sequence
/// micro-batch, or a share of 0.1 of four sequences, are refused naming the field.
#[test]
fn a_replica_with_less_than_one_sequence_is_refused() {
    use super::planner::stage;
    let model = llama_1b(1);
    let four = HybridPlan::one_f_one_b(
        1,
        1,
        vec![stage(
            [0, model.layers()],
            &[0, 1, 2, 3],
            1,
            ZeroStage::None,
            None,
        )],
    );
    let e = model.check(&four, 8, "p.json").unwrap_err().to_string();
    assert!(
        e.contains("p.json") && e.contains("stages[0].replicas"),
        "{e}"
    );
    let model = llama_1b(4);
    let uneven = HybridPlan::one_f_one_b(
        4,
        1,
        vec![stage(
            [0, model.layers()],
            &[0, 1],
            1,
            ZeroStage::None,
            Some(vec![0.1, 0.9]),
        )],
    );
    let e = model.check(&uneven, 8, "p.json").unwrap_err().to_string();
    assert!(e.contains("stages[0].shares"), "{e}");
    let even = HybridPlan::one_f_one_b(
        4,
        1,
        vec![stage(
            [0, model.layers()],
            &[0, 1],
            1,
            ZeroStage::None,
            Some(vec![0.25, 0.75]),
        )],
    );
    assert!(model.check(&even, 8, "p.json").is_ok());
}

#[test]
fn a_zero_stage_reads_as_written_or_as_a_number() {
    for (text, stage) in [
        ("\"1\"", ZeroStage::Optimizer),
        ("3", ZeroStage::Parameters),
        ("0", ZeroStage::None),
    ] {
        assert_eq!(serde_json::from_str::<ZeroStage>(text).unwrap(), stage);
    }
    for bad in ["4", "-1", "\"x\"", "true", "1.5"] {
        let e = serde_json::from_str::<ZeroStage>(bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("a ZeRO stage: 0, 1, 2 or 3"), "{bad}: {e}");
    }
    // Written as before: the stage's number as a string.
    assert_eq!(
        serde_json::to_string(&ZeroStage::Gradients).unwrap(),
        "\"2\""
    );
}
