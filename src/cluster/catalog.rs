//! Device catalog: peak numbers of the GPUs the papers use, from the vendors' datasheets.
//!
//! The cost model's roofline needs peak FP32 (and tensor-core) throughput and memory bandwidth;
//! the simulator needs memory capacity. Figures are the boost-clock datasheet peaks; the cost
//! model's efficiency factors turn them into achievable rates.

use crate::error::InputError;

/// Peak figures of one GPU model. `Copy`: devices hold their own copy, no lifetimes to thread.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuSpec {
    /// Canonical name, used in configs written by the tool and in reports.
    pub name: &'static str,
    /// Other spellings accepted in configs and in `Op::profiled_us` keys.
    pub aliases: &'static [&'static str],
    /// Peak dense FP32 throughput in TFLOP/s.
    pub fp32_tflops: f64,
    /// Peak dense FP16 tensor-core throughput in TFLOP/s; 0 when the GPU has no tensor cores.
    pub tensor_tflops: f64,
    /// Peak device-memory bandwidth in GB/s (1e9 bytes per second).
    pub mem_bandwidth_gbs: f64,
    /// Device memory in GiB (datasheets say "GB" for what is 2^30-byte units of DRAM).
    pub memory_gib: f64,
    /// Microarchitecture: kernels reach different shares of peak on each (the cost model's
    /// efficiency table is per architecture).
    pub arch: Arch,
    /// Aggregate NVLink bandwidth per direction, GB/s (0 for PCIe cards).
    pub nvlink_gbs: f64,
    /// Whether the SXM boards of this GPU connect it through NVSwitch (else a direct mesh).
    pub nvswitch: bool,
}

/// GPU microarchitectures of the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    /// K80 (GK210).
    Kepler,
    /// P100, GTX 1080/1080 Ti, Tesla P4.
    Pascal,
    /// V100: the first generation with tensor cores.
    Volta,
    /// T4, RTX 2080 Ti.
    Turing,
    /// A100 (GA100).
    Ampere,
    /// Consumer Ampere (GA102/GA104): twice the FP32 lanes per SM of GA100, which kernels
    /// rarely fill, so its share of peak differs from A100's.
    Ga10x,
    /// H100 (GH100).
    Hopper,
}

/// The distinct GPU models among `gpus`, in order of first appearance, and each item's index
/// into them: what per-GPU-type tables are built from, so a 1,024-GPU cluster of four models costs
/// four evaluations, not 1,024.
pub(crate) fn gpu_types<'a>(
    gpus: impl IntoIterator<Item = &'a GpuSpec>,
) -> (Vec<&'a GpuSpec>, Vec<usize>) {
    let mut types: Vec<&GpuSpec> = Vec::new();
    let index = (gpus.into_iter())
        .map(|gpu| match types.iter().position(|t| *t == gpu) {
            Some(t) => t,
            None => {
                types.push(gpu);
                types.len() - 1
            }
        })
        .collect();
    (types, index)
}

impl GpuSpec {
    /// Peak FP32 rate in FLOPs per microsecond.
    pub(crate) fn fp32_flops_per_us(&self) -> f64 {
        self.fp32_tflops * 1e6
    }

    /// Peak tensor-core rate in FLOPs per microsecond (0 without tensor cores).
    pub(crate) fn tensor_flops_per_us(&self) -> f64 {
        self.tensor_tflops * 1e6
    }

    /// Peak memory bandwidth in bytes per microsecond.
    pub(crate) fn mem_bandwidth(&self) -> f64 {
        self.mem_bandwidth_gbs * crate::units::GB_PER_S
    }

    /// Device memory in bytes.
    pub(crate) fn memory_bytes(&self) -> f64 {
        self.memory_gib * crate::units::GIB
    }

    /// Whether `name` is this GPU's name or one of its aliases, ignoring case, spaces, `-`, `_`.
    pub(crate) fn matches(&self, name: &str) -> bool {
        let key = normalize(name);
        normalize(self.name) == key || self.aliases.iter().any(|a| normalize(a) == key)
    }

