//! A hybrid plan's training iteration, simulated at layer granularity: each stage's forward and
//! backward per micro-batch from its ops' times on its GPUs (a tensor-parallel group waits for its
//! slowest GPU, a stage for its slowest replica), the tensor-parallel collectives exposed on the
//! critical path as Megatron runs them, ZeRO-3's gathers overlapped with the layers' compute, the
//! pipeline's timeline under its schedule ([`super::schedule`]), then each stage's gradient
//! synchronisation (overlapped with the last backward but for one layer's share), optimizer step
//! and ZeRO-1/2 parameter all-gather. Memory per GPU is the ZeRO paper's model states
//! ([`super::memory`]), the activations of the micro-batches the schedule keeps in flight, the
//! working memory of one layer's backward, and the framework's runtime (CUDA context and
//! allocator reserve).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::autocast::half_parameters;
use crate::cluster::{Cluster, GpuSpec};
use crate::cost::CostModel;
use crate::error::InputError;
use crate::graph::Graph;
use crate::precision::Precision;
use crate::zoo::{self, ZooOptions};

use super::comm::Ring;
use super::memory::{ModelStates, StateBytes, model_states};
use super::plan::{HybridPlan, Recompute, Stage, ZeroStage};
use super::profile::{ModelProfile, PartProfile, Shard};
use super::schedule::{StageTimes, backward_ends};

/// A decoder language model ready for hybrid plans: its training graph at one micro-batch, what
/// its parts cost, and its shape.
#[derive(Debug, Clone)]
pub struct HybridModel {
    pub(super) graph: Graph,
    pub(super) profile: ModelProfile,
    pub(super) states: StateBytes,
    heads: usize,
    kv_heads: usize,
    seq: usize,
    /// The MLP's hidden width, which tensor parallelism splits too (0: not known, not checked).
    mlp_width: usize,
}

impl HybridModel {
    /// `graph` (the model at one micro-batch of `seq`-token sequences, as it trains in
    /// `precision`) with `heads` attention heads and `kv_heads` key/value heads.
    pub fn new(
        graph: Graph,
        precision: Precision,
        [heads, kv_heads, seq]: [usize; 3],
        source: &str,
    ) -> Result<HybridModel, InputError> {
        let profile = ModelProfile::of(&graph, source)?;
        let states = StateBytes::of(&graph, precision);
        Ok(HybridModel {
            graph,
            profile,
            states,
            heads,
            kv_heads,
            mlp_width: 0,
            seq,
        })
    }

    /// Tokens per sequence.
    pub fn seq(&self) -> usize {
        self.seq
    }

    /// The zoo's `name` (a GPT or Llama size) at `micro_batch` sequences, built as `opts` says
    /// and with 16-bit parameters in a mixed `precision` (Megatron's, DeepSpeed's and FSDP's
    /// mixed precision, not autocast's).
    pub fn from_zoo(
        name: &str,
        micro_batch: u32,
        opts: &ZooOptions,
        precision: Precision,
    ) -> crate::error::Result<HybridModel> {
        let lm = zoo::language_model(name)?.ok_or_else(|| {
            InputError::new(
                "<cli>",
                "--model",
                format!("\"{name}\" is not a zoo language model (a gpt* or llama* size, or a model-spec .toml file)"),
            )
        })?;
        let opts = ZooOptions {
            batch_size: Some(micro_batch),
            ..opts.clone()
        };
        let graph = half_parameters(&zoo::build(name, &opts)?, precision, name)?;
        let (heads, kv_heads, seq) = lm.shape();
        let seq = opts.seq.unwrap_or(seq);
        let mut model = HybridModel::new(graph, precision, [heads, kv_heads, seq], name)?;
        model.mlp_width = lm.mlp_width();
        Ok(model)
    }

    /// Whether a tensor-parallel degree of `tp` splits the model evenly: the query and key/value
    /// heads, and the MLP's hidden width where it is known (Megatron requires all three).
    pub(crate) fn tp_splits_evenly(&self, tp: usize) -> bool {
        self.heads.is_multiple_of(tp)
            && self.kv_heads.is_multiple_of(tp)
            && (self.mlp_width == 0 || self.mlp_width.is_multiple_of(tp))
    }

