//! A hybrid-parallel plan as Megatron-LM, DeepSpeed and torchtitan run a decoder language model:
//! the layers cut into pipeline stages, each stage on its own GPUs as `dp` data-parallel replicas
//! of a `tp`-way tensor-parallel group, with a ZeRO stage, an activation-recomputation mode and
//! sequence parallelism chosen per stage. Its JSON form is what `simulate --plan` reads and
//! `place` writes for a hybrid plan.

use serde::{Deserialize, Serialize};

use crate::error::InputError;
use crate::strategy::Schedule;

/// What a data-parallel group shards across its replicas (Rajbhandari et al. SC'20, §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
pub enum ZeroStage {
    /// Plain data parallelism: every replica holds every model state; gradients all-reduced.
    #[default]
    #[serde(rename = "0")]
    None,
    /// ZeRO-1 (P_os): optimizer states sharded; gradients reduce-scattered, updated parameters
    /// all-gathered (Megatron's distributed optimizer).
    #[serde(rename = "1")]
    Optimizer,
    /// ZeRO-2 (P_os+g): gradients sharded as well.
    #[serde(rename = "2")]
    Gradients,
    /// ZeRO-3 (P_os+g+p), FSDP's full sharding: parameters sharded too, all-gathered before each
    /// layer's forward and again before its backward.
    #[serde(rename = "3")]
    Parameters,
}

impl ZeroStage {
    /// The stage's number, 0 to 3.
    pub fn level(self) -> u8 {
        match self {
            ZeroStage::None => 0,
            ZeroStage::Optimizer => 1,
            ZeroStage::Gradients => 2,
            ZeroStage::Parameters => 3,
        }
    }

    /// The stage of number `level`, 0 to 3.
    fn of_level(level: u64) -> Option<ZeroStage> {
        [
            ZeroStage::None,
            ZeroStage::Optimizer,
            ZeroStage::Gradients,
            ZeroStage::Parameters,
        ]
        .get(usize::try_from(level).ok()?)
        .copied()
    }
}

/// A plan file's `zero` as written (`"1"`) or as the number a hand-written file gives (`1`).
impl<'de> Deserialize<'de> for ZeroStage {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Level;
        impl serde::de::Visitor<'_> for Level {
            type Value = ZeroStage;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a ZeRO stage: 0, 1, 2 or 3")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ZeroStage, E> {
                ZeroStage::of_level(v)
                    .ok_or_else(|| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ZeroStage, E> {
                let level = u64::try_from(v)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))?;
                self.visit_u64(level)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ZeroStage, E> {
                v.trim()
                    .parse::<u64>()
                    .ok()
                    .and_then(ZeroStage::of_level)
                    .ok_or_else(|| E::invalid_value(serde::de::Unexpected::Str(v), &self))
            }
        }
        deserializer.deserialize_any(Level)
    }
}

/// What a stage recomputes in backward instead of keeping from forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Recompute {
    /// Every activation backward needs is kept.
    #[default]
    None,
    /// Selective (Korthikanti et al. 2022): the outputs of the matrix products and attention are
    /// kept, the cheap element-wise and normalisation ops between them are recomputed in
    /// backward.
    Selective,
    /// torchtitan's selective op recomputation (`--activation-checkpoint.mode selective`,
    /// `selective_ac_option = "op"`): as [`Recompute::Selective`], but every second weight
    /// matrix product of a layer (in forward order: Llama's `wk`, `wo`, `w3`) is recomputed
    /// too, its output not kept ("saves output of all compute ops, except every second mm").
    SelectiveOp,
    /// Full (Megatron's `--recompute-granularity full`, torchtitan's "full"): only each layer's
    /// input is kept; the whole layer's forward runs again before its backward.
    Full,
}

impl Recompute {
    /// The name plan files use (`none`, `selective`, `selective-op`, `full`).
    pub fn name(self) -> &'static str {
        match self {
            Recompute::None => "none",
            Recompute::Selective => "selective",
            Recompute::SelectiveOp => "selective-op",
            Recompute::Full => "full",
        }
    }
}

/// One pipeline stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    /// First and one-past-last transformer layer of the stage; the first stage also runs the
    /// embedding, the last the final norm, the LM head and the loss.
    pub layers: [usize; 2],
    /// The stage's data-parallel replicas, each the device indices of one tensor-parallel group
    /// (all of one length, the stage's TP degree; rank order as listed).
    pub replicas: Vec<Vec<usize>>,
    /// Share of each micro-batch each replica takes (sums to 1); even when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shares: Option<Vec<f64>>,
    /// Megatron's sequence parallelism: the norms, dropouts and residuals run on `1/tp` of the
    /// sequence, and each tensor-parallel AllReduce becomes a reduce-scatter plus an all-gather.
    #[serde(default)]
    pub sequence_parallel: bool,
    /// What the data-parallel replicas shard.
    #[serde(default)]
    pub zero: ZeroStage,
    /// What backward recomputes.
    #[serde(default)]
    pub recompute: Recompute,
}

