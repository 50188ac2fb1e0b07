//! What the polish already knows of the points it has simulated. Its walks often cross: on GPT at
//! batch 32 × TAG's testbed the walk from the tree's best and the walk from `dp-subset` end at one
//! point, and 391 of the second walk's 476 candidates were the first's. A candidate is simulated
//! only to learn whether it beats a time ([`crate::evaluate::limit_to_beat`]): its exact outcome,
//! or that it ends past that time. Either settles later questions about the same point: an exact
//! outcome any limit, "past L" any limit up to L. A settled question is answered without a
//! simulation, with what the simulation would say, so the walks decide the same whichever ran
//! first (they run side by side) and every result stays the same on any machine.

use std::collections::HashMap;
use std::sync::Mutex;

use super::tree::Outcome;
use crate::strategy::{AllReducePacking, BatchSplit};

/// A point of the polish: each op group's action, the batch split, the groups whose shares go
/// the other way, and the AllReduce packing.
pub(super) type PointKey = (Vec<u16>, BatchSplit, Vec<usize>, AllReducePacking);

/// What one simulation (or several) told of a point.
#[derive(Clone, Copy)]
enum Told {
    /// Simulated to its end.
    Exact(Outcome),
    /// Given up: its iteration ends past this time, µs.
    Past(f64),
}

/// The points' outcomes so far, shared by the walks.
#[derive(Default)]
pub(super) struct Known {
    told: Mutex<HashMap<PointKey, Told>>,
}

impl Known {
    /// What a simulation of `key` given up past `limit_us` would return, when what is known
    /// settles it: `Some(Some(outcome))` finished, `Some(None)` given up; `None` when it must run.
    pub(super) fn answer(&self, key: &PointKey, limit_us: f64) -> Option<Option<Outcome>> {
        let told = self.told.lock().unwrap_or_else(|e| e.into_inner());
        match told.get(key)? {
            Told::Exact(o) if o.time_us > limit_us => Some(None),
            Told::Exact(o) => Some(Some(*o)),
            Told::Past(past) if limit_us <= *past => Some(None),
            Told::Past(_) => None,
        }
    }

    /// Note what a simulation of `key` limited to `limit_us` returned (`None`: given up). What is
    /// known only grows: an exact outcome stays, and "past" keeps the loosest limit given up at.
    pub(super) fn note(&self, key: PointKey, limit_us: f64, found: Option<Outcome>) {
        let mut told = self.told.lock().unwrap_or_else(|e| e.into_inner());
        let now = match (found, told.get(&key).copied()) {
            (Some(o), _) | (None, Some(Told::Exact(o))) => Told::Exact(o),
            (None, Some(Told::Past(past))) => Told::Past(past.max(limit_us)),
            (None, None) => Told::Past(limit_us),
        };
        told.insert(key, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(a: u16) -> PointKey {
        (
            vec![a],
            BatchSplit::Even,
            Vec::new(),
            AllReducePacking::Packed,
        )
    }

    fn outcome(time_us: f64) -> Outcome {
        Outcome {
            time_us,
            fits: true,
            packing: AllReducePacking::Packed,
        }
    }

    /// An exact outcome answers every limit as a simulation would: finished within it, given up
    /// below it.
    #[test]
    fn an_exact_outcome_answers_any_limit() {
        let known = Known::default();
        known.note(key(1), f64::INFINITY, Some(outcome(10.0)));
        assert_eq!(
            known.answer(&key(1), 10.0).map(|o| o.map(|o| o.time_us)),
            Some(Some(10.0))
        );
        assert_eq!(
            known.answer(&key(1), 12.0).map(|o| o.map(|o| o.time_us)),
            Some(Some(10.0))
        );
        assert!(matches!(known.answer(&key(1), 9.5), Some(None)));
        assert!(
            known.answer(&key(2), 9.5).is_none(),
            "another point is unknown"
        );
    }

    /// "Past 8" settles limits up to 8 only; a later, looser "past 9" widens it, and an exact
    /// outcome replaces it (a given-up simulation never narrows what is known).
    #[test]
    fn a_given_up_simulation_answers_only_tighter_limits() {
        let known = Known::default();
        known.note(key(1), 8.0, None);
        assert!(matches!(known.answer(&key(1), 8.0), Some(None)));
        assert!(matches!(known.answer(&key(1), 3.0), Some(None)));
        assert!(known.answer(&key(1), 8.5).is_none());
        known.note(key(1), 9.0, None);
        known.note(key(1), 4.0, None);
        assert!(matches!(known.answer(&key(1), 8.5), Some(None)));
        assert!(known.answer(&key(1), 9.5).is_none());
        known.note(key(1), f64::INFINITY, Some(outcome(11.0)));
        known.note(key(1), 5.0, None);
        assert_eq!(
            known.answer(&key(1), 20.0).map(|o| o.map(|o| o.time_us)),
            Some(Some(11.0))
        );
    }
}
