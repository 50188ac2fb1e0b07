//! The constraint-programming proof of a formulation's optimum, for instances whose MILP cannot
//! close its gap. The MILPs order two nodes (or two transfers) on a device (or a channel) with a
//! binary and a big-M row; their LP relaxation lets every such pair overlap, so on MOIRAI's
//! channel model HiGHS's bound stalls a percent or so below the optimum and the branch and bound
//! never certifies it (`mlp` × `quickp-fat-tree-2`: 1.3% after 10 s, still open after 600 s).
//! The same model written for a lazy-clause-generation solver (pumpkin) is proved instead:
//! precedences propagate on start-time bounds, each ordering decision is a literal with a
//! half-reified difference constraint, and every conflict teaches the solver a clause over those
//! literals, which is what closes such disjunctive scheduling problems.
//!
//! The model is the formulation's, on integers: times in units of `1/scale` µs with every
//! duration rounded down. Rounding down is a relaxation (any real schedule, its starts rounded
//! down, is an integer one of no larger makespan), so "no integer schedule ends by `U`" proves
//! every real schedule ends after `U/scale`: a valid lower bound. Integer solutions are read back
//! as a placement and a task order and re-timed by the shared rule ([`semi_active`]), so an
//! incumbent is always a real schedule of the formulation.
//!
//! - `x[i][d]`: node i on device d (exactly one; co-located nodes share their leader's; the
//!   interchangeable-GPU rule of [`super::symmetry_breaking`]; memory per device as a linear constraint).
//! - `x[i][d] → F_i ≥ S_i + p_i(d)`; `F_i ≤ C`; a cumulative over all nodes at their fastest
//!   times with as many units as GPUs (redundant, for propagation).
//! - Edge e: `T_e ≥ F_src`, `A_e ≥ T_e`, `S_dst ≥ A_e`, and for each ordered device pair
//!   `z_e(k,l) ↔ x[src][k] ∧ x[dst][l]` with `z_e(k,l) → A_e ≥ T_e + c_e(k,l)`.
//! - Two nodes no path orders: `b_ij → F_i ≤ S_j`, and on every device `¬x[i][d] ∨ ¬x[j][d] ∨
//!   b_ij ∨ b_ji`.
//! - MOIRAI's channels: two transfers that may overlap (the MILP's pairs), `o_ef → A_e ≤ T_f`, and
//!   on every channel `¬z_e(k,l) ∨ ¬z_f(k,l) ∨ o_ef ∨ o_fe`.
//!
//! The search asks for a schedule ending by `U` below the incumbent (less the relative gap),
//! re-times each one found into a new incumbent, and stops at the first "none": the incumbent is
//! then optimal within the gap.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use pumpkin_conflict_resolvers::resolvers::ResolutionResolver;
use pumpkin_core::Solver;
use pumpkin_core::constraints::Constraint;
use pumpkin_core::predicates::PredicateConstructor;
use pumpkin_core::proof::ConstraintTag;
use pumpkin_core::results::{ProblemSolution, SatisfactionResultUnderAssumptions};
use pumpkin_core::termination::TerminationCondition;
use pumpkin_core::variables::{AffineView, DomainId, Literal, TransformableVariable};

type View = AffineView<DomainId>;

use super::instance::Instance;
use super::optional_disjunctive::{OptionalTask, post_both_directions};
use super::schedule::{Channels, Plan, semi_active};
use super::symmetry_breaking;

/// The most clauses the pairwise ordering constraints may take: beyond this the model is too
/// large to prove within a solve's time limit, and the MILP alone runs.
pub(crate) const MAX_ORDERING_CLAUSES: f64 = 2e6;

/// The serial horizon in integer units: fine enough that rounding every duration down loses
/// well under the default relative gap (10⁻⁴) along any path, and small enough that a start plus
/// a duration stays inside pumpkin's 32-bit domains.
const UNITS: f64 = 1e9;

/// What the proof established.
#[derive(Debug, Clone)]
pub(crate) struct CpProof {
    /// The best schedule known: the incumbent passed in, or one the search found.
    pub plan: Plan,
    /// A lower bound on every schedule's makespan, µs (0 when the search proved nothing).
    pub bound: f64,
    /// Whether `plan` is optimal within the relative gap.
    pub proved: bool,
}