    /// Whether a time profiled under `key` applies to this GPU: `key` is its name or an alias,
    /// or a family name its name or an alias begins with ("V100" for every V100, "A100" for
    /// every A100: one chip, and a profile rarely says which board it ran on). A family name has
    /// at least three characters and a digit, so "A" or "GTX" names none.
    pub(crate) fn profiled_as(&self, key: &str) -> bool {
        let key = normalize(key);
        let family = key.len() >= 3 && key.chars().any(|c| c.is_ascii_digit());
        std::iter::once(self.name)
            .chain(self.aliases.iter().copied())
            .map(normalize)
            .any(|n| n == key || (family && n.starts_with(&key)))
    }
}

/// Whether times profiled under `key` apply to some GPU of the catalog.
pub(crate) fn known_profile_key(key: &str) -> bool {
    CATALOG.iter().any(|g| g.profiled_as(key))
}

/// A profiled time's key must name a GPU of the catalog, a family of them ("V100") or `cpu`;
/// the error says which are known.
pub(crate) fn check_profile_key(key: &str) -> std::result::Result<(), String> {
    if key.eq_ignore_ascii_case("cpu") || known_profile_key(key) {
        return Ok(());
    }
    Err(format!(
        "unknown GPU type {key:?}; known types: {}, a family of them such as \"V100\", or \
         \"cpu\"",
        known_names().join(", ")
    ))
}

