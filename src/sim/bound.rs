//! A lower bound on an execution graph's makespan, found without simulating it. Every schedule
//! the event loop can produce takes at least:
//! - the busiest resource's work per lane (a resource runs at most its lanes' worth of tasks at
//!   a time);
//! - the longest chain of task durations through the dependencies (no task starts before its
//!   inputs end);
//! - for each resource, its work framed by the earliest start of its tasks before it and the
//!   shortest tail of its tasks after it (the one-machine bound of job-shop scheduling).
//!
//! A search that asks only "is this faster than what I have?"
//! ([`super::Simulator::run_sealed_within`]) can answer "no" from the bound, at a fraction of the
//! event loop's cost: passes over the tasks with no queue per resource. The answer is the one the
//! simulation would give, so nothing a search decides changes. The event loop keeps the chain and
//! the one-machine bounds as it runs, counted from each task's end ([`MakespanBound::frames`]),
//! and gives up as soon as idle time has pushed them past the limit.

use super::exec::{ExecGraph, TaskId};

/// How much of the resource bounds is claimed: the event loop adds the same durations in the
/// order they run, these bounds in task order, so the sums may differ in their last bits (10⁵
/// additions move a sum by at most about 10⁻¹¹ of itself). The chain needs no margin: it adds
/// along each chain exactly as the event loop does, and a float sum never shrinks when a term
/// grows.
const ROUNDING: f64 = 1e-9;

/// Buffers for the bound, kept between calls.
#[derive(Debug, Default)]
pub(crate) struct MakespanBound {
    /// Each task's earliest start: the latest end among its inputs.
    head: Vec<f64>,
    /// Each task's tail: the longest chain of durations after it ends.
    tail: Vec<f64>,
    waiting: Vec<u32>,
    /// The tasks in dependency order (Kahn's).
    order: Vec<TaskId>,
    /// Per resource: work per lane, earliest head and shortest tail among its tasks.
    load: Vec<f64>,
    first_head: Vec<f64>,
    last_tail: Vec<f64>,
    /// Whether the tails, loads and last tails are all of the graph last bounded (not when a
    /// cycle or an infinite limit stopped the bounding short, or a first pass already decided).
    framed: bool,
}

/// What the event loop needs to keep the bound as it runs: each task's tail, and per resource
/// its work per lane and the shortest tail among its tasks, µs.
pub(super) struct Frames<'a> {
    pub tail: &'a [f64],
    pub load: &'a [f64],
    pub last_tail: &'a [f64],
}

impl MakespanBound {
    /// An empty bound (the tests' way to build one; the engine keeps its own).
    #[cfg(test)]
    pub(crate) fn new() -> MakespanBound {
        MakespanBound::default()
    }

    /// A time no simulation of the sealed graph `g` ends before, µs; `None` on a dependency
    /// cycle (the simulation reports that).
    #[cfg(test)]
    pub(crate) fn of(&mut self, g: &ExecGraph) -> Option<f64> {
        self.framed = false;
        let chain = self.longest_chain(g)?;
        let resources = self.busiest_resource(g).max(self.framed_resource(g));
        self.framed = true;
        Some(chain.max(resources * (1.0 - ROUNDING)))
    }

    /// Whether every simulation of the sealed graph `g` has a task ending after `limit_us`
    /// (`of(g) > limit_us`), from the first bound that shows it. Never on a cycle: the
    /// simulation then reports the cycle or gives up as it runs, and the bound leaves it that.
    pub(crate) fn exceeds(&mut self, g: &ExecGraph, limit_us: f64) -> bool {
        self.framed = false;
        if !limit_us.is_finite() {
            return false;
        }
        let Some(chain) = self.longest_chain(g) else {
            return false;
        };
        let past = |bound: f64| MakespanBound::load_exceeds(bound, limit_us);
        let exceeds =
            chain > limit_us || past(self.busiest_resource(g)) || past(self.framed_resource(g));
        // A "no" has computed all three.
        self.framed = !exceeds;
        exceeds
    }

