//! The allocator: mimalloc, keeping freed memory a while before handing it back to the kernel.

/// mimalloc rather than glibc's malloc: a search builds and drops an execution graph of 10^4 to
/// 10^5 tasks per strategy it simulates, and glibc gave their pages back to the kernel only to
/// fault them in again (`place` 5–10% faster on 2 cores, every result the same).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its option enum's 16th entry, v2 and v3 alike).
const MI_OPTION_PURGE_DELAY: i32 = 15;

/// Free memory is kept this many milliseconds before mimalloc hands it back to the kernel. Its
/// default gives a pipeline's execution graph (10^5 tasks, tens of MB) back between one candidate
/// and the next, and the kernel zeroes every page again when the next faults it in: 9% of
/// `pipeline-dp`'s profile on BERT-large x TAG's cloud. With 10 s, `place` there took 8-10% less
/// wall time on 2 cores (the binaries in turn, every result the same) and its peak resident memory
/// rose 399 -> 432 MB. `MIMALLOC_PURGE_DELAY` in the environment still decides when set.
const PURGE_DELAY_MS: std::ffi::c_long = 10_000;

#[allow(unsafe_code)]
unsafe extern "C" {
    /// Exported by the mimalloc that `libmimalloc-sys` compiles in (its Rust binding declares it
    /// only under the `extended` feature, which would add a dependency).
    fn mi_option_set(option: i32, value: std::ffi::c_long);
}

/// Let freed memory stay with the process for a while ([`PURGE_DELAY_MS`]). Call it first thing
/// in `main`, before any thread exists.
#[allow(unsafe_code)]
pub fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: `main` calls this before any thread exists (mimalloc's option setter is not
        // thread safe); the option number and value are what mimalloc.h defines.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    }
}
