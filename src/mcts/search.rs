//! The search loop: selection by PUCT with virtual loss, expansion, leaf completion and
//! simulation in parallel batches, backup, and TAG's SFB double check of the result.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::StdRng;
use rayon::prelude::*;

use super::actions::{PACKINGS, actions, check_action_space, single_group_actions};
use super::config::{MctsConfig, OOM_REWARD, SearchSplit};
use super::grouping::{group_neighbours, ordered_groups};
use super::known::Known;
use super::reserve::{Longest, time_for};
use super::result::{Progress, SearchResult, VertexTarget};
use super::tree::{NO_CHILD, Node, Outcome, Tree};
use crate::error::{Result, SearchError};
use crate::evaluate::{Placement, until};
use crate::gnn::{Feedback, GnnPolicy, VertexPriors};
use crate::pipeline_plan::PipelineFrames;
use crate::problem::Problem;
use crate::strategy::{AllReducePacking, BatchSplit, GroupDecision, ReplicationOption};

/// The search state: tree, evaluation cache and best strategy so far.
pub struct Mcts<'a> {
    pub(super) problem: Problem<'a>,
    pub(super) op_group: Vec<u32>,
    pub(super) groups: usize,
    pub(super) actions: Vec<GroupDecision>,
    pub(super) config: MctsConfig,
    pub(super) tree: Tree,
    pub(super) cache: HashMap<Vec<u16>, Outcome>,
    pub(super) rng: StdRng,
    pub(super) dp: Outcome,
    /// Best (by fit, then time) complete choice seen.
    pub(super) best: Option<(Vec<u16>, Outcome)>,
    pub(super) beat_dp_at: Option<usize>,
    pub(super) iterations: usize,
    /// The GNN that gives new vertices their priors, if any.
    pub(super) policy: Option<VertexPriors<'a>>,
    /// Whether the policy's forward passes ran past the time limit and were abandoned: the
    /// vertices created since have uniform priors.
    pub(super) priors_abandoned: bool,
    /// Runtime feedback of each simulated complete choice (only with a policy).
    pub(super) feedback: HashMap<Vec<u16>, Feedback>,
    /// Vertices created in this batch that wait for priors: node index and path.
    pub(super) pending: Vec<(usize, Vec<u16>)>,
    /// Batch shares of the simulated strategies (DP-NCCL's reference always splits evenly).
    pub(super) split: BatchSplit,
    /// Placements the polish starts from besides data parallelism and the tree's best, with
    /// their outcome when the caller simulated them.
    pub(super) starts: Vec<(Placement, Option<Outcome>)>,
    /// `dp-subset`'s placement and outcome when the caller already has them.
    pub(super) data_parallel: Option<(Placement, Outcome)>,
    /// The actions that all-reduce over one device group's GPUs (on clusters small enough for
    /// every subset of device groups to be an action; none beyond).
    pub(super) single_group_allreduce: Vec<u16>,
    /// The op groups each op group exchanges tensors with, itself included.
    pub(super) group_neighbours: Vec<Vec<usize>>,
    /// When the search began (its grouping included): `config.seconds` counts from here.
    pub(super) began: Instant,
    /// The pipelines the tree searches besides per-group strategies ([`super::pipelines`]).
    pub(super) frames: Option<Arc<PipelineFrames>>,
    /// New pipeline leaves the tree selected.
    pub(super) pipeline_leaves: usize,
    /// Pipelines cached from `pipeline-dp`'s simulations, not the search's.
    pub(super) pipelines_known: usize,
    /// The longest leaf simulation: what a time limit keeps back for the result's compilation.
    pub(super) slowest_simulation: Longest,
    /// The longest round of the polish's moves (simulated side by side).
    pub(super) slowest_round: Longest,
    /// What the polish's simulations told of the points they ran ([`super::known`]).
    pub(super) known: Known,
    /// Seed leaves simulated ([`super::seeds`]).
    pub(super) seeds: usize,
    /// Whether a leaf was abandoned at its deadline ([`Mcts::leaf_deadline`]): the search then
    /// ends.
    pub(super) abandoned: bool,
}

