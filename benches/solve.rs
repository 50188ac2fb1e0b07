//! The MILP benchmark of issue 6, printed as a Markdown table (not a criterion benchmark: one
//! solve takes seconds to minutes). QuickP P2 (fusion + co-location) on VGG16 and BERT-Small on
//! QuickP's 2-, 4- and 6-GPU fat trees (QuickP Table I: 0.5–18.9 s with Gurobi at a 5 % gap);
//! MOIRAI on its fusion rules' coarsening of the forward-only graphs (MOIRAI's setting) on its
//! two 4-GPU clusters. Each solve: 5 % relative gap, one thread, time limit
//! `TOPOPLACE_SOLVE_LIMIT` seconds (default 60). Run: `cargo bench --bench solve`.

use topoplace::cluster::load_cluster;
use topoplace::cost::CostModel;
use topoplace::problem::Problem;
use topoplace::solve::{Coarsen, Formulation, SolveOptions, summary};
use topoplace::zoo::{ZooOptions, build};

fn main() {
    // `cargo bench` passes `--bench`; a test run of the bench target (`cargo test --benches`)
    // should not spend minutes.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let limit: f64 = std::env::var("TOPOPLACE_SOLVE_LIMIT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60.0);
    let mut runs: Vec<(Formulation, &str, String)> = Vec::new();
    for model in ["vgg16", "bert-small"] {
        for n in [2, 4, 6] {
            runs.push((Formulation::Quickp, model, format!("quickp-fat-tree-{n}")));
        }
    }
    for model in ["vgg16-inference", "bert-small-inference"] {
        for c in ["moirai-intra", "moirai-inter"] {
            runs.push((Formulation::Moirai, model, c.to_string()));
        }
    }
    println!(
        "| formulation | model | cluster | nodes | vars | rows | status | objective ms | bound ms | gap | warm start ms | simulated ms | solve s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let cost = CostModel::default();
    for (f, model, cluster) in runs {
        let c = load_cluster(format!(
            "{}/configs/{cluster}.toml",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("config");
        let opts = SolveOptions {
            time_limit_s: limit,
            mip_rel_gap: 0.05,
            ..SolveOptions::default()
        };
        // The default batch first; when the model fits nowhere, halve it (once or twice).
        let mut batch = None;
        let mut outcome = None;
        for _ in 0..3 {
            let graph = build(
                model,
                &ZooOptions {
                    batch_size: batch,
                    ..ZooOptions::default()
                },
            )
            .expect("zoo model");
            let p = Problem {
                graph: &graph,
                cluster: &c,
                cost: &cost,
            };
            let r = summary::run(&p, f, &Coarsen::Auto, 60, &opts);
            let fits_nowhere = matches!(&r, Err(e) if e.to_string().contains("fits the memory"));
            outcome = Some((graph.batch_size, r));
            if !fits_nowhere {
                break;
            }
            batch = Some(graph.batch_size / 2);
        }
        let (batch, outcome) = outcome.expect("one attempt");
        let model = format!("{model} (batch {batch})");
        match outcome {
            Ok(s) => {
                let ms = |x: Option<f64>| x.map_or("—".into(), |v| format!("{:.2}", v / 1e3));
                println!(
                    "| {} | {model} | {cluster} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.1} |",
                    f.name(),
                    s.nodes,
                    s.variables,
                    s.rows,
                    match s.prover {
                        topoplace::solve::Prover::Cp => format!("{} (CP)", s.status.name()),
                        topoplace::solve::Prover::Milp => s.status.name().to_string(),
                        topoplace::solve::Prover::Abandoned => {
                            format!("{} (warm start)", s.status.name())
                        }
                    },
                    ms(s.objective_us),
                    ms(s.bound_us),
                    s.gap.map_or("—".into(), |g| format!("{:.1}%", g * 100.0)),
                    s.heuristic_us / 1e3,
                    s.simulated_us / 1e3,
                    s.build_seconds + s.solve_seconds,
                );
            }
            Err(e) => println!("| {} | {model} | {cluster} | error: {e} |", f.name()),
        }
    }
}
