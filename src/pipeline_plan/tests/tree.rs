//! Pipelines inside TAG's tree: the frames `pipeline-dp` leaves (its fastest plans) are the
//! pipelines it simulated, the tree searches below them within its cap of pipeline leaves, never
//! returns a pipeline slower than its frames, and a cap of 0 is the search without them.

use std::sync::Arc;

use crate::cost::CostModel;
use crate::evaluate::evaluate_strategy;
use crate::mcts::{MctsConfig, SearchResult, Starts, search_from};
use crate::pipeline_plan::frames::BOUNDARY_MOVES;
use crate::pipeline_plan::{
    BestPipeline, PipelineFrames, REFINE_SIMULATIONS, best_pipeline_with_frames,
};
use crate::problem::Problem;
use crate::sim::Order;

use super::{model, shipped};

/// `test` on GPT at batch 8 on TAG's cloud, where pipelines beat every per-group strategy.
fn on_gpt_on_cloud(test: impl FnOnce(&Problem)) {
    let (g, c, cost) = (model("gpt", 8), shipped("tag-cloud"), CostModel::default());
    test(&Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    });
}

fn planned(p: &Problem) -> (BestPipeline, PipelineFrames) {
    best_pipeline_with_frames(p, None, REFINE_SIMULATIONS)
        .unwrap()
        .expect("a pipeline")
}

/// The tree alone (no polish, no SFB check) with `frames` and at most `leaves` pipeline leaves.
fn tree(p: &Problem, frames: &Arc<PipelineFrames>, leaves: usize, seed: u64) -> SearchResult {
    let config = MctsConfig {
        iterations: 64,
        seed,
        polish: 0,
        sfb_check: false,
        pipeline_leaves: leaves,
        ..MctsConfig::default()
    };
    let starts = Starts {
        pipelines: Some(frames.clone()),
        ..Starts::default()
    };
    search_from(p, 20, config, None, starts, |_| {}).unwrap()
}

/// Every frame, as it is, is a pipeline `pipeline-dp` simulated at the time it recorded (the
/// first is its result), every path that leaves a decision open completes to the frame's own,
/// and what it simulated around a frame is no faster than it recorded.
#[test]
fn each_frame_as_it_is_is_a_plan_pipeline_dp_simulated() {
    on_gpt_on_cloud(each_frame_as_it_is_is_a_plan_pipeline_dp_simulated_on);
}

fn each_frame_as_it_is_is_a_plan_pipeline_dp_simulated_on(p: &Problem) {
    let (best, frames) = planned(p);
    assert!(frames.len() > 1, "{} frames", frames.len());
    let own = frames.completed(0, &[]);
    assert_eq!(frames.strategy(p, 0, &own), best.strategy);
    for f in 0..frames.len() {
        let own = frames.completed(f, &[]);
        let kept = [frames.own_count(f) as u16, 0];
        assert_eq!(frames.completed(f, &kept), own, "frame {f}");
        let s = frames.strategy(p, f, &own);
        let e = evaluate_strategy(p, &s, Order::Fifo).unwrap();
        let (time_us, fits) = frames.known(f);
        assert_eq!(e.result.oom.is_empty(), fits, "frame {f}");
        assert!(
            (e.report.iteration_us - time_us).abs() <= 1e-9 * time_us,
            "frame {f}: {} simulated against {time_us} recorded",
            e.report.iteration_us
        );
        if fits {
            assert!(time_us >= best.time_us * (1.0 - 1e-12), "frame {f}");
        }
        // What pipeline-dp simulated around the frame is at least as slow as recorded (a move
        // it gave up is recorded at the time it gave up at, a lower bound).
        for (key, recorded, _) in frames.known_around(f) {
            assert_eq!(key.len(), own.len(), "frame {f}");
            let s = frames.strategy(p, f, &key);
            let t = evaluate_strategy(p, &s, Order::Fifo)
                .unwrap()
                .report
                .iteration_us;
            assert!(
                t >= recorded * (1.0 - 1e-9),
                "frame {f} {key:?}: {t} < {recorded}"
            );
        }
        // A move of the first boundary changes the cut (each stage keeps a chunk).
        let moved = frames.completed(f, &[kept[0], 1]);
        assert_eq!(BOUNDARY_MOVES[1], -1);
        assert!(
            moved[1] < own[1] || own[1] == 1,
            "frame {f}: {moved:?} from {own:?}"
        );
    }
}

/// With frames the tree spends at most its cap of pipeline leaves, its result is never slower
/// than the fastest frame nor than the search without frames, it is what simulating it gives,
/// and the same seed gives the same search. A cap of 0 is the search without frames.
#[test]
fn the_tree_searches_below_the_frames_within_its_cap() {
    on_gpt_on_cloud(the_tree_searches_below_the_frames_within_its_cap_on);
}

fn the_tree_searches_below_the_frames_within_its_cap_on(p: &Problem) {
    let (best, frames) = planned(p);
    let frames = Arc::new(frames);
    let without = tree(p, &frames, 0, 1);
    assert_eq!(without.pipeline_leaves, 0);
    assert!(without.strategy.pipeline.is_none());
    let no_frames = MctsConfig {
        iterations: 64,
        seed: 1,
        polish: 0,
        sfb_check: false,
        ..MctsConfig::default()
    };
    let plain = search_from(p, 20, no_frames, None, Starts::default(), |_| {}).unwrap();
    assert_eq!(plain.strategy, without.strategy);
    let cap = 6;
    let with = tree(p, &frames, cap, 1);
    assert!(
        with.pipeline_leaves > 0 && with.pipeline_leaves <= cap,
        "{} pipeline leaves",
        with.pipeline_leaves
    );
    assert!(with.fits);
    assert!(
        with.iteration_us() <= best.time_us * (1.0 + 1e-12),
        "{} against pipeline-dp's {}",
        with.iteration_us(),
        best.time_us
    );
    assert!(with.iteration_us() <= without.iteration_us() * (1.0 + 1e-12));
    let again = evaluate_strategy(p, &with.strategy, Order::Fifo).unwrap();
    assert!((again.report.iteration_us - with.iteration_us()).abs() <= 1e-9 * with.iteration_us());
    let twice = tree(p, &frames, cap, 1);
    assert_eq!(twice.strategy, with.strategy);
    assert_eq!(twice.pipeline_leaves, with.pipeline_leaves);
}

/// What `pipeline-dp` simulated, as the tree gets it: each frame's recorded time and fit, depth,
/// own micro-batch count and the moves known around it.
type FramesSeen = Vec<((f64, bool), usize, usize, Vec<(Vec<u16>, f64, bool)>)>;

fn seen(frames: &PipelineFrames) -> FramesSeen {
    (0..frames.len())
        .map(|f| {
            let (depth, count) = (frames.depth(f), frames.own_count(f));
            (frames.known(f), depth, count, frames.known_around(f))
        })
        .collect()
}

/// The same pipeline and frames on one thread as on three: the rounds of simulations (whose
/// plans past the best so far are given up, and so are no frames) are a count, not the machine's
/// threads, so the same seed gives the same search on any machine.
#[test]
fn the_frames_do_not_depend_on_the_thread_count() {
    on_gpt_on_cloud(|p| {
        let on = |threads| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let (best, frames) = pool.install(|| planned(p));
            (best.time_us, best.fits, seen(&frames))
        };
        assert_eq!(on(1), on(3));
    });
}
