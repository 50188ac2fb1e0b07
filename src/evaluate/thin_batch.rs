//! A warning for replicas that get less than one sample of the batch. The cost model scales a
//! batch-split op's time with its share, which no real run can do below one sample (a GPU
//! processes whole samples), so the simulated time of such a strategy is optimistic.

use crate::cluster::Cluster;
use crate::graph::Graph;
use crate::strategy::Strategy;

/// The warning to print for `strategy`, or `None` when every replica gets at least one sample.
pub fn thin_batch_warning(graph: &Graph, cluster: &Cluster, strategy: &Strategy) -> Option<String> {
    let (group, share) = strategy.thinnest_share(cluster)?;
    let samples = share * f64::from(graph.batch_size);
    // Shares are floats: a third of three samples is one sample, not 0.9999999999999999.
    if samples >= 1.0 - 1e-9 {
        return None;
    }
    let replicas = strategy.decision(group).devices.len();
    // Two decimals would show 0.996 as "1.00", a whole sample the warning says is missing.
    let shown = if samples >= 0.99 {
        format!("{samples:.4}")
    } else {
        format!("{samples:.2}")
    };
    Some(format!(
        "op group {group} of {} splits batch {} over {replicas} replicas, {shown} samples \
         for the smallest share: below one sample per replica the simulated time is optimistic \
         (raise the batch size or replicate over fewer GPUs)",
        graph.name, graph.batch_size
    ))
}