    /// One layer's forward and backward on `gpu`, the whole micro-batch, no tensor parallelism.
    pub(crate) fn layer_us(&self, gpu: &GpuSpec, cost: &CostModel) -> f64 {
        let shard = Shard {
            share: 1.0,
            tp: 1,
            sequence_parallel: false,
        };
        let l = &self.profile.layer;
        l.forward_us(&self.graph, cost, gpu, shard) + l.backward_us(&self.graph, cost, gpu, shard)
    }

    /// Parameters of the whole model.
    pub(crate) fn params(&self) -> f64 {
        self.graph.ops().iter().map(|o| o.params as f64).sum()
    }

    /// Bytes of the weights, gradients and optimizer state of the whole model: what no layout
    /// can shrink, only spread (ZeRO-3 over every GPU at best).
    pub(crate) fn state_bytes(&self) -> f64 {
        let s = &self.states;
        self.params() * (s.weights + s.grads + s.optimizer)
    }

    /// Transformer layers.
    pub fn layers(&self) -> usize {
        self.profile.layers
    }

    /// The micro-batch the model's graph is built at.
    pub fn micro_batch(&self) -> u32 {
        self.graph.batch_size
    }

    /// Checks `plan` against the model and a cluster of `devices` devices.
    pub fn check(&self, plan: &HybridPlan, devices: usize, source: &str) -> Result<(), InputError> {
        plan.validate(
            source,
            self.layers(),
            [self.heads, self.kv_heads, self.mlp_width],
            devices,
        )?;
        if plan.micro_batch() != f64::from(self.micro_batch()) {
            return Err(InputError::new(
                source,
                "micro_batches",
                format!(
                    "give micro-batches of {} sequences; the model was built at {}",
                    plan.micro_batch(),
                    self.micro_batch()
                ),
            ));
        }
        Ok(())
    }
}

/// One GPU's memory under a plan, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DeviceMemory {
    /// The device's index in the cluster.
    pub device: usize,
    /// Weights, gradients and optimizer state it keeps.
    pub states: ModelStates,
    /// Activations of the micro-batches in flight.
    pub activations: f64,
    /// Backward's working memory, ZeRO-3's gathered layers and recomputed activations.
    pub working: f64,
    /// What the device needs: the tensors plus the runtime's context and allocator reserve.
    pub total: f64,
    /// The device's memory.
    pub capacity: f64,
}

impl DeviceMemory {
    /// Whether what it needs fits its memory.
    pub fn fits(&self) -> bool {
        self.total <= self.capacity
    }

    /// The largest term: "weights", "gradients", "optimizer", "activations" or "working".
    pub fn dominant(&self) -> &'static str {
        let terms = [
            ("weights", self.states.weights),
            ("gradients", self.states.grads),
            ("optimizer", self.states.optimizer),
            ("activations", self.activations),
            ("working", self.working),
        ];
        terms
            .iter()
            .fold(("weights", f64::MIN), |a, &b| if b.1 > a.1 { b } else { a })
            .0
    }
}

/// One stage of a simulated plan, µs (per micro-batch where so named).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageReport {
    /// Forward of one micro-batch, compute and exposed communication.
    pub forward_us: f64,
    /// Backward of one micro-batch, recomputation and exposed communication included.
    pub backward_us: f64,
    /// Of forward and backward, the tensor-parallel collectives.
    pub tp_comm_us: f64,
    /// The gradient synchronisation's exposed part, after the last backward.
    pub dp_sync_us: f64,
    /// Optimizer step (and ZeRO-1/2's parameter all-gather).
    pub optimizer_us: f64,
    /// When the stage is done, from the iteration's start.
    pub end_us: f64,
    /// Each GPU of the stage.
    pub memory: Vec<DeviceMemory>,
}

/// A simulated hybrid plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HybridReport {
    /// One training iteration, µs.
    pub iteration_us: f64,
    /// Each stage, first to last.
    pub stages: Vec<StageReport>,
}

impl HybridReport {
    /// Whether every GPU's memory fits.
    pub fn fits(&self) -> bool {
        self.memory().all(DeviceMemory::fits)
    }

    /// Every GPU's memory.
    pub fn memory(&self) -> impl Iterator<Item = &DeviceMemory> {
        self.stages.iter().flat_map(|s| s.memory.iter())
    }

    /// The GPU with the least room to spare (most over its capacity when it does not fit).
    pub fn tightest(&self) -> Option<&DeviceMemory> {
        self.memory()
            .max_by(|a, b| (a.total / a.capacity).total_cmp(&(b.total / b.capacity)))
    }
}

/// What the stage's parts cost one replica on one GPU type, per micro-batch, µs.
struct Compute {
    forward: f64,
    backward: f64,
    optimizer: f64,
}

