//! How the GPUs of one machine are wired, and what that gives each GPU's port.
//!
//! Every GPU has an egress and an ingress **port** (one link each way) that all its traffic inside
//! the machine shares; a transfer between two GPUs holds the pair's link, the sender's egress port
//! and the receiver's ingress port. A port has `lanes` parallel lanes of the pair bandwidth, so the
//! port's capacity is lanes × pair bandwidth:
//!
//! - **PCIe** (the default for PCIe cards): all of a GPU's traffic goes through its x16 slot, one
//!   lane: a GPU sends to one peer at a time at the pair bandwidth.
//! - **NVLink mesh** (DGX-1 style hybrid cube mesh, the default for SXM2 V100 and P100): the GPU's
//!   NVLink bricks connect it to several peers at once; lanes = aggregate NVLink bandwidth / pair
//!   bandwidth (V100: six 25 GB/s bricks; P100: four 20 GB/s bricks).
//! - **NVSwitch** (the default for SXM A100 and H100): every pair gets the GPU's whole NVLink
//!   bandwidth through the switch, one lane at the port's full rate.
//!
//! Transfers between machines hold the NICs only: the NIC is the slower hop, and holding a GPU's
//! port for a whole NIC transfer would block its intra-machine traffic for no reason.

use serde::{Deserialize, Serialize};

use super::GpuSpec;

/// The intra-machine fabric of a device group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Interconnect {
    /// Each GPU talks through its PCIe slot: one peer at a time at the pair bandwidth.
    Pcie,
    /// NVLink hybrid cube mesh (DGX-1 style): a GPU's bricks reach several peers at once.
    Nvlink,
    /// NVSwitch: every pair gets the GPU's whole NVLink bandwidth, one transfer at a time.
    Nvswitch,
}

impl Interconnect {
    /// What a GPU of this type sits on unless the config says otherwise.
    pub(crate) fn default_for(gpu: &GpuSpec) -> Interconnect {
        match (gpu.nvlink_gbs > 0.0, gpu.nvswitch) {
            (true, true) => Interconnect::Nvswitch,
            (true, false) => Interconnect::Nvlink,
            _ => Interconnect::Pcie,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Interconnect::Pcie => "pcie",
            Interconnect::Nvlink => "nvlink",
            Interconnect::Nvswitch => "nvswitch",
        }
    }

    /// The port capacity per direction, B/µs, when the config gives none: the pair bandwidth on
    /// PCIe and NVSwitch (one lane), the GPU's aggregate NVLink bandwidth on a mesh.
    pub(crate) fn default_port_bandwidth(self, gpu: &GpuSpec, pair_bandwidth: f64) -> f64 {
        match self {
            Interconnect::Nvlink if gpu.nvlink_gbs > 0.0 => {
                (gpu.nvlink_gbs * crate::units::GB_PER_S).max(pair_bandwidth)
            }
            _ => pair_bandwidth,
        }
    }
}

/// Lanes of a port of `port_bandwidth` whose transfers each run at `pair_bandwidth`: how many
/// peers it serves at once (at least one; a port narrower than a pair still serves one).
pub(crate) fn port_lanes(port_bandwidth: f64, pair_bandwidth: f64) -> u32 {
    // The small tolerance keeps 150 / 25 at 6 when the GB/s figures were converted to B/µs.
    ((port_bandwidth / pair_bandwidth) * (1.0 + 1e-9))
        .floor()
        .max(1.0) as u32
}

/// What `nvidia-smi topo -m` says of one machine's GPUs: the interconnect and, for an NVLink
/// mesh, the links per GPU (the most `NV#` bricks any GPU has in all).
#[derive(Debug, Clone, PartialEq)]
pub struct TopoSummary {
    pub gpus: usize,
    pub interconnect: Interconnect,
    /// NVLink bricks per GPU (0 on PCIe), and the most bricks between any one pair.
    pub links_per_gpu: u32,
    pub links_per_pair: u32,
}

/// Most GPUs one `[[machine]]` entry may have: links grow with the square of it, and a typo such
/// as `gpus = 80000` should be refused rather than exhaust memory. Here, not in `config`, so
/// that `nvidia-smi` topologies are held to it before an entry is written.
pub(crate) const MAX_GPUS_PER_ENTRY: i64 = 256;

/// The most NVLink links one GPU has (H100 SXM: 18); `nvidia-smi` never prints `NV0`.
const MAX_NVLINKS: u32 = 18;

