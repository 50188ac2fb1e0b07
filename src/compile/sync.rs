//! Gradient synchronisation inside the compiler: ring AllReduce (packed or bucketed), pushes to
//! a parameter server with `AddN`, and the pulls of updated parameters.

use std::rc::Rc;

use super::compiler::Compiler;
use super::layout::{Layout, LayoutKind};
use super::task_role::TaskRole;
use crate::graph::{OpIdx, Phase};
use crate::sim::{TaskId, TaskKind, TaskSpec};
use crate::strategy::{AllReducePacking, ReplicationOption};

impl Compiler<'_> {
    /// Sum `u`'s partial outputs by its group's option; the devices then holding the sum.
    /// `wanted_on` is the first consumer's device, the natural parameter server when it is one
    /// of the replicas.
    pub(super) fn aggregate(&mut self, u: OpIdx, wanted_on: u32, bytes: f64) -> Vec<(u32, TaskId)> {
        if let Some(h) = self.aggregated.get(&u) {
            return h.clone();
        }
        let producer = Rc::clone(&self.layouts[u]);
        let group = self.strategy.group_of(u);
        let holders = match self.strategy.decision(group).option {
            ReplicationOption::Ps => {
                let ps = if producer.position(wanted_on).is_some() {
                    wanted_on
                } else {
                    let turn = self.ps_turn[group];
                    self.ps_turn[group] += 1;
                    producer.devices[turn % producer.devices.len()]
                };
                vec![(ps, self.push_and_sum(u, &producer, ps, bytes))]
            }
            // Packing is one bucket with no size limit.
            _ if self.strategy.allreduce == AllReducePacking::Packed && self.is_gradient[u] => {
                self.bucketed_all_reduce(group, u, f64::INFINITY)
            }
            _ if self.is_gradient[u]
                && let AllReducePacking::Buckets(cap) = self.strategy.allreduce =>
            {
                self.bucketed_all_reduce(group, u, cap as f64)
            }
            _ => {
                let inputs: Vec<TaskId> = (0..producer.devices.len())
                    .map(|i| self.task_of(u, i))
                    .collect();
                self.all_reduce(u, &producer, &inputs, bytes)
            }
        };
        self.aggregated.insert(u, holders.clone());
        holders
    }

    /// The AllReduce of the bucket holding gradient `u`: `group`'s gradients, in topological
    /// order (the order the backward pass makes them), cut into runs of at most `cap` bytes (a
    /// larger gradient is a bucket of its own). Each bucket's AllReduce waits for its gradients.
    fn bucketed_all_reduce(&mut self, group: usize, u: OpIdx, cap: f64) -> Vec<(u32, TaskId)> {
        if !self.bucket_of.contains_key(&u) {
            self.form_buckets(group, cap);
        }
        let bucket = self.bucket_of[&u];
        if let Some(h) = self.bucket_holders.get(&bucket) {
            return h.clone();
        }
        let members = self.buckets[bucket].clone();
        let layout = Rc::clone(&self.layouts[members[0]]);
        let bytes: f64 = members
            .iter()
            .map(|&op| self.graph.op(op).output_bytes)
            .sum();
        let replicas = layout.devices.len();
        let inputs: Vec<TaskId> = members
            .iter()
            .flat_map(|&op| (0..replicas).map(move |i| (op, i)))
            .map(|(op, i)| self.task_of(op, i))
            .collect();
        let holders = self.all_reduce(members[0], &layout, &inputs, bytes);
        self.bucket_holders.insert(bucket, holders.clone());
        holders
    }

    fn form_buckets(&mut self, group: usize, cap: f64) {
        let mut filled = 0.0;
        let mut open = false;
        for op in self.graph.topological_order() {
            if !(self.is_gradient[op]
                && self.strategy.group_of(op) == group
                && self.layouts[op].kind == LayoutKind::Partial)
            {
                continue;
            }
            let bytes = self.graph.op(op).output_bytes;
            if !open || filled + bytes > cap {
                self.buckets.push(Vec::new());
                filled = 0.0;
                open = true;
            }
            filled += bytes;
            self.buckets.last_mut().expect("a bucket is open").push(op);
            self.bucket_of.insert(op, self.buckets.len() - 1);
        }
    }

    /// Parameter-server aggregation: every replica pushes its partial sum to `ps`, which adds them.
    fn push_and_sum(&mut self, u: OpIdx, producer: &Layout, ps: u32, bytes: f64) -> TaskId {
        let mut parts = Vec::with_capacity(producer.devices.len());
        for (i, &d) in producer.devices.iter().enumerate() {
            let src = self.task_of(u, i);
            parts.push(if d == ps {
                src
            } else {
                self.transfer(TaskRole::Transfer, u, src, d, ps, bytes)
            });
        }
        let k = parts.len() as f64;
        let duration =
            self.cost
                .kernel_us(self.gpu(ps), (k - 1.0) * bytes / 4.0, (k + 1.0) * bytes);
        let t = self.compute(TaskRole::AddN, u, ps, duration, bytes);
        for p in parts {
            self.exec.add_dep(p, t);
        }
        t
    }

    /// Ring AllReduce of `bytes` among every device of `layout` once all `inputs` are done; the
    /// reduced tensor stays on each compiled device until its consumers are done. `u` labels the
    /// tasks. The ring is the layout's whole device list even when only representatives are
    /// compiled: its links and its closed-form time are the whole ring's.
    fn all_reduce(
        &mut self,
        u: OpIdx,
        layout: &Layout,
        inputs: &[TaskId],
        bytes: f64,
    ) -> Vec<(u32, TaskId)> {
        let ring: &[u32] = &layout.all_devices;
        let compiled: &[u32] = &layout.devices;
        let n = ring.len();
        let plan = super::collective::ring_plan(self.cluster, ring);
        let (links, lanes): (Vec<u32>, Vec<u32>) = plan
            .links
            .iter()
            .map(|&(l, k)| (self.exec.link_resource(l), k))
            .unzip();
        let duration = self
            .cost
            .comm
            .allreduce_us(bytes, n, plan.bandwidth, plan.latency_us);
        let ar = self.add_with_lanes(
            TaskRole::AllReduce,
            TaskSpec {
                kind: TaskKind::Collective,
                duration,
                resources: &links,
                out_device: ring[0],
                out_bytes: 0.0,
                priority: 0.0,
                label: u as u32,
            },
            Some(&lanes),
        );
        for &input in inputs {
            self.exec.add_dep(input, ar);
        }
        self.interfere(u, compiled, inputs, duration);
        // The reduced buffer lives on every replica until its consumers are done.
        let mut holders = Vec::with_capacity(compiled.len());
        for &d in compiled {
            let hold = self.add(
                TaskRole::Hold,
                TaskSpec {
                    kind: TaskKind::Collective,
                    duration: 0.0,
                    resources: &[],
                    out_device: d,
                    out_bytes: bytes,
                    priority: 0.0,
                    label: u as u32,
                },
            );
            self.exec.add_dep(ar, hold);
            holders.push((d, hold));
        }
        holders
    }

    /// NCCL's kernels slow each ring GPU's compute by a share of the collective's duration: a
    /// compute task of that length on each, ready when the collective is. One zero-time gate
    /// after the inputs feeds them all (inputs × ring dependencies would grow with the square of
    /// the ring: a packed AllReduce on 1,024 GPUs has 400,000 inputs); the collective itself
    /// still consumes the inputs, so their memory lives until it ends.
    fn interfere(&mut self, u: OpIdx, ring: &[u32], inputs: &[TaskId], duration: f64) {
        let share = self.cost.comm.compute_interference;
        if share <= 0.0 {
            return;
        }
        let gate = self.add(
            TaskRole::Interference,
            TaskSpec {
                kind: TaskKind::Collective,
                duration: 0.0,
                resources: &[],
                out_device: ring[0],
                out_bytes: 0.0,
                priority: 0.0,
                label: u as u32,
            },
        );
        for &input in inputs {
            self.exec.add_dep(input, gate);
        }
        for &d in ring {
            let t = self.compute(TaskRole::Interference, u, d, share * duration, 0.0);
            self.exec.add_dep(gate, t);
        }
    }

    /// After a PS-style update, replicas of the parameter elsewhere pull the new value.
    pub(super) fn pull_parameters(&mut self, opt: OpIdx) {
        let opt_layout = Rc::clone(&self.layouts[opt]);
        for &e in self.graph.in_edges(opt) {
            let edge = self.graph.edges()[e];
            if self.graph.op(edge.src).phase != Phase::Parameter {
                continue;
            }
            let params = Rc::clone(&self.layouts[edge.src]);
            for &d in params.devices.iter() {
                if opt_layout.position(d).is_some() {
                    continue;
                }
                let i = self.nearest(&opt_layout.devices, d);
                let src = self.task_of(opt, i);
                self.transfer(
                    TaskRole::Pull,
                    edge.src,
                    src,
                    opt_layout.devices[i],
                    d,
                    edge.bytes,
                );
            }
        }
    }
}