/// "GTX 1080Ti", "gtx-1080ti" and "GTX_1080TI" are the same GPU.
fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, ' ' | '-' | '_'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// Every GPU the tool knows.
pub static CATALOG: &[GpuSpec] = &[
    // NVIDIA Tesla V100 datasheet (2020), SXM2 column: 15.7 FP32, 125 tensor, 900 GB/s HBM2.
    GpuSpec {
        name: "V100-SXM2-16GB",
        aliases: &["V100-16GB", "V100-SXM2", "Tesla-V100-16GB"],
        fp32_tflops: 15.7,
        tensor_tflops: 125.0,
        mem_bandwidth_gbs: 900.0,
        memory_gib: 16.0,
        arch: Arch::Volta,
        nvlink_gbs: 150.0,
        nvswitch: false,
    },
    // Same datasheet, SXM2 32 GB variant: identical compute, twice the HBM2.
    GpuSpec {
        name: "V100-SXM2-32GB",
        aliases: &["V100-32GB", "Tesla-V100-32GB"],
        fp32_tflops: 15.7,
        tensor_tflops: 125.0,
        mem_bandwidth_gbs: 900.0,
        memory_gib: 32.0,
        arch: Arch::Volta,
        nvlink_gbs: 150.0,
        nvswitch: false,
    },
    // Same datasheet, PCIe column: 14 FP32, 112 tensor, 900 GB/s (lower clock than SXM2).
    GpuSpec {
        name: "V100-PCIe-32GB",
        aliases: &["V100-PCIe", "Tesla-V100-PCIe-32GB"],
        fp32_tflops: 14.0,
        tensor_tflops: 112.0,
        mem_bandwidth_gbs: 900.0,
        memory_gib: 32.0,
        arch: Arch::Volta,
        nvlink_gbs: 0.0,
        nvswitch: false,
    },
    // NVIDIA Tesla P100 PCIe datasheet: 9.3 FP32, 732 GB/s (16 GB CoWoS HBM2); no tensor cores.
    GpuSpec {
        name: "P100-16GB",
        aliases: &["P100", "P100-PCIe", "Tesla-P100", "P100-PCIe-16GB"],
        fp32_tflops: 9.3,
        tensor_tflops: 0.0,
        mem_bandwidth_gbs: 732.0,
        memory_gib: 16.0,
        arch: Arch::Pascal,
        nvlink_gbs: 0.0,
        nvswitch: false,
    },
    // NVIDIA Tesla P100 datasheet, SXM2 (NVLink) column: 10.6 FP32, 732 GB/s, 16 GB.
    GpuSpec {
        name: "P100-SXM2-16GB",
        aliases: &["P100-SXM2", "P100-NVLink"],
        fp32_tflops: 10.6,
        tensor_tflops: 0.0,
        mem_bandwidth_gbs: 732.0,
        memory_gib: 16.0,
        arch: Arch::Pascal,
        nvlink_gbs: 80.0,
        nvswitch: false,
    },
    // NVIDIA GeForce GTX 1080 Ti specifications: 3584 cores × 1582 MHz × 2 = 11.34 FP32,
    // 11 Gbps GDDR5X on 352 bits = 484 GB/s, 11 GB; Pascal, no tensor cores.
    GpuSpec {
        name: "GTX-1080Ti",
        aliases: &["1080Ti", "GeForce-GTX-1080Ti"],
        fp32_tflops: 11.34,
        tensor_tflops: 0.0,
        mem_bandwidth_gbs: 484.0,
        memory_gib: 11.0,
        arch: Arch::Pascal,
        nvlink_gbs: 0.0,
        nvswitch: false,
    },
    // NVIDIA GeForce GTX 1080 specifications: 2560 cores × 1733 MHz × 2 = 8.87 FP32,
    // 10 Gbps GDDR5X on 256 bits = 320 GB/s, 8 GB; Pascal, no tensor cores. The GPU of the
    // public per-model training benchmarks the cost model is checked against.
    GpuSpec {
        name: "GTX-1080",
        aliases: &["1080", "GeForce-GTX-1080"],
        fp32_tflops: 8.87,
        tensor_tflops: 0.0,
        mem_bandwidth_gbs: 320.0,
        memory_gib: 8.0,
        arch: Arch::Pascal,
        nvlink_gbs: 0.0,
        nvswitch: false,
    },
    // NVIDIA T4 datasheet: 8.1 FP32, 65 FP16 mixed-precision tensor, 320 GB/s GDDR6, 16 GB.
    GpuSpec {
        name: "T4",
        aliases: &["Tesla-T4", "T4-16GB"],
        fp32_tflops: 8.1,
        tensor_tflops: 65.0,
        mem_bandwidth_gbs: 320.0,
        memory_gib: 16.0,
        arch: Arch::Turing,
        nvlink_gbs: 0.0,
        nvswitch: false,
    },
    // NVIDIA A100 datasheet (SXM, 40 GB): 19.5 FP32, 312 dense FP16 tensor, 1555 GB/s HBM2.
    GpuSpec {
        name: "A100-40GB",
        aliases: &["A100", "A100-SXM4-40GB"],
        fp32_tflops: 19.5,
        tensor_tflops: 312.0,
        mem_bandwidth_gbs: 1555.0,
        memory_gib: 40.0,
        arch: Arch::Ampere,
        nvlink_gbs: 300.0,
        nvswitch: true,
    },
    // Same datasheet, A100 80GB SXM: 19.5 FP32, 312 dense FP16 tensor, 2039 GB/s HBM2e.
    GpuSpec {
        name: "A100-80GB",
        aliases: &["A100-SXM4-80GB"],
        fp32_tflops: 19.5,
        tensor_tflops: 312.0,
        mem_bandwidth_gbs: 2039.0,
        memory_gib: 80.0,
        arch: Arch::Ampere,
        nvlink_gbs: 300.0,
        nvswitch: true,
    },
    // NVIDIA H100 datasheet, SXM column: 67 FP32, 1979 FP16 tensor with sparsity = 989.5 dense,
    // 3.35 TB/s HBM3, 80 GB.
    GpuSpec {
        name: "H100-SXM-80GB",
        aliases: &["H100", "H100-SXM", "H100-SXM5-80GB"],
        fp32_tflops: 67.0,
        tensor_tflops: 989.5,
        mem_bandwidth_gbs: 3350.0,
        memory_gib: 80.0,
        arch: Arch::Hopper,
        nvlink_gbs: 450.0,
        nvswitch: true,
    },
    // NVIDIA Turing architecture whitepaper, Table 1 (reference RTX 2080 Ti): 13.4 FP32, 107.6
    // FP16 tensor (FP16 accumulate), 616 GB/s GDDR6, 11 GB.
    GpuSpec {
        name: "RTX-2080Ti",
        aliases: &["2080Ti", "GeForce-RTX-2080Ti"],
        fp32_tflops: 13.4,
        tensor_tflops: 107.6,
        mem_bandwidth_gbs: 616.0,
        memory_gib: 11.0,
        arch: Arch::Turing,
        nvlink_gbs: 0.0,
        nvswitch: false,
    },
    // NVIDIA Ampere GA102 whitepaper appendix (GA104 column, RTX 3060 Ti): 16.2 FP32,
    // 64.8 dense FP16 tensor (FP16 accumulate), 448 GB/s GDDR6, 8 GB.
    GpuSpec {
        name: "RTX-3060Ti",
        aliases: &["3060Ti", "GeForce-RTX-3060Ti"],
        fp32_tflops: 16.2,
        tensor_tflops: 64.8,
        mem_bandwidth_gbs: 448.0,
        memory_gib: 8.0,
        arch: Arch::Ga10x,
        nvlink_gbs: 0.0,
        nvswitch: false,
    },
    // Same whitepaper appendix, RTX 3070: 20.3 FP32, 81.3 dense FP16 tensor (FP16 accumulate),
    // 448 GB/s GDDR6, 8 GB.
    GpuSpec {
        name: "RTX-3070",
        aliases: &["3070", "GeForce-RTX-3070"],
        fp32_tflops: 20.3,
        tensor_tflops: 81.3,
        mem_bandwidth_gbs: 448.0,
        memory_gib: 8.0,
        arch: Arch::Ga10x,
        nvlink_gbs: 0.0,
        nvswitch: false,
    },
    // NVIDIA Tesla P4 datasheet: 5.5 FP32, 192 GB/s GDDR5, 8 GB; Pascal, no tensor cores.
    GpuSpec {
        name: "Tesla-P4",
        aliases: &["P4"],
        fp32_tflops: 5.5,
        tensor_tflops: 0.0,
        mem_bandwidth_gbs: 192.0,
        memory_gib: 8.0,
        arch: Arch::Pascal,
        nvlink_gbs: 0.0,
        nvswitch: false,
    },
    // NVIDIA Tesla K80 datasheet: per board (two GK210 GPUs) 8.73 TFLOPS FP32 with GPU Boost,
    // 480 GB/s GDDR5, 24 GB; one GPU is half of each. The GPU of TensorFlow's 2017 distributed
    // benchmarks (EC2 p2.8xlarge).
    GpuSpec {
        name: "K80",
        aliases: &["Tesla-K80", "GK210"],
        fp32_tflops: 4.365,
        tensor_tflops: 0.0,
        mem_bandwidth_gbs: 240.0,
        memory_gib: 12.0,
        arch: Arch::Kepler,
        nvlink_gbs: 0.0,
        nvswitch: false,
    },
    // NVIDIA A100 datasheet, PCIe 40 GB column: 19.5 FP32, 312 dense FP16 tensor, 1555 GB/s;
    // PCIe 4.0 (the NVLink bridge is optional and not assumed).
    GpuSpec {
        name: "A100-PCIe-40GB",
        aliases: &["A100-PCIe", "A100-40GB-PCIe"],
        fp32_tflops: 19.5,
        tensor_tflops: 312.0,
        mem_bandwidth_gbs: 1555.0,
        memory_gib: 40.0,
        arch: Arch::Ampere,
        nvlink_gbs: 0.0,
        nvswitch: false,
    },
];

