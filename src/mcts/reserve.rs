//! Keeping a time limit (`--time`) rather than overshooting it: the search measures how long its
//! indivisible pieces of work take (one simulation, one batch of leaves, one round of the
//! polish's moves) and does not start one that the time left cannot hold, keeping back enough
//! for the final compilation of the result, which comes after everything else.
//!
//! Only searches under a time limit look at these durations; without one every piece runs and
//! the result does not depend on the machine.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The longest of the durations recorded so far (shared between threads).
#[derive(Debug, Default)]
pub(crate) struct Longest(AtomicU64);

impl Longest {
    pub(crate) fn record(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.0.fetch_max(nanos, Ordering::Relaxed);
    }

    /// Run `work` and record how long it took.
    pub(crate) fn timed<T>(&self, work: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let out = work();
        self.record(started.elapsed());
        out
    }

    pub(crate) fn get(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

/// How many rounds `simulations` run side by side take on this machine's threads.
fn rounds_of(simulations: usize) -> u32 {
    let threads = rayon::current_num_threads().max(1);
    u32::try_from(simulations.div_ceil(threads)).unwrap_or(u32::MAX)
}

/// Whether work taking `needed` and started now would end past `deadline` (never, without one),
/// or the caller has asked the work to stop ([`crate::interrupt`]).
pub(crate) fn no_room_for(deadline: Option<Instant>, needed: Duration) -> bool {
    crate::interrupt::requested()
        || deadline.is_some_and(|d| {
            Instant::now()
                .checked_add(needed)
                .is_none_or(|end| end >= d)
        })
}

/// `per_round` times the rounds `simulations` take side by side ([`rounds_of`]), saturating.
pub(crate) fn time_for(per_round: Duration, simulations: usize) -> Duration {
    per_round
        .checked_mul(rounds_of(simulations))
        .unwrap_or(Duration::MAX)
}

/// `deadline` brought forward by `kept_back` (what must still run after the work it bounds).
pub(crate) fn kept_back(deadline: Option<Instant>, kept_back: Duration) -> Option<Instant> {
    deadline.map(|d| d.checked_sub(kept_back).unwrap_or(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_keeps_the_maximum_whatever_the_order() {
        let l = Longest::default();
        for ms in [3, 9, 1, 9, 4] {
            l.record(Duration::from_millis(ms));
        }
        assert_eq!(l.get(), Duration::from_millis(9));
    }

    #[test]
    fn room_is_judged_against_the_deadline_less_the_work() {
        let now = Instant::now();
        let deadline = Some(now + Duration::from_secs(60));
        assert!(!no_room_for(deadline, Duration::from_secs(1)));
        assert!(no_room_for(deadline, Duration::from_secs(61)));
        assert!(!no_room_for(None, Duration::MAX));
        // Work too long to add to an instant never fits.
        assert!(no_room_for(deadline, Duration::MAX));
        assert_eq!(time_for(Duration::MAX, 10_000), Duration::MAX);
        assert_eq!(time_for(Duration::ZERO, 7), Duration::ZERO);
        let earlier = kept_back(deadline, Duration::from_secs(59)).unwrap();
        assert!(no_room_for(Some(earlier), Duration::from_secs(2)));
    }
}