impl<'a> Mcts<'a> {
    /// A search over the given op groups (ids dense, 0 = decided first).
    pub fn new(problem: Problem<'a>, op_group: Vec<u32>, config: MctsConfig) -> Result<Mcts<'a>> {
        let groups = op_group.iter().map(|&g| g as usize + 1).max().unwrap_or(0);
        if groups == 0 {
            return Err(SearchError::NoOps.into());
        }
        check_action_space(problem.cluster)?;
        let actions = actions(problem.cluster);
        let group_neighbours = group_neighbours(problem.graph, &op_group, groups);
        let single_group_allreduce =
            single_group_actions(problem.cluster, &actions, ReplicationOption::AllReduce);
        let mut search = Mcts {
            problem,
            op_group,
            groups,
            tree: Tree::new(actions.len()),
            actions,
            cache: HashMap::new(),
            rng: StdRng::seed_from_u64(config.seed),
            config,
            dp: Outcome {
                time_us: 0.0,
                fits: false,
                packing: AllReducePacking::Packed,
            },
            best: None,
            beat_dp_at: None,
            iterations: 0,
            policy: None,
            priors_abandoned: false,
            feedback: HashMap::new(),
            pending: Vec::new(),
            split: BatchSplit::Even,
            starts: Vec::new(),
            data_parallel: None,
            group_neighbours,
            single_group_allreduce,
            began: Instant::now(),
            frames: None,
            pipeline_leaves: 0,
            pipelines_known: 0,
            slowest_simulation: Longest::default(),
            slowest_round: Longest::default(),
            known: Known::default(),
            seeds: 0,
            abandoned: false,
        };
        // DP-NCCL is action 0 everywhere: simulating it first sets the reward's scale and
        // makes it the incumbent, so the search never returns anything slower that fits.
        let dp_choice = vec![0u16; search.groups];
        let dp_began = Instant::now();
        search.dp = search.outcome(&dp_choice, AllReducePacking::Packed)?;
        let dp_took = dp_began.elapsed();
        search.best = Some((dp_choice.clone(), search.dp));
        // The same choice under the best packing (bucketed: Horovod) is the search's start:
        // backed into the tree as one visit of the root's DP edge, so once worse strategies
        // pull the root's mean down, that edge is preferred and its children, data parallelism
        // with one group changed, are tried. It is iteration 0, not counted in the budget.
        // Timed: the first measure of a leaf's cost, which the seeds' share of a time limit
        // is judged by. Under a limit too short for it (one simulation per packing, more to
        // choose the shares: seconds on a graph of 10⁵ ops), DP-NCCL's measure stands for it.
        let no_time = (search.config.seconds).is_some_and(|s| {
            let needed = dp_took.as_secs_f64() * (PACKINGS.len() + 1) as f64;
            search.began.elapsed().as_secs_f64() + needed > s
        });
        let start = if no_time {
            search.slowest_simulation.record(dp_took);
            search.dp
        } else {
            let (start, _) = search
                .slowest_simulation
                .timed(|| search.simulate(&dp_choice))?;
            search.choose_split(&dp_choice, start)?
        };
        search.cache.insert(dp_choice.clone(), start);
        search.record(&dp_choice, start);
        let reward = search.reward(start);
        search.tree.note_reward(reward);
        search.tree.nodes[0].edges[0].virtual_visits = 1;
        search.tree.nodes[0].edges[0].child = 1;
        search.tree.nodes.push(Node::new(search.actions.len()));
        search.tree.backup(&[0], reward);
        Ok(search)
    }

    /// A search over `groups` METIS op groups of `problem`, numbered in `config`'s group order
    /// (METIS seeded by `config.seed`): the grouping every search of the crate starts from.
    pub(crate) fn grouped(
        problem: Problem<'a>,
        groups: usize,
        config: MctsConfig,
    ) -> Result<Mcts<'a>> {
        let began = Instant::now();
        let op_group = ordered_groups(&problem, groups, config.seed, config.group_order)?;
        let mut search = Mcts::new(problem, op_group, config)?;
        search.began = began;
        Ok(search)
    }

