//! `pipeline-dp`'s refinement of its cut on the simulator: it never returns a plan slower than
//! the dynamic programme's, it moves the cut where the estimate misprices it (BERT-large on TAG's
//! cloud, whose folded first machine runs two stages), and it is deterministic.

use crate::cluster::{Cluster, random_cluster};
use crate::cost::CostModel;
use crate::evaluate::evaluate_strategy;
use crate::graph::Graph;
use crate::pipeline_plan::best::best_pipeline_refined_by;
use crate::pipeline_plan::{BestPipeline, REFINE_SIMULATIONS};
use crate::problem::Problem;
use crate::sim::Order;

use super::{model, shipped};

/// The pipeline planned for `g` on `c` with `simulations` refining its cut.
fn planned(g: &Graph, c: &Cluster, simulations: usize) -> Option<BestPipeline> {
    let cost = CostModel::default();
    let p = Problem {
        graph: g,
        cluster: c,
        cost: &cost,
    };
    best_pipeline_refined_by(&p, None, simulations).unwrap()
}

/// The strategy's iteration as `simulate` runs it (every replica, the file's own order).
fn simulated(g: &Graph, c: &Cluster, b: &BestPipeline) -> f64 {
    let cost = CostModel::default();
    let p = Problem {
        graph: g,
        cluster: c,
        cost: &cost,
    };
    let e = evaluate_strategy(&p, &b.strategy, Order::Fifo).unwrap();
    assert!(e.result.oom.is_empty(), "{}", b.note);
    e.report.iteration_us
}

/// On TAG's cloud the dynamic programme balances the folded first machine's two stages as if
/// each had half of its GPUs; the simulator shows both stages on all eight, and moving the cut
/// is faster. The plan returned is what `simulate` gives for it, and no slower than unrefined.
#[test]
fn the_refinement_moves_bert_large_s_cut_on_tag_cloud() {
    let (g, c) = (model("bert-large", 32), shipped("tag-cloud"));
    let unrefined = planned(&g, &c, 0).expect("a pipeline");
    let refined = planned(&g, &c, REFINE_SIMULATIONS).expect("a pipeline");
    assert!(
        refined.time_us < unrefined.time_us * (1.0 - 1e-6),
        "{} ({}) against {} ({})",
        refined.time_us,
        refined.note,
        unrefined.time_us,
        unrefined.note
    );
    assert!(refined.note.contains("its cut moved"), "{}", refined.note);
    assert!(!unrefined.note.contains("moved"), "{}", unrefined.note);
    let again = simulated(&g, &c, &refined);
    assert!(
        (again - refined.time_us).abs() <= 1e-9 * again,
        "{again} vs {}",
        refined.time_us
    );
}

/// On random topologies (TAG's distribution) the refined plan is never slower than the dynamic
/// programme's, fits whenever that one fits, and two runs give the same strategy.
#[test]
fn the_refinement_never_slows_a_plan_and_is_deterministic() {
    let mut moved = 0;
    for seed in 0..4u64 {
        let c = random_cluster(3_000_000 + seed);
        let g = model("gpt", 8);
        let Some(unrefined) = planned(&g, &c, 0) else {
            continue;
        };
        let refined = planned(&g, &c, REFINE_SIMULATIONS).unwrap();
        assert!(refined.fits || !unrefined.fits, "seed {seed}");
        assert!(
            refined.time_us <= unrefined.time_us || (refined.fits && !unrefined.fits),
            "seed {seed}: {} ({}) against {} ({})",
            refined.time_us,
            refined.note,
            unrefined.time_us,
            unrefined.note
        );
        moved += usize::from(refined.time_us < unrefined.time_us);
        let twice = planned(&g, &c, REFINE_SIMULATIONS).unwrap();
        assert_eq!(twice.strategy, refined.strategy, "seed {seed}");
        assert_eq!(twice.time_us, refined.time_us, "seed {seed}");
    }
    eprintln!("the refinement moved {moved} of the plans");
}