/// Find a GPU by name or alias (case-insensitive). The error lists every known name.
pub fn find_gpu(name: &str) -> Option<&'static GpuSpec> {
    CATALOG.iter().find(|g| g.matches(name))
}

/// Like [`find_gpu`], with an error naming the file and field and listing the known types.
pub fn lookup_gpu(file: &str, field: &str, name: &str) -> Result<&'static GpuSpec, InputError> {
    find_gpu(name).ok_or_else(|| {
        InputError::new(
            file,
            field,
            format!(
                "unknown GPU type {name:?}; known types: {}",
                known_names().join(", ")
            ),
        )
    })
}

/// Canonical names of every catalog entry.
pub(crate) fn known_names() -> Vec<&'static str> {
    CATALOG.iter().map(|g| g.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_two_entries_share_a_spelling() {
        let mut seen = std::collections::BTreeSet::new();
        for g in CATALOG {
            for n in std::iter::once(&g.name).chain(g.aliases.iter()) {
                assert!(seen.insert(normalize(n)), "{n} appears twice");
            }
        }
    }

    #[test]
    fn aliases_resolve() {
        assert_eq!(find_gpu("v100-32gb").unwrap().name, "V100-SXM2-32GB");
        assert_eq!(find_gpu("GTX 1080Ti").unwrap().name, "GTX-1080Ti");
        assert_eq!(find_gpu("P100").unwrap().memory_gib, 16.0);
        assert!(find_gpu("V200").is_none());
        let e = lookup_gpu("f.toml", "machine[0].gpu", "V200").unwrap_err();
        assert!(e.message.contains("T4") && e.field == "machine[0].gpu");
    }
}