    /// The action space: every (device set, replication option) an op group may be given; index
    /// 0 is DP-NCCL's all-GPU all-reduce.
    pub fn actions(&self) -> &[GroupDecision] {
        &self.actions
    }

    /// With [`SearchSplit::Auto`], keep speed-proportional batch shares for the whole search
    /// when they make data parallelism (`dp_choice`) faster than `even` does; the start under
    /// the chosen shares.
    fn choose_split(&mut self, dp_choice: &[u16], even: Outcome) -> Result<Outcome> {
        if self.config.batch_split == SearchSplit::Even {
            return Ok(even);
        }
        self.split = BatchSplit::Proportional;
        let (proportional, _) = self.simulate(dp_choice)?;
        if proportional.better_than(&even) {
            return Ok(proportional);
        }
        self.split = BatchSplit::Even;
        Ok(even)
    }

    /// Also polish from `starts` after the tree (the cheap heuristics' placements, say), and
    /// return one of them when nothing found is faster: the search then never loses to them.
    pub(crate) fn with_starts(mut self, starts: Starts) -> Mcts<'a> {
        let known = starts.known.into_iter().map(|(placement, time_us, fits)| {
            let packing = placement.strategy.allreduce;
            let outcome = Outcome {
                time_us,
                fits,
                packing,
            };
            (placement, Some(outcome))
        });
        self.starts = known
            .chain(starts.unsimulated.into_iter().map(|p| (p, None)))
            .collect();
        if let Some((placement, time_us, fits)) = starts.data_parallel {
            self = self.with_data_parallel(placement, time_us, fits);
        }
        if let Some(frames) = starts.pipelines {
            self.with_frames(frames);
        }
        self
    }

    /// `dp-subset`'s placement with its simulated time and fit, when the caller has run it, so the
    /// polish need not search the device-group subsets again.
    pub(crate) fn with_data_parallel(
        mut self,
        placement: Placement,
        time_us: f64,
        fits: bool,
    ) -> Mcts<'a> {
        let packing = placement.strategy.allreduce;
        self.data_parallel = Some((
            placement,
            Outcome {
                time_us,
                fits,
                packing,
            },
        ));
        self
    }

    /// Take priors from `policy` instead of uniform ones. The root (nothing decided) and the
    /// start vertex (group 0 on DP) get theirs from the start's simulation, DP everywhere.
    pub fn with_policy(mut self, policy: &'a GnnPolicy) -> Result<Mcts<'a>> {
        self.policy = Some(VertexPriors::new(
            policy,
            &self.problem,
            &self.op_group,
            &self.actions,
            self.dp.time_us,
        ));
        let dp_choice = vec![0u16; self.groups];
        let (_, feedback) = self.simulate(&dp_choice)?;
        self.feedback
            .insert(dp_choice, feedback.expect("a policy is set"));
        self.pending = vec![(0, Vec::new()), (1, vec![0])];
        self.assign_priors();
        Ok(self)
    }

    /// DP-NCCL's simulated iteration time, µs: the reward's reference.
    pub(crate) fn dp_us(&self) -> f64 {
        self.dp.time_us
    }

    /// Op groups, decided in id order.
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// The simulated iteration time (µs) of a complete choice under its better packing, with
    /// the search's batch split; infinite when it runs out of memory. Takes `&self` so a
    /// teacher can score many choices in parallel (nothing is cached).
    pub fn choice_time(&self, choice: &[u16]) -> Result<f64> {
        let (o, _) = self.simulate(choice)?;
        Ok(if o.fits { o.time_us } else { f64::INFINITY })
    }

    /// A training target for the vertex `path` from outside the tree (a teacher's decision):
    /// the GNN input the search would score that vertex from (its completion, simulated for
    /// the runtime feedback) and `visits` as its distribution. Needs a policy.
    pub(crate) fn vertex_target(
        &self,
        path: &[u16],
        visits: Vec<(u16, u32)>,
    ) -> Result<VertexTarget> {
        let Some(policy) = self.policy.as_ref() else {
            return Err(SearchError::TargetsNeedPolicy.into());
        };
        let choice = self.complete_or_dp(path);
        let (_, feedback) = self.simulate(&choice)?;
        Ok(VertexTarget {
            graph: policy.graph(&choice, path.len(), &feedback.expect("a policy is set")),
            group: path.len(),
            visits,
        })
    }

    /// The priors of the root's actions (`None`: uniform).
    pub fn root_priors(&self) -> Option<&[f64]> {
        self.tree.nodes[0].priors.as_deref()
    }

    /// Give every pending vertex the policy's priors for its next op group (in parallel). Under
    /// a time limit the forward passes are abandoned at its end, and the search goes on with
    /// uniform priors for the vertices still to come.
    fn assign_priors(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        let Some(policy) = self.policy.as_ref().filter(|_| !self.priors_abandoned) else {
            return;
        };
        let wanted: Vec<(usize, Vec<u16>)> = pending
            .into_iter()
            .filter(|(_, path)| path.len() < self.groups && self.frame_of(path).is_none())
            .collect();
        // The model is Sync and each vertex's forward pass is independent; collecting keeps the
        // creation order, so the result does not depend on the thread count.
        let input = |path: &Vec<u16>| {
            let choice = self.complete_or_dp(path);
            policy.graph(&choice, path.len(), &self.feedback[&choice])
        };
        let priors = match self.search_end() {
            None => Some(
                wanted
                    .par_iter()
                    .map(|(_, path)| policy.priors_of(&input(path), path.len()))
                    .collect(),
            ),
            Some(end) => policy.priors_until(
                wanted
                    .par_iter()
                    .map(|(_, path)| (input(path), path.len()))
                    .collect(),
                end,
            ),
        };
        let Some(priors) = priors else {
            self.priors_abandoned = true;
            return;
        };
        for ((node, _), p) in wanted.into_iter().zip(priors) {
            let p = match self.config.root_noise {
                Some(noise) if node == 0 => noise.apply(&p, &mut self.rng),
                _ => p,
            };
            let p = with_uniform_tail(p, self.tree.nodes[node].edges.len());
            self.tree.nodes[node].priors = Some(p);
        }
    }

    /// When a search under a time limit ends.
    fn search_end(&self) -> Option<Instant> {
        let seconds = self.config.seconds?;
        Some(self.began + Duration::from_secs_f64(seconds))
    }

    /// The completion of `path`; the root (empty path) completes to DP everywhere.
    fn complete_or_dp(&self, path: &[u16]) -> Vec<u16> {
        if path.is_empty() {
            vec![0; self.groups]
        } else {
            self.complete(path)
        }
    }

    /// Run the search to its budget, calling `progress` after every batch.
    pub fn run(mut self, progress: impl FnMut(Progress)) -> Result<SearchResult> {
        let seconds = self.search(progress)?;
        self.finish(seconds)
    }

    /// Run the search, then read off TAG's training targets: every vertex with at least
    /// `min_visits` visits gives its visit distribution `π = softmax(ln N) = N / ΣN` with the
    /// GNN input it was scored from. Needs a policy ([`Mcts::with_policy`]): the input graph
    /// carries the runtime feedback only a policy makes the search keep.
    pub fn run_with_targets(
        &mut self,
        min_visits: u32,
        progress: impl FnMut(Progress),
    ) -> Result<(SearchResult, Vec<VertexTarget>)> {
        if self.policy.is_none() {
            return Err(SearchError::TargetsNeedPolicy.into());
        }
        let seconds = self.search(progress)?;
        let targets = self.targets(min_visits);
        Ok((self.finish(seconds)?, targets))
    }

    /// The vertices with at least `min_visits` visits, depth first in action order.
    fn targets(&self, min_visits: u32) -> Vec<VertexTarget> {
        let policy = self.policy.as_ref().expect("checked by the caller");
        let mut out = Vec::new();
        let mut stack = vec![(0usize, Vec::<u16>::new())];
        while let Some((node, path)) = stack.pop() {
            let edges = &self.tree.nodes[node].edges;
            let total: u32 = edges.iter().map(|e| e.visits).sum();
            if total < min_visits || path.len() >= self.groups || self.frame_of(&path).is_some() {
                continue;
            }
            let choice = self.complete_or_dp(&path);
            if let Some(feedback) = self.feedback.get(&choice) {
                out.push(VertexTarget {
                    graph: policy.graph(&choice, path.len(), feedback),
                    group: path.len(),
                    visits: edges
                        .iter()
                        .enumerate()
                        .filter(|(a, e)| e.visits > 0 && *a < self.actions.len())
                        .map(|(a, e)| (a as u16, e.visits))
                        .collect(),
                });
            }
            // Reverse so the stack pops children in ascending action order.
            for (a, e) in edges.iter().enumerate().rev() {
                if e.child != NO_CHILD && e.visits >= min_visits {
                    let mut child = path.clone();
                    child.push(a as u16);
                    stack.push((e.child as usize, child));
                }
            }
        }
        out
    }

    /// The search loop to the budget; the seconds since the search began (its grouping and
    /// reference simulations included).
    fn search(&mut self, mut progress: impl FnMut(Progress)) -> Result<f64> {
        let began = self.began;
        if self.iterations == 0 {
            if self.config.seed_device_groups {
                self.seed_device_groups()?;
            }
            self.seed_frames()?;
        }
        // Under a time limit no batch starts that would end past it (judged by the longest so
        // far), and the result's compilation is kept time for.
        let mut longest_batch = Duration::ZERO;
        while self.iterations < self.config.iterations {
            let room = self.config.iterations - self.iterations;
            let threads = rayon::current_num_threads().max(1);
            let n = batch_size(&self.config, longest_batch, threads).min(room);
            let needed = longest_batch
                .max(self.time_for(n))
                .saturating_add(self.slowest_simulation.get());
            if crate::interrupt::requested()
                || self.abandoned
                || self
                    .config
                    .seconds
                    .is_some_and(|s| began.elapsed().saturating_add(needed).as_secs_f64() >= s)
            {
                break;
            }
            let batch_began = Instant::now();
            self.batch(n)?;
            longest_batch = longest_batch.max(batch_began.elapsed());
            progress(Progress {
                iterations: self.iterations,
                best_us: self
                    .best
                    .as_ref()
                    .filter(|(_, o)| o.fits)
                    .map(|(_, o)| o.time_us),
                dp_us: self.dp.time_us,
            });
        }
        Ok(began.elapsed().as_secs_f64())
    }

    /// Under a time limit, the instant past which a leaf's compilation or simulation is
    /// abandoned ([`crate::sim::deadline`]): the limit less the slowest simulation so far, which
    /// the result's compilation keeps back.
    fn leaf_deadline(&self) -> Option<Instant> {
        let end = self.search_end()?;
        Some(
            end.checked_sub(self.slowest_simulation.get())
                .unwrap_or(end),
        )
    }

    /// About how long `simulations` take side by side, judged by the slowest leaf simulation.
    pub(super) fn time_for(&self, simulations: usize) -> Duration {
        time_for(self.slowest_simulation.get(), simulations)
    }

    /// Select `n` leaves with virtual loss, evaluate the new ones in parallel, back up in order.
    fn batch(&mut self, n: usize) -> Result<()> {
        let paths: Vec<Vec<u16>> = (0..n).map(|_| self.select()).collect();
        self.evaluate_and_backup(&paths)
    }

    /// Complete and simulate the selected `paths` (the new completions in parallel), give the
    /// new vertices their priors and back the rewards up in order.
    pub(super) fn evaluate_and_backup(&mut self, paths: &[Vec<u16>]) -> Result<()> {
        let complete: Vec<Vec<u16>> = paths.iter().map(|p| self.complete(p)).collect();
        let mut fresh: Vec<&Vec<u16>> = complete
            .iter()
            .filter(|c| !self.cache.contains_key(*c))
            .collect();
        fresh.sort();
        fresh.dedup();
        let this = &*self;
        let deadline = self.leaf_deadline();
        // Pipelines first, one leaf per task: a pipeline takes several times a plain strategy's
        // simulation, and started last it would leave the other threads idle behind it. The
        // outcomes do not depend on the order.
        fresh.sort_by_key(|c| this.frame_of(c).is_none());
        let outcomes: Vec<Result<Option<_>>> = fresh
            .par_iter()
            .with_max_len(1)
            .map(|c| {
                let simulated = || until(deadline, || this.simulate(c));
                this.slowest_simulation.timed(simulated)
            })
            .collect();
        for (c, o) in fresh.into_iter().zip(outcomes) {
            let Some((o, feedback)) = o? else {
                self.abandoned = true;
                continue;
            };
            self.cache.insert(c.clone(), o);
            if let Some(f) = feedback {
                self.feedback.insert(c.clone(), f);
            }
        }
        if self.abandoned {
            // The search ends here: the leaves measured still count towards the best, but the
            // batch is not backed up (its abandoned leaves have no reward).
            for c in &complete {
                if let Some(&o) = self.cache.get(c) {
                    self.record(c, o);
                }
            }
            return Ok(());
        }
        self.assign_priors();
        for (path, c) in paths.iter().zip(&complete) {
            let outcome = self.cache[c];
            self.iterations += 1;
            self.record(c, outcome);
            let reward = self.reward(outcome);
            self.tree.note_reward(reward);
            self.tree.backup(path, reward);
        }
        Ok(())
    }

    /// Walk down by PUCT, adding virtual visits, until an edge with no child (expanded here)
    /// or a complete strategy (a pipeline's leaf spends one of the pipeline leaves left).
    pub(super) fn select(&mut self) -> Vec<u16> {
        let path = self.walk_down();
        self.spend_pipeline_leaf(&path);
        path
    }

    fn walk_down(&mut self) -> Vec<u16> {
        let mut path = Vec::new();
        let mut node = 0usize;
        let mut parent_q = self.tree.root_q();
        while path.is_empty() || path.len() < self.depth_of(&path) {
            let a = self.pick(node, parent_q);
            path.push(a as u16);
            let Some(child) = self.enter(node, &path) else {
                break;
            };
            let edge = &self.tree.nodes[node].edges[a];
            if edge.visits > 0 {
                parent_q = edge.total / edge.visits as f64;
            }
            node = child;
        }
        path
    }

    /// The PUCT argmax at `node` ([`Tree::pick`]); the root's pipeline frames are closed once
    /// no pipeline leaf is left.
    pub(super) fn pick(&mut self, node: usize, parent_q: f64) -> usize {
        let open = if node == 0 && !self.pipelines_open() {
            self.actions.len()
        } else {
            self.tree.nodes[node].edges.len()
        };
        let exploration = self.config.exploration;
        self.tree
            .pick(node, parent_q, open, exploration, &mut self.rng)
    }

    /// Take the edge of `path`'s last action out of `node` (one virtual visit); its child when it
    /// had one, else `None` after creating it (a new vertex, waiting for priors).
    pub(super) fn enter(&mut self, node: usize, path: &[u16]) -> Option<usize> {
        let a = *path.last().expect("a path of at least one action") as usize;
        let edge = &mut self.tree.nodes[node].edges[a];
        edge.virtual_visits += 1;
        if edge.child != NO_CHILD {
            return Some(edge.child as usize);
        }
        let child = self.tree.nodes.len() as u32;
        self.tree.nodes[node].edges[a].child = child;
        let mut vertex = Node::new(self.edges_below(path));
        vertex.priors = self.pipeline_priors(path);
        vertex.first_by_prior = vertex.priors.is_some();
        self.tree.nodes.push(vertex);
        if self.policy.is_some() {
            self.pending.push((child as usize, path.to_vec()));
        }
        None
    }

    /// Undecided groups take the first group's decision (TAG footnote 2); a pipeline's
    /// undecided micro-batch count and boundaries stay its frame's.
    pub(super) fn complete(&self, path: &[u16]) -> Vec<u16> {
        if let Some(f) = self.frame_of(path) {
            return self.completed_pipeline(f, path);
        }
        let mut c = path.to_vec();
        c.resize(self.groups, path[0]);
        c
    }

    fn reward(&self, o: Outcome) -> f64 {
        if o.fits {
            self.dp.time_us / o.time_us - 1.0
        } else {
            OOM_REWARD
        }
    }

    fn record(&mut self, choice: &[u16], o: Outcome) {
        if o.fits && self.dp.fits && o.time_us < self.dp.time_us && self.beat_dp_at.is_none() {
            self.beat_dp_at = Some(self.iterations);
        }
        let better = self.best.as_ref().is_none_or(|(_, b)| o.better_than(b));
        if better {
            self.best = Some((choice.to_vec(), o));
        }
    }
}

