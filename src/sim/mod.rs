//! Discrete-event simulation of an execution graph (TAG §4.3.2): iteration time, per-resource
//! busy time and reference-counted peak memory, and the Chrome trace of a run.
//!
//! The engine knows tasks, resources and memory only; it imports nothing else of the crate. The
//! compiler ([`crate::compile`]) builds its [`ExecGraph`]; [`crate::evaluate`] runs it and turns
//! the result into a report.

mod bound;
mod completions;
pub mod engine;
pub mod exec;
pub mod trace;

pub use bound::MakespanBound;
pub use engine::{Oom, Order, SimError, SimResult, Simulator};
pub use exec::{ExecGraph, TaskId, TaskKind, TaskSpec};
pub use trace::{ChromeTrace, TraceEvent, chrome_trace};