/// Read the GPU × GPU block of `nvidia-smi topo -m` output: rows starting `GPU<k>`, cells `X`,
/// `NV<k>`, `PIX`, `PXB`, `PHB`, `NODE` or `SYS`. Every pair on NVLink with the same brick count
/// of 8 or more reads as NVSwitch (A100: NV12, H100: NV18); some pairs on NVLink as a mesh; none
/// as PCIe.
pub fn parse_nvidia_smi_topo(text: &str) -> Result<TopoSummary, String> {
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        // Matrix rows, not the header (which starts with GPU0 too, but holds only column names).
        .filter(|cells| {
            cells.first().is_some_and(|c| is_gpu_name(c))
                && cells[1..].iter().any(|c| is_link_cell(c))
        })
        .collect();
    let n = rows.len();
    if n == 0 {
        return Err("no `GPU<k>` rows: expected the output of `nvidia-smi topo -m`".into());
    }
    // The header names every GPU: fewer rows than it names is output cut short.
    if let Some(named) = header_gpus(text)
        && named > n
    {
        return Err(format!(
            "the header names {named} GPUs but {n} GPU rows follow: the output was cut or edited"
        ));
    }
    // The entry written would be refused when loaded; say so before writing it.
    if n > MAX_GPUS_PER_ENTRY as usize {
        return Err(format!(
            "{n} GPUs: a machine entry holds at most {MAX_GPUS_PER_ENTRY}"
        ));
    }
    // Rows GPU0, GPU1, … in order: a row repeated (pasted twice) would count as another GPU.
    for (i, row) in rows.iter().enumerate() {
        if row[0] != format!("GPU{i}") {
            let again = rows[..i].iter().position(|r| r[0] == row[0]);
            return Err(match again {
                Some(first) => format!(
                    "row {} repeats {} (row {}): each GPU has one row",
                    i + 1,
                    row[0],
                    first + 1
                ),
                None => format!(
                    "row {} is {}, expected GPU{i}: the rows go GPU0, GPU1, … in order",
                    i + 1,
                    row[0]
                ),
            });
        }
    }
    let mut per_gpu = vec![0u32; n];
    let (mut pairs_nv, mut widest, mut narrowest) = (0usize, 0u32, u32::MAX);
    for (i, row) in rows.iter().enumerate() {
        if row.len() < n + 1 {
            return Err(format!(
                "row GPU{i} has {} cells, expected {n}",
                row.len() - 1
            ));
        }
        // After the n GPU cells come NICs' (PIX, NODE, SYS…) and the affinities: an NVLink or an
        // X there is a GPU cell added.
        let gpu_only = |c: &str| {
            c == "X"
                || c.strip_prefix("NV")
                    .is_some_and(|k| k.parse::<u32>().is_ok())
        };
        if row.get(n + 1).is_some_and(|c| gpu_only(c)) {
            return Err(format!(
                "row GPU{i} has a link cell past the {n} GPUs the rows name ({}): the output was \
                 edited",
                row[n + 1]
            ));
        }
        for (j, cell) in row[1..=n].iter().enumerate() {
            if i == j {
                if *cell != "X" {
                    return Err(format!(
                        "row GPU{i}, column GPU{j} is {cell}, expected X: a GPU has no link to \
                         itself (a cell missing or shifted in this row?)"
                    ));
                }
                continue;
            }
            // A link is the same both ways; which way to believe is unknowable.
            if let Some(back) = rows.get(j).and_then(|r| r.get(i + 1))
                && back != cell
            {
                return Err(format!(
                    "row GPU{i}, column GPU{j} is {} but row GPU{j}, column GPU{i} is {}: the \
                     matrix must be symmetric",
                    cell.escape_debug(),
                    back.escape_debug()
                ));
            }
            let bricks = match cell.strip_prefix("NV") {
                Some(k) => match k.parse::<u32>() {
                    Ok(n) if (1..=MAX_NVLINKS).contains(&n) => n,
                    _ => {
                        return Err(format!(
                            "row GPU{i}, column GPU{j}: {cell:?} is not NV<count> with a count of \
                             1 to {MAX_NVLINKS}"
                        ));
                    }
                },
                None if LINK_CODES.contains(cell) => 0,
                None => return Err(format!("row GPU{i}, column GPU{j}: unknown link {cell:?}")),
            };
            per_gpu[i] += bricks;
            if bricks > 0 {
                pairs_nv += 1;
            }
            widest = widest.max(bricks);
            narrowest = narrowest.min(bricks);
        }
    }
    let all_pairs = n * (n - 1);
    let interconnect = if pairs_nv == 0 {
        Interconnect::Pcie
    } else if pairs_nv == all_pairs && narrowest == widest && widest >= 8 {
        Interconnect::Nvswitch
    } else {
        Interconnect::Nvlink
    };
    Ok(TopoSummary {
        gpus: n,
        interconnect,
        links_per_gpu: per_gpu.into_iter().max().unwrap_or(0),
        links_per_pair: widest,
    })
}

