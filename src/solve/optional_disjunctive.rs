//! A unary resource whose tasks are optional: a pumpkin propagator for "the tasks placed on this
//! device (or channel) do not overlap", where whether a task is placed there is a literal the
//! search decides. Pumpkin's own disjunctive takes only tasks that are always present, and the
//! pairwise ordering clauses of the CP model only learn one conflict at a time, which is why
//! `alexnet` × `quickp-fat-tree-2` stayed unproved: OR-Tools CP-SAT, whose no-overlap constraint
//! reasons over optional intervals, proves it in 10 s; with the same model written pairwise it
//! proves neither that nor `mlp` × `quickp-fat-tree-2` in 60 s.
//!
//! Two of Vilím's rules for a unary resource, extended to optional tasks the way a presence
//! literal allows (a rule that would push an optional task past its latest start removes it
//! from the resource instead):
//! - overload checking: the present tasks that must run inside a window `[a, b)` take no more
//!   than `b − a`; an optional task that would overload a window is not on this resource;
//! - detectable precedences: a task `j` whose latest start is before `i`'s earliest end must run
//!   before `i`, so `i` starts after the earliest end of all such `j`.
//!
//! Both are O(n²) from scratch per call, in one time direction; the constraint is posted twice,
//! the second time on mirrored views (`-start - duration`), which turns latest-start reasoning
//! into earliest-start reasoning. Explanations are lifted: each bound in a reason is the weakest
//! that still makes the rule fire, so the learned clauses generalise.

use pumpkin_core::Solver;
use pumpkin_core::predicates::{Predicate, PropositionalConjunction};
use pumpkin_core::proof::{ConstraintTag, InferenceCode};
use pumpkin_core::propagation::{
    DomainEvents, EventsToRegister, LocalId, PropagationContext, Propagator, PropagatorConstructor,
    PropagatorConstructorContext, PropagatorSpec, ReadDomains, RuntimeCheckers,
};
use pumpkin_core::state::{Conflict, PropagationStatusCP, propagator_conflict};
use pumpkin_core::variables::{
    AffineView, DomainId, IntegerVariable, Literal, TransformableVariable,
};

use pumpkin_core::declare_inference_label;

declare_inference_label!(UnaryOptional);

/// One task: it occupies `[start, start + duration)` when `present` holds.
#[derive(Debug, Clone)]
pub(crate) struct OptionalTask<Var> {
    pub start: Var,
    pub duration: i32,
    pub present: Literal,
}

/// Posts the propagator (one time direction; see the module note).
#[derive(Debug)]
pub(crate) struct OptionalDisjunctive<Var> {
    tasks: Vec<OptionalTask<Var>>,
    tag: ConstraintTag,
}

impl<Var> OptionalDisjunctive<Var> {
    /// Tasks of zero duration occupy nothing and are left out.
    pub(crate) fn new(tasks: Vec<OptionalTask<Var>>, tag: ConstraintTag) -> Self {
        let tasks = tasks.into_iter().filter(|t| t.duration > 0).collect();
        OptionalDisjunctive { tasks, tag }
    }
}

/// Post the unary resource over `tasks` in both time directions (see the module note): as
/// they are, and again on mirrored views `−start − duration`. Fewer than two tasks cannot
/// overlap, so nothing is posted (pumpkin refuses a propagator that watches no variable).
pub(crate) fn post_both_directions(
    solver: &mut Solver,
    tasks: Vec<OptionalTask<AffineView<DomainId>>>,
    tag: ConstraintTag,
) {
    if tasks.len() < 2 {
        return;
    }
    let mirrored = tasks
        .iter()
        .map(|t| OptionalTask {
            start: t.start.scaled(-1).offset(-t.duration),
            ..t.clone()
        })
        .collect();
    solver.add_propagator(OptionalDisjunctive::new(tasks, tag));
    solver.add_propagator(OptionalDisjunctive::new(mirrored, tag));
}