/// Group with METIS and search: what `topoplace place` and the `tag` placer run.
pub fn search(
    p: &Problem,
    groups: usize,
    config: MctsConfig,
    progress: impl FnMut(Progress),
) -> Result<SearchResult> {
    search_with(p, groups, config, None, progress)
}

/// [`search`] with priors from `policy` (`None`: uniform).
pub fn search_with(
    p: &Problem,
    groups: usize,
    config: MctsConfig,
    policy: Option<&GnnPolicy>,
    progress: impl FnMut(Progress),
) -> Result<SearchResult> {
    search_from(p, groups, config, policy, Starts::default(), progress)
}

/// A placement with its simulated time (µs) and fit.
pub(crate) type KnownPlacement = (Placement, f64, bool);

/// The placements a search polishes from besides the tree's best ([`Mcts::with_starts`]).
#[derive(Default)]
pub(crate) struct Starts {
    /// `dp-subset`'s, when the caller has run it (else the polish searches for it).
    pub data_parallel: Option<KnownPlacement>,
    /// Simulated by the caller (the heuristics').
    pub known: Vec<KnownPlacement>,
    /// Not simulated yet (the exact MILPs'): the polish simulates them while time remains.
    pub unsimulated: Vec<Placement>,
    /// `pipeline-dp`'s frames: the pipelines the tree searches too ([`super::pipelines`]).
    pub pipelines: Option<Arc<PipelineFrames>>,
}