/// How many `GPU<k>` columns the header line of `nvidia-smi topo -m` names (the first line whose
/// cells are `GPU0`, `GPU1`, … with no link code); `None` without one.
fn header_gpus(text: &str) -> Option<usize> {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&"GPU0") && !cells.iter().any(|c| is_link_cell(c)))
        .map(|cells| cells.iter().take_while(|c| is_gpu_name(c)).count())
}

/// Whether `cell` names a GPU as `nvidia-smi topo -m` does: `GPU<k>`.
fn is_gpu_name(cell: &str) -> bool {
    cell.strip_prefix("GPU")
        .is_some_and(|k| k.parse::<u32>().is_ok())
}

/// Whether `cell` is one of `nvidia-smi topo -m`'s link codes (`X` on the diagonal), which the
/// header's column names are not.
fn is_link_cell(cell: &str) -> bool {
    cell == "X"
        || cell
            .strip_prefix("NV")
            .is_some_and(|k| k.parse::<u32>().is_ok())
        || LINK_CODES.contains(&cell)
}

/// The codes of pairs that are not on NVLink.
const LINK_CODES: [&str; 6] = ["PIX", "PXB", "PHB", "NODE", "SYS", "SOC"];

/// PCIe 3.0 x16 as p2p copies measure it (of 15.75 GB/s): the pair bandwidth an imported PCIe
/// machine gets; edit the entry for PCIe 4.0 (about 24 GB/s).
pub(crate) const PCIE3_GBS: f64 = 12.0;

impl TopoSummary {
    /// A `[[machine]]` entry for these GPUs of type `gpu`: NVLink bricks at the GPU's per-brick
    /// rate (its aggregate NVLink bandwidth over `links_per_gpu`), PCIe at [`PCIE3_GBS`]. The
    /// NIC is not in `nvidia-smi topo -m`'s GPU block, so it is left for the user to fill in.
    /// Why `gpu` cannot be these GPUs, if it cannot: NVLink in the topology on a type without
    /// it, whose entry would say `intra_bandwidth = "0 GB/s"` and fail to load.
    pub fn gpu_problem(&self, gpu: &GpuSpec) -> Option<String> {
        (self.interconnect != Interconnect::Pcie && gpu.nvlink_gbs <= 0.0).then(|| {
            format!(
                "{} has no NVLink, but the topology shows NVLink between its GPUs",
                gpu.name
            )
        })
    }