impl<Var: IntegerVariable + 'static> PropagatorConstructor for OptionalDisjunctive<Var> {
    type PropagatorImpl = OptionalDisjunctivePropagator<Var>;

    fn create(self, _: PropagatorConstructorContext) -> PropagatorSpec<Self::PropagatorImpl> {
        let n = self.tasks.len() as u32;
        let mut registration = EventsToRegister::builder();
        for (i, task) in self.tasks.iter().enumerate() {
            let i = i as u32;
            registration = registration
                .add(&task.start, DomainEvents::BOUNDS, LocalId::from(i))
                .add(&task.present, DomainEvents::ASSIGN, LocalId::from(n + i));
        }
        PropagatorSpec {
            registration: registration.build(),
            checkers: RuntimeCheckers::empty(),
            propagator: OptionalDisjunctivePropagator {
                tasks: self.tasks,
                code: InferenceCode::new(self.tag, UnaryOptional),
            },
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct OptionalDisjunctivePropagator<Var> {
    tasks: Vec<OptionalTask<Var>>,
    code: InferenceCode,
}

/// A task's bounds at this node of the search.
#[derive(Debug, Clone, Copy)]
struct TaskBounds {
    task: usize,
    est: i64,
    /// Latest start.
    lst: i64,
    duration: i64,
}

impl TaskBounds {
    fn ect(&self) -> i64 {
        self.est + self.duration
    }
    fn lct(&self) -> i64 {
        self.lst + self.duration
    }
}

impl<Var: IntegerVariable + 'static> Propagator for OptionalDisjunctivePropagator<Var> {
    fn name(&self) -> &str {
        "OptionalDisjunctive"
    }

    fn priority(&self) -> pumpkin_core::propagation::Priority {
        pumpkin_core::propagation::Priority::Low
    }

    fn propagate_from_scratch(&self, mut context: PropagationContext) -> PropagationStatusCP {
        let (present, optional) = self.bounds(&context);
        if present.len() + optional.len() < 2 {
            return Ok(());
        }
        self.overload(&mut context, &present, &optional)?;
        self.detectable_precedences(&mut context, &present, &optional)
    }
}

impl<Var: IntegerVariable + 'static> OptionalDisjunctivePropagator<Var> {
    /// The present tasks and the optional ones (absent tasks are ignored).
    fn bounds(&self, context: &PropagationContext) -> (Vec<TaskBounds>, Vec<TaskBounds>) {
        let (mut present, mut optional) = (Vec::new(), Vec::new());
        for (i, t) in self.tasks.iter().enumerate() {
            let w = TaskBounds {
                task: i,
                est: i64::from(context.lower_bound(&t.start)),
                lst: i64::from(context.upper_bound(&t.start)),
                duration: i64::from(t.duration),
            };
            match context.evaluate_literal(t.present) {
                Some(true) => present.push(w),
                None => optional.push(w),
                Some(false) => {}
            }
        }
        (present, optional)
    }

    /// `present ∧ a ≤ start ≤ b − duration` for each task in `set`: they all run inside `[a, b)`.
    fn inside(&self, set: &[TaskBounds], a: i64, b: i64, out: &mut Vec<Predicate>) {
        for w in set {
            let t = &self.tasks[w.task];
            out.push(t.present.get_true_predicate());
            out.push(t.start.lower_bound_predicate(clamp(a)));
            out.push(t.start.upper_bound_predicate(clamp(b - w.duration)));
        }
    }

    /// Overload checking over every window `[est_k, lct_l)` of present tasks, and the optional
    /// tasks that would overload one.
    fn overload(
        &self,
        context: &mut PropagationContext,
        present: &[TaskBounds],
        optional: &[TaskBounds],
    ) -> PropagationStatusCP {
        let mut by_lct: Vec<TaskBounds> = present.to_vec();
        by_lct.sort_by_key(TaskBounds::lct);
        let mut starts: Vec<i64> = present.iter().chain(optional).map(|w| w.est).collect();
        starts.sort_unstable();
        starts.dedup();
        let mut removed = vec![false; optional.len()];
        for &a in &starts {
            let inside: Vec<TaskBounds> = by_lct.iter().filter(|w| w.est >= a).copied().collect();
            let energy = self.energy_from(a, &inside)?;
            let most = most_overloaded_from(a, &inside, &energy);
            for (o, w) in optional.iter().enumerate() {
                if !removed[o] && w.est >= a {
                    let window = Windows {
                        a,
                        inside: &inside,
                        energy: &energy,
                        most: &most,
                    };
                    removed[o] = self.exclude_if_overloading(context, &window, w)?;
                }
            }
        }
        Ok(())
    }

    /// The energy of the present tasks `inside` (those starting at `a` or later, in lct order)
    /// up to each one's lct; a conflict if some window `[a, lct)` is overloaded.
    fn energy_from(&self, a: i64, inside: &[TaskBounds]) -> Result<Vec<i64>, Conflict> {
        let mut energy = Vec::with_capacity(inside.len());
        let mut total = 0;
        for w in inside {
            total += w.duration;
            energy.push(total);
            if total > w.lct() - a {
                self.conflict(&inside[..energy.len()], a, w.lct(), total)?;
            }
        }
        Ok(energy)
    }

    /// Remove optional task `w` (starting at `a` or later) from this resource if it overloads
    /// a window `[a, b)`: `b` its own lct or a later present one, whichever is most overloaded.
    fn exclude_if_overloading(
        &self,
        context: &mut PropagationContext,
        windows: &Windows,
        w: &TaskBounds,
    ) -> Result<bool, Conflict> {
        let Windows {
            a,
            inside,
            energy,
            most,
        } = *windows;
        let first_after = inside.partition_point(|v| v.lct() <= w.lct());
        let own = first_after.checked_sub(1).map_or(0, |k| energy[k]) - (w.lct() - a);
        if own.max(most[first_after]) + w.duration <= 0 {
            return Ok(false);
        }
        let (b, count) = if own >= most[first_after] {
            (w.lct(), first_after)
        } else {
            let k = (first_after..inside.len())
                .find(|&k| overload(a, inside, energy, k) == most[first_after])
                .unwrap_or(inside.len() - 1);
            (inside[k].lct(), k + 1)
        };
        let set_energy = count.checked_sub(1).map_or(0, |k| energy[k]);
        self.exclude(context, &inside[..count], w, a, b, set_energy + w.duration)?;
        Ok(true)
    }

    /// The tasks of `set` need `energy` > `b − a` inside `[a, b)`: fail, with the window widened
    /// by the spare energy so the learned clause covers more.
    fn conflict(&self, set: &[TaskBounds], a: i64, b: i64, energy: i64) -> PropagationStatusCP {
        let (a, b) = widen(a, b, energy);
        let mut reason = Vec::new();
        self.inside(set, a, b, &mut reason);
        propagator_conflict(PropositionalConjunction::new(reason), &self.code)
    }

    /// Optional task `w` would overload `[a, b)` with `set`: it is not on this resource.
    fn exclude(
        &self,
        context: &mut PropagationContext,
        set: &[TaskBounds],
        w: &TaskBounds,
        a: i64,
        b: i64,
        energy: i64,
    ) -> PropagationStatusCP {
        let (a, b) = widen(a, b, energy);
        let mut reason = Vec::new();
        self.inside(set, a, b, &mut reason);
        let t = &self.tasks[w.task];
        reason.push(t.start.lower_bound_predicate(clamp(a)));
        reason.push(t.start.upper_bound_predicate(clamp(b - w.duration)));
        let absent = (!t.present).get_true_predicate();
        context.post(absent, (PropositionalConjunction::new(reason), &self.code))?;
        Ok(())
    }

    /// Detectable precedences: every present `j` with `lst_j < ect_i` runs before `i`.
    fn detectable_precedences(
        &self,
        context: &mut PropagationContext,
        present: &[TaskBounds],
        optional: &[TaskBounds],
    ) -> PropagationStatusCP {
        let mut by_est_desc: Vec<TaskBounds> = present.to_vec();
        by_est_desc.sort_by_key(|w| std::cmp::Reverse(w.est));
        for (i, is_present) in present
            .iter()
            .map(|w| (w, true))
            .chain(optional.iter().map(|w| (w, false)))
        {
            let before = |j: &&TaskBounds| j.task != i.task && j.lst < i.ect();
            // The earliest end of the set: max over k of est_k + the durations with est ≥ est_k.
            let (mut total, mut best, mut best_est) = (0, i64::MIN, 0);
            for j in by_est_desc.iter().filter(before) {
                total += j.duration;
                if j.est + total > best {
                    (best, best_est) = (j.est + total, j.est);
                }
            }
            let pushes_start = best > i.est;
            let leaves_no_room = best > i.lst;
            if !(pushes_start && (is_present || leaves_no_room)) {
                continue;
            }
            let set: Vec<TaskBounds> = by_est_desc
                .iter()
                .filter(before)
                .filter(|j| j.est >= best_est)
                .copied()
                .collect();
            self.precede(context, &set, i, best_est, best, is_present)?;
        }
        Ok(())
    }

    /// All of `set` runs before `i` (each starts by `ect_i − 1`, at or after `first`), so `i`
    /// starts at `end` or later; an optional `i` with no room left is not on this resource.
    fn precede(
        &self,
        context: &mut PropagationContext,
        set: &[TaskBounds],
        i: &TaskBounds,
        first: i64,
        end: i64,
        is_present: bool,
    ) -> PropagationStatusCP {
        let mut reason = Vec::with_capacity(3 * set.len() + 2);
        for j in set {
            let t = &self.tasks[j.task];
            reason.push(t.present.get_true_predicate());
            reason.push(t.start.lower_bound_predicate(clamp(first)));
            reason.push(t.start.upper_bound_predicate(clamp(i.ect() - 1)));
        }
        let t = &self.tasks[i.task];
        reason.push(t.start.lower_bound_predicate(clamp(i.est)));
        let reason = PropositionalConjunction::new(reason);
        if is_present {
            let mut reason = reason;
            reason.push(t.present.get_true_predicate());
            context.post(
                t.start.lower_bound_predicate(clamp(end)),
                (reason, &self.code),
            )?;
        } else {
            let mut reason = reason;
            reason.push(t.start.upper_bound_predicate(clamp(end - 1)));
            context.post((!t.present).get_true_predicate(), (reason, &self.code))?;
        }
        Ok(())
    }
}