/// Bytes per ordering clause the proof may take, learned clauses and stored reasons included
/// (whole-process RSS over clauses): measured 5.3 kB after 15 s and 5.4 kB after 60 s on
/// BERT-Small inference × moirai-inter (276,000 clauses, peak RSS 1.46 and 1.50 GB), rounded up.
/// An admission estimate: longer searches grow further, which [`super::memory_watch`] stops.
pub(crate) const BYTES_PER_ORDERING_CLAUSE: f64 = 6144.0;

/// Whether `inst` is small enough for the proof: at most [`MAX_ORDERING_CLAUSES`], and their
/// estimated memory within `bytes` (what the memory limit leaves beside the MILP).
pub(crate) fn fits(inst: &Instance, channels: Channels, bytes: f64) -> bool {
    let clauses = ordering_clauses(inst, channels);
    clauses <= MAX_ORDERING_CLAUSES && clauses * BYTES_PER_ORDERING_CLAUSE <= bytes
}

/// The clauses that order nodes on a device and transfers on a channel.
fn ordering_clauses(inst: &Instance, channels: Channels) -> f64 {
    let d = inst.devices() as f64;
    let node_clauses = inst.parallel_pairs().len() as f64 * d;
    let transfer_clauses = match channels {
        Channels::PerPair => inst.overlapping_transfers().count() as f64 * d * (d - 1.0),
        Channels::Unlimited => 0.0,
    };
    node_clauses + transfer_clauses
}

/// Look for a schedule better than `incumbent` (admissible) until one is proved optimal within
/// `rel_gap`, the deadline passes or `stop` is raised.
pub(crate) fn prove(
    inst: &Instance,
    channels: Channels,
    incumbent: &Plan,
    rel_gap: f64,
    deadline: Instant,
    stop: &AtomicBool,
) -> CpProof {
    let (mut solver, model) = Model::build(inst, channels).into_parts();
    let mut best = incumbent.clone();
    let mut resolver = ResolutionResolver::default();
    let mut brancher = solver.default_brancher();
    let mut limit = model.units_below(best.makespan * (1.0 - rel_gap));
    loop {
        let mut budget = Until { deadline, stop };
        if budget.should_stop() {
            break;
        }
        let assumption = [model.makespan.upper_bound_predicate(limit)];
        let found = match solver.satisfy_under_assumptions(
            &mut brancher,
            &mut budget,
            &mut resolver,
            &assumption,
        ) {
            SatisfactionResultUnderAssumptions::Satisfiable(sat) => {
                let solution = sat.solution();
                let value = |v: DomainId| solution.get_integer_value(v);
                let lit = |l: Literal| solution.get_literal_value(l);
                Some((
                    model.read(inst, channels, &value, &lit),
                    value(model.makespan),
                ))
            }
            SatisfactionResultUnderAssumptions::UnsatisfiableUnderAssumptions(_)
            | SatisfactionResultUnderAssumptions::Unsatisfiable(_) => {
                let bound = (f64::from(limit) + 1.0) / model.scale;
                let proved = bound >= best.makespan * (1.0 - rel_gap) * (1.0 - 1e-12);
                return CpProof {
                    bound: bound.min(best.makespan),
                    plan: best,
                    proved,
                };
            }
            SatisfactionResultUnderAssumptions::Unknown(_) => None,
        };
        let Some((plan, units)) = found else { break };
        if plan.admissible(inst) && plan.makespan < best.makespan {
            best = plan;
        }
        // Below both the new incumbent and the integer schedule just found, so the next call
        // either finds a strictly shorter one or proves there is none.
        limit = model
            .units_below(best.makespan * (1.0 - rel_gap))
            .min(units - 1);
    }
    CpProof {
        plan: best,
        bound: 0.0,
        proved: false,
    }
}

/// Stop at the deadline, or when the caller raises `stop` (HiGHS proved the optimum first, or
/// memory reached the CP's share of the limit).
struct Until<'a> {
    deadline: Instant,
    stop: &'a AtomicBool,
}

impl TerminationCondition for Until<'_> {
    fn should_stop(&mut self) -> bool {
        self.stop.load(Ordering::Relaxed) || Instant::now() >= self.deadline
    }
}

/// The formulation as a pumpkin model.
struct Model {
    solver: Solver,
    tag: ConstraintTag,
    scale: f64,
    /// `x[i][d]` (members of a co-location set hold their leader's literals).
    x: Vec<Vec<Literal>>,
    start: Vec<DomainId>,
    transfer: Vec<DomainId>,
    makespan: DomainId,
}

