//! `ExecGraph`: what the simulator runs. Tasks (compute on a GPU, a transfer over links, a
//! collective) with durations, the resources each occupies while it runs, dependencies, and the
//! memory each allocates. Flat arrays indexed by task, so the event loop touches no maps.

/// What a task is; the simulator treats all kinds alike, reports tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskKind {
    /// An op's computation on one GPU's compute stream.
    Compute,
    /// A tensor sent over one or more links between devices.
    Transfer,
    /// A collective (AllReduce, broadcast, ...) over a group of devices' links.
    Collective,
}

/// Index of a task in an [`ExecGraph`].
pub(crate) type TaskId = u32;

/// Resources are numbered devices first (`0..devices`, one compute stream each), then links
/// (`devices..devices + links`, one FIFO channel per link direction). A resource has one lane
/// unless given more ([`ExecGraph::set_link_lanes`]): a GPU's NVLink port with six links runs six
/// transfers at once. A task takes one lane of each of its resources unless it asks for more
/// ([`ExecGraph::add_task_with_lanes`]: a collective running one ring per link takes them all).
#[derive(Debug, Clone, Default)]
pub struct ExecGraph {
    devices: usize,
    links: usize,
    /// Lanes of each resource (devices first, then links).
    lanes_of: Vec<u32>,
    /// Memory capacity per device in bytes.
    capacity: Vec<f64>,
    /// Bytes per device outside the tensors (a runtime's context).
    context_bytes: f64,
    /// A runtime allocator's reserve above the tensors' peak, as a share of it.
    allocator_headroom: f64,
    /// Bytes resident on each device for the whole iteration (parameters, optimizer state).
    resident: Vec<f64>,
    kind: Vec<TaskKind>,
    duration: Vec<f64>,
    /// Host time to issue each task before its device can run it, µs (0: none); see
    /// [`ExecGraph::set_host_us`].
    host_us: Vec<f64>,
    /// Resources of task `t`: `resources[res_start[t]..res_start[t + 1]]`.
    res_start: Vec<u32>,
    resources: Vec<u32>,
    /// Lanes the task takes of each of its resources, parallel to `resources`.
    lanes: Vec<u32>,
    /// Device whose memory holds the task's output, and the output's size.
    out_device: Vec<u32>,
    out_bytes: Vec<f64>,
    /// Dispatch priority (lower first) when order is enforced; FIFO ignores it.
    priority: Vec<f64>,
    /// Caller's tag for reports (the op or auxiliary op the task came from).
    label: Vec<u32>,
    deps: Vec<(TaskId, TaskId)>,
    /// Ordering constraints that carry no tensor: `after` waits for `before`, but `before`'s
    /// output is not held for it (a pipeline schedule's order on a stage).
    order_deps: Vec<(TaskId, TaskId)>,
    /// Built by [`ExecGraph::seal`]: successor and predecessor lists.
    succ_start: Vec<u32>,
    succ: Vec<TaskId>,
    pred_start: Vec<u32>,
    pred: Vec<TaskId>,
    order_succ_start: Vec<u32>,
    order_succ: Vec<TaskId>,
    order_pred_count: Vec<u32>,
    sealed: bool,
}

/// Everything about one new task.
#[derive(Debug, Clone)]
pub struct TaskSpec<'a> {
    /// What the task is, for reports.
    pub kind: TaskKind,
    /// How long the task occupies its resources, µs (finite, non-negative).
    pub duration: f64,
    /// Resources (devices, then links, as numbered on [`ExecGraph`]) the task occupies.
    pub resources: &'a [u32],
    /// Device whose memory holds the task's output until its consumers finish.
    pub out_device: u32,
    /// Size of the task's output, bytes.
    pub out_bytes: f64,
    /// Dispatch priority (lower first) when order is enforced; FIFO ignores it.
    pub priority: f64,
    /// Caller's tag for reports (the op or auxiliary op the task came from).
    pub label: u32,
}

impl ExecGraph {
    /// An empty graph over `capacity.len()` devices and `links` link channels.
    pub fn new(capacity: Vec<f64>, links: usize) -> ExecGraph {
        let devices = capacity.len();
        ExecGraph {
            devices,
            links,
            resident: vec![0.0; devices],
            lanes_of: vec![1; devices + links],
            capacity,
            res_start: vec![0],
            ..ExecGraph::default()
        }
    }

