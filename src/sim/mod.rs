//! Discrete-event simulation of an execution graph: iteration time, per-resource busy time and
//! reference-counted peak memory (TAG §4.3.2).

pub mod engine;
pub mod exec;
pub mod trace;

pub use engine::{Oom, Order, SimError, SimResult, Simulator};
pub use exec::{ExecGraph, TaskId, TaskKind, TaskSpec};
pub use trace::{ChromeTrace, TraceEvent, chrome_trace};