impl Model {
    fn build(inst: &Instance, channels: Channels) -> Model {
        let mut solver = Solver::default();
        let tag = solver.new_constraint_tag();
        let scale = UNITS / inst.serial_horizon().max(1e-9);
        let horizon = UNITS as i32;
        let x = placement_literals(&mut solver, tag, inst);
        let start: Vec<DomainId> = (0..inst.len())
            .map(|_| solver.new_bounded_integer(0, horizon))
            .collect();
        let makespan = solver.new_bounded_integer(0, horizon);
        let mut m = Model {
            solver,
            tag,
            scale,
            x,
            start,
            transfer: Vec::new(),
            makespan,
        };
        let finish = m.durations(inst);
        m.memory(inst);
        m.busy_devices(inst);
        let (transfer, arrival, z) = m.edges(inst, &finish);
        m.transfer = transfer;
        m.node_orders(inst, &finish);
        m.device_resources(inst);
        if channels == Channels::PerPair {
            m.transfer_orders(inst, &arrival, &z);
            m.channel_resources(inst, &z);
        }
        m
    }

    /// Units of `1/scale` µs, rounded down: the relaxation's durations.
    fn units(&self, us: f64) -> i32 {
        (us * self.scale).floor() as i32
    }

    /// Each node's finish: its start plus its compute time where that is the same on every
    /// device (then a view of the start, no variable), else a variable at least the start plus
    /// the time on the device it takes.
    fn durations(&mut self, inst: &Instance) -> Vec<View> {
        (0..inst.len())
            .map(|i| {
                let times: Vec<i32> = (0..inst.devices())
                    .map(|d| self.units(inst.nodes[i].compute[d]))
                    .collect();
                let least = times.iter().copied().min().unwrap_or(0);
                let start = view(self.start[i]);
                let finish = if times.iter().all(|&t| t == least) {
                    start.offset(least)
                } else {
                    let f = view(self.solver.new_bounded_integer(0, UNITS as i32));
                    let c = precedes(start, least, f, self.tag);
                    self.solver.add_constraint(c).post();
                    for (d, &t) in times.iter().enumerate() {
                        let c = precedes(start, t, f, self.tag);
                        self.solver.add_constraint(c).implied_by(self.x[i][d]);
                    }
                    f
                };
                let c = precedes(finish, 0, view(self.makespan), self.tag);
                self.solver.add_constraint(c).post();
                finish
            })
            .collect()
    }

    /// A redundant global view: every node holds some GPU for at least its fastest time, so no
    /// more nodes than GPUs run at once (a cumulative constraint; its time-table reasoning prunes
    /// what the pairwise clauses only find by search).
    fn busy_devices(&mut self, inst: &Instance) {
        let durations: Vec<i32> = (0..inst.len())
            .map(|i| self.units(inst.fastest(i)))
            .collect();
        let demand = vec![1; inst.len()];
        let gpus = inst.devices() as i32;
        let c =
            pumpkin_constraints::cumulative(self.start.clone(), durations, demand, gpus, self.tag);
        self.solver.add_constraint(c).post();
    }

    /// Each device's bytes, in units of a millionth of the largest capacity rounded down (a
    /// relaxation; read-back plans are checked against the real bytes).
    fn memory(&mut self, inst: &Instance) {
        let unit = inst.capacity.iter().copied().fold(0.0, f64::max) / 1e6;
        let total: f64 = inst.nodes.iter().map(|n| n.memory).sum();
        let smallest = inst.capacity.iter().copied().fold(f64::INFINITY, f64::min);
        if unit <= 0.0 || total <= smallest {
            // Nothing to constrain: every device holds the whole model.
            return;
        }
        // Bytes of each co-location set, on its leader.
        let leader = inst.colocation_leader();
        let mut set_bytes = vec![0.0; inst.len()];
        for (i, node) in inst.nodes.iter().enumerate() {
            set_bytes[leader[i]] += node.memory;
        }
        for d in 0..inst.devices() {
            let terms: Vec<_> = (0..inst.len())
                .filter(|&i| leader[i] == i)
                .filter_map(|i| {
                    // A weight of zero adds nothing (and pumpkin cannot scale by zero).
                    let weight = (set_bytes[i] / unit).floor() as i32;
                    (weight > 0).then(|| self.x[i][d].scaled(weight))
                })
                .collect();
            let cap = (inst.capacity[d] / unit).floor().min(f64::from(i32::MAX)) as i32;
            let c = pumpkin_constraints::less_than_or_equals(terms, cap, self.tag);
            self.solver.add_constraint(c).post();
        }
    }