struct StageContext<'a> {
    model: &'a HybridModel,
    cluster: &'a Cluster,
    cost: &'a CostModel,
    stage: &'a Stage,
    first: bool,
    last: bool,
    pipeline_stages: usize,
    /// The plan's `tp_comm_overlap`.
    tp_overlap: bool,
}

impl StageContext<'_> {
    fn parts(&self) -> impl Iterator<Item = (&PartProfile, f64)> {
        let p = &self.model.profile;
        [
            (&p.embedding, if self.first { 1.0 } else { 0.0 }),
            (&p.layer, self.stage.layer_count() as f64),
            (&p.head, if self.last { 1.0 } else { 0.0 }),
        ]
        .into_iter()
        .filter(|&(_, n)| n > 0.0)
    }

    fn compute(&self, gpu: &GpuSpec, shard: Shard) -> Compute {
        let g = &self.model.graph;
        let cost = self.cost;
        let shards = if self.stage.zero.level() >= 1 {
            self.stage.dp()
        } else {
            1
        };
        let mut c = Compute {
            forward: 0.0,
            backward: 0.0,
            optimizer: 0.0,
        };
        for (part, n) in self.parts() {
            c.forward += n * part.forward_us(g, cost, gpu, shard);
            c.backward += n * part.backward_us(g, cost, gpu, shard);
            c.optimizer += n * part.optimizer_us(g, cost, gpu, shard.tp, 1.0 / shards as f64);
        }
        let layers = self.stage.layer_count() as f64;
        let layer = &self.model.profile.layer;
        c.backward += layers * layer.recompute_us(self.stage.recompute, g, cost, gpu, shard);
        c
    }

    /// Parameters one tensor-parallel rank of the stage holds.
    fn params_per_rank(&self) -> f64 {
        let t = self.stage.tp();
        let p = &self.model.profile;
        let mut psi: f64 = self
            .parts()
            .map(|(part, n)| n * part.params_per_rank(t))
            .sum();
        // A tied LM head reads the embedding table: the last stage keeps a copy of it.
        let tied = p.head.params_split == 0.0;
        if self.last && !self.first && tied {
            psi += p.embedding.params_split / t as f64;
        }
        psi
    }

    /// A replica's forward, backward, tensor-parallel communication and optimizer step per
    /// micro-batch, µs; `zero3` is the stage's per-layer gather and scatter under ZeRO-3.
    fn replica_times(
        &self,
        replica: &[usize],
        share: f64,
        zero3: (f64, f64),
    ) -> (f64, f64, f64, f64) {
        let s = self.stage;
        let shard = Shard {
            share,
            tp: s.tp(),
            sequence_parallel: s.sequence_parallel,
        };
        let mut by_type: BTreeMap<&str, Compute> = BTreeMap::new();
        for &d in replica {
            let gpu = &self.cluster.devices[d].gpu;
            by_type
                .entry(gpu.name)
                .or_insert_with(|| self.compute(gpu, shard));
        }
        let slowest = |f: fn(&Compute) -> f64| by_type.values().map(f).fold(0.0, f64::max);
        let (mut fwd, mut bwd) = (slowest(|c| c.forward), slowest(|c| c.backward));
        let optimizer = slowest(|c| c.optimizer);
        // Tensor parallelism: two collectives of the layer's activation per layer and pass,
        // and one for the vocabulary-parallel embedding (forward) and loss (backward).
        let ring = Ring::over(self.cluster, replica, 1);
        let act = self.model.profile.layer.input_bytes * share;
        let per_pass = if s.sequence_parallel {
            4.0 * ring.half_us(self.cost, act)
        } else {
            2.0 * ring.allreduce_us(self.cost, act)
        };
        let layers = s.layer_count() as f64;
        let ends = if ring.size > 1 {
            ring.allreduce_us(self.cost, act)
                * (f64::from(u8::from(self.first)) + f64::from(u8::from(self.last)))
        } else {
            0.0
        };
        // Under `tp_comm_overlap` a pass's collectives hide under the layer's compute of that
        // pass but for one chunk of t (the pipelined GEMM's first or last).
        let exposed = |compute: f64| {
            if self.tp_overlap {
                (per_pass - compute / layers).max(per_pass / s.tp() as f64)
            } else {
                per_pass
            }
        };
        let (fwd_tp, bwd_tp) = (layers * exposed(fwd), layers * exposed(bwd));
        let recompute_tp = if s.recompute == Recompute::Full {
            fwd_tp
        } else {
            0.0
        };
        let head_end = if self.first { ends / 2.0 } else { 0.0 };
        let tp = fwd_tp + bwd_tp + recompute_tp + ends;
        fwd += fwd_tp + head_end;
        bwd += bwd_tp + recompute_tp + ends - head_end;
        if s.zero == ZeroStage::Parameters {
            let (gather, scatter) = zero3;
            fwd = fwd.max(layers * gather) + gather;
            bwd = bwd.max(layers * (gather + scatter)) + scatter;
        }
        (fwd, bwd, tp, optimizer)
    }

    /// The data-parallel ring of tensor-parallel rank `rank` of the stage.
    fn dp_ring(&self, rank: usize) -> Ring {
        let devices: Vec<usize> = self.stage.replicas.iter().map(|r| r[rank]).collect();
        Ring::over(self.cluster, &devices, self.stage.tp())
    }

    /// ZeRO-3: one layer's parameter all-gather and gradient reduce-scatter, µs (the slowest
    /// rank's ring).
    fn zero3_layer_us(&self) -> (f64, f64) {
        let psi = self.model.profile.layer.params_per_rank(self.stage.tp());
        let b = self.model.states;
        (0..self.stage.tp())
            .map(|k| {
                let ring = self.dp_ring(k);
                (
                    ring.half_us(self.cost, b.weights * psi),
                    ring.half_us(self.cost, b.grads * psi),
                )
            })
            .fold((0.0, 0.0), |a, b| (a.0.max(b.0), a.1.max(b.1)))
    }

    /// The gradient synchronisation after the last backward: (the part that can overlap the
    /// last backward, the part after the optimizer step), µs.
    fn dp_sync_us(&self) -> (f64, f64) {
        let psi = self.params_per_rank();
        let b = self.model.states;
        (0..self.stage.tp())
            .map(|k| {
                let ring = self.dp_ring(k);
                match self.stage.zero {
                    ZeroStage::None => (ring.allreduce_us(self.cost, b.grads * psi), 0.0),
                    ZeroStage::Optimizer | ZeroStage::Gradients => (
                        ring.half_us(self.cost, b.grads * psi),
                        ring.half_us(self.cost, b.weights * psi),
                    ),
                    // Reduce-scattered layer by layer inside every backward.
                    ZeroStage::Parameters => (0.0, 0.0),
                }
            })
            .fold((0.0, 0.0), |a, b| (a.0.max(b.0), a.1.max(b.1)))
    }

    fn memory(
        &self,
        micro_batches: u32,
        schedule: crate::strategy::Schedule,
        stage_index: usize,
    ) -> Vec<DeviceMemory> {
        let s = self.stage;
        let t = s.tp();
        let p = &self.model.profile;
        let states = model_states(self.params_per_rank(), s.dp(), s.zero, self.model.states);
        let in_flight =
            f64::from(schedule.in_flight(stage_index, self.pipeline_stages, micro_batches));
        let mut out = Vec::new();
        for (replica, share) in s.replicas.iter().zip(s.replica_shares()) {
            let shard = Shard {
                share,
                tp: t,
                sequence_parallel: s.sequence_parallel,
            };
            let layers = s.layer_count() as f64;
            let mut kept = layers * p.layer.kept_bytes(shard, s.recompute);
            let mut largest = p.layer.largest_backward_output;
            if self.first {
                kept += p.embedding.kept_bytes(shard, Recompute::None);
            }
            if self.last {
                kept += p.head.kept_bytes(shard, Recompute::None);
                largest = largest.max(p.head.largest_backward_output);
            }
            let mut working = 2.0 * largest * share / t as f64;
            if s.recompute != Recompute::None {
                working += p.layer.kept_bytes(shard, Recompute::None);
            }
            if s.zero == ZeroStage::Parameters {
                let layer = p.layer.params_per_rank(t);
                working += (2.0 * self.model.states.weights + self.model.states.grads) * layer;
            }
            let activations = in_flight * kept;
            let allocated = states.total() + activations + working;
            for &d in replica {
                out.push(DeviceMemory {
                    device: d,
                    states,
                    activations,
                    working,
                    total: self.cost.runtime.device_bytes(allocated),
                    capacity: self.cluster.devices[d].memory_bytes,
                });
            }
        }
        out
    }
}