/// The windows `[a, lct_k)` over the present tasks starting at `a` or later.
#[derive(Clone, Copy)]
struct Windows<'w> {
    a: i64,
    /// Those tasks, in lct order.
    inside: &'w [TaskBounds],
    /// `energy[k]`: their durations up to the k-th.
    energy: &'w [i64],
    /// `most[k]`: the largest overload of a window ending at the k-th lct or later.
    most: &'w [i64],
}

/// How much the window `[a, lct_k)` is overloaded (negative: its spare time).
fn overload(a: i64, inside: &[TaskBounds], energy: &[i64], k: usize) -> i64 {
    energy[k] - (inside[k].lct() - a)
}

/// Suffix maxima of [`overload`] (`i64::MIN` past the end).
fn most_overloaded_from(a: i64, inside: &[TaskBounds], energy: &[i64]) -> Vec<i64> {
    let mut most = vec![i64::MIN; inside.len() + 1];
    for k in (0..inside.len()).rev() {
        most[k] = most[k + 1].max(overload(a, inside, energy, k));
    }
    most
}

/// Widens `[a, b)` by the energy beyond `b − a + 1`, half on each side: the tasks still cannot
/// fit, and the reason holds in more states.
fn widen(a: i64, b: i64, energy: i64) -> (i64, i64) {
    let spare = (energy - (b - a) - 1).max(0);
    (a - spare / 2, b + (spare - spare / 2))
}

/// A bound as pumpkin's 32-bit value.
fn clamp(v: i64) -> i32 {
    v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}
