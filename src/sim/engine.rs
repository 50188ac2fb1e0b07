//! The discrete-event loop (TAG §4.3.2). Every resource — a GPU's compute stream or one direction
//! of a link — runs tasks one at a time per lane (most resources have one lane; a GPU's NVLink
//! port has one per peer its bricks reach at once). A task waits until all its inputs are done,
//! then joins every resource it needs, and starts when, at each single-lane resource, it heads the
//! queue and the resource is idle, and at each multi-lane resource the lanes it takes are free
//! (lanes go to waiting tasks in key order; no head-of-line blocking, as with parallel links).
//! Keys are one global order (ready time for TensorFlow's FIFO, or a given priority for FastT's
//! order enforcement), so the first waiting task never waits on a task queued behind it and the
//! loop cannot deadlock: once nothing runs, every lane is free and it heads all its queues.
//!
//! A compute task with a host time ([`ExecGraph::set_host_us`]) is issued by its device's host
//! first: each device keeps an issue clock that advances by the host time of every task it
//! starts, whatever the device is doing (the host runs ahead), and the task's kernel begins at
//! the later of its start and its issue; the device waits, idle, in between.
//!
//! Memory is reference-counted: a task's output is allocated on its device when the task starts
//! and freed when the last task consuming it ends (at once, if nothing consumes it). Resident bytes
//! (parameters, optimizer state) stay for the whole iteration.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use super::bound::MakespanBound;
use super::completions::Completions;
use super::deadline;
use super::exec::{ExecGraph, TaskId};

/// How a resource picks the next task among those queued on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// First ready, first run (TensorFlow's default executor); ties by task id.
    #[default]
    Fifo,
    /// Lowest [`ExecGraph::priority`] first (FastT's execution-order enforcement); ties by id.
    Priority,
}

/// A device whose memory peak exceeds its capacity.
#[derive(Debug, Clone, PartialEq)]
pub struct Oom {
    pub device: usize,
    pub peak_bytes: f64,
    pub capacity_bytes: f64,
}

impl Oom {
    pub(crate) fn excess_bytes(&self) -> f64 {
        self.peak_bytes - self.capacity_bytes
    }
}

/// What one simulated iteration did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SimResult {
    /// Time the last task ends, µs.
    pub makespan: f64,
    pub start: Vec<f64>,
    pub end: Vec<f64>,
    /// Busy µs per resource (devices first, then links); a task holding k of a resource's L lanes
    /// for d µs adds d·k/L, so busy time never exceeds the makespan.
    pub busy: Vec<f64>,
    /// What each device needs at its peak: the tensors' peak plus the runtime's context and
    /// allocator reserve (equal to `peak_allocated` when none is charged).
    pub peak_memory: Vec<f64>,
    /// The peak of the tensors alone per device (what `torch.cuda.max_memory_allocated` reports).
    pub peak_allocated: Vec<f64>,
    /// Memory per device after the last task (equals the resident bytes when nothing leaks).
    pub final_memory: Vec<f64>,
    pub oom: Vec<Oom>,
    /// Task starts plus task ends.
    pub events: u64,
}

/// Why a simulation could not finish.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    #[error("the execution graph has a dependency cycle: {finished} of {total} tasks could run")]
    Stuck { finished: usize, total: usize },
}

/// A reusable simulator: its buffers survive between runs, so the search loop allocates nothing
/// once warmed up (the result vectors are reused too).
#[derive(Debug, Default)]
pub struct Simulator {
    /// The counters of every task ([`TaskState`]).
    task: Vec<TaskState>,
    /// Keys and failed tries of the tasks that queued ([`Queued`]).
    queued: Vec<Queued>,
    /// Lanes in use per resource.
    in_use: Vec<u32>,
    /// Queues of single-lane resources.
    queues: Vec<BinaryHeap<Reverse<(u64, TaskId)>>>,
    /// Tasks waiting at each multi-lane resource, in key order.
    waiting: Vec<BTreeSet<(u64, TaskId)>>,
    epoch: u32,
    completions: Completions,
    memory: Vec<f64>,
    result: SimResult,
    bound: MakespanBound,
    /// Per resource, the work per lane of its tasks not yet started; kept while the bound has the
    /// frames of the graph running (a finite limit the bound did not already decide).
    unstarted_load: Vec<f64>,
    limit_us: f64,
    /// Per device, when its host issued the last task started on it, µs.
    issued: Vec<f64>,
}

