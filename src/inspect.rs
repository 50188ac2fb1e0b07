//! What `topoplace info` and `topoplace zoo list` report about a model: sizes per phase, the
//! published figures it is checked against, and a first look at how it fits each GPU type of a
//! cluster (serial compute time on one device, memory needed without any placement).

use serde::Serialize;

use crate::cluster::Cluster;
use crate::cost::CostModel;
use crate::error::Result;
use crate::graph::{Graph, GraphSummary, Phase, SimplifyStats};
use crate::render::{Table, bytes, count, millis};
use crate::zoo::{self, ModelCard};

/// Everything `info` prints; the JSON keys are the field names.
#[derive(Debug, Clone, Serialize)]
pub struct ModelReport {
    /// The graph's totals (sizes, FLOPs, bytes, per phase); flattened into the JSON.
    #[serde(flatten)]
    pub summary: GraphSummary,
    /// Forward multiply-accumulates per sample (forward FLOPs / 2 / batch).
    pub forward_macs_per_sample: f64,
    /// Peak bytes of forward outputs alive at once when the graph runs serially on one device in
    /// its op order, each output freed after its last consumer (what the simulator does; views
    /// are not ops, so they add nothing): the activation memory of a training step.
    pub activation_bytes: f64,
    /// Bytes of every forward output at the batch: the bound when nothing were ever freed.
    pub forward_output_bytes: f64,
    /// The zoo model's card with its published figures; `None` for graphs not from the zoo.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub card: Option<ModelCard>,
    /// What simplification removed, when the graph was simplified before the report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simplified: Option<SimplifyStats>,
    /// Tokens per sequence when asked for (`--seq`), where the card's variant names the default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<usize>,
    /// One estimate per GPU type in the cluster, in order of first appearance; empty without one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub on_gpu: Vec<GpuEstimate>,
}

/// The whole model on one GPU of a type present in the cluster.
#[derive(Debug, Clone, Serialize)]
pub struct GpuEstimate {
    /// Catalog name of the GPU type.
    pub gpu: String,
    /// How many GPUs of this type the cluster has.
    pub count: usize,
    /// One GPU's step: every op at the full batch one after another, each kernel once the host
    /// has issued it ([`CostModel::single_gpu_us`]; no communication).
    pub serial_compute_us: f64,
    /// Resident bytes plus activation bytes.
    pub memory_needed_bytes: f64,
    /// Usable memory of the first device of this type, bytes (a config may override the catalog).
    pub memory_bytes: f64,
    /// Whether `memory_needed_bytes` fits in `memory_bytes`.
    pub fits: bool,
}

impl ModelReport {
    /// Report on `graph`, with its zoo card and simplification stats if any, and per-GPU-type
    /// estimates when a cluster is given.
    pub fn new(
        graph: &Graph,
        card: Option<ModelCard>,
        simplified: Option<SimplifyStats>,
        cluster: Option<&Cluster>,
        cost: &CostModel,
    ) -> ModelReport {
        let summary = graph.summary();
        let forward_flops = summary.per_phase.get("forward").map_or(0.0, |p| p.flops);
        let activation_bytes = serial_activation_peak(graph);
        let forward_output_bytes = crate::units::total(
            graph
                .ops()
                .iter()
                .filter(|op| op.phase == Phase::Forward)
                .map(|op| op.output_bytes),
        );
        let on_gpu = cluster
            .map(|c| {
                estimate_per_gpu_type(graph, c, cost, summary.resident_bytes + activation_bytes)
            })
            .unwrap_or_default();
        ModelReport {
            forward_macs_per_sample: forward_flops / 2.0 / f64::from(graph.batch_size),
            activation_bytes,
            forward_output_bytes,
            summary,
            card,
            simplified,
            seq: None,
            on_gpu,
        }
    }

    /// The report as `info` prints it: header lines, a per-phase table and the per-GPU table.
    pub fn render_text(&self) -> String {
        let s = &self.summary;
        let mut out = format!("model        {}\n", s.name);
        if let Some(card) = &self.card {
            let variant = match self.seq {
                Some(seq) => card.variant.replace("; seq 128;", &format!("; seq {seq};")),
                None => card.variant.to_string(),
            };
            out += &format!("variant      {variant}\n");
        }
        out += &format!("batch size   {}\n", s.batch_size);
        out += &format!(
            "ops          {} ({} edges, {} gradient links)\n",
            s.ops, s.edges, s.gradients
        );
        out += &format!("parameters   {} ({})", count(s.params as f64), s.params);
        if let Some(card) = self.card.as_ref().filter(|c| c.reference_params > 0) {
            let diff = (s.params as f64 / card.reference_params as f64 - 1.0) * 100.0;
            out += &format!(
                "; published {} ({}), {diff:+.2}%",
                card.reference_params, card.reference_params_source
            );
        }
        out += "\n";
        out += &format!(
            "forward      {:.3} GMAC per sample",
            self.forward_macs_per_sample / 1e9
        );
        if let Some(card) = self
            .card
            .as_ref()
            .filter(|c| c.reference_fwd_macs_per_sample > 0.0)
        {
            let diff =
                (self.forward_macs_per_sample / card.reference_fwd_macs_per_sample - 1.0) * 100.0;
            out += &format!(
                "; published {:.3} ({}), {diff:+.2}%",
                card.reference_fwd_macs_per_sample / 1e9,
                card.reference_macs_source
            );
        }
        out += "\n";
        out += &format!(
            "memory       {} resident (parameters {} + optimizer state), {} activations \
             (peak alive; {} if no forward output were freed)\n",
            bytes(s.resident_bytes),
            bytes(s.parameter_bytes),
            bytes(self.activation_bytes),
            bytes(self.forward_output_bytes)
        );
        if let Some(st) = &self.simplified {
            out += &format!(
                "simplified   {} -> {} ops ({} pass-through, {} dangling removed)\n",
                st.ops_before, st.ops_after, st.removed_pass_through, st.removed_dangling
            );
        }
        out += "\n";
        let mut phases = Table::new(["phase", "ops", "GFLOP", "GB accessed"]);
        for phase in Phase::ALL {
            if let Some(p) = s.per_phase.get(phase.name()) {
                phases.row([
                    phase.name().to_string(),
                    p.ops.to_string(),
                    format!("{:.2}", p.flops / 1e9),
                    format!("{:.3}", p.bytes_accessed / 1e9),
                ]);
            }
        }
        out += &phases.render();
        if !self.on_gpu.is_empty() {
            out += "\n";
            let mut gpus = Table::new([
                "gpu",
                "in cluster",
                "serial compute",
                "memory needed",
                "memory",
                "fits",
            ]);
            for g in &self.on_gpu {
                gpus.row([
                    g.gpu.clone(),
                    g.count.to_string(),
                    millis(g.serial_compute_us),
                    bytes(g.memory_needed_bytes),
                    bytes(g.memory_bytes),
                    if g.fits { "yes" } else { "no" }.to_string(),
                ]);
            }
            out += &gpus.render();
        }
        out
    }
}