    /// Devices (GPUs) in the graph, resources `0..devices`.
    pub fn devices(&self) -> usize {
        self.devices
    }

    pub(crate) fn links(&self) -> usize {
        self.links
    }

    /// Resources in all: devices, then link channels.
    pub fn resource_count(&self) -> usize {
        self.devices + self.links
    }

    /// The resource number of link `l`.
    pub(crate) fn link_resource(&self, l: usize) -> u32 {
        (self.devices + l) as u32
    }

    /// Give link `l` `lanes` parallel lanes (at least one).
    pub(crate) fn set_link_lanes(&mut self, l: usize, lanes: u32) {
        self.lanes_of[self.devices + l] = lanes.max(1);
    }

    /// Lanes of resource `r`.
    pub(crate) fn resource_lanes(&self, r: u32) -> u32 {
        self.lanes_of[r as usize]
    }

    /// The work per lane of resource `r` that a task of `duration` µs taking `k` of its lanes
    /// does: what its busy time and the bounds count.
    pub(crate) fn work_per_lane(&self, duration: f64, r: u32, k: u32) -> f64 {
        duration * f64::from(k) / f64::from(self.resource_lanes(r))
    }

    pub(crate) fn add_resident(&mut self, device: usize, bytes: f64) {
        self.resident[device] += bytes;
    }

    /// Bytes resident on each device for the whole iteration (parameters, optimizer state).
    pub fn resident(&self) -> &[f64] {
        &self.resident
    }

    pub(crate) fn capacity(&self) -> &[f64] {
        &self.capacity
    }

    /// Charge every device `context_bytes` beyond its tensors, and an allocator reserve of
    /// `headroom` times their peak: what the memory check compares with the capacity.
    pub(crate) fn set_runtime_memory(&mut self, context_bytes: f64, headroom: f64) {
        self.context_bytes = context_bytes;
        self.allocator_headroom = headroom;
    }

    /// What a device needs when its tensors peak at `allocated` bytes.
    pub(crate) fn device_bytes(&self, allocated: f64) -> f64 {
        allocated * (1.0 + self.allocator_headroom) + self.context_bytes
    }

    /// Room for `tasks` more tasks holding `resources` resources in all: a compiler that knows
    /// about how many it will add then fills arrays allocated once, not grown and copied step by
    /// step (several per simulated strategy, of up to 10⁵ tasks).
    pub(crate) fn reserve(&mut self, tasks: usize, resources: usize) {
        self.kind.reserve(tasks);
        self.duration.reserve(tasks);
        self.host_us.reserve(tasks);
        self.res_start.reserve(tasks);
        self.out_device.reserve(tasks);
        self.out_bytes.reserve(tasks);
        self.priority.reserve(tasks);
        self.label.reserve(tasks);
        self.resources.reserve(resources);
        self.lanes.reserve(resources);
    }

    /// A task taking one lane of each of its resources.
    pub fn add_task(&mut self, spec: TaskSpec<'_>) -> TaskId {
        let n = spec.resources.len();
        self.push_task(spec, std::iter::repeat_n(1, n))
    }

    /// A task taking `lanes[i]` lanes of `spec.resources[i]` (each at most that resource's lanes).
    pub(crate) fn add_task_with_lanes(&mut self, spec: TaskSpec<'_>, lanes: &[u32]) -> TaskId {
        debug_assert_eq!(lanes.len(), spec.resources.len());
        debug_assert!(
            spec.resources
                .iter()
                .zip(lanes)
                .all(|(&r, &k)| k >= 1 && k <= self.lanes_of[r as usize])
        );
        self.push_task(spec, lanes.iter().copied())
    }

    fn push_task(&mut self, spec: TaskSpec<'_>, lanes: impl Iterator<Item = u32>) -> TaskId {
        debug_assert!(spec.duration >= 0.0 && spec.duration.is_finite());
        debug_assert!((spec.out_device as usize) < self.devices);
        debug_assert!(
            spec.resources
                .iter()
                .all(|&r| (r as usize) < self.resource_count())
        );
        let id = self.kind.len() as TaskId;
        self.kind.push(spec.kind);
        self.duration.push(spec.duration);
        self.host_us.push(0.0);
        self.resources.extend_from_slice(spec.resources);
        self.lanes.extend(lanes);
        self.res_start.push(self.resources.len() as u32);
        self.out_device.push(spec.out_device);
        self.out_bytes.push(spec.out_bytes);
        self.priority.push(spec.priority);
        self.label.push(spec.label);
        self.sealed = false;
        id
    }

