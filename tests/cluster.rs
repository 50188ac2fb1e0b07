//! Cluster configs, the random generator and input errors.

use topoplace::cluster::{
    CATALOG, Cluster, LinkKind, TopologyDistribution, find_gpu, load_cluster, parse_cluster,
    random::RANDOM_GPU_TYPES, random_cluster, random_cluster_within,
};
use topoplace::units::{GB_PER_S, GBPS, GIB};

fn config(name: &str) -> Cluster {
    let path = format!("{}/configs/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    load_cluster(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// (config, machines, devices, device groups)
const EXPECTED: &[(&str, usize, usize, usize)] = &[
    ("tag-testbed", 7, 16, 7),
    ("tag-cloud", 6, 32, 6),
    ("tag-sfb", 2, 2, 2),
    ("moirai-inter", 4, 4, 4),
    ("moirai-intra", 1, 4, 2),
    ("quickp-fat-tree-2", 1, 2, 1),
    ("quickp-fat-tree-4", 2, 4, 2),
    ("quickp-fat-tree-6", 3, 6, 3),
    ("celeritas-4xv100", 1, 4, 1),
    ("fastt-8xv100", 1, 8, 1),
    ("fastt-2x4xv100", 2, 8, 2),
    ("hetero-a100-v100", 2, 16, 2),
    ("hetero-a100-40-v100", 4, 32, 4),
    ("hetero-h100-a100", 16, 128, 16),
    ("mixed-1024", 128, 1024, 128),
];

#[test]
fn every_config_loads_with_expected_counts() {
    let dir = format!("{}/configs", env!("CARGO_MANIFEST_DIR"));
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut expected: Vec<String> = EXPECTED.iter().map(|e| e.0.to_string()).collect();
    expected.sort();
    assert_eq!(
        on_disk, expected,
        "every config in configs/ is checked here"
    );
    for &(name, machines, devices, groups) in EXPECTED {
        let c = config(name);
        assert_eq!(c.name, name);
        assert_eq!(c.machines.len(), machines, "{name} machines");
        assert_eq!(c.devices.len(), devices, "{name} devices");
        assert_eq!(c.groups.len(), groups, "{name} groups");
        // Links: one per ordered intra-machine pair, two NIC links per machine, two ports per
        // device.
        let pairs: usize = c
            .machines
            .iter()
            .map(|m| m.devices.len() * (m.devices.len() - 1))
            .sum();
        assert_eq!(
            c.links.len(),
            pairs + 2 * machines + 2 * devices,
            "{name} links"
        );
        for (l, link) in c.links.iter().enumerate() {
            if let LinkKind::Intra { src, dst } = link.kind {
                let (out, inn) = (c.devices[src].port_out, c.devices[dst].port_in);
                assert_eq!(c.path(src, dst).links, vec![l, out, inn], "{name} link {l}");
                assert!(matches!(c.links[out].kind, LinkKind::PortOut { device } if device == src));
                assert!(matches!(c.links[inn].kind, LinkKind::PortIn { device } if device == dst));
            }
        }
        // Every config round-trips through its TOML form.
        assert_eq!(
            parse_cluster(&c.to_toml(), "roundtrip").unwrap(),
            c,
            "{name}"
        );
    }
}

#[test]
fn tag_testbed_routes() {
    let c = config("tag-testbed");
    let gpu_of = |d: usize| c.devices[d].gpu.name;
    assert_eq!(gpu_of(0), "V100-SXM2-32GB");
    assert_eq!(gpu_of(4), "GTX-1080Ti");
    assert_eq!(gpu_of(15), "P100-16GB");
    assert_eq!(c.machines[1].name, "1080ti-0");
    assert_eq!(c.devices[4].name, "1080ti-0:0");
    // Inside the V100 machine: its NVLink pair link and both GPUs' ports. SXM2 V100s default to
    // an NVLink mesh: 150 GB/s of bricks per GPU over 50 GB/s pairs, three lanes per port.
    let r = c.path(0, 1);
    assert_eq!(r.links.len(), 3);
    assert_eq!(c.links[r.links[1]].lanes, 3);
    assert_eq!(c.links[c.devices[4].port_out].lanes, 1, "PCIe: one lane");
    assert_eq!(r.bandwidth, 50.0 * GB_PER_S);
    assert_eq!(r.latency_us, 5.0);
    assert!(matches!(
        c.links[r.links[0]].kind,
        LinkKind::Intra { src: 0, dst: 1 }
    ));
    // PCIe pair inside a 1080Ti machine.
    assert_eq!(c.bandwidth(4, 5), 12.0 * GB_PER_S);
    // Across machines: source NIC-out then destination NIC-in, 100 Gbps = 12,500 B/µs.
    let r = c.path(0, 4);
    assert_eq!(r.bandwidth, 12_500.0);
    assert_eq!(r.latency_us, 10.0);
    assert_eq!(r.links, vec![c.machines[0].nic_out, c.machines[1].nic_in]);
    assert!(matches!(
        c.links[r.links[0]].kind,
        LinkKind::NicOut { machine: 0 }
    ));
    assert!(matches!(
        c.links[r.links[1]].kind,
        LinkKind::NicIn { machine: 1 }
    ));
    assert_eq!(c.latency(4, 0), 10.0);
    assert_eq!(c.link_name(c.path(0, 1).links[0]), "v100:0->v100:1");
    assert_eq!(c.link_name(c.machines[1].nic_in), "1080ti-0 nic-in");
    assert_eq!(c.path(3, 3).links.len(), 0);
    // Every intra link is found from its endpoints.
    for (l, link) in c.links.iter().enumerate() {
        if let LinkKind::Intra { src, dst } = link.kind {
            assert_eq!(c.path(src, dst).links[0], l);
        }
    }
    assert_eq!(c.link_name(c.devices[5].port_in), "1080ti-0:1 port-in");
    // Group bookkeeping.
    assert_eq!(c.groups[0].devices, vec![0, 1, 2, 3]);
    assert_eq!(c.devices[3].memory_bytes, 32.0 * GIB);
}

#[test]
fn tag_cloud_and_quickp_bandwidths() {
    let c = config("tag-cloud");
    assert_eq!(c.bandwidth(0, 16), 10.0 * GBPS);
    assert_eq!(c.devices.iter().filter(|d| d.gpu.name == "T4").count(), 16);
    let q = config("quickp-fat-tree-6");
    assert_eq!(q.bandwidth(0, 1), 50.0 * GB_PER_S);
    assert_eq!(q.bandwidth(1, 2), 20.0 * GB_PER_S);
    assert_eq!(q.bandwidth(5, 0), 20.0 * GB_PER_S);
    assert_eq!(config("fastt-2x4xv100").bandwidth(3, 4), 100.0 * GBPS);
}

#[test]
fn moirai_matrices_override_routes() {
    let c = config("moirai-inter");
    assert_eq!(c.bandwidth(0, 1), 44.26 * GBPS);
    assert_eq!(c.bandwidth(1, 0), 42.39 * GBPS);
    assert_eq!(c.bandwidth(2, 3), 32.95 * GBPS);
    assert_eq!(c.bandwidth(3, 2), 33.28 * GBPS);
    // The route still uses the NIC links; only the bandwidth is the measured one.
    assert_eq!(
        c.path(0, 1).links,
        vec![c.machines[0].nic_out, c.machines[1].nic_in]
    );
    let mem: Vec<f64> = c.devices.iter().map(|d| d.memory_bytes / GIB).collect();
    assert_eq!(mem, vec![11.0, 16.0, 8.0, 8.0]);

    let c = config("moirai-intra");
    assert_eq!(c.machines[0].groups, vec![0, 1]);
    assert_eq!(c.groups[1].gpu.name, "P100-SXM2-16GB");
    assert_eq!(c.bandwidth(0, 1), 1170.04 * GBPS);
    assert_eq!(c.bandwidth(3, 2), 581.35 * GBPS);
    assert_eq!(
        c.path(0, 2).links.len(),
        3,
        "same server: a pair link and the ports"
    );
    // Without the matrix, a cross-group pair gets the slower group's bandwidth.
    let text = std::fs::read_to_string(format!(
        "{}/configs/moirai-intra.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let without = &text[..text.find("[bandwidth_matrix]").unwrap()];
    let m = parse_cluster(without, "no-matrix").unwrap();
    assert_eq!(m.bandwidth(0, 1), 150.0 * GB_PER_S);
    assert_eq!(m.bandwidth(0, 2), 80.0 * GB_PER_S);
}

#[test]
fn summary_reports_bandwidth_in_gbs() {
    let c = config("tag-testbed");
    let s = c.summary();
    assert_eq!(s.devices.len(), 16);
    assert_eq!(s.groups.len(), 7);
    assert_eq!(s.bandwidth_gbs[0][0], 0.0);
    assert_eq!(s.bandwidth_gbs[0][1], 50.0);
    assert_eq!(s.bandwidth_gbs[0][4], 12.5);
    assert_eq!(s.groups[1].intra_bandwidth_gbs, 12.0);
    let json = serde_json::to_value(&s).unwrap();
    for key in ["name", "devices", "groups", "bandwidth_gbs"] {
        assert!(json.get(key).is_some(), "{key}");
    }
    for key in [
        "index",
        "name",
        "machine",
        "gpu",
        "memory_gib",
        "fp32_tflops",
    ] {
        assert!(json["devices"][0].get(key).is_some(), "{key}");
    }
    for key in ["index", "machine", "gpu", "devices", "intra_bandwidth_gbs"] {
        assert!(json["groups"][0].get(key).is_some(), "{key}");
    }
    assert_eq!(json["devices"][0]["memory_gib"], 32.0);
    let text = s.render_text();
    assert!(text.contains("16 devices in 7 device groups"));
    assert!(text.contains("12.5"));
    assert!(text.contains("V100-SXM2-32GB"));
}

#[test]
fn catalog_lookup() {
    assert!(CATALOG.len() >= 13);
    for (alias, name) in [
        ("V100-32GB", "V100-SXM2-32GB"),
        ("v100-16gb", "V100-SXM2-16GB"),
        ("1080Ti", "GTX-1080Ti"),
        ("P100", "P100-16GB"),
        ("A100", "A100-40GB"),
        ("H100", "H100-SXM-80GB"),
        ("rtx 3070", "RTX-3070"),
    ] {
        assert_eq!(find_gpu(alias).map(|g| g.name), Some(name), "{alias}");
    }
    let v100 = find_gpu("V100-SXM2-16GB").unwrap();
    assert_eq!((v100.fp32_tflops, v100.mem_bandwidth_gbs), (15.7, 900.0));
}

fn in_range(x: f64, lo: f64, hi: f64) -> bool {
    (lo..=hi).contains(&x)
}

#[test]
fn random_clusters_follow_tags_distribution() {
    let mut types = std::collections::BTreeSet::new();
    let (mut min_m, mut max_m, mut max_g) = (usize::MAX, 0, 0);
    for seed in 0..1000 {
        let c = random_cluster(seed);
        assert_eq!(c.name, format!("random-{seed}"));
        assert!(in_range(c.machines.len() as f64, 1.0, 6.0));
        min_m = min_m.min(c.machines.len());
        max_m = max_m.max(c.machines.len());
        assert_eq!(c.groups.len(), c.machines.len(), "one GPU type per machine");
        for m in &c.machines {
            assert!(in_range(m.devices.len() as f64, 1.0, 8.0));
            max_g = max_g.max(m.devices.len());
            assert!(
                in_range(m.nic_bandwidth, 20.0 * GBPS, 50.0 * GBPS),
                "{}",
                m.nic_bandwidth
            );
        }
        for g in &c.groups {
            assert!(in_range(g.intra_bandwidth, 64.0 * GBPS, 160.0 * GBPS));
            assert!(RANDOM_GPU_TYPES.contains(&g.gpu.name));
            types.insert(g.gpu.name);
        }
        if seed < 100 {
            assert_eq!(parse_cluster(&c.to_toml(), "rt").unwrap(), c, "seed {seed}");
        }
    }
    assert_eq!(types.len(), 3, "all three types appear");
    assert_eq!(
        (min_m, max_m, max_g),
        (1, 6, 8),
        "the ends of the ranges are reached"
    );
}

#[test]
fn other_bandwidth_ranges_change_only_the_bandwidths() {
    let wide = TopologyDistribution {
        intra_gbps: [64, 400],
        inter_gbps: [10, 100],
        ..TopologyDistribution::TAG
    };
    let (mut lo_intra, mut hi_intra, mut lo_nic, mut hi_nic) = (f64::MAX, 0.0f64, f64::MAX, 0.0f64);
    for seed in 0..300 {
        let tag = random_cluster(seed);
        assert_eq!(random_cluster_within(seed, TopologyDistribution::TAG), tag);
        let c = random_cluster_within(seed, wide);
        assert_eq!(c.name, format!("random-{seed}-intra64-400-inter10-100"));
        // The same machines, GPU types and counts: one draw sequence, other ranges.
        assert_eq!(c.machines.len(), tag.machines.len());
        for (g, t) in c.groups.iter().zip(&tag.groups) {
            assert_eq!((g.gpu.name, g.devices.len()), (t.gpu.name, t.devices.len()));
            assert!(in_range(g.intra_bandwidth, 64.0 * GBPS, 400.0 * GBPS));
            lo_intra = lo_intra.min(g.intra_bandwidth / GBPS);
            hi_intra = hi_intra.max(g.intra_bandwidth / GBPS);
        }
        for m in &c.machines {
            assert!(in_range(m.nic_bandwidth, 10.0 * GBPS, 100.0 * GBPS));
            lo_nic = lo_nic.min(m.nic_bandwidth / GBPS);
            hi_nic = hi_nic.max(m.nic_bandwidth / GBPS);
        }
        if seed < 50 {
            assert_eq!(parse_cluster(&c.to_toml(), "rt").unwrap(), c, "seed {seed}");
        }
    }
    // The draws spread over the whole ranges, beyond TAG's ends on both sides where they exist.
    assert!(lo_intra < 70.0 && hi_intra > 390.0, "{lo_intra} {hi_intra}");
    assert!(lo_nic < 15.0 && hi_nic > 95.0, "{lo_nic} {hi_nic}");
    let reversed = TopologyDistribution {
        intra_gbps: [64, 400],
        inter_gbps: [50, 20],
        ..TopologyDistribution::TAG
    };
    assert_eq!(reversed.problem().map(|p| p.0), Some("inter_gbps"));
    assert_eq!(wide.problem(), None);
}

/// The fastest range a distribution takes draws clusters that load; one Gbps more is refused,
/// where every draw failed the loader's 1 PB/s check and panicked.
#[test]
fn bandwidth_ranges_stop_at_the_loaders_fastest_link() {
    let max = topoplace::cluster::random::MAX_LINK_GBPS;
    assert_eq!(max, 8_000_000, "1 PB/s");
    let fastest = TopologyDistribution {
        intra_gbps: [max, max],
        inter_gbps: [max, max],
        ..TopologyDistribution::TAG
    };
    assert_eq!(fastest.problem(), None);
    for seed in 0..5 {
        let c = random_cluster_within(seed, fastest);
        assert_eq!(parse_cluster(&c.to_toml(), "rt").unwrap(), c, "seed {seed}");
    }
    let above = TopologyDistribution {
        inter_gbps: [max, max + 1],
        ..fastest
    };
    assert_eq!(above.problem().map(|p| p.0), Some("inter_gbps"));
}

#[test]
fn random_clusters_are_deterministic() {
    assert_eq!(random_cluster(42), random_cluster(42));
    assert_eq!(random_cluster(42).to_toml(), random_cluster(42).to_toml());
    assert_ne!(random_cluster(42).to_toml(), random_cluster(43).to_toml());
    let distinct: std::collections::BTreeSet<String> = (0..50)
        .map(|s| {
            let t = random_cluster(s).to_toml();
            t[t.find("[[machine]]").unwrap()..].to_string()
        })
        .collect();
    assert_eq!(
        distinct.len(),
        50,
        "different seeds give different topologies"
    );
}

const GOOD: &str = r#"
name = "t"
[[machine]]
name = "a"
gpu = "V100-32GB"
gpus = 2
intra_bandwidth = "150 GB/s"
nic = "100 Gbps"
[[machine]]
name = "b"
gpu = "T4"
gpus = 1
intra_bandwidth = "12 GB/s"
nic = "100 Gbps"
"#;

/// Parse `text`, expect an error whose field contains `field` and whose text contains `words`.
fn expect_error(text: &str, field: &str, words: &[&str]) {
    let e = parse_cluster(text, "bad.toml").expect_err("should be refused");
    let shown = e.to_string();
    assert!(shown.starts_with("bad.toml"), "{shown}");
    assert_eq!(shown.lines().count(), 1, "one line: {shown}");
    assert!(
        e.field.contains(field),
        "field {:?} should name {field}: {shown}",
        e.field
    );
    for w in words {
        assert!(shown.contains(w), "{shown:?} should contain {w:?}");
    }
}

#[test]
fn good_input_parses() {
    let c = parse_cluster(GOOD, "good.toml").unwrap();
    assert_eq!(c.devices.len(), 3);
    assert_eq!(c.inter_latency_us, 10.0);
    assert_eq!(c.groups[0].intra_latency_us, 5.0);
    // Plain numbers: GB/s for bandwidths, µs for latency, GiB for memory.
    let plain = GOOD
        .replace("\"150 GB/s\"", "150")
        .replace("name = \"t\"", "name = \"t\"\ninter_latency = 7")
        .replace("gpus = 1", "gpus = 1\nmemory = 15");
    let p = parse_cluster(&plain, "plain.toml").unwrap();
    assert_eq!(p.groups[0].intra_bandwidth, 150.0 * GB_PER_S);
    assert_eq!(p.inter_latency_us, 7.0);
    assert_eq!(p.devices[2].memory_bytes, 15.0 * GIB);
    assert_eq!(parse_cluster(&p.to_toml(), "rt").unwrap(), p);
}

#[test]
fn bad_inputs_name_the_field() {
    expect_error(
        &GOOD.replace("\"150 GB/s\"", "\"0 GB/s\""),
        "machine[0].intra_bandwidth",
        &["greater than zero"],
    );
    expect_error(
        &GOOD.replacen("\"100 Gbps\"", "\"-5 Gbps\"", 1),
        "machine[0].nic",
        &["negative"],
    );
    // Absurd links: their iteration times printed with hundreds of digits.
    expect_error(
        &GOOD.replacen("\"100 Gbps\"", "\"1e-300 Gbps\"", 1),
        "machine[0].nic",
        &["1 Mbps to 1 PB/s"],
    );
    expect_error(
        &GOOD.replace("\"150 GB/s\"", "\"1e20 GB/s\""),
        "machine[0].intra_bandwidth",
        &["1 Mbps to 1 PB/s"],
    );
    // Memory no GPU has: 1e-300 GiB ran every op out of memory unseen.
    for memory in ["1e-300", "\"1 B\"", "\"1000 TiB\"", "\"17 TiB\""] {
        expect_error(
            &GOOD.replacen("gpus = 2", &format!("gpus = 2\nmemory = {memory}"), 1),
            "machine[0].memory",
            &["1 MiB to 16 TiB"],
        );
    }
    // Values that overflow a float in their unit are past the range too, and say so with it
    // (they said "it overflows to infinity", or were taken: a latency of 1e300 s).
    for memory in ["\"1e308 TiB\"", "1e308", "\"1e400 B\""] {
        expect_error(
            &GOOD.replacen("gpus = 2", &format!("gpus = 2\nmemory = {memory}"), 1),
            "machine[0].memory",
            &["1 MiB to 16 TiB"],
        );
    }
    expect_error(
        &GOOD.replace("\"150 GB/s\"", "\"1e308 TB/s\""),
        "machine[0].intra_bandwidth",
        &["1 Mbps to 1 PB/s"],
    );
    for latency in ["\"1e300 s\"", "\"1e308 s\"", "\"2 s\""] {
        expect_error(
            &GOOD.replacen(
                "name = \"t\"",
                &format!("name = \"t\"\ninter_latency = {latency}"),
                1,
            ),
            "inter_latency",
            &["too large", "at most 1 s"],
        );
    }
    // Up to the GPU's own 32 GiB: 16 TiB, within the range, is above it.
    for memory in ["\"1 MiB\"", "\"32 GiB\""] {
        let text = GOOD.replacen("gpus = 2", &format!("gpus = 2\nmemory = {memory}"), 1);
        parse_cluster(&text, "ok.toml").unwrap();
    }
    expect_error(
        &GOOD.replace("\"T4\"", "\"V200\""),
        "machine[1].gpu",
        &["unknown GPU type", "V200", "V100-SXM2-32GB"],
    );
    expect_error(
        &GOOD.replace("gpus = 2", "gpus = 0"),
        "machine[0].gpus",
        &["at least 1"],
    );
    expect_error(
        &GOOD.replace("gpus = 2", "gpus = 100000"),
        "machine[0].gpus",
        &["at most"],
    );
    expect_error(
        &GOOD.replace("gpus = 2", "gpus = 200\ncount = 4000"),
        "machine",
        &["at most 1024"],
    );
    let mixed = GOOD
        .replace("name = \"a\"", "name = \"a\"\nserver = \"s\"")
        .replace("name = \"b\"", "name = \"b\"\nserver = \"s\"");
    assert_eq!(parse_cluster(&mixed, "ok.toml").unwrap().machines.len(), 1);
    expect_error(
        &mixed.replacen("\"100 Gbps\"", "\"10 Gbps\"", 1),
        "machine[1].nic",
        &["same server"],
    );
    expect_error(
        &mixed.replacen("gpus = 2", "gpus = 2\ncount = 2", 1),
        "machine[0].count",
        &["server"],
    );
    expect_error(
        &GOOD.replace("gpus = 2", "gpus = 2\ncount = 0"),
        "machine[0].count",
        &["at least 1"],
    );
    expect_error(
        &GOOD.replace("\"12 GB/s\"", "\"12 furlongs\""),
        "machine[1].intra_bandwidth",
        &["unknown bandwidth unit", "Gbps", "GB/s"],
    );
    expect_error(
        &GOOD.replacen(
            "name = \"t\"",
            "name = \"t\"\ninter_latency = \"3 fortnights\"",
            1,
        ),
        "inter_latency",
        &["unknown time unit", "ms"],
    );
    expect_error(
        &GOOD.replace(
            "intra_bandwidth = \"150 GB/s\"",
            "intra_bandwith = \"150 GB/s\"",
        ),
        "machine[0]",
        &["intra_bandwith"],
    );
    expect_error(&GOOD.replace("gpus = 2\n", ""), "machine[0]", &["gpus"]);
    expect_error(
        &GOOD.replace("\"150 GB/s\"", "true"),
        "machine[0].intra_bandwidth",
        &["a number or a string with a unit"],
    );
    expect_error(
        &GOOD.replace("name = \"b\"", "name = \"a\""),
        "machine[1].name",
        &["duplicate"],
    );
    // Reports and strategy files name the cluster and its machines: an empty name is refused.
    expect_error(
        &GOOD.replacen("name = \"t\"", "name = \"\"", 1),
        "name",
        &["empty"],
    );
    expect_error(
        &GOOD.replace("name = \"b\"", "name = \" \""),
        "machine[1].name",
        &["empty"],
    );
    expect_error(
        &GOOD.replace("name = \"a\"", "name = \"a\"\nserver = \"\""),
        "machine[0].server",
        &["empty"],
    );
    // A TOML date reaches the deserialiser as a map; the message says what it is.
    expect_error(
        &GOOD.replace("gpus = 2", "gpus = 1979-05-27"),
        "machine[0].gpus",
        &["date-time 1979-05-27", "expected"],
    );
    // Names the reports print may not break their lines or turn them around.
    expect_error(
        &GOOD.replacen("name = \"t\"", "name = \"t\\nu\"", 1),
        "name",
        &["control character"],
    );
    expect_error(
        &GOOD.replace("name = \"b\"", "name = \"b\\u202Ec\""),
        "machine[1].name",
        &["U+202E"],
    );
    // A bandwidth without a unit is in GB/s; a negative one is named without internal units.
    let e = parse_cluster(
        &GOOD.replace("intra_bandwidth = \"150 GB/s\"", "intra_bandwidth = -5"),
        "bad.toml",
    )
    .unwrap_err();
    assert!(
        e.message.ends_with("is negative") || e.message.contains("negative"),
        "{e}"
    );
    assert!(!e.message.contains("(-"), "{e}");
    // serde's names of the loader's own types stay out of the message.
    let e = parse_cluster("name = \"c\"\nmachine = [5]\n", "bad.toml").unwrap_err();
    assert_eq!(e.field, "machine[0]");
    assert!(e.message.ends_with("expected an object"), "{e}");
    expect_error(
        &GOOD.replace("gpus = 1", "gpus = { count = 1 }"),
        "machine[1].gpus",
        &["invalid type: map"],
    );
    let e = parse_cluster("name = \"t\"\n[[machine]\n", "bad.toml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "bad.toml: malformed TOML at line 2, column 11: unclosed array table, expected `]`"
    );
}

#[test]
fn bad_matrices_are_refused() {
    let with = |m: &str| format!("{GOOD}[bandwidth_matrix]\n{m}\n");
    expect_error(
        &with("unit = \"Gbps\"\nvalues = [[0, 1], [1, 0]]"),
        "bandwidth_matrix.values",
        &["3×3"],
    );
    expect_error(
        &with("unit = \"Gbps\"\nvalues = [[0, 1, 1], [1, 0], [1, 1, 0]]"),
        "bandwidth_matrix.values[1]",
        &["3 entries"],
    );
    expect_error(
        &with("unit = \"Gbps\"\nvalues = [[0, 1, 1], [1, 0, 0], [1, 1, 0]]"),
        "bandwidth_matrix.values[1][2]",
        &["greater than zero"],
    );
    expect_error(
        &with("unit = \"Gbps\"\nvalues = [[0, 1, 1], [1, 0, -2], [1, 1, 0]]"),
        "bandwidth_matrix.values[1][2]",
        &["negative"],
    );
    // Outside the links' range: 1e-300 GB/s printed 3.2e304 ms, 5e-324 NaN.
    for tiny in ["1e-300", "5e-324", "1e20"] {
        expect_error(
            &with(&format!(
                "unit = \"GB/s\"\nvalues = [[0, 1, 1], [1, 0, {tiny}], [1, 1, 0]]"
            )),
            "bandwidth_matrix.values[1][2]",
            &["1 Mbps to 1 PB/s"],
        );
    }
    expect_error(
        &with("unit = \"parsecs\"\nvalues = [[0, 1, 1], [1, 0, 1], [1, 1, 0]]"),
        "bandwidth_matrix.unit",
        &["Gbps"],
    );
    let ok = parse_cluster(
        &with("unit = \"GB/s\"\nvalues = [[0, 1, 2], [3, 0, 4], [5, 6, 0]]"),
        "ok.toml",
    )
    .unwrap();
    assert_eq!(ok.bandwidth(1, 2), 4.0 * GB_PER_S);
}

/// The wide GPU mix draws every machine's type from TAG's three and the T4, A100 and H100 (each
/// seen over 300 seeds, nothing else), names its clusters apart, and round-trips through TOML;
/// TAG's mix is untouched by it.
#[test]
fn the_wide_gpu_mix_adds_todays_gpu_types() {
    use std::collections::BTreeSet;
    use topoplace::cluster::GpuMix;
    let wide = TopologyDistribution {
        gpus: GpuMix::Wide,
        ..TopologyDistribution::TAG
    };
    let mut seen = BTreeSet::new();
    for seed in 0..300 {
        let c = random_cluster_within(seed, wide);
        assert_eq!(c.name, format!("random-{seed}-wide"));
        for g in &c.groups {
            assert!(GpuMix::Wide.types().contains(&g.gpu.name), "{}", g.gpu.name);
            seen.insert(g.gpu.name);
        }
        for g in &random_cluster(seed).groups {
            assert!(GpuMix::Tag.types().contains(&g.gpu.name));
        }
        if seed < 20 {
            assert_eq!(parse_cluster(&c.to_toml(), "rt").unwrap(), c, "seed {seed}");
        }
    }
    assert_eq!(seen.len(), 6, "{seen:?}");
    for newer in ["T4", "A100-40GB", "H100-SXM-80GB"] {
        assert!(seen.contains(newer), "{newer}");
    }
}

/// With `nvlink`, about half the machines whose GPU type has NVLink (TAG's V100-SXM2; the wide
/// mix's A100 and H100 too) get their type's own fabric: a mesh at 200–400 Gbps per pair, or an
/// NVSwitch at the type's whole NVLink bandwidth. Every other machine keeps TAG's PCIe wiring in
/// TAG's intra range; the clusters are named apart and round-trip through TOML.
#[test]
fn nvlink_machines_get_their_fabric_in_half_the_draws() {
    use topoplace::cluster::{GpuMix, Interconnect};
    for gpus in [GpuMix::Tag, GpuMix::Wide] {
        let nvlink = TopologyDistribution {
            gpus,
            nvlink: true,
            ..TopologyDistribution::TAG
        };
        let (mut wired, mut capable) = (0usize, 0usize);
        for seed in 0..300 {
            let c = random_cluster_within(seed, nvlink);
            assert!(c.name.ends_with("-nvlink"), "{}", c.name);
            for g in &c.groups {
                let gbps = g.intra_bandwidth / GBPS;
                match g.interconnect {
                    Interconnect::Pcie => assert!((64.0..=160.0).contains(&gbps), "{gbps}"),
                    Interconnect::Nvlink => {
                        assert!(g.gpu.nvlink_gbs > 0.0 && !g.gpu.nvswitch);
                        assert!((200.0..=400.0).contains(&gbps), "{gbps}");
                    }
                    Interconnect::Nvswitch => {
                        assert!(g.gpu.nvswitch);
                        assert!((g.intra_bandwidth / GB_PER_S - g.gpu.nvlink_gbs).abs() < 1e-9);
                    }
                }
                if g.gpu.nvlink_gbs > 0.0 {
                    capable += 1;
                    wired += usize::from(g.interconnect != Interconnect::Pcie);
                }
            }
            if seed < 20 {
                assert_eq!(parse_cluster(&c.to_toml(), "rt").unwrap(), c, "seed {seed}");
            }
        }
        let share = wired as f64 / capable as f64;
        assert!(
            capable > 100 && (0.4..=0.6).contains(&share),
            "{wired} of {capable}"
        );
    }
}

/// Today's distribution draws only its Ampere and Hopper GPUs (every one trains in bf16), wires
/// about half the SXM machines with NVSwitch at the type's NVLink bandwidth and the rest over
/// PCIe at 128–256 Gbps, gives every machine a 100–400 Gbps NIC, and is named apart from TAG's.
#[test]
fn todays_distribution_draws_todays_gpus_and_links() {
    use std::collections::BTreeSet;
    use topoplace::cluster::{GpuMix, Interconnect};
    use topoplace::precision::Precision;
    let today = TopologyDistribution::named("today").unwrap();
    assert_eq!(today, TopologyDistribution::TODAY);
    assert_eq!(
        TopologyDistribution::named("tag"),
        Some(TopologyDistribution::TAG)
    );
    assert_eq!(TopologyDistribution::named("2019"), None);
    let (mut seen, mut switched, mut capable) = (BTreeSet::new(), 0usize, 0usize);
    for seed in 0..300 {
        let c = random_cluster_within(seed, today);
        assert!(c.name.ends_with("-today-nvlink"), "{}", c.name);
        Precision::Bf16
            .check_cluster(&c, &c.name, "precision")
            .unwrap();
        for g in &c.groups {
            assert!(
                GpuMix::Today.types().contains(&g.gpu.name),
                "{}",
                g.gpu.name
            );
            seen.insert(g.gpu.name);
            match g.interconnect {
                Interconnect::Pcie => {
                    let gbps = g.intra_bandwidth / GBPS;
                    assert!((128.0..=256.0).contains(&gbps), "{gbps}");
                }
                Interconnect::Nvswitch => switched += 1,
                Interconnect::Nvlink => panic!("{}: today's SXM GPUs sit on NVSwitch", g.gpu.name),
            }
            capable += usize::from(g.gpu.nvlink_gbs > 0.0);
        }
        for m in &c.machines {
            let gbps = m.nic_bandwidth / GBPS;
            assert!((100.0..=400.0).contains(&gbps), "{gbps}");
        }
        if seed < 20 {
            assert_eq!(parse_cluster(&c.to_toml(), "rt").unwrap(), c, "seed {seed}");
        }
    }
    assert_eq!(seen.len(), GpuMix::Today.types().len(), "{seen:?}");
    let share = switched as f64 / capable as f64;
    assert!((0.4..=0.6).contains(&share), "{switched} of {capable}");
}

/// The diagonal of a measured matrix is never read: a value there is a row shifted by one or a
/// matrix of another cluster, and was dropped without a word.
#[test]
fn nonzero_matrix_diagonal_is_refused() {
    let with = |m: &str| format!("{GOOD}[bandwidth_matrix]\n{m}\n");
    expect_error(
        &with("unit = \"Gbps\"\nvalues = [[0, 1, 1], [1, 5, 1], [1, 1, 0]]"),
        "bandwidth_matrix.values[1][1]",
        &["give 0"],
    );
    assert!(
        parse_cluster(
            &with("unit = \"Gbps\"\nvalues = [[0, 1, 1], [1, 0, 1], [1, 1, 0]]"),
            "ok"
        )
        .is_ok()
    );
}

/// `memory` is what is usable of the GPU's own: above the catalog's figure for the board it is
/// refused, naming the GPU's memory; up to it is accepted.
#[test]
fn memory_above_the_gpus_own_is_refused() {
    expect_error(
        &GOOD.replacen("gpus = 2", "gpus = 2\nmemory = \"100 GiB\"", 1),
        "machine[0].memory",
        &["100 GiB", "V100-SXM2-32GB", "32 GiB"],
    );
    let full = GOOD.replacen("gpus = 2", "gpus = 2\nmemory = \"32 GiB\"", 1);
    assert_eq!(
        parse_cluster(&full, "ok").unwrap().devices[0].memory_bytes,
        32.0 * GIB
    );
}