impl Stage {
    /// The tensor-parallel degree.
    pub fn tp(&self) -> usize {
        self.replicas.first().map_or(0, Vec::len)
    }

    /// The data-parallel degree.
    pub fn dp(&self) -> usize {
        self.replicas.len()
    }

    /// Transformer layers of the stage.
    pub(crate) fn layer_count(&self) -> usize {
        self.layers[1] - self.layers[0]
    }

    /// Each replica's share of a micro-batch.
    pub(crate) fn replica_shares(&self) -> Vec<f64> {
        self.shares
            .clone()
            .unwrap_or_else(|| vec![1.0 / self.dp() as f64; self.dp()])
    }

    /// Every device of the stage.
    pub(crate) fn devices(&self) -> impl Iterator<Item = usize> + '_ {
        self.replicas.iter().flatten().copied()
    }
}

/// The most micro-batches a plan may run in one step. The pipeline schedule is simulated one
/// micro-batch at a time on every stage, so its time and memory grow with the count. Published
/// pipelines run tens to hundreds: Megatron-LM's trillion-parameter run splits its 3,072
/// sequences over 6 pipelines, 512 micro-batches of one sequence each.
pub const MAX_MICRO_BATCHES: u32 = 65_536;

/// A hybrid-parallel plan of one training iteration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HybridPlan {
    /// The model the plan was made for (`place --out` writes it; `simulate --plan` refuses a
    /// plan for another model). Absent from plans built in code and from older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The name of the cluster the plan was made for, checked as `model` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Sequences per iteration, over all replicas and micro-batches.
    pub global_batch: u32,
    /// Micro-batches each iteration is cut into; each flows through every stage.
    pub micro_batches: u32,
    /// The pipeline schedule.
    #[serde(default = "one_f_one_b")]
    pub schedule: Schedule,
    /// Whether the gradient synchronisation starts during the last backward, bucket by bucket
    /// (PyTorch DDP, FSDP, Megatron-Core's `--overlap-grad-reduce`), or only after it (Megatron-LM
    /// before 2023).
    #[serde(default = "yes")]
    pub overlap_grad_reduce: bool,
    /// Whether the tensor-parallel collectives run under the adjacent matrix products
    /// (Megatron-Core's `--tp-comm-overlap`: the sequence-parallel all-gather and
    /// reduce-scatter split into chunks pipelined with the GEMM's chunks). Needs sequence
    /// parallelism on every stage with TP > 1, as Megatron requires. Off by default.
    #[serde(default)]
    pub tp_comm_overlap: bool,
    /// The stages, first to last.
    pub stages: Vec<Stage>,
}

fn yes() -> bool {
    true
}

fn one_f_one_b() -> Schedule {
    Schedule::OneFOneB
}

impl HybridPlan {
    /// Sequences in one micro-batch (of the whole stage, before its replicas share it).
    pub(crate) fn micro_batch(&self) -> f64 {
        f64::from(self.global_batch) / f64::from(self.micro_batches)
    }

    /// Every device the plan uses.
    pub fn devices(&self) -> Vec<usize> {
        let mut d: Vec<usize> = self.stages.iter().flat_map(Stage::devices).collect();
        d.sort_unstable();
        d
    }

    /// A 1F1B plan of `stages`, gradient reduction overlapped with the last backward, no
    /// tensor-parallel overlap: what the planners build.
    pub fn one_f_one_b(global_batch: u32, micro_batches: u32, stages: Vec<Stage>) -> HybridPlan {
        HybridPlan {
            model: None,
            cluster: None,
            global_batch,
            micro_batches,
            schedule: Schedule::OneFOneB,
            overlap_grad_reduce: true,
            tp_comm_overlap: false,
            stages,
        }
    }

    /// Checks that the micro-batch count is at most [`MAX_MICRO_BATCHES`] and divides the global
    /// batch (before the model is built at the micro-batch it gives).
    pub fn check_micro_batches(&self, source: &str) -> Result<(), InputError> {
        if self.global_batch == 0 {
            return Err(InputError::new(
                source,
                "global_batch",
                "must be at least one sequence",
            ));
        }
        if self.micro_batches > MAX_MICRO_BATCHES {
            return Err(InputError::new(
                source,
                "micro_batches",
                format!(
                    "{} is more than {MAX_MICRO_BATCHES} micro-batches a step (the schedule \
                     is simulated micro-batch by micro-batch)",
                    self.micro_batches
                ),
            ));
        }
        if self.micro_batches == 0 || !self.global_batch.is_multiple_of(self.micro_batches) {
            return Err(InputError::new(
                source,
                "micro_batches",
                format!(
                    "{} does not divide the global batch {}",
                    self.micro_batches, self.global_batch
                ),
            ));
        }
        Ok(())
    }

    /// The first replica of `s` whose share of a micro-batch is less than one sequence (a plan
    /// of more replicas than sequences would otherwise simulate as if each trained on a fraction
    /// of one).
    fn replica_short_of_a_sequence(&self, s: &Stage) -> Option<usize> {
        let micro = self.micro_batch();
        let even = vec![1.0 / s.dp() as f64; s.dp()];
        let shares = s.shares.as_ref().unwrap_or(&even);
        shares.iter().position(|x| x * micro < 1.0 - 1e-9)
    }