    /// Task `t` (a compute task) must first be issued by its device's host, which takes `us` µs
    /// and issues its device's tasks one after another, in the order they start, running ahead
    /// of the device: `t` starts no earlier than the sum of the host times of its device's tasks
    /// issued before it and its own ([`crate::cost::HostDispatch`]).
    pub(crate) fn set_host_us(&mut self, t: TaskId, us: f64) {
        debug_assert!(us >= 0.0 && us.is_finite());
        self.host_us[t as usize] = us;
    }

    /// `after` may start only when `before` has finished; `after` consumes `before`'s output.
    pub fn add_dep(&mut self, before: TaskId, after: TaskId) {
        self.deps.push((before, after));
        self.sealed = false;
    }

    /// `after` may start only when `before` has finished, and consumes nothing of it: `before`'s
    /// memory is freed by its data consumers alone.
    pub(crate) fn add_order_dep(&mut self, before: TaskId, after: TaskId) {
        self.order_deps.push((before, after));
        self.sealed = false;
    }

    /// Build the adjacency lists; called by the simulator, cheap to call again.
    pub fn seal(&mut self) {
        if self.sealed {
            return;
        }
        let n = self.len();
        self.order_succ_start = starts(n, self.order_deps.iter().map(|d| d.0));
        self.order_succ = fill(&self.order_succ_start, self.order_deps.iter().copied());
        self.order_pred_count = vec![0; n];
        for &(_, after) in &self.order_deps {
            self.order_pred_count[after as usize] += 1;
        }
        self.succ_start = starts(n, self.deps.iter().map(|d| d.0));
        self.pred_start = starts(n, self.deps.iter().map(|d| d.1));
        self.succ = fill(&self.succ_start, self.deps.iter().map(|&(a, b)| (a, b)));
        self.pred = fill(&self.pred_start, self.deps.iter().map(|&(a, b)| (b, a)));
        self.sealed = true;
    }

    pub(crate) fn is_sealed(&self) -> bool {
        self.sealed
    }

    /// Number of tasks.
    pub fn len(&self) -> usize {
        self.kind.len()
    }

    /// Whether the graph has no task.
    pub fn is_empty(&self) -> bool {
        self.kind.is_empty()
    }

    pub(crate) fn kind(&self, t: TaskId) -> TaskKind {
        self.kind[t as usize]
    }

    /// Duration of task `t`, µs.
    pub fn duration(&self, t: TaskId) -> f64 {
        self.duration[t as usize]
    }

    /// Host time to issue task `t`, µs ([`Self::set_host_us`]).
    pub(crate) fn host_us(&self, t: TaskId) -> f64 {
        self.host_us[t as usize]
    }

    /// Resources task `t` occupies while it runs (devices, then links).
    pub fn task_resources(&self, t: TaskId) -> &[u32] {
        let t = t as usize;
        &self.resources[self.res_start[t] as usize..self.res_start[t + 1] as usize]
    }

    /// Lanes task `t` takes of each of its resources, parallel to [`Self::task_resources`].
    pub(crate) fn task_lanes(&self, t: TaskId) -> &[u32] {
        let t = t as usize;
        &self.lanes[self.res_start[t] as usize..self.res_start[t + 1] as usize]
    }

    pub(crate) fn out_device(&self, t: TaskId) -> u32 {
        self.out_device[t as usize]
    }

    /// Size of task `t`'s output, bytes.
    pub fn out_bytes(&self, t: TaskId) -> f64 {
        self.out_bytes[t as usize]
    }

    pub(crate) fn priority(&self, t: TaskId) -> f64 {
        self.priority[t as usize]
    }

    /// The caller's tag of task `t` (the op or auxiliary op it came from).
    pub fn label(&self, t: TaskId) -> u32 {
        self.label[t as usize]
    }

    /// Successors of `t`; the graph must be sealed.
    pub fn successors(&self, t: TaskId) -> &[TaskId] {
        debug_assert!(self.sealed);
        let t = t as usize;
        &self.succ[self.succ_start[t] as usize..self.succ_start[t + 1] as usize]
    }

