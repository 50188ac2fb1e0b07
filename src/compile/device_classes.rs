//! Symmetric compilation: replicas that behave alike are simulated once.
//!
//! Two devices are in one *class* when they are the same GPU type with the same memory and every
//! layout holds both or neither, with equal batch shares: then each runs the same tasks with the
//! same durations, in the same order, waiting on the same collectives. When, in addition, the
//! only things joining devices are ring AllReduces (no transfer, concat, parameter-server push or
//! pull, whose routes and peers differ from device to device), the simulation of one
//! representative per class is exact: every member's compute stream, memory and busy time are
//! its representative's, and each collective still holds the links of its whole ring and lasts
//! as NCCL's closed form says for the whole ring. The compiler tries this first and falls back
//! to the full graph when anything asymmetric appears, so the result never depends on which was
//! used (the tests compare both to 1e-9).
//!
//! Data parallelism over 512 GPUs of two types has two classes: the graph it simulates is that of
//! two GPUs and one ring, whatever the cluster's size.

use std::collections::HashMap;
use std::rc::Rc;

use super::layout::Layout;
use crate::cluster::Cluster;
use crate::sim::{Oom, SimResult};
use crate::strategy::{ReplicationOption, Strategy};

/// What makes devices alike: GPU type, memory, and the (layout, share) pairs holding them.
type ClassKey<'a> = (&'a str, u64, &'a [(usize, u64)]);

/// The representative of every device (the lowest index of its class).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceClasses {
    representative: Vec<usize>,
}

impl DeviceClasses {
    /// The classes of `strategy`'s `layouts` on `cluster`; `None` when every class is a single
    /// device or the strategy surely breaks them ([`Self::broken_by`]).
    pub(super) fn of(
        cluster: &Cluster,
        strategy: &Strategy,
        layouts: &[Rc<Layout>],
    ) -> Option<DeviceClasses> {
        if Self::broken_by(strategy) {
            return None;
        }
        let devices = cluster.devices.len();
        let mut signature: Vec<Vec<(usize, u64)>> = vec![Vec::new(); devices];
        let mut seen: HashMap<*const Layout, usize> = HashMap::new();
        for layout in layouts {
            let next = seen.len();
            let id = *seen.entry(Rc::as_ptr(layout)).or_insert(next);
            if id != next {
                continue;
            }
            for (&d, &share) in layout.devices.iter().zip(layout.shares.iter()) {
                signature[d as usize].push((id, share.to_bits()));
            }
        }
        let mut first_of: HashMap<ClassKey<'_>, usize> = HashMap::new();
        let representative: Vec<usize> = (0..devices)
            .map(|d| {
                let device = &cluster.devices[d];
                let key = (
                    device.gpu.name,
                    device.memory_bytes.to_bits(),
                    signature[d].as_slice(),
                );
                *first_of.entry(key).or_insert(d)
            })
            .collect();
        let shared = representative.iter().enumerate().any(|(d, &r)| r != d);
        shared.then_some(DeviceClasses { representative })
    }

    pub(crate) fn is_representative(&self, device: u32) -> bool {
        self.representative[device as usize] == device as usize
    }

    /// Every layout with its representatives only (layouts shared between ops stay shared).
    pub(super) fn restrict(&self, layouts: &[Rc<Layout>]) -> Vec<Rc<Layout>> {
        let mut restricted: HashMap<*const Layout, Rc<Layout>> = HashMap::new();
        layouts
            .iter()
            .map(|layout| {
                let r = restricted
                    .entry(Rc::as_ptr(layout))
                    .or_insert_with(|| Rc::new(layout.restricted(|d| self.is_representative(d))));
                Rc::clone(r)
            })
            .collect()
    }

    /// Whether `strategy` surely breaks the classes, so that the compiler need not try them: a
    /// parameter server over two or more GPUs pushes gradients to, and pulls parameters from,
    /// particular devices. (Found otherwise only once the wiring reaches the first optimizer
    /// update, near the end; in a polish from bucketed AllReduce most candidates have a PS
    /// group.) A false "no" costs only the attempt: the result is the same either way.
    fn broken_by(strategy: &Strategy) -> bool {
        strategy
            .decisions()
            .iter()
            .any(|d| d.option == ReplicationOption::Ps && d.devices.len() >= 2)
    }

    /// A representative-only simulation's result, made the full one's: each device's busy time,
    /// memory and out-of-memory verdict are its representative's (links and tasks are as run).
    pub(crate) fn expand(&self, result: &mut SimResult) {
        for values in [
            &mut result.busy,
            &mut result.peak_memory,
            &mut result.peak_allocated,
            &mut result.final_memory,
        ] {
            self.copy_from_representatives(values);
        }
        let by_device: HashMap<usize, Oom> =
            result.oom.iter().map(|o| (o.device, o.clone())).collect();
        result.oom = (0..self.representative.len())
            .filter_map(|d| {
                by_device.get(&self.representative[d]).map(|o| Oom {
                    device: d,
                    ..o.clone()
                })
            })
            .collect();
    }

    /// Each device's entry of `values` (per device first; later entries untouched) set to its
    /// representative's.
    pub(crate) fn copy_from_representatives(&self, values: &mut [f64]) {
        for (d, &rep) in self.representative.iter().enumerate() {
            if rep != d {
                values[d] = values[rep];
            }
        }
    }
}
