//! A request, from outside, to stop long work early: the Python package's Ctrl-C.
//!
//! The command line needs none (Ctrl-C ends its process). A library caller that abandons a call
//! — the Python package raises `KeyboardInterrupt` at once — runs the call with
//! [`stoppable`] on a thread of its own and raises the flag; the long loops (the tree search's
//! batches, its polish and finish, the hybrid planners, `compare`'s methods) ask [`requested`]
//! where they ask whether time is up, and end as if it were. The flag lives on the thread that
//! runs the call, so calls on other threads run on; work that loop farms out to rayon's threads
//! finishes its current piece.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

thread_local! {
    static FLAG: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Runs `job` on this thread with `flag` as its stop request: once the flag is raised,
/// [`requested`] answers true on this thread until `job` returns.
///
/// ```
/// use std::sync::{atomic::{AtomicBool, Ordering}, Arc};
/// use topoplace::interrupt::{requested, stoppable};
///
/// let flag = Arc::new(AtomicBool::new(false));
/// let steps = stoppable(flag.clone(), || {
///     let mut steps = 0;
///     while !requested() {
///         steps += 1;
///         if steps == 3 {
///             flag.store(true, Ordering::Relaxed); // as another thread would on Ctrl-C
///         }
///     }
///     steps
/// });
/// assert_eq!(steps, 3);
/// assert!(!requested()); // outside the job nothing is requested
/// ```
pub fn stoppable<T: Send>(flag: Arc<AtomicBool>, job: impl FnOnce() -> T + Send) -> T {
    // The call's own rayon pool, each of its threads holding the flag: the parallel work the
    // call farms out sees the request too.
    let on_pool_threads = flag.clone();
    let pool = rayon::ThreadPoolBuilder::new()
        .start_handler(move |_| {
            set(Some(on_pool_threads.clone()));
        })
        .build();
    let before = set(Some(flag));
    let result = match pool {
        Ok(pool) => pool.install(job),
        Err(_) => job(),
    };
    set(before);
    result
}

/// Makes `flag` this thread's stop request; returns the one it replaces.
fn set(flag: Option<Arc<AtomicBool>>) -> Option<Arc<AtomicBool>> {
    FLAG.with(|f| f.replace(flag))
}

/// Seconds after its start past which work under a time limit of `limit` seconds gives no answer
/// rather than a late one: the limit with the 10% + 1 s a time limit is held within, less 0.2 s
/// to print. A search plans to end at `limit`; only the simulations it cannot cut short run on
/// (a reference DP-NCCL and the fastest GPU alone, a second each on 2·10⁵ ops and 16 GPUs).
pub fn give_up_after(limit: f64) -> f64 {
    1.1 * limit + 0.8
}

/// Whether `deadline` has passed (never, without one) or the work was asked to stop: what every
/// time limit asks.
pub fn past(deadline: Option<Instant>) -> bool {
    requested() || deadline.is_some_and(|d| Instant::now() >= d)
}

/// Whether the work running on this thread has been asked to stop.
pub fn requested() -> bool {
    FLAG.with(|f| {
        f.borrow()
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    })
}
/// The answer of `job`, run on a thread of its own, if it comes within `wait`; `None` when it
/// does not, the thread left to finish (or stay blocked) on its own and its answer dropped. For
/// work that cannot be asked to stop: a GNN forward pass, decoding a policy file, opening a pipe
/// nobody writes to.
pub(crate) fn answer_within<T: Send + 'static>(
    wait: std::time::Duration,
    job: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Nobody hears once the wait has given up.
        let _ = send.send(job());
    });
    receive.recv_timeout(wait).ok()
}