/// The event loop's counters of one task: every completion touches its successors' and
/// predecessors', scattered over 10⁵ tasks, so they are kept apart from what only a queued task
/// needs ([`Queued`]) and eight tasks share a cache line.
#[derive(Debug, Clone, Copy)]
struct TaskState {
    /// Inputs (data and order) not yet done.
    waiting_inputs: u32,
    /// Data consumers not yet done: its output is freed when none is left.
    consumers_left: u32,
}

/// What the loop keeps of a task that had to queue (one that starts as it becomes ready never
/// touches it); written when it queues, so never reset between runs.
#[derive(Debug, Clone, Copy, Default)]
struct Queued {
    /// Its key in the queues.
    key: u64,
    /// The completion (epoch) at which it was last tried and could not start: starting tasks
    /// only takes resources away, so within one completion a failed try stays failed and is not
    /// repeated (a collective heads hundreds of queues it would otherwise be tried at).
    failed_at: u32,
}

/// Order-preserving map of a finite f64 onto u64 (so keys compare as integers).
fn sort_key(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

fn key_time(key: u64) -> f64 {
    let bits = if key >> 63 == 1 {
        key & !(1 << 63)
    } else {
        !key
    };
    f64::from_bits(bits)
}

impl Simulator {
    /// A simulator with empty buffers; they grow on the first run and are reused after.
    pub fn new() -> Simulator {
        Simulator::default()
    }

    /// Simulate one iteration of `g` (sealed first if needed).
    pub fn run(&mut self, g: &mut ExecGraph, order: Order) -> Result<&SimResult, SimError> {
        g.seal();
        self.run_sealed(g, order)
    }

    /// Simulate a graph that is already sealed.
    pub fn run_sealed(&mut self, g: &ExecGraph, order: Order) -> Result<&SimResult, SimError> {
        self.run_sealed_within(g, order, f64::INFINITY)
            .map(|r| r.expect("no task ends after an infinite time"))
    }

    /// [`Self::run_sealed`], given up (`None`) as soon as a task ends after `limit_us`: the
    /// makespan is then past the limit too, and a caller asking only "faster than this?" has its
    /// answer without simulating the rest. Where a lower bound on the makespan already passes the
    /// limit ([`super::bound`]), the answer comes without simulating at all, and where it passes
    /// it part way, counted from a task's end, it comes there ([`Self::bound_passes_limit`]).
    /// Past this thread's wall-clock [`deadline`] it is given up (`None`) too.
    pub(crate) fn run_sealed_within(
        &mut self,
        g: &ExecGraph,
        order: Order,
        limit_us: f64,
    ) -> Result<Option<&SimResult>, SimError> {
        assert!(
            g.is_sealed(),
            "seal the execution graph before simulating it"
        );
        if self.bound.exceeds(g, limit_us) {
            return Ok(None);
        }
        self.reset(g);
        self.limit_us = limit_us;
        if let Some(frames) = self.bound.frames() {
            self.unstarted_load.extend_from_slice(frames.load);
        }
        for t in 0..g.len() as TaskId {
            if self.task[t as usize].waiting_inputs == 0 {
                self.make_ready(g, order, t, 0.0);
            }
        }
        let mut finished: usize = 0;
        while let Some((key, t)) = self.completions.pop() {
            let now = key_time(key);
            if now > limit_us {
                return Ok(None);
            }
            self.complete(g, order, t, now);
            finished += 1;
            if self.bound_passes_limit(g, t, now)
                || (finished.is_multiple_of(deadline::ASK_EVERY) && deadline::passed())
            {
                return Ok(None);
            }
        }
        if finished < g.len() {
            return Err(SimError::Stuck {
                finished,
                total: g.len(),
            });
        }
        self.finish(g);
        Ok(Some(&self.result))
    }

    /// The result of the last run.
    pub fn result(&self) -> &SimResult {
        &self.result
    }

    fn reset(&mut self, g: &ExecGraph) {
        let n = g.len();
        self.task.clear();
        self.task.extend((0..n as TaskId).map(|t| TaskState {
            waiting_inputs: g.wait_count(t),
            consumers_left: g.successors(t).len() as u32,
        }));
        if self.queued.len() < n {
            self.queued.resize(n, Queued::default());
        }
        self.in_use.clear();
        self.in_use.resize(g.resource_count(), 0);
        self.queues.resize_with(g.resource_count(), BinaryHeap::new);
        self.queues.iter_mut().for_each(BinaryHeap::clear);
        self.waiting.resize_with(g.resource_count(), BTreeSet::new);
        self.waiting.iter_mut().for_each(BTreeSet::clear);
        self.epoch = 0;
        self.unstarted_load.clear();
        self.completions.clear();
        self.memory.clear();
        self.memory.extend_from_slice(g.resident());
        self.issued.clear();
        self.issued.resize(g.devices(), 0.0);
        let r = &mut self.result;
        r.makespan = 0.0;
        r.events = 0;
        for v in [&mut r.start, &mut r.end] {
            v.clear();
            v.resize(n, f64::NAN);
        }
        r.busy.clear();
        r.busy.resize(g.resource_count(), 0.0);
        r.peak_memory.clear();
        r.peak_memory.extend_from_slice(g.resident());
        r.final_memory.clear();
        r.oom.clear();
    }

    fn make_ready(&mut self, g: &ExecGraph, order: Order, t: TaskId, now: f64) {
        let resources = g.task_resources(t);
        if resources.is_empty() {
            self.start(g, t, now);
            return;
        }
        let key = match order {
            Order::Fifo => sort_key(now),
            Order::Priority => sort_key(g.priority(t)),
        };
        if self.free_for(g, t) {
            // Queued and popped again at once otherwise: nothing else moves in between.
            self.take_lanes(g, t);
            self.start(g, t, now);
            return;
        }
        self.queued[t as usize] = Queued {
            key,
            failed_at: u32::MAX,
        };
        for &r in resources {
            if g.resource_lanes(r) == 1 {
                self.queues[r as usize].push(Reverse((key, t)));
            } else {
                self.waiting[r as usize].insert((key, t));
            }
        }
        self.try_start(g, t, now);
    }

    /// Whether every resource `t` needs has its lanes free and, where single-lane, nobody
    /// queued: `t` would head each queue it joined and start at once.
    fn free_for(&self, g: &ExecGraph, t: TaskId) -> bool {
        self.lanes_free(g, t, |queue| queue.is_empty())
    }

    /// Whether `t` finds the lanes it takes free at each of its resources, and each single-lane
    /// resource's queue passes `heads`.
    fn lanes_free(
        &self,
        g: &ExecGraph,
        t: TaskId,
        heads: impl Fn(&BinaryHeap<Reverse<(u64, TaskId)>>) -> bool,
    ) -> bool {
        let lanes = g.task_lanes(t);
        g.task_resources(t).iter().zip(lanes).all(|(&q, &k)| {
            let lanes_of = g.resource_lanes(q);
            let q = q as usize;
            self.in_use[q] + k <= lanes_of && (lanes_of > 1 || heads(&self.queues[q]))
        })
    }

    /// `t`'s lanes taken at each of its resources.
    fn take_lanes(&mut self, g: &ExecGraph, t: TaskId) {
        for (&q, &k) in g.task_resources(t).iter().zip(g.task_lanes(t)) {
            self.in_use[q as usize] += k;
        }
    }

    /// Start `t` if it heads the queue of each single-lane resource it needs and finds the lanes
    /// it takes free everywhere.
    fn try_start(&mut self, g: &ExecGraph, t: TaskId, now: f64) -> bool {
        if !self.lanes_free(g, t, |queue| queue.peek().map(|h| h.0.1) == Some(t)) {
            return false;
        }
        let key = self.queued[t as usize].key;
        for &q in g.task_resources(t) {
            if g.resource_lanes(q) == 1 {
                self.queues[q as usize].pop();
            } else {
                self.waiting[q as usize].remove(&(key, t));
            }
        }
        self.take_lanes(g, t);
        self.start(g, t, now);
        true
    }

    /// Resource `r` has free lanes again: start its queue's head, or, on a multi-lane resource,
    /// the waiting tasks in key order while lanes remain.
    fn retry(&mut self, g: &ExecGraph, r: u32, now: f64) {
        let ri = r as usize;
        if g.resource_lanes(r) == 1 {
            if let Some(&Reverse((_, t))) = self.queues[ri].peek() {
                self.try_again(g, t, now);
            }
            return;
        }
        let mut after = None;
        while self.in_use[ri] < g.resource_lanes(r) {
            let next = match after {
                None => self.waiting[ri].iter().next().copied(),
                Some(k) => self.waiting[ri]
                    .range((std::ops::Bound::Excluded(k), std::ops::Bound::Unbounded))
                    .next()
                    .copied(),
            };
            let Some(entry) = next else { break };
            self.try_again(g, entry.1, now);
            after = Some(entry);
        }
    }

    /// [`Self::try_start`] unless `t` already failed to start in this completion.
    fn try_again(&mut self, g: &ExecGraph, t: TaskId, now: f64) {
        if self.queued[t as usize].failed_at == self.epoch {
            return;
        }
        if !self.try_start(g, t, now) {
            self.queued[t as usize].failed_at = self.epoch;
        }
    }

    fn start(&mut self, g: &ExecGraph, t: TaskId, now: f64) {
        let ti = t as usize;
        if !self.unstarted_load.is_empty() {
            let d = g.duration(t);
            for (&r, &k) in g.task_resources(t).iter().zip(g.task_lanes(t)) {
                self.unstarted_load[r as usize] -= g.work_per_lane(d, r, k);
            }
        }
        let d = g.out_device(t) as usize;
        let begin = now + self.wait_for_host(g, t, d, now);
        self.result.start[ti] = begin;
        self.result.events += 1;
        self.memory[d] += g.out_bytes(t);
        if self.memory[d] > self.result.peak_memory[d] {
            self.result.peak_memory[d] = self.memory[d];
        }
        self.completions.push(sort_key(begin + g.duration(t)), t);
    }

    /// How long task `t`, starting at `now` on device `d`, waits for the host to issue it (0 for
    /// a task without host time): the device's issue clock advances by `t`'s host time.
    fn wait_for_host(&mut self, g: &ExecGraph, t: TaskId, d: usize, now: f64) -> f64 {
        let host = g.host_us(t);
        if host == 0.0 {
            return 0.0;
        }
        self.issued[d] += host;
        (self.issued[d] - now).max(0.0)
    }

    fn complete(&mut self, g: &ExecGraph, order: Order, t: TaskId, now: f64) {
        let ti = t as usize;
        self.result.end[ti] = now;
        self.result.events += 1;
        if now > self.result.makespan {
            self.result.makespan = now;
        }
        let duration = g.duration(t);
        for (&r, &k) in g.task_resources(t).iter().zip(g.task_lanes(t)) {
            self.in_use[r as usize] -= k;
            self.result.busy[r as usize] += g.work_per_lane(duration, r, k);
        }
        for &p in g.predecessors(t) {
            let p = p as usize;
            self.task[p].consumers_left -= 1;
            if self.task[p].consumers_left == 0 {
                self.memory[g.out_device(p as TaskId) as usize] -= g.out_bytes(p as TaskId);
            }
        }
        if g.successors(t).is_empty() {
            self.memory[g.out_device(t) as usize] -= g.out_bytes(t);
        }
        for &s in g.successors(t).iter().chain(g.order_successors(t)) {
            self.task[s as usize].waiting_inputs -= 1;
            if self.task[s as usize].waiting_inputs == 0 {
                self.make_ready(g, order, s, now);
            }
        }
        self.epoch = self.epoch.wrapping_add(1);
        for &r in g.task_resources(t) {
            self.retry(g, r, now);
        }
    }

    /// Whether, as `t` ends at `now`, the iteration surely ends past the limit: the chain of
    /// durations after `t` starts now, and at each of `t`'s resources the unstarted tasks start
    /// no sooner and run at most its lanes at a time, after the last of which at least the
    /// shortest tail of its tasks remains (the bound's one-machine frame, moved to now). Idle
    /// time the bound before the run could not see (a pipeline's bubble, a bucket's wait) is
    /// in `now`: the simulation is given up here, not at its end, with the answer it would give.
    fn bound_passes_limit(&self, g: &ExecGraph, t: TaskId, now: f64) -> bool {
        let Some(frames) = self.bound.frames() else {
            return false;
        };
        let past = |bound: f64| MakespanBound::load_exceeds(bound, self.limit_us);
        if past(now + frames.tail[t as usize]) {
            return true;
        }
        g.task_resources(t).iter().any(|&r| {
            let r = r as usize;
            past(now + self.unstarted_load[r] + frames.last_tail[r])
        })
    }

    fn finish(&mut self, g: &ExecGraph) {
        let r = &mut self.result;
        r.final_memory.extend_from_slice(&self.memory);
        r.peak_allocated.clear();
        r.peak_allocated.extend_from_slice(&r.peak_memory);
        for peak in &mut r.peak_memory {
            *peak = g.device_bytes(*peak);
        }
        for (device, (&peak, &capacity)) in r.peak_memory.iter().zip(g.capacity()).enumerate() {
            if peak > capacity {
                r.oom.push(Oom {
                    device,
                    peak_bytes: peak,
                    capacity_bytes: capacity,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_key_preserves_order_and_round_trips() {
        let xs = [-5.0, -0.5, 0.0, 1e-9, 3.0, 1e12];
        for w in xs.windows(2) {
            assert!(sort_key(w[0]) < sort_key(w[1]));
        }
        for x in [0.0, 2.5, 1e9] {
            assert_eq!(key_time(sort_key(x)), x);
        }
    }
}
