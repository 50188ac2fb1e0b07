//! What the hybrid planners share: the model built at each micro-batch they try (cached), the
//! cluster's GPUs pooled by type, and the one way a candidate plan is finished and judged —
//! each stage given the cheapest recomputation that lets it fit, then simulated.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::cluster::Cluster;
use crate::cost::CostModel;
use crate::error::Result;
use crate::precision::Precision;
use crate::zoo::ZooOptions;

use super::estimate::{HybridModel, HybridReport, estimate};
use super::plan::{HybridPlan, Recompute, Stage, ZeroStage};

/// A plan with its simulation.
#[derive(Debug, Clone)]
pub struct Planned {
    /// The plan.
    pub plan: HybridPlan,
    /// Its simulated iteration.
    pub report: HybridReport,
}

impl Planned {
    /// Whether `self` is a better answer than `other`: fitting beats not fitting, then faster.
    pub(crate) fn beats(&self, other: Option<&Planned>) -> bool {
        match other {
            None => true,
            Some(o) => match (self.report.fits(), o.report.fits()) {
                (true, false) => true,
                (false, true) => false,
                _ => self.report.iteration_us < o.report.iteration_us,
            },
        }
    }
}

/// Parameters from which a zoo language model is placed with hybrid plans by default.
const HYBRID_FROM_PARAMS: u64 = 1_000_000_000;

/// Whether `name` is a zoo language model (GPT or Llama) of a billion parameters or more, which
/// `place` and `compare` plan with hybrid plans unless told otherwise.
pub fn planned_by_default(name: &str) -> Result<bool> {
    // Counted in closed form: building the graph to sum its parameters cost `place` a third of
    // a second on a 2·10⁵-op spec, before the graph it places was built again.
    let params = crate::zoo::language_model(name)?.map_or(0, |m| m.params());
    Ok(params >= HYBRID_FROM_PARAMS)
}

/// Keeps `candidate` in `best` when it fits and is faster.
pub(crate) fn keep_fitting(best: &mut Option<Planned>, candidate: Option<Planned>) {
    if let Some(p) = candidate
        && p.report.fits()
        && p.beats(best.as_ref())
    {
        *best = Some(p);
    }
}

/// GPUs of one type: its device groups (one machine's GPUs of that type each), fastest first.
#[derive(Debug, Clone)]
pub(crate) struct Pool {
    pub groups: Vec<Vec<usize>>,
    /// One transformer layer's forward and backward on one GPU of the type, µs (whole
    /// micro-batch, no tensor parallelism): what the layers are split by.
    pub layer_us: f64,
}

impl Pool {
    /// GPUs of the smallest device group: the largest tensor-parallel degree inside a machine.
    pub(crate) fn per_machine(&self) -> usize {
        self.groups.iter().map(Vec::len).min().unwrap_or(0)
    }
}

/// The planners' context: a language model of the zoo at any micro-batch, a cluster, a cost model
/// and the global batch.
pub struct Planner<'a> {
    name: String,
    opts: ZooOptions,
    precision: Precision,
    pub(crate) cluster: &'a Cluster,
    pub(crate) cost: &'a CostModel,
    pub(crate) global_batch: u32,
    models: BTreeMap<u32, HybridModel>,
    deadline: Option<Instant>,
    judged: usize,
}

