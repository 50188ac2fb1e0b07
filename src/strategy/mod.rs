//! A deployment strategy (TAG §4.2): ops are partitioned into op groups, and each group gets a
//! non-empty set of devices and one of four replication options. The JSON form lists, per group,
//! its op ids, devices and option, so a person can read and edit it.

mod decision;
mod file;
mod pipeline;
mod reference;

pub use decision::{
    AllReducePacking, BatchSplit, GroupDecision, HOROVOD_FUSION_BYTES, ReplicationOption, Strategy,
};
pub use file::{
    GroupRecord, LoadedStrategy, PipelineRecord, STRATEGY_FORMAT, StrategyFile, load_strategy,
    parse_strategy, save_strategy,
};
pub use pipeline::{Pipeline, Schedule};
pub use reference::{Reference, fastest_device};