    /// Whether `load_us` of work on one lane of a resource ends past `limit_us` in every
    /// schedule, however the sums were ordered (the margin of [`ROUNDING`]).
    pub(crate) fn load_exceeds(load_us: f64, limit_us: f64) -> bool {
        load_us * (1.0 - ROUNDING) > limit_us
    }

    /// The tails and per-resource frames of the graph last bounded, when that bounding computed
    /// them all: after an [`Self::exceeds`] that answered "no" under a finite limit, or an
    /// [`Self::of`] of an acyclic graph.
    pub(super) fn frames(&self) -> Option<Frames<'_>> {
        self.framed.then_some(Frames {
            tail: &self.tail,
            load: &self.load,
            last_tail: &self.last_tail,
        })
    }

    /// The most work any one resource holds per lane, µs (the loads kept).
    fn busiest_resource(&mut self, g: &ExecGraph) -> f64 {
        self.load.clear();
        self.load.resize(g.resource_count(), 0.0);
        for t in 0..g.len() as TaskId {
            let d = g.duration(t);
            for (&r, &k) in g.task_resources(t).iter().zip(g.task_lanes(t)) {
                self.load[r as usize] += g.work_per_lane(d, r, k);
            }
        }
        self.load.iter().copied().fold(0.0, f64::max)
    }

    /// The latest end of a chain of dependent tasks that each start as soon as their inputs end;
    /// the heads and Kahn's order are kept. `None` on a cycle (tasks left out of the order).
    fn longest_chain(&mut self, g: &ExecGraph) -> Option<f64> {
        let n = g.len();
        self.head.clear();
        self.head.resize(n, 0.0);
        self.waiting.clear();
        self.waiting
            .extend((0..n as TaskId).map(|t| g.wait_count(t)));
        self.order.clear();
        self.order
            .extend((0..n as TaskId).filter(|&t| self.waiting[t as usize] == 0));
        let mut latest: f64 = 0.0;
        let mut next = 0;
        while let Some(&t) = self.order.get(next) {
            next += 1;
            let end = self.head[t as usize] + g.duration(t);
            latest = latest.max(end);
            for &s in g.successors(t).iter().chain(g.order_successors(t)) {
                let s = s as usize;
                self.head[s] = self.head[s].max(end);
                self.waiting[s] -= 1;
                if self.waiting[s] == 0 {
                    self.order.push(s as TaskId);
                }
            }
        }
        (self.order.len() == n).then_some(latest)
    }

    /// The longest of each resource's work per lane between the earliest head and the shortest
    /// tail of its tasks: its first task starts no sooner, and after its last one ends at least
    /// that tail remains. Needs the loads ([`Self::busiest_resource`]) and a complete dependency
    /// order with its heads ([`Self::longest_chain`]).
    fn framed_resource(&mut self, g: &ExecGraph) -> f64 {
        self.tail.clear();
        self.tail.resize(g.len(), 0.0);
        for &t in self.order.iter().rev() {
            self.tail[t as usize] = g
                .successors(t)
                .iter()
                .chain(g.order_successors(t))
                .map(|&s| g.duration(s) + self.tail[s as usize])
                .fold(0.0, f64::max);
        }
        let resources = g.resource_count();
        self.first_head.clear();
        self.first_head.resize(resources, f64::INFINITY);
        self.last_tail.clear();
        self.last_tail.resize(resources, f64::INFINITY);
        for t in 0..g.len() {
            for &r in g.task_resources(t as TaskId) {
                let r = r as usize;
                self.first_head[r] = self.first_head[r].min(self.head[t]);
                self.last_tail[r] = self.last_tail[r].min(self.tail[t]);
            }
        }
        (0..resources)
            .filter(|&r| self.load[r] > 0.0)
            .map(|r| self.first_head[r] + self.load[r] + self.last_tail[r])
            .fold(0.0, f64::max)
    }
}
