//! A wall-clock instant past which this thread's compilations and simulations are abandoned: a
//! search under a time limit hands it to each leaf it measures, so that one leaf that takes
//! seconds (an op-level strategy on a thousand GPUs) cannot carry the search past its limit.
//!
//! The deadline lives on the thread that measures the leaf ([`during`]); the compiler and the
//! engine ask [`passed`] every few hundred ops or events, and give up as they do past a
//! simulated-time limit. Work outside [`during`] has no deadline and never gives up.

use std::cell::Cell;
use std::time::Instant;

thread_local! {
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Runs `job` with `deadline` as this thread's deadline (none: no deadline), restoring the one
/// before it afterwards.
pub(crate) fn during<T>(deadline: Option<Instant>, job: impl FnOnce() -> T) -> T {
    /// Puts the earlier deadline back however `job` ends, unwinding included (a rayon thread
    /// outlives the job it ran).
    struct Restore(Option<Instant>);
    impl Drop for Restore {
        fn drop(&mut self) {
            DEADLINE.set(self.0);
        }
    }
    let _restore = Restore(DEADLINE.replace(deadline));
    job()
}

/// This thread's deadline, for work handed to other threads (a rayon pool's workers do not
/// inherit it): they run under it with [`during`].
pub(crate) fn current() -> Option<Instant> {
    DEADLINE.get()
}

/// Whether this thread's deadline has passed (never without one).
pub(crate) fn passed() -> bool {
    DEADLINE
        .get()
        .is_some_and(|deadline| Instant::now() >= deadline)
}

/// How many ops or events the loops that ask [`passed`] handle between two questions: a clock
/// read costs tens of nanoseconds, an event about a microsecond.
pub(crate) const ASK_EVERY: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_deadline_holds_only_inside_its_job() {
        assert!(!passed());
        assert!(during(Some(Instant::now()), passed));
        assert!(!during(
            Some(Instant::now() + Duration::from_secs(3600)),
            passed
        ));
        assert!(!during(None, passed));
        assert!(!passed());
    }

    #[test]
    fn the_current_deadline_is_the_innermost_one() {
        let soon = Some(Instant::now() + Duration::from_secs(1));
        let later = Some(Instant::now() + Duration::from_secs(3600));
        assert_eq!(current(), None);
        assert_eq!(during(later, || during(soon, current)), soon);
        assert_eq!(during(later, current), later);
        assert_eq!(current(), None);
    }

    #[test]
    fn an_inner_deadline_gives_way_to_the_outer_one_after_it() {
        let past = Some(Instant::now());
        let inner = during(past, || during(None, passed));
        let outer_after = during(past, || {
            during(None, || ());
            passed()
        });
        assert!(!inner && outer_after);
    }

    #[test]
    fn a_job_that_panics_leaves_no_deadline_behind() {
        let past = Some(Instant::now());
        let unwound = std::panic::catch_unwind(|| during(past, || panic!("the job failed")));
        assert!(unwound.is_err());
        assert!(!passed());
    }
}
