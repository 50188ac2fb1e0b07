//! Chrome trace export (`chrome://tracing`, Perfetto): one track per GPU and per link direction,
//! one complete ("X") event per task on every resource it held.

use serde::Serialize;

use super::engine::SimResult;
use super::exec::{ExecGraph, TaskId, TaskKind};

/// One event of the Trace Event Format.
#[derive(Debug, Clone, Serialize)]
pub struct TraceEvent {
    pub name: String,
    pub cat: &'static str,
    pub ph: &'static str,
    /// Start, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ts: Option<f64>,
    /// Duration, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dur: Option<f64>,
    pub pid: u32,
    pub tid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<serde_json::Value>,
}

/// The whole trace document.
#[derive(Debug, Clone, Serialize)]
pub struct ChromeTrace {
    #[serde(rename = "traceEvents")]
    pub trace_events: Vec<TraceEvent>,
    #[serde(rename = "displayTimeUnit")]
    pub display_time_unit: &'static str,
}

/// Process ids: GPUs on one track group, links on another.
const GPU_PID: u32 = 0;
const LINK_PID: u32 = 1;

/// The most events a trace is built with: about 150 MB of JSON, and some 400 MB to build. Data
/// parallelism over 1,024 GPUs of a 5,000-op graph holds 10⁷ (one per task and resource held) and
/// aborted the process for memory.
pub const MAX_TRACE_EVENTS: usize = 1_000_000;

/// How many events [`chrome_trace`] makes of `g`: one per task and resource it holds, and one
/// naming each track.
pub fn trace_events(g: &ExecGraph) -> usize {
    let tasks: usize = (0..g.len() as TaskId)
        .map(|t| g.task_resources(t).len())
        .sum();
    tasks + g.resource_count() + 2
}

/// Build the trace of a finished simulation. `resource_name(r)` names resource `r` (devices
/// first, then links); `task_name(t)` names task `t`.
pub fn chrome_trace(
    g: &ExecGraph,
    result: &SimResult,
    resource_name: impl Fn(u32) -> String,
    task_name: impl Fn(TaskId) -> String,
) -> ChromeTrace {
    let place = |r: u32| {
        if (r as usize) < g.devices() {
            (GPU_PID, r)
        } else {
            (LINK_PID, r - g.devices() as u32)
        }
    };
    let mut events = Vec::with_capacity(g.len() + g.resource_count() + 2);
    for (pid, label) in [(GPU_PID, "GPUs"), (LINK_PID, "links")] {
        events.push(metadata("process_name", pid, 0, label));
    }
    for r in 0..g.resource_count() as u32 {
        let (pid, tid) = place(r);
        events.push(metadata("thread_name", pid, tid, &resource_name(r)));
    }
    for t in 0..g.len() as TaskId {
        let cat = match g.kind(t) {
            TaskKind::Compute => "compute",
            TaskKind::Transfer => "transfer",
            TaskKind::Collective => "collective",
        };
        let name = task_name(t);
        for &r in g.task_resources(t) {
            let (pid, tid) = place(r);
            events.push(TraceEvent {
                name: name.clone(),
                cat,
                ph: "X",
                ts: Some(result.start[t as usize]),
                dur: Some(g.duration(t)),
                pid,
                tid,
                args: Some(serde_json::json!({ "task": t, "bytes": g.out_bytes(t) })),
            });
        }
    }
    ChromeTrace {
        trace_events: events,
        display_time_unit: "ms",
    }
}

fn metadata(kind: &str, pid: u32, tid: u32, name: &str) -> TraceEvent {
    TraceEvent {
        name: kind.to_string(),
        cat: "__metadata",
        ph: "M",
        ts: None,
        dur: None,
        pid,
        tid,
        args: Some(serde_json::json!({ "name": name })),
    }
}
