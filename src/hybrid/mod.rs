//! Hybrid parallelism for decoder language models, as Megatron-LM, DeepSpeed and torchtitan run
//! it and as the heterogeneous planners (Metis, Sailor) search it: pipeline stages of whole
//! transformer layers, each on its own GPUs as data-parallel replicas of a tensor-parallel group,
//! with a ZeRO stage, sequence parallelism and activation recomputation per stage.
//!
//! A [`HybridPlan`] is simulated by [`estimate`] at layer granularity: every layer's ops are timed
//! by the same cost model as the op-level simulator's (so precision, fused kernels and each GPU's
//! fitted efficiencies carry over), and the communication, the pipeline's timeline and the memory
//! of every GPU follow the closed forms of Megatron (Shoeybi et al. 2019; Narayanan et al. SC'21;
//! Korthikanti et al. 2022) and ZeRO (Rajbhandari et al. SC'20). The op-level simulator cannot
//! run a 70 B model's hundreds of thousands of per-micro-batch tasks on 1,024 GPUs within a
//! search's budget; the planners this is compared with work at the same granularity.

mod baselines;
mod comm;
mod estimate;
mod layout;
mod layout_expert;
mod layout_features;
mod layout_tree;
mod memory;
mod metis_atc24;
mod plan;
mod planner;
mod profile;
mod refine;
mod sailor;
mod schedule;
mod search;

pub use baselines::fsdp;
pub use baselines::megatron;
pub use estimate::DeviceMemory;
pub use estimate::HybridModel;
pub use estimate::HybridReport;
pub use estimate::StageReport;
pub use estimate::estimate;
pub use layout_expert::ExpertLayout;
pub use layout_expert::expert_layout;
pub use layout_features::Decision;
pub use layout_features::LAYOUT_FEATURES;
pub use layout_features::LayoutContext;
pub use layout_features::PartialLayout;
pub use layout_features::PoolFacts;
pub use layout_features::layout_features;
pub use layout_tree::LayoutPriors;
pub use layout_tree::LayoutSample;
pub use layout_tree::LayoutSearch;
pub use layout_tree::UniformPriors;
pub use layout_tree::layout_search;
pub use memory::ModelStates;
pub use memory::StateBytes;
pub use memory::model_states;
pub use metis_atc24::metis_atc24;
pub use plan::HybridPlan;
pub use plan::Recompute;
pub use plan::Stage;
pub use plan::ZeroStage;
pub use plan::load_plan;
pub use planner::Planned;
pub use planner::Planner;
pub use planner::planned_by_default;
pub use sailor::sailor;
pub use search::DEFAULT_SECONDS;
pub use search::HybridPlacement;
pub use search::JOINT_SEARCH;
pub use search::MethodPlan;
pub use search::plan_all;
pub use search::search;

#[cfg(test)]
mod tests;
