//! The pipeline option: op groups arranged in an ordered chain of stages, the batch cut into
//! micro-batches that flow through the stages, under a schedule.
//!
//! Each stage is a set of op groups; each group keeps its own decision (devices and replication
//! option), so a stage can be data-parallel with AllReduce or a parameter server, duplicated or
//! model-parallel inside. Forward activations flow from a stage to the next and their gradients
//! back; the gradients of a stage's weights are accumulated over the micro-batches and
//! synchronised once, after the last one (GPipe, Huang et al. 2019, §2.2).
//!
//! Schedules, for `p` stages and `m` micro-batches:
//! - [`Schedule::GPipe`]: every stage runs all `m` forwards, then all `m` backwards (a flush):
//!   the first stage holds the activations of all `m` micro-batches.
//! - [`Schedule::OneFOneB`]: PipeDream-Flush (Narayanan et al. 2021): stage `s` (from 0) runs
//!   `p − s` forwards, then alternates one backward and one forward, so it never holds more than
//!   `p − s` micro-batches. Same bubble as GPipe, `(p − 1) / (m + p − 1)` of the iteration for
//!   uniform stages, with less memory.

use serde::{Deserialize, Serialize};

use crate::error::InputError;

/// The order of forwards and backwards on each stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Schedule {
    /// GPipe: all forwards of every micro-batch, then all backwards; the first stage holds every
    /// micro-batch's activations.
    #[serde(rename = "gpipe")]
    GPipe,
    /// PipeDream-Flush (1F1B): after a warm-up of `p − s` forwards, stage `s` alternates one
    /// backward and one forward, holding at most `p − s` micro-batches.
    #[serde(rename = "1f1b")]
    OneFOneB,
}

impl Schedule {
    /// Every schedule; the pipeline planner simulates candidates under each.
    pub const ALL: [Schedule; 2] = [Schedule::GPipe, Schedule::OneFOneB];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Schedule::GPipe => "gpipe",
            Schedule::OneFOneB => "1f1b",
        }
    }

    /// Micro-batches stage `stage` of `stages` may have in flight (forward done, backward not).
    pub fn in_flight(self, stage: usize, stages: usize, micro_batches: u32) -> u32 {
        match self {
            Schedule::GPipe => micro_batches,
            Schedule::OneFOneB => micro_batches.min((stages - stage) as u32),
        }
    }
}

/// Stages of op groups, micro-batches and a schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipeline {
    /// Stage of each op group (index = group).
    stage_of_group: Vec<u32>,
    /// Micro-batches the batch is cut into (divides the batch size).
    pub micro_batches: u32,
    /// The order of forwards and backwards on each stage.
    pub schedule: Schedule,
}

/// The most micro-batches a strategy's pipeline may cut the batch into: 32 times what the
/// pipeline planners try ([`crate::pipeline_plan`]), and GPipe's and PipeDream's runs use at most
/// a few dozen.
pub const MAX_MICRO_BATCHES: u32 = 1024;

/// The most op copies (ops × micro-batches) a pipeline strategy file may ask for: a 70 B Llama's
/// 10⁴ ops at 1,024 micro-batches is 10⁷. A 2·10⁵-op graph at 1,024 micro-batches asked 5 GB for
/// the copies' table alone and aborted the process.
pub const MAX_OP_COPIES: u64 = 20_000_000;

impl Pipeline {
    /// Stages as lists of group indices, in chain order. Every one of `groups` groups must be in
    /// exactly one stage, every stage non-empty, and `micro_batches` (at most
    /// [`MAX_MICRO_BATCHES`]) must divide `batch_size`.
    /// `source` names the origin in errors.
    pub fn new(
        source: &str,
        stages: &[Vec<usize>],
        micro_batches: u32,
        schedule: Schedule,
        groups: usize,
        batch_size: u32,
    ) -> Result<Pipeline, InputError> {
        if stages.is_empty() {
            return Err(InputError::new(source, "pipeline.stages", "no stages"));
        }
        if micro_batches > MAX_MICRO_BATCHES {
            return Err(InputError::new(
                source,
                "pipeline.micro_batches",
                format!(
                    "{micro_batches} is more than {MAX_MICRO_BATCHES}: every op runs once a \
                     micro-batch, so the step would be simulated as that many copies of the graph"
                ),
            ));
        }
        if micro_batches == 0 || !batch_size.is_multiple_of(micro_batches) {
            return Err(InputError::new(
                source,
                "pipeline.micro_batches",
                format!("must divide the batch size {batch_size} (got {micro_batches})"),
            ));
        }
        let mut stage_of_group = vec![u32::MAX; groups];
        for (s, members) in stages.iter().enumerate() {
            if members.is_empty() {
                return Err(InputError::new(
                    source,
                    format!("pipeline.stages[{s}]"),
                    "no groups",
                ));
            }
            for (j, &g) in members.iter().enumerate() {
                let field = format!("pipeline.stages[{s}][{j}]");
                let slot = stage_of_group.get_mut(g).ok_or_else(|| {
                    InputError::new(
                        source,
                        &field,
                        format!("group {g} does not exist ({groups} groups)"),
                    )
                })?;
                if *slot != u32::MAX {
                    return Err(InputError::new(
                        source,
                        field,
                        format!("group {g} is already in stage {slot}"),
                    ));
                }
                *slot = s as u32;
            }
        }
        if let Some(g) = stage_of_group.iter().position(|&s| s == u32::MAX) {
            return Err(InputError::new(
                source,
                "pipeline.stages",
                format!("group {g} is in no stage"),
            ));
        }
        Ok(Pipeline {
            stage_of_group,
            micro_batches,
            schedule,
        })
    }

    /// Stages in the chain (every stage holds a group, so the largest stage index names the last).
    pub fn stages(&self) -> usize {
        self.stage_of_group
            .iter()
            .max()
            .map_or(0, |&s| s as usize + 1)
    }

    /// The stage (0 = first in the chain) op group `group` runs in.
    pub fn stage_of(&self, group: usize) -> usize {
        self.stage_of_group[group] as usize
    }

    /// Group indices of every stage, in chain order.
    pub fn stage_groups(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new(); self.stages()];
        for (g, &s) in self.stage_of_group.iter().enumerate() {
            out[s as usize].push(g);
        }
        out
    }
}