    /// Checks the plan against a model of `layers` layers, `heads` attention heads, `kv_heads`
    /// key/value heads and an MLP `mlp_width` wide (0: not known) on `devices` devices; `source`
    /// names the file in errors.
    pub fn validate(
        &self,
        source: &str,
        layers: usize,
        [heads, kv_heads, mlp_width]: [usize; 3],
        devices: usize,
    ) -> Result<(), InputError> {
        let err = |field: String, msg: String| Err(InputError::new(source, field, msg));
        if self.stages.is_empty() {
            return err("stages".into(), "no stages".into());
        }
        self.check_micro_batches(source)?;
        if self.tp_comm_overlap
            && let Some(i) = self
                .stages
                .iter()
                .position(|s| s.tp() > 1 && !s.sequence_parallel)
        {
            return err(
                "tp_comm_overlap".into(),
                format!("needs sequence_parallel on stages[{i}], whose TP is above 1"),
            );
        }
        let mut next_layer = 0;
        let mut used = vec![false; devices];
        for (i, s) in self.stages.iter().enumerate() {
            let field = |f: &str| format!("stages[{i}].{f}");
            if s.layers[0] != next_layer || s.layers[1] <= s.layers[0] {
                return err(
                    field("layers"),
                    format!(
                        "{:?} must start at layer {next_layer} and hold at least one layer",
                        s.layers
                    ),
                );
            }
            next_layer = s.layers[1];
            let tp = s.tp();
            if s.replicas.is_empty() || tp == 0 {
                return err(field("replicas"), "no devices".into());
            }
            if let Some(r) = s.replicas.iter().position(|r| r.len() != tp) {
                return err(
                    field(&format!("replicas[{r}]")),
                    format!("has {} devices, replica 0 has {tp}", s.replicas[r].len()),
                );
            }
            if !heads.is_multiple_of(tp) || !kv_heads.is_multiple_of(tp) {
                return err(
                    field("replicas"),
                    format!(
                        "tensor-parallel degree {tp} must divide the {heads} attention heads and \
                         the {kv_heads} key/value heads"
                    ),
                );
            }
            if mlp_width != 0 && !mlp_width.is_multiple_of(tp) {
                return err(
                    field("replicas"),
                    format!(
                        "tensor-parallel degree {tp} must divide the MLP's width {mlp_width} \
                         (each GPU holds an equal slice of it)"
                    ),
                );
            }
            for d in s.devices() {
                if d >= devices {
                    return err(
                        field("replicas"),
                        format!("device {d} does not exist (the cluster has {devices})"),
                    );
                }
                if std::mem::replace(&mut used[d], true) {
                    return err(field("replicas"), format!("device {d} is used twice"));
                }
            }
            if let Some(shares) = &s.shares {
                let total: f64 = shares.iter().sum();
                if shares.len() != s.dp()
                    || shares.iter().any(|x| !x.is_finite() || *x <= 0.0)
                    || (total - 1.0).abs() > 1e-6
                {
                    return err(
                        field("shares"),
                        format!("must be {} positive shares summing to 1", s.dp()),
                    );
                }
                // Given shares say how many sequences each replica trains on: whole ones. (An
                // even split of sequences the replicas do not divide is averaged instead.)
                let micro = self.micro_batch();
                if let Some(r) = shares.iter().position(|x| {
                    let sequences = x * micro;
                    (sequences - sequences.round()).abs() > 1e-6 * sequences.max(1.0)
                }) {
                    return err(
                        field("shares"),
                        format!(
                            "replica {r} gets {:.3} of the micro-batch's {micro} sequences: a \
                             replica trains on whole sequences",
                            shares[r] * micro
                        ),
                    );
                }
            }
            if let Some(r) = self.replica_short_of_a_sequence(s) {
                return err(
                    field(if s.shares.is_some() {
                        "shares"
                    } else {
                        "replicas"
                    }),
                    format!(
                        "replica {r} gets less than one of the micro-batch's {} sequences: a \
                         replica trains on whole sequences",
                        self.micro_batch()
                    ),
                );
            }
        }
        if next_layer != layers {
            return err(
                "stages".into(),
                format!("cover layers 0..{next_layer}; the model has {layers}"),
            );
        }
        Ok(())
    }
}

/// The plan in the JSON file at `path`; errors name the file and the field.
pub fn load_plan(path: &std::path::Path) -> crate::error::Result<HybridPlan> {
    let text = crate::io::read_text_file(path)?;
    let source = path.display().to_string();
    // An array read as the plan's fields in order said "[0]: invalid type …, expected a string".
    if !text.trim_start().starts_with('{') {
        return Err(crate::error::InputError::new(
            &source,
            "",
            "a plan file holds one JSON object (as `place --out` writes a hybrid plan)",
        )
        .into());
    }
    Ok(crate::io::parse_json(&text, &source)?)
}
