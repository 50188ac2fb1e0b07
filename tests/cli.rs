//! The command line as a user meets it: bad input gives one `error:` line naming the file and
//! field, a non-zero exit and no panic; `--json` output parses with its documented keys.

mod common;
use common::{json_of, run, run_json, run_ok, run_timed_alone, scratch};

/// Run with a file holding `text`; expect a clean failure whose message contains every `needle`.
fn fails_naming(args_before_file: &[&str], file_name: &str, text: &str, needles: &[&str]) {
    let dir = scratch(file_name);
    let path = dir.join(file_name);
    std::fs::write(&path, text).unwrap();
    let mut args: Vec<&str> = args_before_file.to_vec();
    let p = path.to_str().unwrap();
    args.push(p);
    let out = run(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} should fail");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains(file_name), "names the file: {stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "{needle:?} missing from {stderr}");
    }
    assert!(out.stdout.is_empty(), "nothing half-printed on stdout");
}

const GRAPH: &str = r#"{"name": "g", "batch_size": 2, "ops": [
  {"id": 0, "name": "a", "op_type": "MatMul", "phase": "forward", "flops": 10},
  {"id": 1, "name": "b", "op_type": "Relu", "phase": "forward", "flops": 1}],
  "edges": [{"src": 0, "dst": 1, "bytes": 8}]}"#;

#[test]
fn good_graph_file_reports_its_ops() {
    let dir = scratch("good");
    let path = dir.join("g.json");
    std::fs::write(&path, GRAPH).unwrap();
    let v = run_json(&["info", path.to_str().unwrap(), "--json"]);
    assert_eq!(v["ops"], 2);
    assert_eq!(v["flops"], 11.0);
    assert_eq!(v["per_phase"]["forward"]["ops"], 2);
}

#[test]
fn malformed_graph_fails_cleanly() {
    fails_naming(
        &["info"],
        "broken.json",
        "{\"name\": \"g\", \"batch_size\": ",
        &["broken.json"],
    );
}

/// A graph file with a second object, or junk, after the first was read as the first alone.
#[test]
fn text_after_the_graph_is_refused() {
    for tail in ["\n{}", " xyz", "}"] {
        fails_naming(
            &["info"],
            "tail.json",
            &format!("{GRAPH}{tail}"),
            &["text after the JSON value"],
        );
    }
}

#[test]
fn cyclic_graph_fails_cleanly() {
    let cyclic = GRAPH.replace(
        r#"[{"src": 0, "dst": 1, "bytes": 8}]"#,
        r#"[{"src": 0, "dst": 1, "bytes": 8}, {"src": 1, "dst": 0, "bytes": 8}]"#,
    );
    fails_naming(
        &["info"],
        "cyclic.json",
        &cyclic,
        &["cycle", "\"a\"", "\"b\""],
    );
}

