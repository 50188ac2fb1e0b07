//! The memory limit while the solvers search. The size estimate refuses a model too large to
//! build, but a search keeps growing after the build: HiGHS's branch-and-bound tree (BERT-Small
//! inference × moirai-inter, a 0.2 GiB model: 2.1 GiB peak after 150 s) and pumpkin's learned
//! clauses and stored reasons (1.5 GB after 60 s, 3.1 GB after 150 s at a zero gap). So while
//! they run, a watcher reads this process's resident memory every 50 ms and stops the CP proof
//! at [`CP_SHARE`] of the limit and HiGHS at [`MILP_SHARE`]: each keeps its incumbent and
//! bound, as at its time limit. The margins cover what grows between two reads and the freed
//! memory the allocator keeps after the CP stops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Share of the memory limit at which the CP proof stops.
pub(crate) const CP_SHARE: f64 = 0.8;

/// Share of the memory limit at which HiGHS is interrupted.
pub(crate) const MILP_SHARE: f64 = 0.9;

/// Between two reads of the resident memory (a read of /proc/self/status costs tens of µs).
const POLL: Duration = Duration::from_millis(50);

/// Raise `flag` once the resident memory reaches `cap` bytes.
pub(crate) struct Tripwire<'a> {
    pub cap: f64,
    pub flag: &'a AtomicBool,
}

/// Flags to raise at the time limit. HiGHS overshoots its own `time_limit` by seconds on large
/// models (presolve and the root LP check it rarely; bert-small × moirai-inter under QuickP took
/// 7.9 s for 2.4 s), but it polls its interrupt callback inside the simplex and the
/// branch and bound, so the watcher raises the interrupt itself when the time is up.
pub(crate) struct Deadline<'a> {
    pub at: Instant,
    pub flags: [&'a AtomicBool; 2],
}

/// Read the resident memory now and every [`POLL`] until `done` is raised (unpark the watching
/// thread to end the wait at once), and raise the deadline's flags once it passes; whether any
/// memory tripwire fired.
pub(crate) fn watch(done: &AtomicBool, wires: &[Tripwire], deadline: &Deadline) -> bool {
    let mut fired = false;
    while !done.load(Ordering::Relaxed) {
        if let Some(resident) = resident_bytes() {
            for wire in wires.iter().filter(|w| resident >= w.cap) {
                wire.flag.store(true, Ordering::Relaxed);
                fired = true;
            }
        }
        let now = Instant::now();
        if now >= deadline.at {
            for flag in deadline.flags {
                flag.store(true, Ordering::Relaxed);
            }
        }
        std::thread::park_timeout(
            POLL.min(deadline.at.saturating_duration_since(now))
                .max(MIN_POLL),
        );
    }
    fired
}

/// The shortest wait between two reads, past the deadline too.
const MIN_POLL: Duration = Duration::from_millis(5);

/// This process's resident memory (VmRSS; `None` where /proc is missing, and then only the size
/// estimate holds the limit).
pub(crate) fn resident_bytes() -> Option<f64> {
    status_bytes("VmRSS:")
}

/// A memory field of /proc/self/status (`VmRSS:`, `VmHWM:`, ...), in bytes.
pub fn status_bytes(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = status.lines().find_map(|l| l.strip_prefix(field))?;
    let kib: f64 = kib.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024.0)
}
