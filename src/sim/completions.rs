//! The simulator's queue of running tasks by end time: a radix heap (Ahuja, Mehlhorn, Orlin and
//! Tarjan 1990). The event loop pops ends in time order and every task it starts ends no earlier
//! than now, so the keys are monotone: a key is only ever compared with the last one popped, and
//! each entry moves down a few of 65 buckets instead of sifting through a binary heap of every
//! running task (that heap's `pop` was 7–9% of `place`'s CPU time on BERT-large and GPT).
//!
//! The order is exactly a binary min-heap's of `(key, task)`: the least key first, and among
//! equal keys the least task id (ties kept in a small heap of their own), so simulations do not
//! change by a microsecond.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::exec::TaskId;

/// Running tasks by end key ([`super::engine`]'s order-preserving map of the end time).
#[derive(Debug)]
pub(super) struct Completions {
    /// The last key popped (0 before the first): every key pushed is at least this.
    last: u64,
    /// Tasks whose key equals `last`, least id first.
    now: BinaryHeap<Reverse<TaskId>>,
    /// `buckets[b]` (b ≥ 1): entries whose key differs from `last` first in bit `b − 1` (counting
    /// from the least significant), so every key of bucket `b` is below every key of `b + 1`.
    buckets: [Vec<(u64, TaskId)>; 65],
}

impl Default for Completions {
    fn default() -> Completions {
        Completions {
            last: 0,
            now: BinaryHeap::new(),
            buckets: std::array::from_fn(|_| Vec::new()),
        }
    }
}

impl Completions {
    pub(super) fn clear(&mut self) {
        self.last = 0;
        self.now.clear();
        self.buckets.iter_mut().for_each(Vec::clear);
    }

    /// Add `task` ending at `key`, which is no less than the last key popped.
    pub(super) fn push(&mut self, key: u64, task: TaskId) {
        debug_assert!(key >= self.last, "a task cannot end before now");
        if key == self.last {
            self.now.push(Reverse(task));
        } else {
            self.buckets[bucket(self.last, key)].push((key, task));
        }
    }

    /// The least `(key, task)`, removed.
    pub(super) fn pop(&mut self) -> Option<(u64, TaskId)> {
        if self.now.is_empty() {
            self.advance()?;
        }
        let Reverse(task) = self.now.pop()?;
        Some((self.last, task))
    }

    /// Move `last` to the least key left and its tasks into `now`; `None` when empty.
    fn advance(&mut self) -> Option<()> {
        let b = (1..self.buckets.len()).find(|&b| !self.buckets[b].is_empty())?;
        // Taken out and put back emptied: its allocation serves the simulator's next run.
        let mut entries = std::mem::take(&mut self.buckets[b]);
        self.last = entries.iter().map(|&(k, _)| k).min()?;
        for (key, task) in entries.drain(..) {
            if key == self.last {
                self.now.push(Reverse(task));
            } else {
                // Below bucket `b`: they agree with the new `last` on every bit from `b − 1` up.
                self.buckets[bucket(self.last, key)].push((key, task));
            }
        }
        self.buckets[b] = entries;
        Some(())
    }
}

/// The bucket of `key` (≠ `last`): one past the highest bit where the two differ.
fn bucket(last: u64, key: u64) -> usize {
    64 - (last ^ key).leading_zeros() as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    /// Against a binary min-heap of `(key, task)` on random monotone runs: pushes at or after
    /// the last key popped, many equal keys (tasks of zero duration, ends at the same time).
    #[test]
    fn pops_in_a_binary_heaps_order() {
        let mut rng = StdRng::seed_from_u64(7);
        for run in 0..200 {
            let mut radix = Completions::default();
            let mut heap = BinaryHeap::new();
            let mut now = 0u64;
            let mut next_task = 0u32;
            for _ in 0..rng.random_range(1..400) {
                for _ in 0..rng.random_range(0..4) {
                    let key = match rng.random_range(0..4) {
                        0 => now,
                        1 => now + rng.random_range(0..4u64),
                        2 => now + rng.random_range(0..1u64 << 20),
                        _ => now.saturating_add(rng.random::<u64>() >> rng.random_range(0..64)),
                    };
                    // Task ids in any order: a task started later may have a lower id.
                    let task = rng.random_range(0..1000u32).wrapping_add(next_task);
                    next_task += 1;
                    radix.push(key, task);
                    heap.push(Reverse((key, task)));
                }
                if rng.random_bool(0.5) {
                    let expected = heap.pop().map(|Reverse(e)| e);
                    assert_eq!(radix.pop(), expected, "run {run}");
                    if let Some((key, _)) = expected {
                        now = key;
                    }
                }
            }
            while let Some(Reverse(expected)) = heap.pop() {
                assert_eq!(radix.pop(), Some(expected), "run {run}");
            }
            assert_eq!(radix.pop(), None);
            radix.clear();
            assert_eq!(radix.pop(), None);
        }
    }
}