#[test]
fn edges_without_bytes_and_disconnected_ops_fail_cleanly() {
    let unsized_edge = GRAPH.replace(r#", "bytes": 8"#, "");
    fails_naming(
        &["info"],
        "unsized.json",
        &unsized_edge,
        &["edges[0]", "bytes"],
    );
    // The forward-only graph with its edges left out.
    let no_edges = GRAPH.replace(
        r#""edges": [{"src": 0, "dst": 1, "bytes": 8}]"#,
        r#""edges": []"#,
    );
    assert_ne!(no_edges, GRAPH);
    fails_naming(
        &["info"],
        "no-edges.json",
        &no_edges,
        &["edges", "unconnected"],
    );
    // A forward-only graph that kept one edge of its fourteen.
    let text = std::fs::read_to_string("datasets/zoo/mlp-inference.json").unwrap();
    let mut graph: serde_json::Value = serde_json::from_str(&text).unwrap();
    let edges = graph["edges"].as_array_mut().unwrap();
    assert!(edges.len() > 10);
    edges.truncate(1);
    fails_naming(
        &["info"],
        "most-edges-lost.json",
        &graph.to_string(),
        &["edges", "have no edge", "left out"],
    );
    // An op name that would break or turn around the reports' lines.
    let mut graph: serde_json::Value = serde_json::from_str(&text).unwrap();
    graph["ops"][1]["name"] = serde_json::Value::from("fc\u{202E}1");
    fails_naming(
        &["info"],
        "turned-name.json",
        &graph.to_string(),
        &["ops[1].name", "U+202E"],
    );
    graph["ops"][1]["name"] = serde_json::Value::from("fc\u{0}1");
    fails_naming(
        &["info"],
        "nul-name.json",
        &graph.to_string(),
        &["ops[1].name", "control character"],
    );
}

#[test]
fn dangling_edge_fails_cleanly() {
    let dangling = GRAPH.replace(r#""dst": 1"#, r#""dst": 7"#);
    fails_naming(
        &["info"],
        "dangling.json",
        &dangling,
        &["edges[0].dst", "7"],
    );
}

#[test]
fn negative_size_fails_cleanly() {
    let negative = GRAPH.replace(r#""bytes": 8"#, r#""bytes": -8"#);
    fails_naming(
        &["info"],
        "negative.json",
        &negative,
        &["edges[0].bytes", "negative"],
    );
}

const CLUSTER: &str = r#"name = "c"
[[machine]]
name = "m"
gpu = "V100-32GB"
gpus = 2
intra_bandwidth = "150 GB/s"
nic = "100 Gbps"
"#;

#[test]
fn good_cluster_prints_json() {
    let dir = scratch("cluster-good");
    let path = dir.join("c.toml");
    std::fs::write(&path, CLUSTER).unwrap();
    let v = run_json(&["cluster", path.to_str().unwrap(), "--json"]);
    assert_eq!(v["devices"].as_array().unwrap().len(), 2);
    assert_eq!(v["groups"].as_array().unwrap().len(), 1);
    assert_eq!(v["bandwidth_gbs"][0][1], 150.0);
}

#[test]
fn zero_bandwidth_fails_cleanly() {
    let zero = CLUSTER.replace("\"150 GB/s\"", "\"0 GB/s\"");
    fails_naming(&["cluster"], "zero.toml", &zero, &["intra_bandwidth"]);
}

#[test]
fn unknown_gpu_fails_cleanly() {
    let unknown = CLUSTER.replace("V100-32GB", "Voodoo-5");
    fails_naming(&["cluster"], "unknown.toml", &unknown, &["gpu", "Voodoo-5"]);
}

#[test]
fn malformed_cluster_fails_cleanly() {
    fails_naming(
        &["cluster"],
        "bad.toml",
        "name = \"c\"\n[[machine]\n",
        &["bad.toml"],
    );
}

#[test]
fn unknown_model_and_missing_file_fail_cleanly() {
    // A name that is neither shipped nor a file is a bad value of the flag: a usage error.
    let out = run(&["info", "resnet-9000"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.contains("resnet-9000") && stderr.contains("resnet101"),
        "{stderr}"
    );
    assert!(stderr.contains("<MODEL>"), "names the argument: {stderr}");
    // Each command names the flag the name came by.
    let out_dir = scratch("unknown-model");
    let out_dir = out_dir.to_str().unwrap();
    for (args, flag) in [
        (
            &[
                "simulate",
                "--model",
                "resnet-9000",
                "--cluster",
                "tag-testbed",
            ][..],
            "--model:",
        ),
        (
            &[
                "compare",
                "--models",
                "resnet-9000",
                "--clusters",
                "tag-testbed",
                "--out",
                out_dir,
            ][..],
            "--models:",
        ),
    ] {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
    }
    let out = run(&["cluster", "configs/no-such-cluster.toml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains("no-such-cluster.toml"), "{stderr}");
    assert!(!stderr.contains("panicked"));
}

#[test]
fn random_topology_is_deterministic_and_loads() {
    let a = run(&["topology", "random", "--seed", "7"]);
    let b = run(&["topology", "random", "--seed", "7"]);
    let c = run(&["topology", "random", "--seed", "8"]);
    assert!(a.status.success());
    assert_eq!(a.stdout, b.stdout);
    assert_ne!(a.stdout, c.stdout);
    let dir = scratch("random");
    let path = dir.join("r.toml");
    let out = run(&[
        "topology",
        "random",
        "--seed",
        "7",
        "--out",
        path.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert_eq!(std::fs::read(&path).unwrap(), a.stdout);
    let summary = run_json(&["cluster", path.to_str().unwrap(), "--json"]);
    // With `--json` too, the file still gets the TOML (it was left as it was) and standard
    // output the summary.
    let both = dir.join("both.toml");
    let args = ["topology", "random", "--seed", "7", "--json", "--out"];
    let printed = run_json(&[&args[..], &[both.to_str().unwrap()]].concat());
    assert_eq!(std::fs::read(&both).unwrap(), a.stdout);
    assert_eq!(printed, summary);
}

/// `--nvlink` names the cluster apart and wires some V100-SXM2 machines with NVLink (seed 3 has
/// two of them), which the written config keeps and `cluster` reads back as NVLink machines.
#[test]
fn random_topology_with_nvlink_machines() {
    let out = run(&["topology", "random", "--seed", "3", "--nvlink"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert!(text.contains("name = \"random-3-nvlink\""), "{text}");
    assert_eq!(
        text.matches("interconnect = \"nvlink\"").count(),
        2,
        "{text}"
    );
    let plain = run(&["topology", "random", "--seed", "3"]);
    let plain = String::from_utf8(plain.stdout).unwrap();
    assert!(!plain.contains("interconnect = \"nvlink\""), "{plain}");
    let dir = scratch("random-nvlink");
    let path = dir.join("r.toml");
    std::fs::write(&path, &text).unwrap();
    let cluster = topoplace::cluster::load_cluster(&path).unwrap();
    let nvlink = cluster
        .groups
        .iter()
        .filter(|g| g.interconnect == topoplace::cluster::Interconnect::Nvlink)
        .count();
    assert_eq!(nvlink, 2);
}

#[test]
fn random_topology_takes_other_bandwidth_ranges() {
    let out = run(&[
        "topology",
        "random",
        "--seed",
        "7",
        "--intra-gbps",
        "300,400",
        "--inter-gbps",
        "90,100",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert!(
        text.contains("name = \"random-7-intra300-400-inter90-100\""),
        "{text}"
    );
    let gbps: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with("intra_bandwidth") || l.starts_with("nic"))
        .map(|l| {
            l.split('"')
                .nth(1)
                .unwrap()
                .trim_end_matches(" Gbps")
                .parse()
                .unwrap()
        })
        .collect();
    assert!(!gbps.is_empty());
    assert!(
        gbps.iter().all(|&g| (90.0..=400.0).contains(&g)),
        "{gbps:?}"
    );
    // A usage error, refused at the flag (exit 2).
    let out = run(&["topology", "random", "--inter-gbps", "50,20"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains("--inter-gbps"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn info_on_zoo_model_with_cluster() {
    let v = run_json(&[
        "info",
        "vgg19",
        "--cluster",
        "configs/tag-testbed.toml",
        "--json",
    ]);
    assert_eq!(v["params"], 143_667_240u64);
    assert_eq!(v["batch_size"], 96);
    let gpus = v["on_gpu"].as_array().unwrap();
    assert_eq!(gpus.len(), 3, "V100, 1080Ti and P100");
    // The V100 is the fastest of the three at fp32, so its serial time is the smallest.
    let time = |name: &str| {
        gpus.iter()
            .find(|g| g["gpu"].as_str().unwrap().contains(name))
            .map(|g| g["serial_compute_us"].as_f64().unwrap())
            .unwrap()
    };
    assert!(time("V100") < time("1080") && time("V100") < time("P100"));
}

#[test]
fn zoo_export_writes_loadable_files() {
    let dir = scratch("export");
    let v = run_json(&[
        "zoo",
        "export",
        "--models",
        "mlp",
        "--out",
        dir.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(v.as_array().unwrap().len(), 2, "training and forward-only");
    for name in ["mlp.json", "mlp-inference.json"] {
        let path = dir.join(name);
        run_ok(&["info", path.to_str().unwrap(), "--json"]);
    }
    // A bad name among good ones writes nothing.
    let dir2 = scratch("export-bad");
    let out = run(&[
        "zoo",
        "export",
        "--models",
        "mlp,nope",
        "--out",
        dir2.to_str().unwrap(),
    ]);
    // A usage error, at the flag, before anything is built.
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read_dir(&dir2).unwrap().count(), 0);
    // A forward-only name exports that graph alone; it panicked building `mlp-inference`'s own
    // `-inference` twin.
    let dir3 = scratch("export-inference");
    let v = run_json(&[
        "zoo",
        "export",
        "--models",
        "mlp-inference",
        "--out",
        dir3.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(v.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v[0]["model"], "mlp-inference");
    let path = dir3.join("mlp-inference.json");
    let info = run_json(&["info", path.to_str().unwrap(), "--json"]);
    assert!(info["per_phase"].get("backward").is_none(), "{info}");
    assert_eq!(info["gradients"], 0, "{info}");
    assert!(
        info["per_phase"]["forward"]["ops"].as_u64().unwrap() > 0,
        "{info}"
    );
    let twice = "mlp-inference-inference";
    let out = run(&[
        "zoo",
        "export",
        "--models",
        twice,
        "--out",
        dir3.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--models") && stderr.contains("not a zoo model"),
        "{stderr}"
    );
}

/// `import`, `group --dot` and `policy train-layouts` wrote over their own input when told to
/// (`import a.json --out a.json` replaced a torch export with the converted graph): refused
/// as `place` refuses it, exit 2 naming the flag, the input left as it was.
#[test]
fn outputs_that_are_the_input_are_refused() {
    let dir = scratch("own-input");
    let graph = dir.join("g.json");
    std::fs::write(&graph, GRAPH).unwrap();
    let recipe = dir.join("layouts.toml");
    std::fs::write(&recipe, "distribution = \"today\"\n").unwrap();
    let (g, r) = (graph.to_str().unwrap(), recipe.to_str().unwrap());
    for (args, flag) in [
        (vec!["import", g, "--out", g], "--out"),
        (vec!["group", "--model", g, "--dot", g], "--dot"),
        (vec!["policy", "train-layouts", r, "--out", r], "--out"),
    ] {
        let out = run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains("input file"),
            "{stderr}"
        );
    }
    assert_eq!(std::fs::read_to_string(&graph).unwrap(), GRAPH);
    assert_eq!(
        std::fs::read_to_string(&recipe).unwrap(),
        "distribution = \"today\"\n"
    );
}

/// A CSV graph is read from three files, and `compare --out` writes fixed names into its
/// directory: `import dir --out dir/ops.csv`, `simulate --trace dir/gradients.csv` and `compare
/// --clusters d/results.csv --out d` wrote over an input. Each is refused, the input left whole.
#[test]
fn outputs_over_csv_files_or_compare_inputs_are_refused() {
    let dir = scratch("csv-own-input");
    let csv = dir.join("graph");
    std::fs::create_dir_all(&csv).unwrap();
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/csv_example");
    for name in ["ops.csv", "edges.csv", "gradients.csv"] {
        std::fs::copy(example.join(name), csv.join(name)).unwrap();
    }
    let results = dir.join("results");
    std::fs::create_dir_all(&results).unwrap();
    let cluster = results.join("results.csv");
    std::fs::write(&cluster, CLUSTER).unwrap();
    let before = |name: &str| std::fs::read(csv.join(name)).unwrap();
    let kept = ["ops.csv", "edges.csv", "gradients.csv"].map(before);
    let path = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let (g, ops, edges, grads) = (
        path(&csv),
        path(&csv.join("ops.csv")),
        path(&csv.join("edges.csv")),
        path(&csv.join("gradients.csv")),
    );
    let (c, r) = (path(&cluster), path(&results));
    let cases: [(Vec<&str>, &str); 4] = [
        (vec!["import", &g, "--out", &ops], "--out"),
        (vec!["import", &ops, "--out", &edges], "--out"),
        (
            vec![
                "simulate",
                "--model",
                &g,
                "--cluster",
                "tag-testbed",
                "--trace",
                &grads,
            ],
            "--trace",
        ),
        (
            vec![
                "compare",
                "--models",
                "mlp",
                "--clusters",
                &c,
                "--out",
                &r,
                "--methods",
                "dp-nccl",
            ],
            "--out",
        ),
    ];
    for (args, flag) in cases {
        let out = run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains("input file"),
            "{stderr}"
        );
    }
    assert_eq!(["ops.csv", "edges.csv", "gradients.csv"].map(before), kept);
    assert_eq!(std::fs::read_to_string(&cluster).unwrap(), CLUSTER);
}

/// An argument that is not UTF-8 where text is expected was refused without saying which one
/// ("invalid UTF-8 was detected in one or more arguments"): the refusal names it.
#[cfg(unix)]
#[test]
fn a_non_utf8_argument_is_named() {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    let bad = OsString::from_vec(b"/tmp/\xff.json".to_vec());
    let out = run(&[OsString::from("info"), bad]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("\\xFF.json"), "{stderr}");
}

/// `experiment` flags that the named experiment does not read were ignored without a word
/// (`overhead --cluster tag-cloud` ran on random topologies); they are refused, naming the flag
/// and the experiments that read it, and `--steps` past a recipe's most is refused at the flag.
#[test]
fn experiment_flags_that_do_not_apply_are_refused() {
    let dir = scratch("experiment-flags");
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    for (name, flag, value) in [
        ("overhead", "--cluster", "tag-cloud"),
        ("overhead", "--seeds", "2"),
        ("search-efficiency", "--batch", "7"),
        ("search-efficiency", "--distribution", "today"),
        ("search-efficiency", "--topology-seed", "5"),
        ("reference-best", "--topologies", "3"),
        ("holdout-models", "--steps", "1000001"),
    ] {
        let args = [
            "experiment",
            name,
            "--models",
            "mlp",
            "--out",
            out,
            flag,
            value,
        ];
        let run = run(&args);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
    }
}

/// A model whose weights, gradients and optimizer state alone outgrow every GPU of the cluster
/// together is refused before the search, saying so: "give it more --time" could never help.
#[test]
fn place_of_a_model_larger_than_the_cluster_says_it_cannot_fit() {
    let dir = scratch("larger-than-cluster");
    let spec = dir.join("huge.toml");
    let text = "family = \"llama\"\nlayers = 400\nhidden = 32768\nheads = 256\nkv_heads = 8\n\
                ffn = 131072\nvocab = 128000\nseq = 2048\n";
    std::fs::write(&spec, text).unwrap();
    let args = [
        "place",
        "--model",
        spec.to_str().unwrap(),
        "--cluster",
        "tag-testbed",
    ];
    let out = run(&[&args[..], &["--time", "5"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot fit on tag-testbed"), "{stderr}");
    assert!(!stderr.contains("more --time"), "{stderr}");
}

/// Counts that would run for months are refused at the flag; an empty list entry is named as
/// empty, not as a name given twice.
#[test]
fn absurd_counts_and_empty_names_are_usage_errors() {
    for (args, needle) in [
        (
            vec![
                "experiment",
                "search-efficiency",
                "--out",
                "x",
                "--seeds",
                "100000000",
            ],
            "--seeds",
        ),
        (
            vec![
                "experiment",
                "overhead",
                "--out",
                "x",
                "--topologies",
                "100000000",
            ],
            "--topologies",
        ),
        (
            vec![
                "compare",
                "--models",
                "mlp",
                "--clusters",
                ",,",
                "--out",
                "x",
            ],
            "a name is empty",
        ),
    ] {
        let out = run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{stderr}");
    }
}

/// A hybrid search the time limit stops before any plan is judged says so: it said the model
/// "does not fit" after "all 0 hybrid plans tried run out of GPU memory".
#[test]
fn a_search_out_of_time_is_not_called_out_of_memory() {
    let out = run(&[
        "place",
        "--model",
        "llama-70b",
        "--cluster",
        "mixed-1024",
        "--time",
        "0.001",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("ran out of time") && !stderr.contains("does not fit"),
        "{stderr}"
    );
}

/// Sums of nothing print as 0, not as the -0 `Iterator::sum` gives.
#[test]
fn empty_sums_print_without_a_minus_sign() {
    let out = run_ok(&[
        "simulate",
        "--model",
        "mlp-inference",
        "--cluster",
        "tag-testbed",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("-0.000"), "{text}");
    let dir = scratch("one-op");
    let path = dir.join("one.json");
    let one = r#"{"name": "one", "batch_size": 1, "ops": [
      {"id": 0, "name": "a", "op_type": "MatMul", "phase": "forward", "flops": 10}], "edges": []}"#;
    std::fs::write(&path, one).unwrap();
    let v = run_json(&["info", path.to_str().unwrap(), "--json"]);
    assert!(v["edge_bytes"].as_f64().unwrap().is_sign_positive(), "{v}");
}

/// An output that cannot be written is refused before the search, so no other output is
/// replaced: `--trace` naming a directory failed after `--out` had been written over.
#[test]
fn place_writes_nothing_when_one_output_is_unwritable() {
    let dir = scratch("place-outputs");
    let precious = dir.join("precious.json");
    std::fs::write(&precious, "precious").unwrap();
    let adir = dir.join("adir");
    std::fs::create_dir(&adir).unwrap();
    let place = ["place", "--model", "mlp", "--cluster", "tag-testbed"];
    let (out, trace) = (precious.to_str().unwrap(), adir.to_str().unwrap());
    // The same file by another spelling: the trace was written over the file, then the rename
    // of the strategy failed.
    let respelled = format!("{}/./precious.json", dir.display());
    // A directory is a bad file (exit 1); one path for both is a bad flag value (exit 2).
    for (outputs, named, code) in [
        (["--out", out, "--trace", trace], "adir", 1),
        (["--out", out, "--trace", out], "--trace", 2),
        (["--out", out, "--trace", &respelled], "--trace", 2),
    ] {
        let args: Vec<&str> = place.iter().chain(&outputs).copied().collect();
        let result = run(&args);
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert_eq!(result.status.code(), Some(code), "{stderr}");
        assert!(stderr.contains(named), "{stderr}");
        assert!(result.stdout.is_empty());
        assert_eq!(std::fs::read_to_string(&precious).unwrap(), "precious");
    }
}

#[test]
fn simulate_reports_against_dp_and_writes_a_trace() {
    let dir = scratch("simulate");
    let trace = dir.join("trace.json");
    let v = run_json(&[
        "simulate",
        "--model",
        "mlp",
        "--cluster",
        "configs/quickp-fat-tree-4.toml",
        "--strategy",
        "dp-p",
        "--trace",
        trace.to_str().unwrap(),
        "--json",
    ]);
    // On identical GPUs proportional shares are even shares: DP-P is DP.
    let (t, dp) = (
        v["iteration_us"].as_f64().unwrap(),
        v["dp_iteration_us"].as_f64().unwrap(),
    );
    assert!((t - dp).abs() <= 1e-9 * dp, "{t} vs {dp}");
    assert_eq!(v["devices"].as_array().unwrap().len(), 4);
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    assert!(
        events.iter().filter(|e| e["ph"] == "X").count() >= v["tasks"].as_u64().unwrap() as usize
    );
}

/// `simulate` of the MLP on a two-GPU cluster, the strategy file's path to follow.
const SIMULATE_MLP_STRATEGY: [&str; 6] = [
    "simulate",
    "--model",
    "mlp",
    "--cluster",
    "configs/quickp-fat-tree-2.toml",
    "--strategy",
];

#[test]
fn strategy_file_errors_name_the_field() {
    let strategy =
        r#"{"groups": [{"ops": [999, 1, 2], "devices": [0, 1], "option": "all-reduce"}]}"#;
    fails_naming(
        &SIMULATE_MLP_STRATEGY,
        "strategy.json",
        strategy,
        &["groups[0].ops[0]", "no op has id 999"],
    );
    // A strategy covering every op but naming a GPU the cluster lacks.
    let ops: Vec<String> = (0..39).map(|i| i.to_string()).collect();
    let strategy = format!(
        r#"{{"groups": [{{"ops": [{}], "devices": [0, 9], "option": "all-reduce"}}]}}"#,
        ops.join(",")
    );
    fails_naming(
        &SIMULATE_MLP_STRATEGY,
        "strategy2.json",
        &strategy,
        &["groups[0].devices", "device 9"],
    );
    let bad_option = strategy.replace("all-reduce", "allreduce-ish");
    fails_naming(
        &SIMULATE_MLP_STRATEGY,
        "strategy3.json",
        &bad_option,
        &["groups[0].option"],
    );
    // Buckets of no bytes hold no gradient.
    let zero_buckets = strategy
        .replace("\"devices\": [0, 9]", "\"devices\": [0, 1]")
        .replacen('{', "{\"allreduce\": {\"buckets\": 0}, ", 1);
    fails_naming(
        &SIMULATE_MLP_STRATEGY,
        "strategy4.json",
        &zero_buckets,
        &["allreduce", "0 bytes"],
    );
    // A group of no ops (it was taken, its devices deciding nothing).
    let empty_group = strategy.replace(
        "\"devices\": [0, 9], \"option\": \"all-reduce\"}",
        "\"devices\": [0, 1], \"option\": \"all-reduce\"}, {\"ops\": [], \"devices\": [0], \"option\": \"all-reduce\"}",
    );
    fails_naming(
        &SIMULATE_MLP_STRATEGY,
        "strategy5.json",
        &empty_group,
        &["groups[1].ops", "empty"],
    );
    // An empty list where the writer leaves the key out: `[]` priorities read as "none" though
    // a list of the wrong length is an error, and `"sfb": true` beside an empty
    // `sfb_duplicated` was two answers at once.
    let good = strategy.replace("\"devices\": [0, 9]", "\"devices\": [0, 1]");
    for (k, key) in ["priority", "sfb_duplicated"].into_iter().enumerate() {
        let text = good.replacen('{', &format!("{{\"sfb\": true, \"{key}\": [], "), 1);
        fails_naming(
            &SIMULATE_MLP_STRATEGY,
            &format!("empty-list{k}.json"),
            &text,
            &[key, "empty list"],
        );
    }
}

/// `simulate` of `model` on the A100 + V100 cluster in fp16 under PyTorch
/// ([`FP16_ON_A100_V100`]), with a plan file to follow.
fn simulate_plan(model: &str) -> Vec<&str> {
    let mut args = vec!["simulate", "--model", model];
    args.extend(FP16_ON_A100_V100);
    args.push("--plan");
    args
}

/// A pipeline of more micro-batches than `strategy::MAX_MICRO_BATCHES` (1,024) would be
/// simulated as that many copies of the graph (vgg19 at 65,536 ran out of memory); a hybrid plan
/// of more than 65,536 micro-batches likewise (the schedule is simulated micro-batch by
/// micro-batch: 2^30 took 23 GB before the kernel stopped it).
#[test]
fn micro_batch_counts_past_their_bounds_are_refused() {
    let ops: Vec<String> = (0..39).map(|i| i.to_string()).collect();
    let strategy = format!(
        r#"{{"groups": [{{"ops": [{}], "devices": [0], "option": "all-reduce"}}],
            "pipeline": {{"stages": [[0]], "micro_batches": 2048, "schedule": "gpipe"}}}}"#,
        ops.join(",")
    );
    fails_naming(
        &[
            "simulate",
            "--model",
            "mlp",
            "--cluster",
            "tag-sfb",
            "--batch",
            "2048",
            "--strategy",
        ],
        "pipeline.json",
        &strategy,
        &["pipeline.micro_batches", "1024"],
    );
    let plan = r#"{"global_batch": 1073741824, "micro_batches": 1073741824, "schedule": "1f1b",
        "stages": [{"layers": [0, 16], "replicas": [[0]], "sequence_parallel": false,
        "zero": "1", "recompute": "none"}]}"#;
    fails_naming(
        &simulate_plan("llama-1b"),
        "plan.json",
        plan,
        &["micro_batches", "65536"],
    );
}

#[test]
fn sizes_that_would_exhaust_memory_or_threads_are_refused() {
    let dir = scratch("absurd-sizes");
    let out = dir.join("p.gnn");
    let out = out.to_str().unwrap();
    for args in [
        vec!["policy", "init", "--out", out, "--width", "100000"],
        vec!["policy", "init", "--out", out, "--heads", "1000"],
        vec![
            "solve",
            "--model",
            "mlp",
            "--cluster",
            "tag-sfb",
            "--formulation",
            "quickp",
            "--threads",
            "100000",
        ],
    ] {
        let run = run(&args);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("more than the"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    assert!(!std::path::Path::new(out).exists());
    // Within the flags' bounds, but its 730 million weights would make a 2.7 GiB file that no
    // command may read back (the input files' 1 GiB cap): refused at once, naming the flag.
    let run = run(&[
        "policy", "init", "--out", out, "--width", "4096", "--heads", "64",
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--width") && stderr.contains("1 GiB"),
        "{stderr}"
    );
    assert!(!std::path::Path::new(out).exists());
}

#[test]
fn import_converts_and_every_command_reads_the_result() {
    let dir = scratch("import");
    let out_path = dir.join("vgg.json");
    let v = run_json(&[
        "import",
        "datasets/quickp/comp_graph_alexnet.json.gz",
        "--format",
        "quickp",
        "--out",
        out_path.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(v["ops"], 1695);
    assert_eq!(v["format"], "quickp");
    // The written file and the original both load through `--model`.
    for model in [
        out_path.to_str().unwrap(),
        "datasets/quickp/comp_graph_alexnet.json.gz",
    ] {
        let info = run_ok(&["info", model, "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
        assert_eq!(v["ops"], 1695);
    }
}

#[test]
fn import_of_a_malformed_file_fails_cleanly_and_writes_nothing() {
    let dir = scratch("import-bad");
    let out_path = dir.join("never.json");
    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        r#"{"directed": true, "nodes": [{"id": "a"}], "links": []}"#,
    )
    .unwrap();
    let out = run(&[
        "import",
        bad.to_str().unwrap(),
        "--out",
        out_path.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("bad.json") && !stderr.contains("panicked"),
        "{stderr}"
    );
    assert!(!out_path.exists());
    let out = run(&[
        "import",
        bad.to_str().unwrap(),
        "--format",
        "onnx",
        "--out",
        "x.json",
    ]);
    // An unknown value of an enumerated flag is clap's usage error (exit 2) listing the values.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains("onnx"), "{stderr}");
    assert!(
        stderr.contains("torch") && stderr.contains("quickp"),
        "{stderr}"
    );
}

#[test]
fn group_prints_statistics_and_writes_dot() {
    let dir = scratch("group");
    let dot = dir.join("g.dot");
    let v = run_json(&[
        "group",
        "--model",
        "resnet101",
        "--method",
        "metis",
        "-k",
        "12",
        "--dot",
        dot.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(v["method"], "metis");
    assert!(v["groups"].as_u64().unwrap() <= 12);
    assert!(v["cut_bytes"].as_f64().unwrap() < v["total_edge_bytes"].as_f64().unwrap());
    let text = std::fs::read_to_string(&dot).unwrap();
    assert!(
        text.starts_with("digraph"),
        "{}",
        &text[..40.min(text.len())]
    );
    let out = run(&["group", "--model", "mlp", "--method", "spectral"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("spectral") && stderr.contains("celeritas"),
        "{stderr}"
    );
    let out = run(&["group", "--model", "mlp", "--gpu", "Voodoo-5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Voodoo-5"));
}

#[test]
fn info_uses_the_configs_memory_override() {
    let dir = scratch("memory-override");
    let path = dir.join("small.toml");
    std::fs::write(
        &path,
        CLUSTER.replace(
            "nic = \"100 Gbps\"",
            "nic = \"100 Gbps\"\nmemory = \"4 GiB\"",
        ),
    )
    .unwrap();
    let v = run_json(&[
        "info",
        "vgg19",
        "--cluster",
        path.to_str().unwrap(),
        "--json",
    ]);
    let gpu = &v["on_gpu"][0];
    assert_eq!(
        gpu["memory_bytes"].as_f64().unwrap(),
        4.0 * (1u64 << 30) as f64
    );
    // VGG19 at batch 96 needs far more than 4 GiB.
    assert_eq!(gpu["fits"], false);
}

/// Every enumerated flag refuses an unknown value with clap's usage error (exit 2), naming the
/// value and listing the valid ones; none falls back silently to a default.
#[test]
fn unknown_values_of_enumerated_flags_are_usage_errors() {
    let cases: [(&[&str], &[&str]); 6] = [
        (
            &[
                "simulate",
                "--model",
                "mlp",
                "--cluster",
                "tag-testbed",
                "--order",
                "lifo",
            ],
            &["fifo", "priority"],
        ),
        (
            &[
                "place",
                "--model",
                "mlp",
                "--cluster",
                "tag-testbed",
                "--batch-split",
                "odd",
            ],
            &["even", "auto"],
        ),
        (
            &[
                "place",
                "--model",
                "mlp",
                "--cluster",
                "tag-testbed",
                "--group-order",
                "size",
            ],
            &["compute", "impact"],
        ),
        (
            &[
                "place",
                "--model",
                "mlp",
                "--cluster",
                "tag-testbed",
                "--gnn-device",
                "tpu",
            ],
            &["cpu", "wgpu"],
        ),
        (
            &[
                "solve",
                "--model",
                "mlp",
                "--cluster",
                "tag-testbed",
                "--formulation",
                "ilp",
            ],
            &["quickp", "moirai"],
        ),
        (
            &["group", "--model", "mlp", "--method", "kmeans"],
            &["metis", "chunks"],
        ),
    ];
    for (args, valid) in cases {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let bad = args.last().unwrap();
        assert!(stderr.contains(bad), "{args:?}: {stderr}");
        for v in valid {
            assert!(stderr.contains(v), "{args:?} lists {v}: {stderr}");
        }
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// `topology nvidia-smi` turns `nvidia-smi topo -m` output into a machine entry the cluster
/// parser reads: a DGX-1 V100 hybrid cube mesh is an NVLink mesh with 50 GB/s pairs (two bricks)
/// and three lanes per port; garbage is one error naming the file.
#[test]
fn nvidia_smi_topology_imports_as_a_machine_entry() {
    let dir = common::scratch("nvidia-smi");
    let file = dir.join("topo.txt");
    let rows = [
        "GPU0 X NV1 NV1 NV2 NV2 SYS SYS SYS",
        "GPU1 NV1 X NV2 NV1 SYS NV2 SYS SYS",
        "GPU2 NV1 NV2 X NV2 SYS SYS NV1 SYS",
        "GPU3 NV2 NV1 NV2 X SYS SYS SYS NV1",
        "GPU4 NV2 SYS SYS SYS X NV1 NV1 NV2",
        "GPU5 SYS NV2 SYS SYS NV1 X NV2 NV1",
        "GPU6 SYS SYS NV1 SYS NV1 NV2 X NV2",
        "GPU7 SYS SYS SYS NV1 NV2 NV1 NV2 X",
    ];
    std::fs::write(
        &file,
        format!("\tGPU0\tGPU1\tCPU Affinity\n{}\n", rows.join("\n")),
    )
    .unwrap();
    let out = common::binary()
        .args(["topology", "nvidia-smi", "--gpu", "V100-16GB"])
        .arg(&file)
        .output()
        .unwrap();
    let out = common::succeeded(out);
    let entry = String::from_utf8(out.stdout).unwrap();
    let c = topoplace::cluster::parse_cluster(&format!("name = \"dgx1\"\n{entry}"), "t").unwrap();
    assert_eq!(c.devices.len(), 8);
    assert_eq!(
        c.groups[0].interconnect,
        topoplace::cluster::Interconnect::Nvlink
    );
    assert_eq!(c.groups[0].port_lanes(), 3);
    std::fs::write(&file, "not a topology").unwrap();
    let out = common::binary()
        .args(["topology", "nvidia-smi", "--gpu", "V100-16GB"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("topo.txt") && err.lines().count() == 1,
        "{err}"
    );
}

/// What made `topology nvidia-smi` write entries that do not load is refused, and a name with
/// quotes is escaped: `--name 'a"b'` wrote invalid TOML, `--gpu T4` on NVLink `"0 GB/s"`.
#[test]
fn nvidia_smi_entries_always_load() {
    let dir = common::scratch("nvidia-smi-bad");
    let file = dir.join("topo.txt");
    let write = |cell: &str| {
        let text = format!("GPU0 X {cell}\nGPU1 {cell} X\n");
        std::fs::write(&file, text).unwrap();
    };
    let smi = |extra: &[&str]| {
        let mut args = vec!["topology", "nvidia-smi", file.to_str().unwrap()];
        args.extend_from_slice(extra);
        run(&args)
    };
    write("NV2");
    let out = smi(&["--gpu", "V100-32GB", "--name", "a\"b\\c"]);
    let entry = String::from_utf8(common::succeeded(out).stdout).unwrap();
    let c = topoplace::cluster::parse_cluster(&format!("name = \"n\"\n{entry}"), "t").unwrap();
    assert_eq!(c.machines[0].name, "a\"b\\c");
    let refused = |out: std::process::Output, code: i32, needle: &str| {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{err}");
        assert!(err.contains(needle) && !err.contains("panicked"), "{err}");
        assert!(out.stdout.is_empty(), "{err}");
    };
    refused(smi(&["--gpu", "V100-32GB", "--name", ""]), 2, "--name");
    refused(smi(&["--gpu", "T4"]), 2, "--gpu");
    // An unknown type is the flag's error too (it was exit 1, naming "--gpu: gpu").
    refused(smi(&["--gpu", "Voodoo-5"]), 2, "--gpu");
    for cell in ["NV0", "NV19", "NV999999"] {
        write(cell);
        refused(smi(&["--gpu", "V100-32GB"]), 1, "topo.txt");
    }
}

/// Numbers a flag cannot take are usage errors (exit 2, naming the flag), not silently turned
/// into something else: 0 groups, 0 seeds, NaN, negative or absurdly long time limits, a negative
/// gap.
#[test]
fn impossible_numbers_are_refused_at_the_flag() {
    let place = ["place", "--model", "mlp", "--cluster", "tag-testbed"];
    let solve = ["solve", "--model", "mlp", "--cluster", "tag-testbed"];
    let experiment = ["experiment", "search-efficiency", "--out", "/nonexistent/x"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        ([&place[..], &["--groups", "0"]].concat(), "--groups"),
        ([&place[..], &["--budget", "0"]].concat(), "--budget"),
        // A gap past 1 stops where 1 does; a limit below what the process holds refuses all.
        ([&solve[..], &["--gap", "1e308"]].concat(), "--gap"),
        (
            [&solve[..], &["--memory-limit", "1 B"]].concat(),
            "--memory-limit",
        ),
        (
            [&solve[..], &["--memory-limit", "-4 GiB"]].concat(),
            "--memory-limit",
        ),
        // `-k` where the method chooses its own count was ignored.
        (
            vec!["group", "--model", "mlp", "--method", "quickp", "-k", "5"],
            "-k",
        ),
        (
            [
                &solve[..],
                &["--formulation", "quickp", "--coarsen", "none", "-k", "5"],
            ]
            .concat(),
            "-k",
        ),
        // Priority order without priorities ran in arrival order.
        (
            vec![
                "simulate",
                "--model",
                "mlp",
                "--cluster",
                "tag-testbed",
                "--order",
                "priority",
            ],
            "--order",
        ),
        (
            vec![
                "zoo",
                "export",
                "--out",
                "/nonexistent/z",
                "--models",
                "nope",
            ],
            "--models",
        ),
        // A batch that grows an op past the graph's bounds blamed the op (exit 1).
        (
            vec![
                "info",
                "llama-70b",
                "--batch",
                "1048576",
                "--seq",
                "1048576",
            ],
            "--batch",
        ),
        (
            vec![
                "place",
                "--model",
                "llama-1b",
                "--cluster",
                "hetero-h100-a100",
                "--batch",
                "4294967295",
            ],
            "--batch",
        ),
        ([&place[..], &["--time", "NaN"]].concat(), "--time"),
        ([&place[..], &["--time=-1"]].concat(), "--time"),
        // A negative number as the next word is the flag's value, judged by the flag's check
        // (it was "unexpected argument '-1'", naming no flag).
        ([&place[..], &["--time", "-1"]].concat(), "--time"),
        ([&place[..], &["--batch", "-3"]].concat(), "--batch"),
        ([&solve[..], &["--gap", "-0.5"]].concat(), "--gap"),
        (vec!["group", "--model", "mlp", "-k", "0"], "-k"),
        ([&solve[..], &["--time-limit=-5"]].concat(), "--time-limit"),
        (
            [&solve[..], &["--time-limit", "inf"]].concat(),
            "--time-limit",
        ),
        ([&solve[..], &["--gap=-1"]].concat(), "--gap"),
        // Past a year a deadline would overflow `Instant + Duration`.
        ([&place[..], &["--time", "1e20"]].concat(), "--time"),
        (
            [&solve[..], &["--time-limit", "1e20"]].concat(),
            "--time-limit",
        ),
        (vec!["bench", "place", "--time", "1e20"], "--time"),
        // Below a millisecond it was printed back as 300 digits.
        (
            [&solve[..], &["--time-limit", "1e-300"]].concat(),
            "--time-limit",
        ),
        (vec!["bench", "place", "--repeat", "0"], "--repeat"),
        (
            vec!["bench", "place", "--repeat", "99999999999"],
            "--repeat",
        ),
        (vec!["bench", "place", "--limit=-1"], "--limit"),
        ([&solve[..], &["--threads", "0"]].concat(), "--threads"),
        ([&experiment[..], &["--seeds", "0"]].concat(), "--seeds"),
        (
            [&experiment[..], &["--topologies", "0"]].concat(),
            "--topologies",
        ),
        // Validated at the flag, not after loading the model (they exited 1).
        ([&place[..], &["--batch", "0"]].concat(), "--batch"),
        (
            vec![
                "simulate",
                "--model",
                "mlp",
                "--cluster",
                "tag-testbed",
                "--batch",
                "0",
            ],
            "--batch",
        ),
        (
            [
                &solve[..],
                &["--formulation", "quickp", "--coarsen", "bogus"],
            ]
            .concat(),
            "--coarsen",
        ),
        (
            vec![
                "sfb",
                "--model",
                "mlp",
                "--cluster",
                "tag-testbed",
                "--depth",
                "4294967295",
            ],
            "--depth",
        ),
        (vec!["bench", "gnn", "--samples", "1000000"], "--samples"),
        (vec!["bench", "scale", "--gpus", "9"], "--gpus"),
        (
            vec!["topology", "random", "--intra-gbps", "160,64"],
            "--intra-gbps",
        ),
        // Above the loader's 1 PB/s: every draw failed to load, a panic.
        (
            vec!["topology", "random", "--intra-gbps", "1,1000000000"],
            "--intra-gbps",
        ),
        (
            vec!["topology", "random", "--inter-gbps", "9000000,9000000"],
            "--inter-gbps",
        ),
        (
            vec![
                "experiment",
                "unseen-topologies",
                "--out",
                "/nonexistent/e",
                "--intra-gbps",
                "9000000,9000000",
            ],
            "--intra-gbps",
        ),
    ];
    let compare = |methods| {
        let args = [
            "compare",
            "--models",
            "mlp",
            "--clusters",
            "tag-testbed",
            "--methods",
            methods,
            "--out",
            "/nonexistent/y",
        ];
        (args.to_vec(), "--methods")
    };
    let cases: Vec<(Vec<&str>, &str)> = cases
        .into_iter()
        .chain([compare("foo"), compare(" , "), compare("heft,heft")])
        .collect();
    for (args, flag) in cases {
        let out = run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
        // One line, as every error is (clap's usage and help hints left out), and the flag
        // named once (`--methods heft,heft` said `… '--methods <METHODS>': <cli>: --methods:`).
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(!stderr.contains("<cli>: --methods"), "{args:?}: {stderr}");
    }
    // A refusal names the flag's own bound, however large the number given.
    for (args, bound) in [
        (
            vec!["info", "mlp", "--batch", "18446744073709551616"],
            "4294967295",
        ),
        (
            vec!["info", "gpt", "--seq", "99999999999999999999"],
            "1048576",
        ),
        (
            [&solve[..], &["--threads", "18446744073709551616"]].concat(),
            "256",
        ),
    ] {
        let out = run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("the {bound} allowed")),
            "{args:?}: {stderr}"
        );
    }
    // A command without its subcommand still shows its whole help.
    for args in [&[][..], &["policy"][..]] {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("Commands:"), "{args:?}: {stderr}");
    }
    // Missing and conflicting flags are one line too, naming them.
    let out = run(&["compare", "--models", "mlp", "--clusters", "tag-testbed"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--out"), "{stderr}");
}

/// A strategy file made for another model or cluster is an error naming the field; a shipped
/// config name works wherever a cluster is asked for.
#[test]
fn strategies_for_another_model_or_cluster_are_refused() {
    let dir = scratch("strategy-mismatch");
    let file = dir.join("s.json");
    run_ok(&[
        "place",
        "--model",
        "mlp",
        "--cluster",
        "tag-testbed",
        "--budget",
        "8",
        "--out",
        file.to_str().unwrap(),
    ]);
    run_ok(&[
        "simulate",
        "--model",
        "mlp",
        "--cluster",
        "tag-testbed",
        "--strategy",
        file.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&file).unwrap();
    for (field, from, to) in [
        ("model", "\"mlp\"", "\"alexnet\""),
        ("cluster", "\"tag-testbed\"", "\"tag-cloud\""),
    ] {
        std::fs::write(&file, text.replacen(from, to, 1)).unwrap();
        let out = run(&[
            "simulate",
            "--model",
            "mlp",
            "--cluster",
            "tag-testbed",
            "--strategy",
            file.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(field) && stderr.lines().count() == 1,
            "{stderr}"
        );
    }
    for args in [
        &["cluster", "tag-testbed"][..],
        &["info", "mlp", "--cluster", "tag-testbed"],
    ] {
        run_ok(args);
    }
}

/// Files from other editors and mistaken paths: a UTF-8 byte-order mark is read past; an array
/// where a strategy object belongs, and an output path under a file, are one-line errors naming
/// the file asked for.
#[test]
fn byte_order_marks_arrays_and_paths_under_files() {
    let dir = scratch("bom");
    let graph = dir.join("mlp.json");
    let exported = run(&[
        "zoo",
        "export",
        "--models",
        "mlp",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(exported.status.success());
    let mut bom = b"\xef\xbb\xbf".to_vec();
    bom.extend(std::fs::read(&graph).unwrap());
    std::fs::write(&graph, bom).unwrap();
    run_ok(&["info", graph.to_str().unwrap()]);

    let array = dir.join("array.json");
    std::fs::write(&array, "[]").unwrap();
    let out = run(&[
        "simulate",
        "--model",
        "mlp",
        "--cluster",
        "tag-testbed",
        "--strategy",
        array.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains("array.json") && stderr.contains("one JSON object"),
        "{stderr}"
    );

    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let target = file.join("x.toml");
    let out = run(&["topology", "random", "--out", target.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains("x.toml") && stderr.contains("is a file") && stderr.lines().count() == 1,
        "{stderr}"
    );
}

/// `bench scale` measures each size in a child process of its own: the growth column is the
/// log-log slope between neighbouring rows, the peak memory is the child's; a size that is not a
/// multiple of 8 is refused, naming it.
#[test]
fn bench_scale_reports_the_growth_between_sizes() {
    let v = run_json(&[
        "bench",
        "scale",
        "--model",
        "mlp",
        "--gpus",
        "8,64",
        "--place-up-to",
        "0",
        "--json",
    ]);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let seconds = |r: &serde_json::Value| {
        r["compile_s"].as_f64().unwrap() + r["simulate_s"].as_f64().unwrap()
    };
    let slope = (seconds(&rows[1]) / seconds(&rows[0])).ln() / 8f64.ln();
    assert!((rows[1]["growth"].as_f64().unwrap() - slope).abs() < 1e-9);
    assert!(rows[0]["growth"].is_null());
    for r in rows {
        assert!(r["peak_mib"].as_f64().unwrap() > 1.0, "{r}");
        assert!(r["every_replica_peak_mib"].as_f64().unwrap() > 1.0, "{r}");
        assert!(r["every_replica_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(
            r["place_s"].is_null(),
            "place runs only up to --place-up-to"
        );
    }
    let out = run(&["bench", "scale", "--gpus", "12"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--gpus") && stderr.contains("12"),
        "{stderr}"
    );
}

#[test]
fn replicas_with_less_than_one_sample_are_warned_about() {
    let dir = scratch("thin-batch");
    let path = dir.join("g.json");
    std::fs::write(&path, GRAPH).unwrap();
    let graph = path.to_str().unwrap();
    // Batch 2 over TAG's 16-GPU testbed: 0.125 samples per replica.
    let thin = run_ok(&[
        "simulate",
        "--model",
        graph,
        "--cluster",
        "tag-testbed",
        "--strategy",
        "dp",
    ]);
    let stderr = String::from_utf8_lossy(&thin.stderr);
    assert!(stderr.contains("warning:"), "{stderr}");
    assert!(stderr.contains("0.12 samples"), "{stderr}");
    // Batch 2 over two GPUs: one sample each, nothing to warn about.
    let whole = run_ok(&[
        "simulate",
        "--model",
        graph,
        "--cluster",
        "quickp-fat-tree-2",
        "--strategy",
        "dp",
    ]);
    let stderr = String::from_utf8_lossy(&whole.stderr);
    assert!(!stderr.contains("warning:"), "{stderr}");
}

/// `bench place` runs `place` as a user does and reports what it found on every run: the same
/// result and strategy count as `place` itself, one wall time per run, the median among them,
/// and the limit judged.
#[test]
fn bench_place_reports_what_place_finds() {
    let instance = ["--model", "mlp", "--cluster", "tag-testbed"];
    let rows = run_json(&[
        "bench",
        "place",
        "--models",
        "mlp",
        "--clusters",
        "tag-testbed",
        "--repeat",
        "2",
        "--limit",
        "1000",
        "--json",
    ]);
    let place = run_json(&[&["place"], &instance[..], &["--json"]].concat());
    let rows = rows.as_array().expect("one row per instance");
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    let place_us = place["iteration_us"].as_f64().unwrap();
    for run in 0..2 {
        assert_eq!(row["simulated"][run], place["simulated"]);
        let bench_us = row["iteration_ms"][run].as_f64().unwrap() * 1000.0;
        assert!(
            (bench_us - place_us).abs() <= 1e-9 * place_us,
            "{bench_us} vs {place_us}"
        );
    }
    let walls = common::f64s(&row["wall_s"]);
    assert_eq!(walls.len(), 2);
    let median = row["median_s"].as_f64().unwrap();
    assert!((median - (walls[0] + walls[1]) / 2.0).abs() < 1e-12);
    assert_eq!(row["within_limit"], true);
}

/// A `--limit` the slowest run breaks fails the command once the table is printed, naming the
/// instance: a limit judged is a test.
#[test]
fn bench_place_fails_when_a_run_breaks_its_limit() {
    let out = run(&[
        "bench",
        "place",
        "--models",
        "mlp",
        "--clusters",
        "tag-testbed",
        "--repeat",
        "1",
        "--limit",
        "0.001",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stdout.contains("within limit"), "{stdout}");
    assert!(
        stderr.contains("--limit") && stderr.contains("mlp on tag-testbed"),
        "{stderr}"
    );
}

/// A full stdout is one error naming stdout and exit 1, never a panic or a silent success: for
/// clap's help and version too.
#[cfg(target_os = "linux")]
/// `out` is a command's error (exit 1, no panic) whose message starts with `prefix`.
fn failed_with(out: &std::process::Output, args: &[&str], prefix: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(
        err.starts_with(prefix) && !err.contains("panicked"),
        "{err}"
    );
}

#[test]
fn a_full_stdout_is_an_error_not_a_panic() {
    use std::process::Stdio;
    let commands: [&[&str]; 7] = [
        &["policy", "--help"],
        &["--version"],
        &["info", "vgg19"],
        &["cluster", "tag-testbed"],
        &["zoo", "list"],
        &[
            "simulate",
            "--model",
            "mlp",
            "--cluster",
            "tag-testbed",
            "--json",
        ],
        &["fidelity"],
    ];
    for args in commands {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = common::binary()
            .args(args)
            .stdout(Stdio::from(full))
            .output()
            .unwrap();
        failed_with(&out, args, "error: <stdout>:");
    }
}

/// A stderr that cannot be written (`2>/dev/full`) loses the message but not the exit status:
/// `eprintln!` panicked there, exit 101.
#[test]
fn a_full_stderr_keeps_the_exit_status() {
    use std::process::Stdio;
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let dir = scratch("full-stderr");
    let broken = dir.join("broken.json");
    std::fs::write(&broken, "{\"name\": \"g\", \"batch_size\": ").unwrap();
    let broken = broken.to_str().unwrap();
    for (args, code) in [
        (&["info", broken][..], 1),
        (&["info", "nosuch"][..], 2),
        (
            &["simulate", "--model", "mlp", "--cluster", "nosuch"][..],
            2,
        ),
    ] {
        let out = common::binary()
            .args(args)
            .stdout(Stdio::from(full()))
            .stderr(Stdio::from(full()))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}");
    }
}

/// `--out /dev/stdout` with stdout a pipe (`| wc -c`): the link leads to `/proc/self/fd/1` and
/// on to `pipe:[N]`, which no directory holds; the bytes go into the pipe.
#[cfg(target_os = "linux")]
#[test]
fn an_output_to_dev_stdout_reaches_a_pipe() {
    let out = common::binary()
        .args(["topology", "random", "--seed", "1", "--out", "/dev/stdout"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("[[machine]]"), "{stdout}");
}

/// An output through a symbolic link writes the link's target and keeps the link (a dangling
/// link's target is created); one through a pipe writes into the pipe instead of replacing it
/// with a regular file.
#[cfg(unix)]
#[test]
fn an_output_may_not_be_an_input_or_a_directory() {
    let dir = scratch("output-forms");
    let graph = dir.join("g.json");
    std::fs::copy("datasets/zoo/mlp.json", &graph).unwrap();
    let before = std::fs::read(&graph).unwrap();
    let g = graph.to_str().unwrap();
    // The strategy written over the graph it was searched for.
    let out = run(&[
        "place",
        "--model",
        g,
        "--cluster",
        "tag-testbed",
        "--budget",
        "4",
        "--out",
        g,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--out") && stderr.contains("input file"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&graph).unwrap(), before);
    // A file path written as a folder wrote a file named like the folder.
    let folder = format!("{}/trace/", dir.display());
    let out = run(&[
        "simulate",
        "--model",
        "mlp",
        "--cluster",
        "tag-testbed",
        "--trace",
        &folder,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("names a directory"), "{stderr}");
    assert!(!dir.join("trace").exists());
    // A directory where one of compare's files goes: none of them is written (results.csv was
    // renamed into place before results.md failed).
    let cmp = dir.join("cmp");
    std::fs::create_dir_all(cmp.join("results.md")).unwrap();
    let out = run(&[
        "compare",
        "--models",
        "mlp",
        "--clusters",
        "tag-testbed",
        "--methods",
        "single",
        "--out",
        cmp.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("is a directory"), "{stderr}");
    assert!(!cmp.join("results.csv").exists());
}

#[test]
fn outputs_write_through_links_and_pipes_without_replacing_them() {
    use std::os::unix::fs::FileTypeExt;
    let dir = scratch("write-through");
    let target = dir.join("target.json");
    std::fs::write(&target, "old").unwrap();
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    topoplace::io::write_atomic(&link, b"new").unwrap();
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");

    // A dangling link (relative, as `ln -s made.json dangling.json` makes it) gets its target
    // created; a loop of links is an error naming the link, and leaves both links as they were.
    let dangling = dir.join("dangling.json");
    std::os::unix::fs::symlink("made.json", &dangling).unwrap();
    topoplace::io::write_atomic(&dangling, b"made").unwrap();
    assert!(
        std::fs::symlink_metadata(&dangling)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("made.json")).unwrap(),
        "made"
    );
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    std::os::unix::fs::symlink(&b, &a).unwrap();
    std::os::unix::fs::symlink(&a, &b).unwrap();
    let looped = topoplace::io::write_atomic(&a, b"x")
        .unwrap_err()
        .to_string();
    assert!(
        looped.contains("a.json") && looped.contains("symbolic links"),
        "{looped}"
    );
    for link in [&a, &b] {
        assert!(
            std::fs::symlink_metadata(link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    let fifo = dir.join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    topoplace::io::write_atomic(&fifo, b"through the pipe").unwrap();
    assert_eq!(reader.join().unwrap(), "through the pipe");
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
}

/// A device as an input (`/dev/zero` as the model, cluster or strategy) is refused at once,
/// naming the file, instead of being read until the 1 GiB cap (ten seconds) or memory runs out.
#[cfg(unix)]
#[test]
fn an_endless_input_is_refused_not_read_forever() {
    for args in [
        [
            "--model",
            "/dev/zero",
            "--cluster",
            "tag-testbed",
            "--strategy",
            "dp",
        ],
        [
            "--model",
            "mlp",
            "--cluster",
            "/dev/zero",
            "--strategy",
            "dp",
        ],
        [
            "--model",
            "mlp",
            "--cluster",
            "tag-testbed",
            "--strategy",
            "/dev/zero",
        ],
    ] {
        let out = common::binary()
            .arg("simulate")
            .args(args)
            .output()
            .unwrap();
        failed_with(&out, &args, "error: /dev/zero: is a device, not a file");
    }
}

/// `place` checks its output paths before it searches: a bad `--trace` leaves no `--out`
/// written behind it, and the error comes at once.
#[test]
fn place_refuses_a_bad_output_path_before_writing_any() {
    let dir = scratch("place-outputs");
    let file = dir.join("a-file");
    std::fs::write(&file, "").unwrap();
    let out = dir.join("strategy.json");
    let result = run(&[
        "place",
        "--model",
        "mlp",
        "--cluster",
        "tag-testbed",
        "--out",
        out.to_str().unwrap(),
        "--trace",
        file.join("trace.json").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&result.stderr);
    assert_eq!(result.status.code(), Some(1), "{err}");
    assert!(
        err.contains("trace.json") && err.contains("is a file"),
        "{err}"
    );
    assert!(
        !out.exists(),
        "--out was written before the bad --trace was found"
    );
}

/// `bench scale` measures each size's growth against the size above it: a repeated or smaller
/// size is refused (it printed a growth of -inf).
#[test]
fn bench_scale_sizes_must_increase() {
    let out = run(&["bench", "scale", "--gpus", "8,8"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.starts_with("error:") && err.contains("--gpus"), "{err}");
}

/// A one-op graph gives the CP prover a resource with a single task: nothing to post, where
/// pumpkin panicked in its thread (and the command still exited 0).
#[test]
fn solve_proves_a_one_op_graph_without_a_panic() {
    let dir = scratch("one-op");
    std::fs::write(
        dir.join("ops.csv"),
        "# batch_size=1\n# name=one\n\
         id,name,op_type,phase,flops,bytes_accessed,output_bytes,resident_bytes,params,split,batch_scaled\n\
         0,x,MatMul,forward,1000000,1000,1000,0,0,concat,\n",
    )
    .unwrap();
    std::fs::write(dir.join("edges.csv"), "src,dst,bytes\n").unwrap();
    let out = run(&[
        "solve",
        "--model",
        dir.to_str().unwrap(),
        "--cluster",
        "tag-testbed",
        "--formulation",
        "moirai",
        "--time-limit",
        "5",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("optimal"));
}

/// A language model's run on the shipped A100 + V100 cluster in fp16 under PyTorch.
const FP16_ON_A100_V100: [&str; 6] = [
    "--cluster",
    "hetero-a100-v100",
    "--precision",
    "fp16",
    "--framework",
    "pytorch",
];

#[test]
fn hybrid_plan_errors_name_the_file_and_field() {
    let mut args = vec!["simulate", "--model", "llama-1b"];
    args.extend(FP16_ON_A100_V100);
    args.push("--plan");
    let stage = |layers: &str, replicas: &str| {
        format!(
            r#"{{"global_batch": 8, "micro_batches": 2, "stages": [{{"layers": {layers}, "replicas": {replicas}}}]}}"#
        )
    };
    fails_naming(
        &args,
        "gap.json",
        &stage("[0, 10]", "[[0]]"),
        &["stages", "layers 0..10"],
    );
    fails_naming(
        &args,
        "tp3.json",
        &stage("[0, 16]", "[[0, 1, 2]]"),
        &["stages[0].replicas", "degree 3"],
    );
    fails_naming(
        &args,
        "twice.json",
        &stage("[0, 16]", "[[0], [0]]"),
        &["used twice"],
    );
    fails_naming(
        &args,
        "far.json",
        &stage("[0, 16]", "[[99]]"),
        &["device 99"],
    );
    fails_naming(
        &args,
        "field.json",
        r#"{"global_batch": 8, "micro_batches": 2, "stages": [], "pipeline": 1}"#,
        &["pipeline"],
    );
    fails_naming(
        &args,
        "zero.json",
        r#"{"global_batch": 8, "micro_batches": 2, "stages": [{"layers": [0, 16], "replicas": [[0]], "zero": "4"}]}"#,
        &["stages[0].zero"],
    );
    fails_naming(
        &args,
        "mb.json",
        r#"{"global_batch": 8, "micro_batches": 3, "stages": [{"layers": [0, 16], "replicas": [[0]]}]}"#,
        &["micro_batches"],
    );
}

#[test]
fn place_writes_a_hybrid_plan_that_simulate_reproduces() {
    let dir = scratch("hybrid-place");
    let out = dir.join("plan.json");
    let mut common = vec!["--model", "llama-8b", "--json"];
    common.extend(FP16_ON_A100_V100);
    let mut place = vec!["place", "--batch", "32", "--out", out.to_str().unwrap()];
    place.extend(&common);
    let placed = run_json(&place);
    assert!(placed["fits"].as_bool().unwrap());
    assert!(placed["speedup_over_best_other"].as_f64().unwrap() >= 1.0);
    let mut simulate = vec!["simulate", "--plan", out.to_str().unwrap()];
    simulate.extend(&common);
    let simulated = run_json(&simulate);
    assert_eq!(placed["iteration_ms"], simulated["iteration_ms"]);
    // The same seed, the same plan: placing again writes the same file.
    let first = std::fs::read_to_string(&out).unwrap();
    run_ok(&place);
    assert_eq!(first, std::fs::read_to_string(&out).unwrap());
    // The file names what it was made for; another model or cluster is refused, naming it.
    let plan: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(plan["model"], "llama-8b");
    for (field, from, to) in [
        ("model", "llama-8b", "llama-7b"),
        ("cluster", "hetero-a100-v100", "mixed-1024"),
    ] {
        let other: Vec<&str> = simulate
            .iter()
            .map(|&a| if a == from { to } else { a })
            .collect();
        let refused = run(&other);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success(), "{field}: {stderr}");
        assert!(
            stderr.contains(&format!("{field}: the plan is for {field} \"{from}\"")),
            "{stderr}"
        );
    }
    // A model that is not a zoo language model is refused by the hybrid planner.
    let refused = run(&[
        "place",
        "--model",
        "vgg19",
        "--cluster",
        "tag-testbed",
        "--planner",
        "hybrid",
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--planner"));
}

#[test]
fn hybrid_place_keeps_its_time_limit_on_1024_gpus() {
    let (out, wall) = run_timed_alone(&[
        "place",
        "--model",
        "llama-70b",
        "--cluster",
        "mixed-1024",
        "--batch",
        "1024",
        "--precision",
        "bf16",
        "--framework",
        "pytorch",
        "--time",
        "4",
        "--json",
    ]);
    let placed = json_of(out);
    assert!(placed["fits"].as_bool().unwrap());
    assert!(wall < 4.0 * 1.25, "--time 4 took {wall:.1} s");
}

/// A graph of one input fanning out to 20,000 ops: its pipeline candidates ordered every op of a
/// micro-batch before every op of the next, 10⁸ order pairs (10 GB, 19 s for `--time 5`), and
/// the best data parallelism swept every GPU subset past the deadline. `place --time 3` now ends
/// within its limit (10% + 1 s).
#[test]
fn place_on_a_wide_fan_out_holds_its_time_limit() {
    let dir = scratch("fan-out");
    let n = 20_000;
    let mut ops = vec![
        serde_json::json!({"id": 0, "name": "x", "op_type": "Placeholder",
        "phase": "input", "output_bytes": 4096, "split": "concat"}),
    ];
    let mut edges = Vec::new();
    for i in 1..=n {
        ops.push(
            serde_json::json!({"id": i, "name": format!("f{i}"), "op_type": "Relu",
            "phase": "forward", "flops": 1000, "output_bytes": 4096, "split": "concat"}),
        );
        edges.push(serde_json::json!({"src": 0, "dst": i, "bytes": 4096}));
    }
    let graph = serde_json::json!({"name": "fan", "batch_size": 8, "ops": ops, "edges": edges});
    let path = dir.join("fan.json");
    std::fs::write(&path, graph.to_string()).unwrap();
    place_holds_its_time_limit(path.to_str().unwrap(), "tag-testbed", 3.0);
}

/// Seven GPU types of eight GPUs each: Sailor's planner built every combination of one GPU quota
/// per type before trying the first (20^7 of them), and `place --time 2` on a 1 B Llama ran out
/// of memory in seconds. It now walks them one at a time within the limit.
#[test]
fn place_of_a_language_model_on_many_gpu_types_holds_its_time_limit() {
    let dir = scratch("seven-types");
    let gpus = [
        "V100-SXM2-16GB",
        "V100-SXM2-32GB",
        "V100-PCIe-32GB",
        "P100-16GB",
        "P100-SXM2-16GB",
        "GTX-1080Ti",
        "GTX-1080",
    ];
    let mut toml = String::from("name = \"seven-types\"\n");
    for (i, gpu) in gpus.iter().enumerate() {
        toml += &format!(
            "[[machine]]\nname = \"m{i}\"\ngpu = \"{gpu}\"\ngpus = 8\n\
             intra_bandwidth = \"{} GB/s\"\nnic = \"100 Gbps\"\n",
            10 + i
        );
    }
    let path = dir.join("seven.toml");
    std::fs::write(&path, toml).unwrap();
    place_holds_its_time_limit("llama-1b", path.to_str().unwrap(), 2.0);
}

/// Tensor parallelism splits the MLP's columns as it splits the heads: a degree that does not
/// divide the MLP's width is refused in a plan file (it simulated as if each GPU held 7,167.5
/// columns of Llama 3 8B cut to an MLP of 14,335).
#[test]
fn a_tensor_parallel_degree_must_divide_the_mlp() {
    let dir = scratch("tp-mlp");
    let spec = dir.join("odd-mlp.toml");
    std::fs::write(&spec, "base = \"llama-8b\"\nlayers = 2\nffn = 14335\n").unwrap();
    let plan = r#"{"global_batch": 8, "micro_batches": 1,
        "stages": [{"layers": [0, 2], "replicas": [[0, 1]]}]}"#;
    fails_naming(
        &simulate_plan(spec.to_str().unwrap()),
        "tp2.json",
        plan,
        &["stages[0].replicas", "MLP's width 14335"],
    );
}

/// MOIRAI's CP proof builds its model before it first looks at the deadline: on vgg19 ×
/// moirai-inter the solve waited for it, 4.8–6.0 s for `--time-limit 3`. It is now left to
/// finish in the background, as an overrunning HiGHS is.
#[test]
fn solve_with_the_cp_proof_holds_its_time_limit() {
    let args = [
        "solve",
        "--model",
        "vgg19",
        "--cluster",
        "moirai-inter",
        "--formulation",
        "moirai",
        "--time-limit",
        "3",
    ];
    let (out, took) = run_timed_alone(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(took <= 3.0 * 1.1 + 1.0, "--time-limit 3 took {took:.1} s");
}

/// `place --model model --cluster cluster --time limit` succeeds within the limit's 10% + 1 s.
fn place_holds_its_time_limit(model: &str, cluster: &str, limit: f64) {
    let time = limit.to_string();
    let args = [
        "place",
        "--model",
        model,
        "--cluster",
        cluster,
        "--time",
        &time,
    ];
    let (out, took) = run_timed_alone(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(took <= 1.1 * limit + 1.0, "{took:.1} s for --time {limit}");
}

/// On 1,024 GPUs one op-level leaf takes seconds to compile and simulate: started with the time
/// nearly spent, it carried `place --time 5` to 12.9 s and `--time 10` to 11.8 s. Leaves are now
/// abandoned at the limit (less what the result's compilation keeps back), and the search ends
/// with what it measured.
#[test]
fn place_on_a_thousand_gpus_holds_its_time_limit() {
    place_holds_its_time_limit("bert-large", "mixed-1024", 8.0);
}

/// A GPT of 1,024 thin layers is 2 × 10⁵ ops: the pipeline heuristic's copies per micro-batch
/// count and its re-batched graphs took seconds each, unchecked, and carried `place --time 2`
/// to 6–15 s. They are abandoned at the heuristics' deadline now.
#[test]
fn place_on_a_deep_graph_holds_its_time_limit() {
    let dir = scratch("deep-graph");
    let spec = dir.join("deep.toml");
    let text = "family = \"gpt\"\nlayers = 1024\nhidden = 64\nheads = 1\nseq = 16\nvocab = 1000\n";
    std::fs::write(&spec, text).unwrap();
    let spec = spec.to_str().unwrap();
    let args = [
        "place",
        "--model",
        spec,
        "--cluster",
        "tag-testbed",
        "--planner",
        "tag",
    ];
    let (out, took) = run_timed_alone(&[&args[..], &["--time", "2"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(took <= 2.0 * 1.1 + 1.0, "{took:.1} s for --time 2");
}

/// A policy file of 190 MB takes longer than half of `--time 0.2` to check and decode: `place`
/// does not wait for it (it waited 2.5 s for a 723 MB one under `--time 2`), searches with
/// uniform priors and says so.
#[test]
fn place_does_not_wait_past_its_time_for_a_huge_policy() {
    let dir = scratch("huge-policy");
    let policy = dir.join("wide.gnn");
    let policy = policy.to_str().unwrap();
    let made = run(&["policy", "init", "--width", "1024", "--out", policy]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let args = ["place", "--model", "mlp", "--cluster", "tag-testbed"];
    let (out, took) =
        run_timed_alone(&[&args[..], &["--policy", policy, "--time", "0.2"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(took <= 0.2 * 1.1 + 1.0, "{took:.1} s for --time 0.2");
    assert!(
        stderr.contains("was not read within 50% of --time"),
        "{stderr}"
    );
}

/// With the time spent before the tree starts, `dp-subset` scores only the fastest GPU alone:
/// `place` returned that (540 ms for bert-large on TAG's testbed, where DP-NCCL takes 360 ms)
/// and called it the best other method. DP-NCCL, which the tree measures first, is kept.
#[test]
fn place_out_of_time_is_never_slower_than_dp_nccl() {
    for model in ["bert-large", "resnet152"] {
        let args = ["place", "--model", model, "--cluster", "tag-testbed"];
        let placed = run_json(&[&args[..], &["--time", "0.01", "--json"]].concat());
        let dp = placed["dp_nccl_us"].as_f64().unwrap();
        assert!(placed["dp_nccl_fits"] == true, "{placed}");
        assert!(placed["iteration_us"].as_f64().unwrap() <= dp, "{placed}");
        assert!(
            placed["best_heuristic_us"].as_f64().unwrap() <= dp,
            "{placed}"
        );
    }
}

/// `compare --time-limit` holds for the list schedulers too: on 1,024 GPUs ETF-style list
/// scheduling takes over ten seconds, and heft took 90 s before its mean transfer costs were
/// summed by link class. A method cut short is a row saying so.
#[test]
fn compare_time_limit_holds_for_the_list_schedulers() {
    let dir = scratch("compare-time-limit");
    let limit = 1.0;
    let out = dir.join("out");
    let rows = run_json(&[
        "compare",
        "--models",
        "bert-large",
        "--clusters",
        "mixed-1024",
        "--methods",
        "m-etf,m-sct,heft",
        "--time-limit",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    for row in rows.as_array().unwrap() {
        let took = row["search_s"].as_f64().unwrap();
        assert!(took <= 1.1 * limit + 1.0, "{row}");
        if row["iteration_ms"].is_null() {
            assert_eq!(row["error"], "no plan in its time", "{row}");
        }
    }
}

/// Under a limit too short for the baselines, a baseline without a plan is reported as having
/// run out of time, not as one that found nothing that fits.
#[test]
fn hybrid_baselines_cut_short_say_so() {
    let args = [
        "place",
        "--model",
        "llama-7b",
        "--cluster",
        "hetero-h100-a100",
        "--time",
        "0.001",
    ];
    let placed = run_json(&[&args[..], &["--json"]].concat());
    let baselines = placed["baselines"].as_array().unwrap();
    assert_eq!(baselines.len(), 4);
    assert!(
        baselines.iter().all(|b| b["out_of_time"] == true),
        "{placed}"
    );
    let text = String::from_utf8(run(&args).stdout).unwrap();
    for b in baselines.iter().filter(|b| b["iteration_ms"].is_null()) {
        let method = b["method"].as_str().unwrap();
        assert!(text.contains(&format!("{method} none in time")), "{text}");
    }
    assert!(!text.contains("no other method fits"), "{text}");
}

/// A model-spec file stands where a model name goes: `place` plans the Llama it describes with
/// hybrid plans, and a wrong spec is one error naming the file and the field.
#[test]
fn place_reads_a_model_spec_file() {
    let dir = scratch("model-spec");
    let spec = dir.join("llama-8b-16l.toml");
    std::fs::write(&spec, "base = \"llama-8b\"\nlayers = 16\nseq = 2048\n").unwrap();
    let spec = spec.display().to_string();
    let placed = run_json(&[
        "place",
        "--model",
        &spec,
        "--cluster",
        "hetero-a100-v100",
        "--batch",
        "16",
        "--precision",
        "fp16",
        "--framework",
        "pytorch",
        "--json",
    ]);
    assert!(placed["fits"].as_bool().unwrap(), "{placed}");
    let stages = placed["plan"]["stages"]
        .as_array()
        .expect("a hybrid plan lists its stages");
    let last_layer = stages.last().unwrap()["layers"][1].as_u64();
    assert_eq!(last_layer, Some(16), "{placed}");

    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "base = \"llama-8b\"\nkv_heads = 3\n").unwrap();
    let out = run(&["info", &bad.display().to_string()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("bad.toml: kv_heads:"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn layout_policy_trains_from_a_recipe_and_is_compared_with_uniform_priors() {
    let dir = scratch("layout-policy");
    let recipe = dir.join("layouts.toml");
    let text = "seed = 2\ndistribution = \"today\"\ntopology_seed = 4000000\ntopologies = 4\n\
        models = [\"llama-1b\"]\nbatches = [8]\nseq = 256\nprecision = \"bf16\"\n\
        framework = \"pytorch\"\ngenerations = 1\nexpert_budget = 30\nepochs = 1\n\
        learning_rate = 0.001\nwidth = 16\n";
    std::fs::write(&recipe, text).unwrap();
    let policy = dir.join("p.policy").display().to_string();
    let recipe_path = recipe.display().to_string();
    let out = run(&["policy", "train-layouts", &recipe_path, "--out", &policy]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exp = dir.join("exp").display().to_string();
    let out = run(&[
        "experiment",
        "layout-priors",
        "--layout-policy",
        &policy,
        "--models",
        "llama-1b",
        "--topologies",
        "2",
        "--distribution",
        "today",
        "--precision",
        "bf16",
        "--framework",
        "pytorch",
        "--budget",
        "10",
        "--uniform-budget",
        "20",
        "--no-instances",
        "--out",
        &exp,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(dir.join("exp/layout-priors-per-instance.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    // Each search kept to its budget.
    for l in csv.lines().skip(1) {
        let f: Vec<&str> = l.split(',').collect();
        let sims: Vec<usize> = f[5..8].iter().map(|x| x.parse().unwrap()).collect();
        assert!(sims[0] <= 10 && sims[1] <= 20 && sims[2] <= 10, "{l}");
    }
    // A bad recipe: one error naming the file and the field, nothing written.
    std::fs::write(&recipe, text.replace("epochs = 1", "epochs = -1")).unwrap();
    let fresh = dir.join("q.policy");
    let out = run(&[
        "policy",
        "train-layouts",
        &recipe_path,
        "--out",
        &fresh.display().to_string(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("layouts.toml") && err.contains("epochs"),
        "{err}"
    );
    assert!(!fresh.exists());
    // The op-group GNN's file where a layout policy goes is named as what it was read as.
    let gnn = format!("{}/models/tag-default.gnn", env!("CARGO_MANIFEST_DIR"));
    let out = run(&[
        "experiment",
        "layout-priors",
        "--layout-policy",
        &gnn,
        "--out",
        &exp,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("tag-default.gnn: not a topoplace layout policy: the first line"),
        "{err}"
    );
}

/// `fidelity --json` prints the comparison table; with `--calibrate` it had nothing to say and
/// was ignored, so the pair is a usage error.
#[test]
fn fidelity_json_is_the_table_and_refuses_calibrate() {
    let out = run(&["fidelity", "--json"]);
    assert!(out.status.success());
    let rows = json_of(out);
    assert!(rows.as_array().is_some_and(|r| r.len() > 50));
    let out = run(&["fidelity", "--calibrate", "--json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--json") && err.contains("--calibrate"),
        "{err}"
    );
}

/// Llama 2 7B on `hetero-a100-v100` in fp16 with PyTorch's kernels: a hybrid-planned instance.
fn llama_7b_fp16() -> Vec<&'static str> {
    [&["--model", "llama-7b"][..], &FP16_ON_A100_V100].concat()
}

/// Flags that mean nothing where they are given are refused or named, not silently dropped:
/// hybrid planners alone on a model they do not plan, a method, model or cluster named twice, an
/// empty method name, `--trace` under the
/// hybrid planners, a recipe's missing cluster or oversized GNN.
#[test]
fn flags_that_would_be_ignored_are_refused_or_named() {
    let dir = scratch("ignored-flags");
    let out = dir.join("c").display().to_string();
    for (methods, needle) in [
        ("megatron,fsdp", "none of --models"),
        ("dp-nccl,dp-nccl", "named twice"),
        // An empty name between commas, as `--models a,,b` refuses it (it was skipped).
        ("dp-nccl,,heft", "method \"\""),
    ] {
        let r = run(&[
            "compare",
            "--models",
            "vgg19",
            "--clusters",
            "tag-testbed",
            "--methods",
            methods,
            "--out",
            &out,
        ]);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{methods}: {err}");
        assert!(err.contains("--methods") && err.contains(needle), "{err}");
    }
    for (models, clusters, flag) in [
        ("vgg19,vgg19", "tag-testbed", "--models"),
        ("vgg19", "tag-testbed,tag-testbed", "--clusters"),
    ] {
        let r = run(&[
            "compare",
            "--models",
            models,
            "--clusters",
            clusters,
            "--methods",
            "dp-nccl",
            "--out",
            &out,
        ]);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{flag}: {err}");
        assert!(err.contains(flag) && err.contains("named twice"), "{err}");
    }
    let trace = dir.join("t.json");
    let t = trace.display().to_string();
    let llama = [&["place"][..], &llama_7b_fp16(), &["--time", "2"]].concat();
    let r = run(&[&llama[..], &["--trace", &t]].concat());
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(err.contains("--trace") && !trace.exists(), "{err}");
    let r = run(&[&llama[..], &["--budget", "7", "--groups", "9"]].concat());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{err}");
    assert!(err.contains("warning: --budget, --groups"), "{err}");

    let smoke = std::fs::read_to_string("training/smoke.toml").unwrap();
    for (from, to, field) in [
        ("width = 32", "width = 8192", "model"),
        (
            "topologies = 100",
            "topologies = 100\nclusters = [\"nowhere.toml\"]",
            "training_set.clusters[0]",
        ),
    ] {
        let recipe = dir.join("r.toml");
        std::fs::write(&recipe, smoke.replace(from, to)).unwrap();
        let run_dir = dir.join("run");
        let r = run(&[
            "train",
            "--config",
            &recipe.display().to_string(),
            "--out",
            &run_dir.display().to_string(),
        ]);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{err}");
        assert!(err.contains("r.toml") && err.contains(field), "{err}");
        assert!(!run_dir.join("checkpoints").exists(), "{err}");
    }
}

/// A plan's global batch that the model cannot be built at is the plan's error, naming its
/// file and `global_batch`, not the zoo model's; a plan simulated in TF32 on V100s says they run
/// FP32 there, as `simulate` without a plan does (it said nothing).
#[test]
fn plan_batch_errors_name_the_plan_file() {
    let dir = scratch("plan-batch");
    let good = dir.join("p.json");
    let g = good.display().to_string();
    let lm = llama_7b_fp16();
    let r = run(&[&["place"][..], &lm, &["--time", "2", "--out", &g]].concat());
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    // The plan under TF32 says, as `simulate` without a plan does, that the V100s run FP32.
    let model = [
        "simulate",
        "--model",
        "llama-7b",
        "--cluster",
        "hetero-a100-v100",
    ];
    let tf32 = run(&[&model[..], &["--precision", "tf32", "--plan", &g]].concat());
    let err = String::from_utf8_lossy(&tf32.stderr);
    assert!(tf32.status.success(), "{err}");
    assert!(err.contains("no TF32 on V100"), "{err}");
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&good).unwrap()).unwrap();
    for batch in [0u64, 1 << 30] {
        let mut bad = plan.clone();
        bad["global_batch"] = batch.into();
        bad["micro_batches"] = 1.into();
        let path = dir.join(format!("b{batch}.json"));
        std::fs::write(&path, bad.to_string()).unwrap();
        let p = path.display().to_string();
        let r = run(&[&["simulate"][..], &lm, &["--plan", &p]].concat());
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{err}");
        assert!(err.contains(&p) && err.contains("global_batch"), "{err}");
    }
}

/// Usage errors found by a hostile sweep: each exits 2 naming its flag.
#[test]
fn more_usage_errors_exit_2_naming_the_flag() {
    let dir = scratch("usage-2");
    let x = dir.join("x").display().to_string();
    for (args, flag) in [
        (
            vec!["policy", "init", "--out", &x, "--heads", "3"],
            "--heads",
        ),
        (
            vec![
                "place",
                "--model",
                "mlp",
                "--cluster",
                "tag-testbed",
                "--policy",
                "",
            ],
            "--policy",
        ),
        (vec!["bench", "place", "--models", ""], "--models"),
        (
            vec!["bench", "place", "--clusters", "nowhere"],
            "--clusters",
        ),
        // A forward-only model has no optimizer: the flag changed nothing, without a word.
        (
            vec!["info", "mlp-inference", "--optimizer", "sgd"],
            "--optimizer",
        ),
        (
            vec![
                "place",
                "--model",
                "mlp",
                "--cluster",
                "tag-testbed",
                "--budget",
                "18446744073709551616",
            ],
            "--budget",
        ),
    ] {
        let r = run(&args);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: {err}");
        assert!(!err.contains("not a whole number"), "{args:?}: {err}");
    }
    assert!(!dir.join("x").exists());
    // Upgrading a policy that already has a checksum changes nothing and says so.
    let copy = dir.join("p.gnn");
    std::fs::copy("models/tag-default.gnn", &copy).unwrap();
    let r = run(&["policy", "upgrade", &copy.display().to_string()]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stdout).contains("already carries a checksum"));
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read("models/tag-default.gnn").unwrap()
    );
}

/// Flags that build a zoo model (`--seq`, `--optimizer`) are refused on a graph file, naming
/// the flag: its sequence length and optimizer ops are the ones it was exported with
/// (`--optimizer sgd` on a graph file was dropped without a word). On a zoo model they apply.
#[test]
fn zoo_only_flags_are_refused_on_a_graph_file() {
    let dir = scratch("zoo-only-flags");
    let graph = dir.join("g.json");
    std::fs::write(&graph, GRAPH).unwrap();
    let g = graph.display().to_string();
    let out = dir.join("c").display().to_string();
    for (flag, value) in [("--optimizer", "sgd"), ("--seq", "64")] {
        for args in [
            vec!["simulate", "--model", &g, "--cluster", "tag-testbed"],
            vec!["info", &g],
            vec![
                "place",
                "--model",
                &g,
                "--cluster",
                "tag-testbed",
                "--budget",
                "2",
            ],
            vec![
                "compare",
                "--models",
                &g,
                "--clusters",
                "tag-testbed",
                "--out",
                &out,
            ],
        ] {
            let args = [&args[..], &[flag, value]].concat();
            let r = run(&args);
            let err = String::from_utf8_lossy(&r.stderr);
            assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains(flag) && err.contains("graph file"),
                "{args:?}: {err}"
            );
            assert!(r.stdout.is_empty(), "{args:?}");
        }
    }
    assert!(!dir.join("c").exists());
    run_ok(&["info", "mlp", "--optimizer", "sgd"]);
    run_ok(&["info", &g, "--framework", "pytorch"]);
}

/// A directory `--out` naming an existing file, or a path under one, is a usage error naming the
/// flag and saying what is wrong, at once (it was "File exists (os error 17)", after `compare`'s
/// or `experiment`'s whole run).
#[test]
fn a_directory_out_that_is_a_file_is_named_at_the_flag() {
    let dir = scratch("out-is-a-file");
    let file = dir.join("precious");
    std::fs::write(&file, "keep").unwrap();
    let f = file.display().to_string();
    let under = file.join("sub").display().to_string();
    let recipe = "training/smoke.toml";
    for out in [&f, &under] {
        for args in [
            vec![
                "compare",
                "--models",
                "mlp",
                "--clusters",
                "tag-testbed",
                "--out",
                out,
            ],
            vec!["experiment", "overhead", "--models", "mlp", "--out", out],
            vec!["train", "--config", recipe, "--out", out],
            vec![
                "selfplay", "--config", recipe, "--shard", "0", "--of", "2", "--out", out,
            ],
            vec!["zoo", "export", "--models", "mlp", "--out", out],
        ] {
            let r = run(&args);
            let err = String::from_utf8_lossy(&r.stderr);
            assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains("--out") && err.contains("exists and is not a directory"),
                "{args:?}: {err}"
            );
            assert!(!err.contains("os error"), "{args:?}: {err}");
        }
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
}

/// A memory size that overflows says it is too large, with the most taken (it said "must be above
/// 0").
#[test]
fn an_overflowing_memory_limit_is_too_large() {
    for limit in ["1e308 GiB", "1e400 B", "2000000 TiB"] {
        let r = run(&[
            "solve",
            "--model",
            "mlp",
            "--cluster",
            "tag-testbed",
            "--memory-limit",
            limit,
        ]);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{limit}: {err}");
        assert!(
            err.contains("--memory-limit")
                && err.contains("too large")
                && err.contains("1048576 TiB"),
            "{limit}: {err}"
        );
    }
}

/// `place --out` and `--trace` are written as one: a trace that fails on a full device leaves
/// the `--out` file as it was (the strategy replaced it, and then the trace failed), and no
/// temporary file is left beside it.
#[cfg(unix)]
#[test]
fn a_failing_trace_leaves_the_out_file_as_it_was() {
    let dir = scratch("out-and-full-trace");
    let out = dir.join("k.json");
    std::fs::write(&out, "PREV").unwrap();
    let args = [
        "place",
        "--model",
        "mlp",
        "--cluster",
        "tag-testbed",
        "--budget",
        "3",
        "--out",
        out.to_str().unwrap(),
        "--trace",
        "/dev/full",
    ];
    let ran = run(&args);
    failed_with(&ran, &args, "error: /dev/full");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "PREV");
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(left.len(), 1, "{left:?}");
    // Both regular: both written.
    let trace = dir.join("t.json");
    let args = [&args[..9], &["--trace", trace.to_str().unwrap()]].concat();
    run_ok(&args);
    assert!(
        std::fs::read_to_string(&out)
            .unwrap()
            .contains("\"groups\"")
    );
    assert!(
        std::fs::read_to_string(&trace)
            .unwrap()
            .contains("traceEvents")
    );
}

/// Two inputs whose results would share a label or a chart file are refused before anything
/// runs: `ms/ok.toml` and `ms2/ok.toml` were both charted as `ok_<cluster>.svg`, the second
/// replacing the first, and two cluster files `ok.toml` gave rows no one could tell apart.
#[test]
fn compare_refuses_inputs_it_could_not_tell_apart() {
    let dir = scratch("compare-same-stem");
    for sub in ["a", "b"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        let testbed = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/tag-testbed.toml");
        std::fs::copy(testbed, dir.join(sub).join("ok.toml")).unwrap();
    }
    let spec = "base = \"gpt\"\nlayers = 2\n";
    for sub in ["a", "b"] {
        std::fs::write(dir.join(sub).join("gpt.toml"), spec).unwrap();
    }
    let path = |p: &str| dir.join(p).display().to_string();
    let out = path("out");
    let cases = [
        (
            format!("{},{}", path("a/gpt.toml"), path("b/gpt.toml")),
            path("a/ok.toml"),
            "--models",
        ),
        (
            "mlp".to_string(),
            format!("{},{}", path("a/ok.toml"), path("b/ok.toml")),
            "--clusters",
        ),
    ];
    for (models, clusters, flag) in cases {
        let args = [
            "compare",
            "--models",
            &models,
            "--clusters",
            &clusters,
            "--methods",
            "dp-nccl",
            "--out",
            &out,
        ];
        let ran = run(&args);
        let err = String::from_utf8_lossy(&ran.stderr);
        assert_eq!(ran.status.code(), Some(2), "{err}");
        assert!(
            err.contains(flag) && err.contains("give one of them another"),
            "{err}"
        );
        assert!(!dir.join("out").exists());
    }
}

/// A graph too large for the MILP is refused on a floor counted from its nodes, edges and GPUs
/// alone: the full estimate's reachability matrix (n² bytes) took 10 s and 1.5 GiB at 20,000
/// nodes before the refusal, and aborted the process at 200,000.
#[test]
fn a_milp_too_large_is_refused_on_its_floor() {
    let n = 20_000;
    let mut ops = vec![
        r#"{"id": 0, "name": "in", "op_type": "IteratorGetNext", "phase": "input", "output_bytes": 4096}"#
            .to_string(),
    ];
    ops.extend((1..n).map(|i| {
        format!(
            r#"{{"id": {i}, "name": "r{i}", "op_type": "Relu", "phase": "forward", "flops": 1024, "bytes_accessed": 8192, "output_bytes": 4096}}"#
        )
    }));
    let edges: Vec<String> = (1..n)
        .map(|i| format!(r#"{{"src": {}, "dst": {i}, "bytes": 4096}}"#, i - 1))
        .collect();
    let graph = format!(
        r#"{{"name": "chain", "batch_size": 1, "ops": [{}], "edges": [{}]}}"#,
        ops.join(","),
        edges.join(",")
    );
    let dir = scratch("milp-floor");
    let path = dir.join("chain.json");
    std::fs::write(&path, graph).unwrap();
    let r = run(&[
        "solve",
        "--model",
        path.to_str().unwrap(),
        "--cluster",
        "tag-testbed",
        "--formulation",
        "moirai",
        "--memory-limit",
        "512 MiB",
    ]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(
        err.contains("at least") && err.contains("over the memory limit of 512.0 MiB"),
        "{err}"
    );
}

/// `--precision tf32` on GPUs without TF32 runs as PyTorch runs it there, in FP32, and says so:
/// the result equalled FP32's without a word.
#[test]
fn tf32_on_volta_says_it_runs_in_fp32() {
    let args = ["simulate", "--model", "mlp", "--cluster", "fastt-8xv100"];
    let tf32 = run_ok(&[&args[..], &["--precision", "tf32"]].concat());
    let fp32 = run_ok(&args);
    let stderr = String::from_utf8_lossy(&tf32.stderr);
    assert!(
        stderr.contains("no TF32 on") && stderr.contains("run in FP32"),
        "{stderr}"
    );
    assert_eq!(tf32.stdout, fp32.stdout, "the same step as FP32");
    assert!(!String::from_utf8_lossy(&fp32.stderr).contains("TF32"));
}

/// Sizes found only after a costly expansion are refused before it: a trace whose tasks alone
/// pass the event cap (its compilation with every replica aborted for memory on 1,024 GPUs), a
/// pipeline file of more op copies than a step is simulated with (5 GB for 1,024 micro-batches of
/// 2·10⁵ ops), and a cluster of more device groups than TAG's search indexes (28 s of
/// heuristics before the refusal, which named neither cluster nor cause).
#[test]
fn expansions_past_their_bounds_are_refused_before_they_are_made() {
    let dir = scratch("expansions");
    let trace = dir.join("t.json");
    let args = [
        "simulate",
        "--model",
        "bert-small",
        "--cluster",
        "mixed-1024",
    ];
    let out = run(&[&args[..], &["--trace", trace.to_str().unwrap()]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--trace") && stderr.contains("at least"),
        "{stderr}"
    );
    assert!(!trace.exists());

    let spec = dir.join("long.toml");
    let text = "family = \"gpt\"\nlayers = 200\nhidden = 64\nheads = 1\nseq = 16\nvocab = 100\n";
    std::fs::write(&spec, text).unwrap();
    let spec = spec.to_str().unwrap();
    let ops = run_json(&["info", spec, "--json"])["ops"].as_u64().unwrap();
    assert!(ops * 1024 > 20_000_000, "{ops} ops");
    let all: Vec<String> = (0..ops).map(|i| i.to_string()).collect();
    let strategy = format!(
        r#"{{"groups": [{{"ops": [{}], "devices": [0], "option": "all-reduce"}}],
            "pipeline": {{"stages": [[0]], "micro_batches": 1024, "schedule": "gpipe"}}}}"#,
        all.join(",")
    );
    let model = ["simulate", "--model", spec, "--cluster", "tag-sfb"];
    fails_naming(
        &[&model[..], &["--batch", "1024", "--strategy"]].concat(),
        "copies.json",
        &strategy,
        &["pipeline.micro_batches", "op copies"],
    );

    let machines: String = (0..300)
        .map(|i| {
            format!(
                "[[machine]]\nname = \"m{i}\"\ngpu = \"A100-80GB\"\ngpus = 1\n\
                 intra_bandwidth = \"20 GB/s\"\nnic = \"50 Gbps\"\n"
            )
        })
        .collect();
    let cluster = dir.join("g300.toml");
    std::fs::write(&cluster, format!("name = \"g300\"\n{machines}")).unwrap();
    let cluster = cluster.to_str().unwrap();
    let out = run(&[
        "place",
        "--model",
        "mlp",
        "--cluster",
        cluster,
        "--budget",
        "5",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("g300") && stderr.contains("300 device groups"),
        "{stderr}"
    );
}

/// `group` has a time limit: QuickP's grouping ran more than 120 s on a 2·10⁵-op graph with no
/// way to stop it.
#[test]
fn group_gives_up_at_its_time_limit() {
    let args = ["group", "--model", "bert-large", "--method", "quickp"];
    let out = run(&[&args[..], &["--time-limit", "0.001"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("did not end within --time-limit 0.001 s"),
        "{stderr}"
    );
    assert!(run(&args).status.success());
}
