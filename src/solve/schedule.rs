//! Schedules of an [`Instance`] and the one timing rule every part of `solve` agrees on.
//!
//! A node runs on its device for its compute time, one node at a time per device. A tensor edge
//! between nodes on different devices becomes a transfer of `latency + bytes / bandwidth`:
//! with [`Channels::Unlimited`] (QuickP) it starts when its producer ends and never waits for
//! another transfer; with [`Channels::PerPair`] (MOIRAI) it runs on the channel of its ordered
//! device pair, one transfer at a time. Given where each node goes and one sequence of all tasks
//! (a linear extension of the precedences), [`semi_active`] starts every task as early as the
//! sequence allows: the brute-force enumerator, the warm-start heuristic and the read-back of a
//! MILP solution all time schedules with it.

use serde::Serialize;

use super::instance::Instance;

/// How transfers share the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Channels {
    /// No congestion: every transfer has the route to itself (QuickP P1/P2).
    Unlimited,
    /// One channel per ordered device pair, transfers on it never overlap (MOIRAI).
    PerPair,
}

/// One unit of work of the extended task graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Task {
    Node(usize),
    /// The transfer of edge `e` (only when its ends are on different devices).
    Transfer(usize),
}

/// A timed schedule.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    pub device: Vec<usize>,
    pub start: Vec<f64>,
    /// Start of each edge's transfer; `None` when both ends share a device.
    pub transfer_start: Vec<Option<f64>>,
    pub makespan: f64,
}

impl Plan {
    pub(crate) fn finish(&self, inst: &Instance, i: usize) -> f64 {
        self.start[i] + inst.nodes[i].compute[self.device[i]]
    }

    /// Every task, ordered by start time (ties: producers before consumers), which is a linear
    /// extension of the precedences and the order each device and channel runs its tasks in.
    pub(crate) fn sequence(&self, inst: &Instance) -> Vec<Task> {
        let rank = topo_rank(inst);
        let mut keyed: Vec<(f64, f64, Task)> = (0..inst.len())
            .map(|i| (self.start[i], rank[i] as f64, Task::Node(i)))
            .collect();
        for (e, edge) in inst.edges.iter().enumerate() {
            if self.device[edge.src] != self.device[edge.dst] {
                let t = self.transfer_start[e].unwrap_or_else(|| self.finish(inst, edge.src));
                keyed.push((t, rank[edge.src] as f64 + 0.5, Task::Transfer(e)));
            }
        }
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        keyed.into_iter().map(|k| k.2).collect()
    }

    /// Bytes each device holds by this placement.
    pub(crate) fn memory(&self, inst: &Instance) -> Vec<f64> {
        let mut used = vec![0.0; inst.devices()];
        for (i, &d) in self.device.iter().enumerate() {
            used[d] += inst.nodes[i].memory;
        }
        used
    }

    /// Whether the placement respects memory and co-location.
    pub(crate) fn admissible(&self, inst: &Instance) -> bool {
        let fits = self
            .memory(inst)
            .iter()
            .zip(&inst.capacity)
            .all(|(u, c)| u <= c);
        let leader = inst.colocation_leader();
        fits && (0..inst.len()).all(|i| self.device[i] == self.device[leader[i]])
    }
}

/// Position of each node in the instance's topological order.
pub(crate) fn topo_rank(inst: &Instance) -> Vec<usize> {
    let mut rank = vec![0; inst.len()];
    for (r, i) in inst.topological_order().into_iter().enumerate() {
        rank[i] = r;
    }
    rank
}

/// Incremental timing state, shared by [`semi_active`], the heuristic and the enumerator.
#[derive(Debug, Clone)]
pub(crate) struct Timer<'a> {
    inst: &'a Instance,
    channels: Channels,
    pub device: Vec<usize>,
    pub start: Vec<f64>,
    pub finish: Vec<f64>,
    /// When each edge's tensor is on its consumer's device (NaN: not yet).
    pub arrival: Vec<f64>,
    pub transfer_start: Vec<Option<f64>>,
    device_free: Vec<f64>,
    channel_free: Vec<f64>,
    pub makespan: f64,
    in_edges: &'a [Vec<usize>],
}

/// `in_edges[i]`: the edges into node i.
pub(crate) fn in_edges(inst: &Instance) -> Vec<Vec<usize>> {
    let mut v = vec![Vec::new(); inst.len()];
    for (e, edge) in inst.edges.iter().enumerate() {
        v[edge.dst].push(e);
    }
    v
}