/// What decides a replica's times besides its stage: its share, its GPU types in order, how
/// many machine boundaries it spans and its first link's rate. Built without allocating, since
/// the planners estimate plans of hundreds of replicas thousands of times.
struct ReplicaKey<'a> {
    cluster: &'a Cluster,
    replica: &'a [usize],
    share: u64,
    machines: usize,
    link: u64,
}

impl<'a> ReplicaKey<'a> {
    fn of(cluster: &'a Cluster, replica: &'a [usize], share: f64) -> ReplicaKey<'a> {
        let machine = |d: usize| cluster.devices[d].machine;
        let machines = 1 + replica
            .windows(2)
            .filter(|w| machine(w[0]) != machine(w[1]))
            .count();
        let link = match replica {
            [a, b, ..] => cluster.bandwidth(*a, *b),
            _ => 0.0,
        };
        ReplicaKey {
            cluster,
            replica,
            share: share.to_bits(),
            machines,
            link: link.to_bits(),
        }
    }
}

impl PartialEq for ReplicaKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        let gpu = |d: &usize| self.cluster.devices[*d].gpu.name;
        (self.share, self.machines, self.link) == (other.share, other.machines, other.link)
            && self
                .replica
                .iter()
                .map(gpu)
                .eq(other.replica.iter().map(gpu))
    }
}