    pub fn machine_toml(&self, name: &str, gpu: &GpuSpec) -> String {
        let (pair, port) = match self.interconnect {
            Interconnect::Pcie => (PCIE3_GBS, PCIE3_GBS),
            Interconnect::Nvswitch => (gpu.nvlink_gbs, gpu.nvlink_gbs),
            Interconnect::Nvlink => {
                let brick = gpu.nvlink_gbs / f64::from(self.links_per_gpu.max(1));
                (
                    brick * f64::from(self.links_per_pair.max(1)),
                    gpu.nvlink_gbs,
                )
            }
        };
        // A TOML string, quotes and backslashes escaped: `a"b` wrote a file that did not parse.
        let name = toml::Value::String(name.to_string());
        format!(
            "[[machine]]\nname = {name}\ngpu = \"{}\"\ngpus = {}\ninterconnect = \"{}\"\n\
             intra_bandwidth = \"{pair} GB/s\"\nport_bandwidth = \"{port} GB/s\"\n\
             nic = \"100 Gbps\"  # not in nvidia-smi's GPU block: set the machine's NIC\n",
            gpu.name,
            self.gpus,
            self.interconnect.name()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_round_down_but_never_to_zero() {
        assert_eq!(port_lanes(150.0, 25.0), 6);
        assert_eq!(port_lanes(150.0, 50.0), 3);
        assert_eq!(port_lanes(12.0, 12.0), 1);
        assert_eq!(port_lanes(10.0, 12.0), 1);
    }

    #[test]
    fn nvidia_smi_topo_reads_pcie_mesh_and_switch() {
        let pcie = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tSYS\t0-11\nGPU1\tSYS\t X \t0-11\n";
        let p = parse_nvidia_smi_topo(pcie).unwrap();
        assert_eq!((p.gpus, p.interconnect), (2, Interconnect::Pcie));
        // The DGX-1 V100 hybrid cube mesh: each GPU has six bricks to four peers.
        let mesh = "GPU0 X NV1 NV1 NV2 NV2 SYS SYS SYS\n\
                    GPU1 NV1 X NV2 NV1 SYS NV2 SYS SYS\n\
                    GPU2 NV1 NV2 X NV2 SYS SYS NV1 SYS\n\
                    GPU3 NV2 NV1 NV2 X SYS SYS SYS NV1\n\
                    GPU4 NV2 SYS SYS SYS X NV1 NV1 NV2\n\
                    GPU5 SYS NV2 SYS SYS NV1 X NV2 NV1\n\
                    GPU6 SYS SYS NV1 SYS NV1 NV2 X NV2\n\
                    GPU7 SYS SYS SYS NV1 NV2 NV1 NV2 X\n";
        let m = parse_nvidia_smi_topo(mesh).unwrap();
        assert_eq!(m.interconnect, Interconnect::Nvlink);
        assert_eq!((m.links_per_gpu, m.links_per_pair), (6, 2));
        let switch = "GPU0 X NV12 NV12\nGPU1 NV12 X NV12\nGPU2 NV12 NV12 X\n";
        assert_eq!(
            parse_nvidia_smi_topo(switch).unwrap().interconnect,
            Interconnect::Nvswitch
        );
        assert!(parse_nvidia_smi_topo("nothing here").is_err());
        // A row pasted twice counted as another GPU; a link read differently each way was
        // taken from one of them.
        let twice = parse_nvidia_smi_topo("GPU0 X NV2\nGPU0 NV2 X\n").unwrap_err();
        assert!(twice.contains("row 2 repeats GPU0"), "{twice}");
        let skewed = parse_nvidia_smi_topo("GPU0 X NV2\nGPU1 SYS X\n").unwrap_err();
        assert!(
            skewed.contains("row GPU0, column GPU1 is NV2")
                && skewed.contains("row GPU1, column GPU0 is SYS"),
            "{skewed}"
        );
        // More GPUs than a machine entry may hold wrote an entry that did not load.
        let n = MAX_GPUS_PER_ENTRY as usize + 1;
        let big: String = (0..n)
            .map(|i| {
                let cells: Vec<&str> = (0..n).map(|j| if i == j { "X" } else { "SYS" }).collect();
                format!("GPU{i} {}\n", cells.join(" "))
            })
            .collect();
        let many = parse_nvidia_smi_topo(&big).unwrap_err();
        assert!(
            many.contains("257 GPUs") && many.contains("at most 256"),
            "{many}"
        );
        assert!(parse_nvidia_smi_topo("GPU0 X QQ\nGPU1 QQ X\n").is_err());
    }

    /// A row without its `X` was dropped as if it were the header: the first GPU's made the
    /// error blame the next row's order, a later one's made the machine a GPU short.
    #[test]
    fn nvidia_smi_rows_missing_their_diagonal_are_named() {
        let first = parse_nvidia_smi_topo("GPU0 NV1 NV1\nGPU1 NV1 X\n").unwrap_err();
        assert!(
            first.contains("row GPU0, column GPU0 is NV1, expected X"),
            "{first}"
        );
        let last = parse_nvidia_smi_topo("GPU0 X NV1\nGPU1 NV1 NV2\n").unwrap_err();
        assert!(
            last.contains("row GPU1, column GPU1 is NV2, expected X"),
            "{last}"
        );
        let header = "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n";
        let with_header = format!("{header}GPU0 X NV4 PIX 0-7 0\nGPU1 NV4 X PIX 0-7 0\n");
        assert_eq!(parse_nvidia_smi_topo(&with_header).unwrap().gpus, 2);
        // Cut after the first row: it read as a one-GPU PCIe machine.
        let cut = parse_nvidia_smi_topo(&format!("{header}GPU0 X NV4 PIX 0-7 0\n")).unwrap_err();
        assert!(cut.contains("names 2 GPUs but 1 GPU rows"), "{cut}");
        // A GPU cell too many in one row (an NVLink past the last GPU) is an edit, not a NIC.
        let extra = parse_nvidia_smi_topo("GPU0 X NV1\nGPU1 NV1 X NV1\n").unwrap_err();
        assert!(
            extra.contains("row GPU1 has a link cell past the 2 GPUs"),
            "{extra}"
        );
    }
}
