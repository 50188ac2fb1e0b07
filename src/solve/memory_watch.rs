//! The memory limit while the solvers search. The size estimate refuses a model too large to
//! build, but a search keeps growing after the build: HiGHS's branch-and-bound tree (BERT-Small
//! inference × moirai-inter, a 0.2 GiB model: 2.1 GiB peak after 150 s) and pumpkin's learned
//! clauses and stored reasons (1.5 GB after 60 s, 3.1 GB after 150 s at a zero gap). So while
//! they run, a watcher reads this process's resident memory every 50 ms and stops the CP proof
//! at [`CP_SHARE`] of the limit and HiGHS at [`MILP_SHARE`]: each keeps its incumbent and
//! bound, as at its time limit. The margins cover what grows between two reads and the freed
//! memory the allocator keeps after the CP stops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Share of the memory limit at which the CP proof stops.
pub(crate) const CP_SHARE: f64 = 0.7;

/// Share of the memory limit at which HiGHS is interrupted.
pub(crate) const MILP_SHARE: f64 = 0.8;

/// Between two reads of the resident memory (a read of /proc/self/status costs tens of µs).
const POLL: Duration = Duration::from_millis(50);

/// Raise `flag` once the resident memory reaches `cap` bytes.
pub(crate) struct Tripwire<'a> {
    pub cap: f64,
    pub flag: &'a AtomicBool,
}

/// Read the resident memory now and every [`POLL`] until `done` is raised (unpark the watching
/// thread to end the wait at once); whether any tripwire fired.
pub(crate) fn watch(done: &AtomicBool, wires: &[Tripwire]) -> bool {
    let mut fired = false;
    while !done.load(Ordering::Relaxed) {
        if let Some(resident) = resident_bytes() {
            for wire in wires.iter().filter(|w| resident >= w.cap) {
                wire.flag.store(true, Ordering::Relaxed);
                fired = true;
            }
        }
        std::thread::park_timeout(POLL);
    }
    fired
}

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