impl<'a> Timer<'a> {
    pub(crate) fn new(
        inst: &'a Instance,
        channels: Channels,
        device: Vec<usize>,
        in_edges: &'a [Vec<usize>],
    ) -> Timer<'a> {
        let d = inst.devices();
        Timer {
            inst,
            channels,
            device,
            start: vec![f64::NAN; inst.len()],
            finish: vec![f64::NAN; inst.len()],
            arrival: vec![f64::NAN; inst.edges.len()],
            transfer_start: vec![None; inst.edges.len()],
            device_free: vec![0.0; d],
            channel_free: vec![0.0; d * d],
            makespan: 0.0,
            in_edges,
        }
    }

    /// Whether edge `e` needs a transfer task of its own (a congested channel).
    pub(crate) fn is_transfer_task(&self, e: usize) -> bool {
        let edge = self.inst.edges[e];
        self.channels == Channels::PerPair && self.device[edge.src] != self.device[edge.dst]
    }

    /// Run `task` as early as its inputs and resources allow (its predecessors must have run).
    pub(crate) fn run(&mut self, task: Task) {
        match task {
            Task::Node(i) => self.run_node(i),
            Task::Transfer(e) => self.run_transfer(e),
        }
    }

    fn run_node(&mut self, i: usize) {
        let d = self.device[i];
        let mut ready = self.device_free[d];
        for &e in self.in_edges[i].iter() {
            let src = self.inst.edges[e].src;
            let arrive = if self.is_transfer_task(e) {
                self.arrival[e]
            } else {
                let (k, l) = (self.device[src], d);
                let t = self.finish[src] + self.inst.comm(e, k, l);
                if k != l {
                    self.transfer_start[e] = Some(self.finish[src]);
                }
                self.arrival[e] = t;
                t
            };
            ready = ready.max(arrive);
        }
        self.start[i] = ready;
        self.finish[i] = ready + self.inst.nodes[i].compute[d];
        self.device_free[d] = self.finish[i];
        self.makespan = self.makespan.max(self.finish[i]);
    }

    fn run_transfer(&mut self, e: usize) {
        let edge = self.inst.edges[e];
        let (k, l) = (self.device[edge.src], self.device[edge.dst]);
        let ch = k * self.inst.devices() + l;
        let start = self.finish[edge.src].max(self.channel_free[ch]);
        let end = start + self.inst.comm(e, k, l);
        self.channel_free[ch] = end;
        self.transfer_start[e] = Some(start);
        self.arrival[e] = end;
        self.makespan = self.makespan.max(end);
    }

    pub(crate) fn into_plan(self) -> Plan {
        Plan {
            device: self.device,
            start: self.start,
            transfer_start: self.transfer_start,
            makespan: self.makespan,
        }
    }
}

/// Time `sequence` on placement `device`: every task as early as the sequence allows. Transfers
/// in the sequence are ignored under [`Channels::Unlimited`] (they never wait).
pub(crate) fn semi_active(
    inst: &Instance,
    channels: Channels,
    device: &[usize],
    sequence: &[Task],
) -> Plan {
    let ins = in_edges(inst);
    let mut t = Timer::new(inst, channels, device.to_vec(), &ins);
    for &task in sequence {
        match task {
            Task::Transfer(e) if !t.is_transfer_task(e) => {}
            task => t.run(task),
        }
    }
    t.into_plan()
}

/// A quick feasible schedule for the warm start and the big-M horizon: nodes in topological
/// order, each on the device (with room, honouring co-location) where it would finish first, its
/// transfers queued on their channels just before it.
pub(crate) fn greedy(inst: &Instance, channels: Channels) -> Plan {
    list_schedule(inst, channels, &vec![None; inst.len()], None)
}

/// The second warm start: the nodes of the critical paths (fastest times, free transfers) pinned
/// to the device that runs them fastest, every other node kept off it and placed as [`greedy`]
/// places. Where the optimum is the critical path itself (the off-path work hides beside it, as
/// the weight gradients of a CNN's training step do on four GPUs), this finds it, while the
/// greedy rule lets the first off-path node take the path's device and delay it.
pub(crate) fn critical_path_first(inst: &Instance, channels: Channels) -> Plan {
    let path = inst.critical_nodes();
    let path_time = |d: usize| -> f64 { path.iter().map(|&i| inst.nodes[i].compute[d]).sum() };
    let path_bytes: f64 = path.iter().map(|&i| inst.nodes[i].memory).sum();
    let home = (0..inst.devices())
        .filter(|&d| path_bytes <= inst.capacity[d])
        .min_by(|&a, &b| path_time(a).total_cmp(&path_time(b)))
        .unwrap_or(0);
    let mut pinned = vec![None; inst.len()];
    for &i in &path {
        pinned[i] = Some(home);
    }
    list_schedule(inst, channels, &pinned, Some(home))
}

