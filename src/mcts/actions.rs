//! The action space: a (set of device groups, replication option) pair per op group, and the
//! strategy a complete choice of actions stands for.

use super::config::FULL_SUBSETS_UP_TO;
use crate::cluster::Cluster;
use crate::error::{Result, SearchError};
use crate::strategy::{AllReducePacking, BatchSplit, GroupDecision, ReplicationOption, Strategy};

/// Sets of device groups an action may use. Up to [`FULL_SUBSETS_UP_TO`] device groups: every
/// non-empty subset. Beyond, the (2^M − 1) subsets are too many, so the search is restricted to
/// one or two device groups, each machine's device groups, and all of them.
pub(crate) fn device_group_sets(cluster: &Cluster) -> Vec<Vec<usize>> {
    let m = cluster.groups.len();
    if m <= FULL_SUBSETS_UP_TO {
        return (1u32..(1 << m))
            .map(|mask| (0..m).filter(|&g| mask >> g & 1 == 1).collect())
            .collect();
    }
    let mut sets: Vec<Vec<usize>> = (0..m).map(|g| vec![g]).collect();
    for a in 0..m {
        sets.extend((a + 1..m).map(|b| vec![a, b]));
    }
    for machine in &cluster.machines {
        let mut g = machine.groups.clone();
        g.sort_unstable();
        if g.len() > 2 && !sets.contains(&g) {
            sets.push(g);
        }
    }
    sets.push((0..m).collect());
    sets
}

/// Refuses a cluster whose device groups give more actions than the search indexes (a `u16`):
/// before the heuristics run, which took 28 s on 1,024 one-GPU machines before the refusal.
pub(crate) fn check_action_space(cluster: &Cluster) -> Result<()> {
    let count = ReplicationOption::ALL.len() * device_group_sets(cluster).len();
    if count > u16::MAX as usize {
        return Err(SearchError::TooManyActions {
            cluster: cluster.name.clone(),
            device_groups: cluster.groups.len(),
            actions: count,
        }
        .into());
    }
    Ok(())
}

/// Every action: each device-group set with each option, as a decision over its GPUs. The
/// all-GPU all-reduce action (DP-NCCL's) comes first.
pub fn actions(cluster: &Cluster) -> Vec<GroupDecision> {
    let mut sets = device_group_sets(cluster);
    // Largest set first so DP's action is index 0.
    sets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = Vec::new();
    for set in sets {
        let mut devices: Vec<usize> = set
            .iter()
            .flat_map(|&g| cluster.groups[g].devices.iter().copied())
            .collect();
        devices.sort_unstable();
        for option in ReplicationOption::ALL {
            out.push(GroupDecision {
                devices: devices.clone(),
                option,
            });
        }
    }
    out
}

/// How a searched strategy's AllReduce groups synchronise: each leaf is simulated with both and
/// keeps the faster (an extension of TAG's action space, which fixes one scheme). Gradients in 64 MiB buckets overlap the backward pass (Horovod's fusion, the
/// overlap TAG's per-group strategies have); one pack per strategy group after the backward pass
/// wins where many small AllReduces would each pay the ring latency.
pub const PACKINGS: [AllReducePacking; 2] = [
    AllReducePacking::Buckets(crate::strategy::HOROVOD_FUSION_BYTES),
    AllReducePacking::Packed,
];

/// How the replicas of a choice's groups share the batch: `split`, but the other way for the
/// search groups in `other` (sorted).
#[derive(Debug, Clone, Copy)]
pub struct Shares<'s> {
    /// How replicas share the batch in every search group not in `other`.
    pub split: BatchSplit,
    /// Search groups (sorted op-group indices) whose replicas share the batch the other way.
    pub other: &'s [usize],
}

impl Shares<'static> {
    /// Equal shares everywhere (TAG).
    pub const EVEN: Shares<'static> = Shares {
        split: BatchSplit::Even,
        other: &[],
    };
}

/// The strategy that gives op group `g` the decision `actions[choice[g]]` and the batch
/// `shares`, synchronised by `packing`. Groups with the same action and shares share one
/// strategy group, so every group on action 0 with even shares and [`AllReducePacking::Packed`]
/// is exactly DP-NCCL and scores 0.
pub fn build_strategy(
    op_group: &[u32],
    actions: &[GroupDecision],
    choice: &[u16],
    packing: AllReducePacking,
    shares: Shares,
    devices: usize,
) -> Result<Strategy> {
    // A strategy group per (action, shares the other way) used.
    let slot_of =
        |g: usize| 2 * choice[g] as usize + shares.other.binary_search(&g).is_ok() as usize;
    let mut slot = vec![u32::MAX; 2 * actions.len()];
    let mut decisions = Vec::new();
    let mut flipped = Vec::new();
    for g in 0..choice.len() {
        let k = slot_of(g);
        if slot[k] == u32::MAX {
            slot[k] = decisions.len() as u32;
            if k % 2 == 1 {
                flipped.push(decisions.len());
            }
            decisions.push(actions[choice[g] as usize].clone());
        }
    }
    let ops = op_group
        .iter()
        .map(|&g| slot[slot_of(g as usize)])
        .collect();
    let mut s = Strategy::new(
        "mcts",
        ops,
        decisions,
        shares.split,
        op_group.len(),
        devices,
    )?;
    for group in flipped {
        s.set_split(group, shares.split.other());
    }
    s.allreduce = packing;
    Ok(s)
}

/// The actions that replicate with `option` over exactly one device group's GPUs, where every
/// subset of device groups is an action.
pub(super) fn single_group_actions(
    cluster: &crate::cluster::Cluster,
    actions: &[GroupDecision],
    option: ReplicationOption,
) -> Vec<u16> {
    let subsets = cluster.groups.iter().map(|g| g.devices.clone());
    subset_actions(cluster, actions, option, subsets)
}

/// The actions that replicate with `option` over every GPU of one type, for each type spread over
/// several device groups (where every subset of device groups is an action): "the fast GPUs
/// only", the subset an engineer tries next on a heterogeneous cluster.
pub(super) fn one_type_actions(
    cluster: &crate::cluster::Cluster,
    actions: &[GroupDecision],
    option: ReplicationOption,
) -> Vec<u16> {
    let mut types: Vec<&str> = cluster.groups.iter().map(|g| g.gpu.name).collect();
    types.sort_unstable();
    types.dedup();
    let subsets = types.into_iter().filter_map(|name| {
        let groups: Vec<_> = cluster
            .groups
            .iter()
            .filter(|g| g.gpu.name == name)
            .collect();
        (groups.len() > 1).then(|| {
            groups
                .iter()
                .flat_map(|g| g.devices.iter().copied())
                .collect()
        })
    });
    subset_actions(cluster, actions, option, subsets)
}

/// The action replicating with `option` over each of `subsets` (GPU indices), where every subset
/// of device groups is an action; none beyond.
fn subset_actions(
    cluster: &crate::cluster::Cluster,
    actions: &[GroupDecision],
    option: ReplicationOption,
    subsets: impl Iterator<Item = Vec<usize>>,
) -> Vec<u16> {
    if cluster.groups.len() > super::config::FULL_SUBSETS_UP_TO {
        return Vec::new();
    }
    subsets
        .filter_map(|mut devices| {
            devices.sort_unstable();
            actions
                .iter()
                .position(|a| a.option == option && a.devices == devices)
                .map(|a| a as u16)
        })
        .collect()
}