/// `priors` over a vertex's first actions, the `edges − priors.len()` after them (the root's
/// pipeline frames, which the GNN does not score) given the uniform share `1 / edges`, all
/// renormalised to a sum of one.
fn with_uniform_tail(mut priors: Vec<f64>, edges: usize) -> Vec<f64> {
    if priors.len() >= edges {
        return priors;
    }
    let share = 1.0 / edges as f64;
    let scale = 1.0 - share * (edges - priors.len()) as f64;
    priors.iter_mut().for_each(|p| *p *= scale);
    priors.resize(edges, share);
    priors
}

/// [`search_with`], also polishing from `starts`.
pub(crate) fn search_from(
    p: &Problem,
    groups: usize,
    config: MctsConfig,
    policy: Option<&GnnPolicy>,
    starts: Starts,
    progress: impl FnMut(Progress),
) -> Result<SearchResult> {
    // With no time left the tree runs no iteration: the GNN's priors (a forward pass over every
    // device of a 1,024-GPU cluster takes a second) would be computed for nothing, and so would
    // METIS's op groups (a quarter of a second on 10⁵ ops): one group stands for the starts.
    let no_time = config.seconds.is_some_and(|s| s <= 0.0);
    let groups = if no_time { 1 } else { groups };
    let mut mcts = Mcts::grouped(*p, groups, config)?.with_starts(starts);
    let out_of_time =
        (mcts.config.seconds).is_some_and(|s| mcts.began.elapsed().as_secs_f64() >= s);
    if let Some(policy) = policy.filter(|_| !out_of_time) {
        mcts = mcts.with_policy(policy)?;
    }
    mcts.run(progress)
}