/// Simulates one training iteration of `plan` for `model` on `cluster`.
pub fn estimate(
    model: &HybridModel,
    cluster: &Cluster,
    cost: &CostModel,
    plan: &HybridPlan,
) -> HybridReport {
    let p = plan.stages.len();
    let contexts: Vec<StageContext> = plan
        .stages
        .iter()
        .enumerate()
        .map(|(i, stage)| StageContext {
            model,
            cluster,
            cost,
            stage,
            first: i == 0,
            last: i + 1 == p,
            pipeline_stages: p,
            tp_overlap: plan.tp_comm_overlap,
        })
        .collect();
    let mut times = Vec::with_capacity(p);
    let mut partial = Vec::with_capacity(p);
    for (i, c) in contexts.iter().enumerate() {
        let (mut fwd, mut bwd, mut tp, mut opt) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
        let zero3 = if c.stage.zero == ZeroStage::Parameters {
            c.zero3_layer_us()
        } else {
            (0.0, 0.0)
        };
        // Replicas alike (share, GPU types, one machine or not, link rate) take alike times.
        let mut alike: Vec<(ReplicaKey, (f64, f64, f64, f64))> = Vec::new();
        for (replica, share) in c.stage.replicas.iter().zip(c.stage.replica_shares()) {
            let key = ReplicaKey::of(cluster, replica, share);
            let (f, b, t, o) = match alike.iter().find(|(k, _)| *k == key) {
                Some((_, times)) => *times,
                None => {
                    let times = c.replica_times(replica, share, zero3);
                    alike.push((key, times));
                    times
                }
            };
            (fwd, bwd, tp, opt) = (fwd.max(f), bwd.max(b), tp.max(t), opt.max(o));
        }
        let send_next = contexts.get(i + 1).map_or(0.0, |next| {
            let bytes = model.profile.layer.input_bytes / c.stage.dp() as f64;
            let (a, b) = (c.stage.replicas[0][0], next.stage.replicas[0][0]);
            cluster.transfer_us(a, b, bytes)
        });
        times.push(StageTimes {
            forward: fwd,
            backward: bwd,
            send_next,
        });
        partial.push((tp, opt));
    }
    let ends = backward_ends(plan.schedule, &times, plan.micro_batches as usize);
    let mut stages = Vec::with_capacity(p);
    for (i, c) in contexts.iter().enumerate() {
        let (reduce, gather) = c.dp_sync_us();
        let layers = c.stage.layer_count() as f64;
        let exposed = if plan.overlap_grad_reduce {
            (reduce - times[i].backward * (1.0 - 1.0 / layers)).max(reduce / layers)
        } else {
            reduce
        };
        let (tp, opt) = partial[i];
        let optimizer_us = opt + gather;
        stages.push(StageReport {
            forward_us: times[i].forward,
            backward_us: times[i].backward,
            tp_comm_us: tp,
            dp_sync_us: exposed,
            optimizer_us,
            end_us: ends[i] + exposed + optimizer_us,
            memory: c.memory(plan.micro_batches, plan.schedule, i),
        });
    }
    HybridReport {
        iteration_us: stages.iter().map(|s| s.end_us).fold(0.0, f64::max),
        stages,
    }
}