impl<'a> Planner<'a> {
    /// Plans for the zoo's `name` built as `opts` says (its batch ignored) in `precision`, at
    /// `global_batch` sequences an iteration.
    pub fn new(
        name: &str,
        opts: &ZooOptions,
        precision: Precision,
        cluster: &'a Cluster,
        cost: &'a CostModel,
        global_batch: u32,
    ) -> Result<Planner<'a>> {
        let mut p = Planner {
            name: name.to_string(),
            opts: opts.clone(),
            precision,
            cluster,
            cost,
            global_batch,
            models: BTreeMap::new(),
            deadline: None,
            judged: 0,
        };
        p.model(global_batch)?;
        Ok(p)
    }

    /// Stops the searches at `deadline` (they keep the best plan found by then).
    pub fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    /// The precision the plans train in.
    pub(crate) fn precision(&self) -> Precision {
        self.precision
    }

    /// Plans simulated so far.
    pub fn judged(&self) -> usize {
        self.judged
    }

    /// Whether the deadline has passed or the caller asked the work to stop
    /// ([`crate::interrupt`]).
    pub(crate) fn out_of_time(&self) -> bool {
        crate::interrupt::past(self.deadline)
    }

    /// The model at a micro-batch of `micro_batch` sequences.
    pub(crate) fn model(&mut self, micro_batch: u32) -> Result<&HybridModel> {
        if !self.models.contains_key(&micro_batch) {
            let m = HybridModel::from_zoo(&self.name, micro_batch, &self.opts, self.precision)?;
            self.models.insert(micro_batch, m);
        }
        Ok(&self.models[&micro_batch])
    }

    /// Tokens per sequence of the model.
    pub fn seq(&mut self, micro_batch: u32) -> Result<usize> {
        Ok(self.model(micro_batch)?.seq())
    }

    /// Transformer layers of the model.
    pub(crate) fn layers(&self) -> usize {
        self.models.values().next().map_or(0, HybridModel::layers)
    }

    /// Whether a tensor-parallel degree of `tp` splits the model's heads and MLP evenly.
    pub(crate) fn tp_splits_evenly(&self, tp: usize) -> bool {
        self.models
            .values()
            .next()
            .is_some_and(|m| m.tp_splits_evenly(tp))
    }

    /// The cluster's GPUs pooled by type, fastest (per layer) first.
    pub(crate) fn pools(&mut self) -> Result<Vec<Pool>> {
        let batch = self.global_batch;
        let cluster = self.cluster;
        let cost = self.cost;
        let model = self.model(batch)?;
        let mut by_type: BTreeMap<&'static str, Vec<Vec<usize>>> = BTreeMap::new();
        for g in &cluster.groups {
            let gpu = cluster.devices[g.devices[0]].gpu.name;
            by_type.entry(gpu).or_default().push(g.devices.clone());
        }
        let mut pools: Vec<Pool> = by_type
            .into_values()
            .map(|groups| {
                let spec = &cluster.devices[groups[0][0]].gpu;
                Pool {
                    layer_us: model.layer_us(spec, cost),
                    groups,
                }
            })
            .collect();
        pools.sort_by(|a, b| a.layer_us.total_cmp(&b.layer_us));
        Ok(pools)
    }

    /// Simulates `plan` with the recomputation it names; `None` when it does not suit the model
    /// or the cluster.
    pub(crate) fn judge_as_is(&mut self, plan: HybridPlan) -> Option<Planned> {
        let micro_batch = plan.global_batch / plan.micro_batches;
        self.judged += 1;
        let cluster = self.cluster;
        let cost = self.cost;
        let model = self.model(micro_batch).ok()?;
        model.check(&plan, cluster.devices.len(), "<plan>").ok()?;
        let report = estimate(model, cluster, cost, &plan);
        Some(Planned { plan, report })
    }

    /// Simulates `plan` after giving each stage the cheapest recomputation with which it fits
    /// (none, then selective, then full); `None` when its micro-batch cannot be built.
    pub(crate) fn judge(&mut self, mut plan: HybridPlan) -> Option<Planned> {
        for s in &mut plan.stages {
            s.recompute = Recompute::None;
        }
        let Planned {
            mut plan,
            mut report,
        } = self.judge_as_is(plan)?;
        let micro_batch = plan.global_batch / plan.micro_batches;
        let (cluster, cost) = (self.cluster, self.cost);
        let model = self.model(micro_batch).ok()?;
        for next in [Recompute::Selective, Recompute::Full] {
            let mut changed = false;
            for (s, r) in plan.stages.iter_mut().zip(&report.stages) {
                if r.memory.iter().any(|m| !m.fits()) {
                    s.recompute = next;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
            report = estimate(model, cluster, cost, &plan);
        }
        Some(Planned { plan, report })
    }
}

/// A stage of `layers` on `devices` (whole device groups, in order) cut into tensor-parallel
/// groups of `tp`, with `zero` and sequence parallelism when `tp` > 1.
pub(crate) fn stage(
    layers: [usize; 2],
    devices: &[usize],
    tp: usize,
    zero: ZeroStage,
    shares: Option<Vec<f64>>,
) -> Stage {
    Stage {
        layers,
        replicas: devices.chunks(tp).map(<[usize]>::to_vec).collect(),
        shares,
        sequence_parallel: tp > 1,
        zero,
        recompute: Recompute::None,
    }
}

/// `layers` cut into `weights.len()` contiguous ranges of at least one layer, each about its
/// weight's share (largest remainders); `None` when there are fewer layers than ranges.
pub(crate) fn split_layers(layers: usize, weights: &[f64]) -> Option<Vec<[usize; 2]>> {
    let n = weights.len();
    if n == 0 || layers < n {
        return None;
    }
    let total: f64 = weights.iter().sum();
    // One layer each, the rest by weight.
    let spare = (layers - n) as f64;
    let exact: Vec<f64> = weights.iter().map(|w| spare * w / total).collect();
    let mut counts: Vec<usize> = exact.iter().map(|x| 1 + x.floor() as usize).collect();
    let mut left = layers - counts.iter().sum::<usize>();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    for &i in order.iter().cycle() {
        if left == 0 {
            break;
        }
        counts[i] += 1;
        left -= 1;
    }
    let mut start = 0;
    Some(
        counts
            .iter()
            .map(|&c| {
                let r = [start, start + c];
                start += c;
                r
            })
            .collect(),
    )
}

/// Divisors of `n` in increasing order.
pub(crate) fn divisors(n: u32) -> Vec<u32> {
    (1..=n).filter(|d| n.is_multiple_of(*d)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_split_by_weight_cover_every_layer_once() {
        assert_eq!(
            split_layers(32, &[1.0, 1.0]).unwrap(),
            vec![[0, 16], [16, 32]]
        );
        assert_eq!(
            split_layers(10, &[3.0, 1.0]).unwrap(),
            vec![[0, 7], [7, 10]]
        );
        assert_eq!(split_layers(2, &[1.0, 1.0, 1.0]), None);
        let s = split_layers(80, &[5.0, 1.0, 0.1]).unwrap();
        assert_eq!(s[2][1], 80);
        assert!(s.iter().all(|r| r[1] > r[0]));
        assert_eq!(divisors(12), vec![1, 2, 3, 4, 6, 12]);
    }
}