/// List scheduling in topological order: a pinned node goes to its device; any other to the
/// device with room (and, while another has room, not `avoid`) where it would finish first.
fn list_schedule(
    inst: &Instance,
    channels: Channels,
    pinned: &[Option<usize>],
    avoid: Option<usize>,
) -> Plan {
    let n = inst.len();
    let ins = in_edges(inst);
    let order = inst.topological_order();
    let leader = inst.colocation_leader();
    let mut used = vec![0.0; inst.devices()];
    let mut device = vec![usize::MAX; n];
    let mut t = Timer::new(inst, channels, vec![0; n], &ins);
    for &i in &order {
        let forced = (leader[i] != i && device[leader[i]] != usize::MAX)
            .then(|| device[leader[i]])
            .or(pinned[i]);
        let candidates: Vec<usize> = match forced {
            Some(d) => vec![d],
            None => {
                // Devices with room, not `avoid` while another has room; every device when none has.
                let room = |d: &usize| used[*d] + inst.nodes[i].memory <= inst.capacity[*d];
                let with_room: Vec<usize> = (0..inst.devices()).filter(room).collect();
                let preferred: Vec<usize> = with_room
                    .iter()
                    .copied()
                    .filter(|&d| Some(d) != avoid)
                    .collect();
                match (preferred.is_empty(), with_room.is_empty()) {
                    (false, _) => preferred,
                    (true, false) => with_room,
                    (true, true) => (0..inst.devices()).collect(),
                }
            }
        };
        let mut best: Option<(f64, Timer)> = None;
        for d in candidates {
            let mut trial = t.clone();
            place(&mut trial, &ins[i], i, d);
            let f = trial.finish[i];
            if best.as_ref().is_none_or(|(bf, _)| f < *bf) {
                best = Some((f, trial));
            }
        }
        let (_, chosen) = best.expect("at least one device");
        t = chosen;
        device[i] = t.device[i];
        used[device[i]] += inst.nodes[i].memory;
    }
    t.into_plan()
}

/// The fallback when [`greedy`] runs out of memory: nodes in topological order filled into the
/// GPUs in turn, each GPU taking its share of the total bytes (proportional to its capacity),
/// co-located nodes following their set; then timed in that order. Admissible whenever the bytes
/// can be cut that way, which is what tight instances need first.
pub(crate) fn memory_first(inst: &Instance, channels: Channels) -> Plan {
    let total: f64 = inst.nodes.iter().map(|n| n.memory).sum();
    let capacity: f64 = inst.capacity.iter().sum();
    let order = inst.topological_order();
    let leader = inst.colocation_leader();
    let mut device = vec![usize::MAX; inst.len()];
    let mut used = vec![0.0; inst.devices()];
    let mut k = 0;
    for &i in &order {
        let set_device = (0..inst.len())
            .find(|&j| leader[j] == leader[i] && device[j] != usize::MAX)
            .map(|j| device[j]);
        let d = match set_device {
            Some(d) => d,
            None => {
                let share = |k: usize| inst.capacity[k] / capacity * total;
                while k + 1 < inst.devices()
                    && (used[k] + inst.nodes[i].memory > inst.capacity[k] || used[k] >= share(k))
                {
                    k += 1;
                }
                k
            }
        };
        device[i] = d;
        used[d] += inst.nodes[i].memory;
    }
    let mut sequence = Vec::new();
    for &i in &order {
        for (e, edge) in inst.edges.iter().enumerate() {
            if edge.dst == i && device[edge.src] != device[i] {
                sequence.push(Task::Transfer(e));
            }
        }
        sequence.push(Task::Node(i));
    }
    semi_active(inst, channels, &device, &sequence)
}

/// Put node `i` on `d` in the timer, running its transfers first.
fn place(t: &mut Timer, ins: &[usize], i: usize, d: usize) {
    t.device[i] = d;
    for &e in ins {
        if t.is_transfer_task(e) {
            t.run(Task::Transfer(e));
        }
    }
    t.run(Task::Node(i));
}