    /// Predecessors of `t`; the graph must be sealed.
    pub fn predecessors(&self, t: TaskId) -> &[TaskId] {
        debug_assert!(self.sealed);
        let t = t as usize;
        &self.pred[self.pred_start[t] as usize..self.pred_start[t + 1] as usize]
    }

    /// Tasks that wait for `t` by an order dependency ([`Self::add_order_dep`]); sealed graph.
    pub(crate) fn order_successors(&self, t: TaskId) -> &[TaskId] {
        debug_assert!(self.sealed);
        let t = t as usize;
        &self.order_succ[self.order_succ_start[t] as usize..self.order_succ_start[t + 1] as usize]
    }

    /// Everything `t` waits for: its data and its order predecessors; sealed graph.
    pub(crate) fn wait_count(&self, t: TaskId) -> u32 {
        debug_assert!(self.sealed);
        self.predecessors(t).len() as u32 + self.order_pred_count[t as usize]
    }
}

/// How a link is used: its lane count and every (task, lanes taken) on it.
type LinkUse<'a> = (u32, &'a [(TaskId, u32)]);

impl ExecGraph {
    /// Merge links that every task uses alike: two links held by exactly the same tasks, each
    /// taking the same lanes of both, with equal lane counts, are always equally busy, so one of
    /// them can stand for both. A collective over a ring of 512 GPUs holds about a thousand
    /// links, all alike when nothing else uses them: the simulator then checks and frees one
    /// where it checked a thousand, with the same schedule. Returns, for each link, the link
    /// standing for it (whose busy time is its own).
    pub(crate) fn merge_alike_links(&mut self) -> Vec<u32> {
        // Each link's users, in task order, as one array sliced by link (no list per link).
        let link_of = |r: u32| (r as usize).checked_sub(self.devices);
        let user_start = starts(
            self.links,
            self.resources
                .iter()
                .filter_map(|&r| link_of(r))
                .map(|l| l as TaskId),
        );
        let uses = (0..self.len() as TaskId).flat_map(|t| {
            let on = self.task_resources(t).iter().zip(self.task_lanes(t));
            on.filter_map(move |(&r, &k)| link_of(r).map(|l| (l as u32, (t, k))))
        });
        let users: Vec<(TaskId, u32)> = fill(&user_start, uses);
        let used_by = |l: usize| &users[user_start[l] as usize..user_start[l + 1] as usize];
        let mut first: std::collections::HashMap<LinkUse<'_>, u32> = Default::default();
        let stand_in: Vec<u32> = (0..self.links)
            .map(|l| {
                let key = (self.lanes_of[self.devices + l], used_by(l));
                *first.entry(key).or_insert(l as u32)
            })
            .collect();
        // Links no task uses may stand for each other: no task's resources change then.
        if stand_in
            .iter()
            .enumerate()
            .all(|(l, &s)| s as usize == l || used_by(l).is_empty())
        {
            return stand_in;
        }
        let (mut resources, mut lanes, mut res_start) = (Vec::new(), Vec::new(), vec![0u32]);
        for t in 0..self.len() as TaskId {
            let begin = resources.len();
            for (&r, &k) in self.task_resources(t).iter().zip(self.task_lanes(t)) {
                let r = match link_of(r) {
                    Some(l) => (self.devices as u32) + stand_in[l],
                    None => r,
                };
                if !resources[begin..].contains(&r) {
                    resources.push(r);
                    lanes.push(k);
                }
            }
            res_start.push(resources.len() as u32);
        }
        self.resources = resources;
        self.lanes = lanes;
        self.res_start = res_start;
        stand_in
    }
}

fn starts(n: usize, keys: impl Iterator<Item = TaskId>) -> Vec<u32> {
    let mut start = vec![0u32; n + 1];
    for k in keys {
        start[k as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    start
}

/// `pairs` of (key, value) as one array sliced by key (`start` from [`starts`] over the keys),
/// each key's values in the order given.
fn fill<T: Copy + Default>(start: &[u32], pairs: impl Iterator<Item = (u32, T)>) -> Vec<T> {
    let mut next: Vec<u32> = start[..start.len() - 1].to_vec();
    let mut out = vec![T::default(); *start.last().unwrap() as usize];
    for (key, value) in pairs {
        out[next[key as usize] as usize] = value;
        next[key as usize] += 1;
    }
    out
}