/// Peak of live forward-output bytes over a serial run in topological order: an output is
/// allocated when its op runs and freed once every consumer has run (one with no consumer is
/// freed at once). Reference counting as in the simulator, on one device.
fn serial_activation_peak(graph: &Graph) -> f64 {
    let ops = graph.ops();
    let mut waiting: Vec<usize> = (0..ops.len()).map(|i| graph.out_edges(i).len()).collect();
    let (mut live, mut peak) = (0.0f64, 0.0f64);
    for i in graph.topological_order() {
        let forward = ops[i].phase == Phase::Forward;
        if forward {
            live += ops[i].output_bytes;
            peak = peak.max(live);
            if waiting[i] == 0 {
                live -= ops[i].output_bytes;
            }
        }
        for p in graph.predecessors(i) {
            waiting[p] -= 1;
            if waiting[p] == 0 && ops[p].phase == Phase::Forward {
                live -= ops[p].output_bytes;
            }
        }
    }
    peak
}

fn estimate_per_gpu_type(
    graph: &Graph,
    cluster: &Cluster,
    model: &CostModel,
    memory_needed: f64,
) -> Vec<GpuEstimate> {
    let mut out: Vec<GpuEstimate> = Vec::new();
    for device in &cluster.devices {
        if let Some(e) = out.iter_mut().find(|e| e.gpu == device.gpu.name) {
            e.count += 1;
            continue;
        }
        let serial_compute_us = model.single_gpu_us(graph, &device.gpu);
        // The device's usable memory: a config may override the catalog's.
        let memory_bytes = device.memory_bytes;
        let needed = model.runtime.device_bytes(memory_needed);
        out.push(GpuEstimate {
            gpu: device.gpu.name.to_string(),
            count: 1,
            serial_compute_us,
            memory_needed_bytes: needed,
            memory_bytes,
            fits: needed <= memory_bytes,
        });
    }
    out
}

/// One row of `zoo list`.
#[derive(Debug, Clone, Serialize)]
pub struct ZooRow {
    /// The zoo model's name.
    pub name: String,
    /// The implementation the graph reproduces (the card's variant; empty without a card).
    pub variant: String,
    /// Default batch size of the training graph.
    pub batch_size: u32,
    /// Ops of the training graph (forward, backward, optimizer).
    pub ops: usize,
    /// Ops of the forward-only (`-inference`) graph.
    pub inference_ops: usize,
    /// Trainable parameters counted in the built graph.
    pub params: u64,
    /// Published trainable parameter count (0 without a card).
    pub reference_params: u64,
    /// Forward multiply-accumulates per sample, in units of 1e9.
    pub forward_gmac_per_sample: f64,
}

/// Build every zoo model (training and inference, default options) and summarise each in a row.
pub fn zoo_listing() -> Result<Vec<ZooRow>> {
    let mut rows = Vec::new();
    for &name in zoo::NAMES {
        let opts = zoo::ZooOptions::default();
        let training = zoo::build(name, &opts)?;
        let inference = zoo::build(&format!("{name}-inference"), &opts)?;
        let card = zoo::card(name);
        let report = ModelReport::new(&training, card.clone(), None, None, &CostModel::default());
        rows.push(ZooRow {
            name: name.to_string(),
            variant: card
                .as_ref()
                .map(|c| c.variant.to_string())
                .unwrap_or_default(),
            batch_size: training.batch_size,
            ops: training.len(),
            inference_ops: inference.len(),
            params: report.summary.params,
            reference_params: card.map_or(0, |c| c.reference_params),
            forward_gmac_per_sample: report.forward_macs_per_sample / 1e9,
        });
    }
    Ok(rows)
}

/// The `zoo list` rows as a text table (variant cut to its first clause).
pub fn render_zoo_listing(rows: &[ZooRow]) -> String {
    let mut t = Table::new([
        "model",
        "batch",
        "ops",
        "fwd-only ops",
        "params",
        "GMAC/sample",
        "variant",
    ]);
    for r in rows {
        t.row([
            r.name.clone(),
            r.batch_size.to_string(),
            r.ops.to_string(),
            r.inference_ops.to_string(),
            count(r.params as f64),
            format!("{:.3}", r.forward_gmac_per_sample),
            // The first clause names the variant; `--json` and `info` carry the whole text.
            r.variant.split(';').next().unwrap_or_default().to_string(),
        ]);
    }
    t.render()
}