    /// Transfer starts, arrivals and channel literals `z[e][(k, l)]` (k ≠ l, row-major).
    #[allow(clippy::type_complexity)]
    fn edges(
        &mut self,
        inst: &Instance,
        finish: &[View],
    ) -> (Vec<DomainId>, Vec<DomainId>, Vec<Vec<Literal>>) {
        let horizon = UNITS as i32;
        let d = inst.devices();
        let (mut transfer, mut arrival, mut z) = (Vec::new(), Vec::new(), Vec::new());
        for (e, edge) in inst.edges.iter().enumerate() {
            let t = self.solver.new_bounded_integer(0, horizon);
            let a = self.solver.new_bounded_integer(0, horizon);
            for c in [
                precedes(finish[edge.src], 0, view(t), self.tag),
                precedes(view(t), 0, view(a), self.tag),
                precedes(view(a), 0, view(self.start[edge.dst]), self.tag),
            ] {
                self.solver.add_constraint(c).post();
            }
            let mut lits = Vec::new();
            for k in 0..d {
                for l in (0..d).filter(|&l| l != k) {
                    let (xs, xd) = (self.x[edge.src][k], self.x[edge.dst][l]);
                    let zl = self.and(xs, xd);
                    let c = precedes(view(t), self.units(inst.comm(e, k, l)), view(a), self.tag);
                    self.solver.add_constraint(c).implied_by(zl);
                    lits.push(zl);
                }
            }
            transfer.push(t);
            arrival.push(a);
            z.push(lits);
        }
        (transfer, arrival, z)
    }

    /// A literal equal to `a ∧ b`.
    fn and(&mut self, a: Literal, b: Literal) -> Literal {
        let z = self.solver.new_literal();
        let tag = self.tag;
        self.solver
            .add_clause([(!z).get_true_predicate(), a.get_true_predicate()], tag);
        self.solver
            .add_clause([(!z).get_true_predicate(), b.get_true_predicate()], tag);
        self.solver.add_clause(
            [
                z.get_true_predicate(),
                (!a).get_true_predicate(),
                (!b).get_true_predicate(),
            ],
            tag,
        );
        z
    }

    /// `b → end(first) ≤ start(second)` for a new literal b.
    fn order_literal(&mut self, end: View, start: View) -> Literal {
        let b = self.solver.new_literal();
        let c = precedes(end, 0, start, self.tag);
        self.solver.add_constraint(c).implied_by(b);
        b
    }

    fn node_orders(&mut self, inst: &Instance, finish: &[View]) {
        for (i, j) in inst.parallel_pairs() {
            let ij = self.order_literal(finish[i], view(self.start[j]));
            let ji = self.order_literal(finish[j], view(self.start[i]));
            for d in 0..inst.devices() {
                let clause = [
                    (!self.x[i][d]).get_true_predicate(),
                    (!self.x[j][d]).get_true_predicate(),
                    ij.get_true_predicate(),
                    ji.get_true_predicate(),
                ];
                self.solver.add_clause(clause, self.tag);
            }
        }
    }

    fn transfer_orders(&mut self, inst: &Instance, arrival: &[DomainId], z: &[Vec<Literal>]) {
        for (e, f) in inst.overlapping_transfers() {
            let ef = self.order_literal(view(arrival[e]), view(self.transfer[f]));
            let fe = self.order_literal(view(arrival[f]), view(self.transfer[e]));
            for (&ze, &zf) in z[e].iter().zip(&z[f]) {
                let clause = [
                    (!ze).get_true_predicate(),
                    (!zf).get_true_predicate(),
                    ef.get_true_predicate(),
                    fe.get_true_predicate(),
                ];
                self.solver.add_clause(clause, self.tag);
            }
        }
    }

    /// Each device as a unary resource over the nodes it may hold.
    fn device_resources(&mut self, inst: &Instance) {
        for d in 0..inst.devices() {
            let tasks = (0..inst.len())
                .map(|i| (view(self.start[i]), inst.nodes[i].compute[d], self.x[i][d]))
                .collect();
            self.unary(tasks);
        }
    }

    /// Each channel as a unary resource over the transfers it may carry.
    fn channel_resources(&mut self, inst: &Instance, z: &[Vec<Literal>]) {
        let d = inst.devices();
        let pairs = (0..d).flat_map(|k| (0..d).filter(move |&l| l != k).map(move |l| (k, l)));
        for (c, (k, l)) in pairs.enumerate() {
            let tasks = (0..inst.edges.len())
                .map(|e| (view(self.transfer[e]), inst.comm(e, k, l), z[e][c]))
                .collect();
            self.unary(tasks);
        }
    }