/// Leaves of the search's next batch on `threads` threads. Under a time limit the first batch is
/// one round, a leaf per thread: until a tree leaf has run, the slowest simulation known is a
/// reference one (data parallelism, whose alike GPUs compile once), which on 128 GPUs ran 100×
/// faster than the model-parallel leaves, so a whole first batch overran `--time 2` by seconds.
fn batch_size(config: &MctsConfig, longest_batch: Duration, threads: usize) -> usize {
    let full = config.batch.max(1);
    if config.seconds.is_some() && longest_batch.is_zero() {
        full.min(threads)
    } else {
        full
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_timed_search_starts_with_one_round_of_leaves() {
        let untimed = MctsConfig::default();
        let timed = MctsConfig {
            seconds: Some(2.0),
            ..MctsConfig::default()
        };
        let full = untimed.batch;
        assert!(full > 2);
        assert_eq!(batch_size(&untimed, Duration::ZERO, 2), full);
        assert_eq!(batch_size(&timed, Duration::ZERO, 2), 2);
        assert_eq!(batch_size(&timed, Duration::from_millis(5), 2), full);
        assert_eq!(batch_size(&timed, Duration::ZERO, 64), full);
    }

    /// A batch whose leaves run past the leaf deadline is abandoned: the search is marked to end,
    /// nothing is cached or backed up for those leaves, and the best stays what was measured.
    #[test]
    fn leaves_past_the_deadline_end_the_search_with_what_it_measured() {
        let text = "name = \"two\"\n[[machine]]\nname = \"a\"\ngpu = \"V100-32GB\"\ngpus = 2\n\
            intra_bandwidth = \"50 GB/s\"\nnic = \"10 Gbps\"\n";
        let cluster = crate::cluster::parse_cluster(text, "<test>").unwrap();
        let graph = crate::zoo::build("resnet50", &crate::zoo::ZooOptions::default()).unwrap();
        let cost = crate::cost::CostModel::default();
        let problem = Problem::new(&graph, &cluster, &cost);
        let config = MctsConfig {
            polish: 0,
            ..MctsConfig::default()
        };
        let mut search = Mcts::grouped(problem, 4, config).unwrap();
        // A limit already spent: the leaf deadline has passed.
        search.config.seconds = Some(1e-9);
        let best_of = |s: &Mcts| s.best.as_ref().map(|(c, o)| (c.clone(), o.time_us, o.fits));
        let (cached, best) = (search.cache.len(), best_of(&search));
        let root_visits: u32 = search.tree.nodes[0].edges.iter().map(|e| e.visits).sum();
        search.batch(4).unwrap();
        assert!(search.abandoned);
        assert_eq!(search.cache.len(), cached);
        assert_eq!(best_of(&search), best);
        let after: u32 = search.tree.nodes[0].edges.iter().map(|e| e.visits).sum();
        assert_eq!(after, root_visits);
        // Without a deadline the same batch is measured and backed up.
        search.config.seconds = None;
        search.abandoned = false;
        search.batch(4).unwrap();
        assert!(!search.abandoned && search.cache.len() > cached);
    }
}
