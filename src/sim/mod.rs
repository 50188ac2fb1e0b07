//! Discrete-event simulation of an execution graph (TAG §4.3.2): iteration time, per-resource
//! busy time and reference-counted peak memory, and the Chrome trace of a run.
//!
//! The engine knows tasks, resources and memory only; it imports nothing else of the crate. The
//! compiler ([`crate::compile`]) builds its [`ExecGraph`]; [`crate::evaluate`] runs it and turns
//! the result into a report.

mod bound;
mod completions;
pub(crate) mod deadline;
pub(crate) mod engine;
pub(crate) mod exec;
pub(crate) mod trace;

pub(crate) use bound::MakespanBound;
pub(crate) use engine::Oom;
pub use engine::Order;
pub(crate) use engine::SimError;

pub(crate) use engine::SimResult;
pub use engine::Simulator;
pub use exec::ExecGraph;
pub(crate) use exec::TaskId;
pub use exec::TaskKind;
pub use exec::TaskSpec;
pub use trace::chrome_trace;
pub use trace::{MAX_TRACE_EVENTS, trace_events};

#[cfg(test)]
mod tests;
