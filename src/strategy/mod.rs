//! A deployment strategy (TAG §4.2): ops are partitioned into op groups, and each group gets a
//! non-empty set of devices and one of four replication options. The JSON form lists, per group,
//! its op ids, devices and option, so a person can read and edit it.

mod decision;
mod file;
mod pipeline;
mod reference;

pub use decision::AllReducePacking;
pub use decision::BatchSplit;
pub use decision::GroupDecision;
pub use decision::HOROVOD_FUSION_BYTES;
pub use decision::ReplicationOption;
pub use decision::Strategy;
pub use file::StrategyFile;
pub use file::load_strategy;
pub use file::parse_strategy;
pub use file::{save_strategy, strategy_text};
pub use pipeline::Pipeline;
pub use pipeline::Schedule;
pub use reference::Reference;