    /// No two present tasks `(start, µs, present)` overlap: the optional-task disjunctive, in
    /// both time directions.
    fn unary(&mut self, tasks: Vec<(View, f64, Literal)>) {
        let forward = tasks
            .iter()
            .map(|&(start, us, present)| OptionalTask {
                start,
                duration: self.units(us),
                present,
            })
            .collect::<Vec<_>>();
        post_both_directions(&mut self.solver, forward, self.tag);
    }

    fn into_parts(self) -> (Solver, Readback) {
        let Model {
            solver,
            scale,
            x,
            start,
            transfer,
            makespan,
            ..
        } = self;
        (
            solver,
            Readback {
                scale,
                x,
                start,
                transfer,
                makespan,
            },
        )
    }
}

/// The variables a solution is read from, apart from the solver that holds them.
struct Readback {
    scale: f64,
    x: Vec<Vec<Literal>>,
    start: Vec<DomainId>,
    transfer: Vec<DomainId>,
    makespan: DomainId,
}

impl Readback {
    /// The largest integer makespan that is strictly below `us` µs.
    fn units_below(&self, us: f64) -> i32 {
        ((us * self.scale).ceil() as i32 - 1).max(0)
    }

    /// The solution as a real schedule: its placement and the order of its integer starts,
    /// re-timed by the shared rule.
    fn read(
        &self,
        inst: &Instance,
        channels: Channels,
        value: &dyn Fn(DomainId) -> i32,
        lit: &dyn Fn(Literal) -> bool,
    ) -> Plan {
        let device: Vec<usize> = self
            .x
            .iter()
            .map(|row| row.iter().position(|&l| lit(l)).unwrap_or(0))
            .collect();
        let time = |v: DomainId| f64::from(value(v));
        let ordered = Plan {
            start: self.start.iter().map(|&s| time(s)).collect(),
            transfer_start: inst
                .edges
                .iter()
                .zip(&self.transfer)
                .map(|(edge, &t)| (device[edge.src] != device[edge.dst]).then(|| time(t)))
                .collect(),
            makespan: 0.0,
            device,
        };
        semi_active(inst, channels, &ordered.device, &ordered.sequence(inst))
    }
}

/// `a + gap ≤ b` as a constraint.
fn precedes(a: View, gap: i32, b: View, tag: ConstraintTag) -> impl Constraint {
    pumpkin_constraints::less_than_or_equals(vec![a, b.scaled(-1)], -gap, tag)
}

/// A variable as the view the constraints take.
fn view(v: DomainId) -> View {
    v.scaled(1)
}

/// `x[i][d]`, exactly one device per co-location set, with the interchangeable-GPU rule.
fn placement_literals(
    solver: &mut Solver,
    tag: ConstraintTag,
    inst: &Instance,
) -> Vec<Vec<Literal>> {
    let d = inst.devices();
    let leader = inst.colocation_leader();
    let mut own: Vec<Option<Vec<Literal>>> = vec![None; inst.len()];
    for i in (0..inst.len()).filter(|&i| leader[i] == i) {
        own[i] = Some(one_of(solver, tag, d));
    }
    let row = |j: usize| own[j].as_ref().expect("a leader's row");
    for (i, k, earlier) in symmetry_breaking::rule(inst, &leader) {
        let mut clause = vec![(!row(i)[k]).get_true_predicate()];
        clause.extend(earlier.iter().map(|&j| row(j)[k - 1].get_true_predicate()));
        solver.add_clause(clause, tag);
    }
    (0..inst.len())
        .map(|i| own[leader[i]].clone().expect("a leader's row"))
        .collect()
}

/// `d` literals exactly one of which holds: on two devices one literal and its negation.
fn one_of(solver: &mut Solver, tag: ConstraintTag, d: usize) -> Vec<Literal> {
    if d == 2 {
        let on_second = solver.new_literal();
        return vec![!on_second, on_second];
    }
    let row: Vec<Literal> = (0..d).map(|_| solver.new_literal()).collect();
    solver.add_clause(row.iter().map(|l| l.get_true_predicate()), tag);
    for a in 0..d {
        for b in a + 1..d {
            solver.add_clause(
                [
                    (!row[a]).get_true_predicate(),
                    (!row[b]).get_true_predicate(),
                ],
                tag,
            );
        }
    }
    row
}
