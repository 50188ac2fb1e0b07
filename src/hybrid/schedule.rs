//! The timeline of a pipeline's micro-batches: every stage runs its forwards and backwards in the
//! schedule's order, each as soon as its stage is free and its input has arrived from the
//! neighbouring stage. For `p` equal stages of forward `F` and backward `B`, no transfer time and
//! `m` micro-batches this is the textbook (m + p − 1)·(F + B) of GPipe and 1F1B alike.

use crate::strategy::Schedule;

/// Per-micro-batch times of one stage, µs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct StageTimes {
    pub forward: f64,
    pub backward: f64,
    /// Sending one micro-batch's activation to the next stage (and its gradient back).
    pub send_next: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    Forward,
    Backward,
}

/// The order stage `s` of `p` runs its passes in for `m` micro-batches.
fn order(schedule: Schedule, s: usize, p: usize, m: usize) -> Vec<(Pass, usize)> {
    match schedule {
        Schedule::GPipe => (0..m)
            .map(|j| (Pass::Forward, j))
            .chain((0..m).map(|j| (Pass::Backward, j)))
            .collect(),
        Schedule::OneFOneB => {
            let warm = (p - s - 1).min(m);
            let mut v: Vec<(Pass, usize)> = (0..warm).map(|j| (Pass::Forward, j)).collect();
            for j in 0..m - warm {
                v.push((Pass::Forward, warm + j));
                v.push((Pass::Backward, j));
            }
            v.extend((m - warm..m).map(|j| (Pass::Backward, j)));
            v
        }
    }
}

/// When each stage finishes its last backward, µs from the iteration's start.
pub(crate) fn backward_ends(schedule: Schedule, stages: &[StageTimes], m: usize) -> Vec<f64> {
    let p = stages.len();
    let orders: Vec<Vec<(Pass, usize)>> = (0..p).map(|s| order(schedule, s, p, m)).collect();
    let mut fwd_end = vec![vec![f64::NAN; m]; p];
    let mut bwd_end = vec![vec![f64::NAN; m]; p];
    let mut next = vec![0usize; p];
    let mut free = vec![0.0f64; p];
    let mut remaining: usize = orders.iter().map(Vec::len).sum();
    while remaining > 0 {
        let before = remaining;
        for s in 0..p {
            while let Some(&(pass, j)) = orders[s].get(next[s]) {
                let ready = match pass {
                    Pass::Forward if s == 0 => Some(0.0),
                    Pass::Forward => Some(fwd_end[s - 1][j] + stages[s - 1].send_next),
                    Pass::Backward if s + 1 == p => Some(fwd_end[s][j]),
                    Pass::Backward => Some(bwd_end[s + 1][j] + stages[s].send_next),
                };
                let Some(ready) = ready.filter(|r| !r.is_nan()) else {
                    break;
                };
                let start = ready.max(free[s]);
                let end = match pass {
                    Pass::Forward => start + stages[s].forward,
                    Pass::Backward => start + stages[s].backward,
                };
                match pass {
                    Pass::Forward => fwd_end[s][j] = end,
                    Pass::Backward => bwd_end[s][j] = end,
                }
                free[s] = end;
                next[s] += 1;
                remaining -= 1;
            }
        }
        assert!(remaining < before, "a pipeline schedule deadlocked");
    }
    free
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_stages_take_m_plus_p_minus_1_slots() {
        for schedule in Schedule::ALL {
            for (p, m) in [(1, 1), (1, 8), (4, 1), (4, 8), (8, 32), (3, 2)] {
                let st = vec![
                    StageTimes {
                        forward: 1.0,
                        backward: 2.0,
                        send_next: 0.0
                    };
                    p
                ];
                let ends = backward_ends(schedule, &st, m);
                let expect = (m + p - 1) as f64 * 3.0;
                assert_eq!(ends[0], expect, "{schedule:?} p={p} m={m}");
            }
        }
    }

    #[test]
    fn transfers_delay_the_first_stage_by_a_round_trip_per_boundary() {
        let st = vec![
            StageTimes {
                forward: 1.0,
                backward: 1.0,
                send_next: 0.5
            };
            3
        ];
        // One micro-batch: three forwards, three backwards, two hops each way.
        assert_eq!(backward_ends(Schedule::OneFOneB, &st, 1)[0], 6.0 + 2.0);
    }
}
