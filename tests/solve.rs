//! The exact MILPs from the command line: `solve` prints its proof and fails cleanly on a model
//! that fits nowhere, and `compare` runs the MILP placers under its time limit. The formulations
//! themselves are unit-tested in `src/solve/tests.rs`.

mod common;

use std::path::Path;
use std::time::Instant;

use common::{json_of, run, run_json, scratch};

/// One V100 and one P100 on one server, with an optional memory size.
fn mixed_server(dir: &Path, memory: Option<&str>) -> std::path::PathBuf {
    let memory = memory.map_or(String::new(), |m| format!("memory = \"{m}\"\n"));
    let mut text = String::from("name = \"mixed\"\n");
    for (gpu, bw) in [("V100-SXM2-32GB", "50 GB/s"), ("P100-SXM2-16GB", "20 GB/s")] {
        text.push_str(&format!(
            "[[machine]]\nserver = \"s\"\nname = \"{gpu}\"\ngpu = \"{gpu}\"\ngpus = 1\n\
             intra_bandwidth = \"{bw}\"\nintra_latency = \"5 us\"\nnic = \"100 Gbps\"\n{memory}"
        ));
    }
    let path = dir.join(format!("mixed-{}.toml", memory.len()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn cli_solve_prints_the_proof_and_fails_cleanly() {
    let dir = scratch("solve");
    let ok = mixed_server(&dir, None);
    let small = mixed_server(&dir, Some("1 MiB"));
    let solve = |cfg: &Path, extra: &[&str]| {
        let mut args: Vec<String> = ["solve", "--model", "mlp", "--cluster"]
            .map(String::from)
            .to_vec();
        args.push(cfg.display().to_string());
        args.extend(["--formulation", "quickp", "--time-limit", "5"].map(String::from));
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    let v = run_json(&solve(&ok, &["--json"]));
    for key in [
        "objective_us",
        "bound_us",
        "gap",
        "status",
        "simulated_us",
        "aligned_us",
    ] {
        assert!(v.get(key).is_some(), "missing {key}: {v}");
    }
    let text = common::run_ok(&solve(&ok, &["--coarsen", "none"]));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("P1") && text.contains("objective") && text.contains("gap"));
    let bad = run(&solve(&small, &[]));
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.starts_with("error:") && err.contains("mlp"), "{err}");
}

#[test]
fn compare_runs_the_milp_placers_under_its_time_limit() {
    let dir = scratch("solve-cmp");
    let cfg = mixed_server(&dir, None);
    let started = Instant::now();
    let out = dir.join("out");
    let rows = json_of(run(&[
        "compare",
        "--models",
        "mlp",
        "--clusters",
        &cfg.display().to_string(),
        "--methods",
        "quickp-milp,moirai-milp,heft",
        "--time-limit",
        "3",
        "--out",
        &out.display().to_string(),
        "--json",
    ]));
    assert!(started.elapsed().as_secs_f64() < 2.0 * 3.0 + 10.0);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for row in rows {
        assert!(row["error"].is_null(), "{row}");
        assert!(row["iteration_ms"].as_f64().unwrap() > 0.0);
    }
}
