//! How close to a GPU's datasheet peak its kernels run: one row per microarchitecture and kernel
//! class, fitted to published single-GPU training throughputs (`topoplace experiment calibrate`,
//! docs/fidelity.md says which measurements were fitted and which were held out).
//!
//! Kernel classes (by the op's type and convolution window, [`KernelClass::of`]): dense matrix
//! products (cuBLAS GEMM), convolutions (cuDNN, with Winograd for 3x3 stride-1 windows and FFT for
//! stride-1 windows of 5x5 and larger, each a speed-up over the nominal FLOPs) and everything else,
//! which is memory-bound (elementwise, normalisation, reductions, pooling, optimizer updates).

use crate::cluster::Arch;
use crate::graph::Op;

/// What sort of kernel runs an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KernelClass {
    Gemm,
    /// Fused attention of a known shape ([`crate::graph::Op::attention`]): in 16 bits it runs at
    /// the published kernels' speed ([`super::attention`]), otherwise as a matrix product.
    Attention,
    /// A convolution run with Winograd's minimal filtering (3x3, stride 1).
    ConvWinograd,
    /// A convolution run with FFTs (stride 1, window 5x5 or larger).
    ConvFft,
    /// Any other convolution (implicit GEMM: 1x1, strided, 7x7 stems).
    Conv,
    /// Elementwise, normalisation, pooling, reductions, optimizer updates.
    Memory,
}

impl KernelClass {
    /// The class of `op`, from its convolution window or its framework type.
    pub(crate) fn of(op: &Op) -> KernelClass {
        if op.attention.is_some() {
            return KernelClass::Attention;
        }
        if let Some(w) = op.conv_window {
            return if w.winograd_eligible() {
                KernelClass::ConvWinograd
            } else if w.stride == [1, 1] && w.kernel[0] >= 5 && w.kernel[1] >= 5 {
                KernelClass::ConvFft
            } else {
                KernelClass::Conv
            };
        }
        // Called for every op in every simulation: no allocation, one pass over the type.
        let t = op.op_type.as_bytes();
        if starts_with_ignore_case(t, b"conv") || starts_with_ignore_case(t, b"depthwiseconv") {
            KernelClass::Conv
        } else if is_plain_mm(t) || names_a_matrix_product(t) {
            KernelClass::Gemm
        } else {
            KernelClass::Memory
        }
    }
}

/// Whether `t` is ATen's plain matrix product, alone or namespaced (`mm`, `aten.mm`): a name too
/// short to look for inside others (`mm` is in `comm`, `summary`).
fn is_plain_mm(t: &[u8]) -> bool {
    let last = t.rsplit(|&b| b == b'.').next().unwrap_or(t);
    last.eq_ignore_ascii_case(b"mm")
}

/// Whether `t` contains (ignoring case) one of the framework names of a dense matrix product:
/// matmul, gemm, addmm, bmm, einsum, linear, or fused attention (its two products). One pass:
/// each position is looked at only for the names its letter begins.
fn names_a_matrix_product(t: &[u8]) -> bool {
    (0..t.len()).any(|i| {
        let needle: &[u8] = match t[i].to_ascii_lowercase() {
            b'm' => b"matmul",
            b'g' => b"gemm",
            b'a' if starts_with_ignore_case(&t[i..], b"attention") => return true,
            b'a' => b"addmm",
            b'b' => b"bmm",
            b'e' => b"einsum",
            b'l' => b"linear",
            _ => return false,
        };
        starts_with_ignore_case(&t[i..], needle)
    })
}

fn starts_with_ignore_case(text: &[u8], prefix: &[u8]) -> bool {
    text.len() >= prefix.len() && text[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// Efficiencies of one architecture.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelEfficiency {
    /// Share of peak FP32 reached by GEMMs.
    pub gemm: f64,
    /// Share of peak FP32 reached by convolutions, on their nominal FLOPs before any fast
    /// algorithm's speed-up.
    pub conv: f64,
    /// Share of the tensor-core peak (TF32 or 16-bit, [`crate::precision::Precision`]) reached
    /// by matrix products and fused attention that run on the tensor cores.
    pub tensor: f64,
    /// The same for convolutions (cuDNN's implicit GEMM on the tensor cores).
    pub tensor_conv: f64,
    /// How much fewer FLOPs than nominal a Winograd convolution does (Lavin & Gray: F(2x2,3x3)
    /// 2.25×, F(4x4,3x3) 4×, less the transforms).
    pub winograd_speedup: f64,
    /// The same for FFT convolutions of large windows.
    pub fft_speedup: f64,
    /// Share of peak memory bandwidth reached by memory-bound kernels.
    pub memory: f64,
    /// Fixed cost per op, µs: kernel launch and the framework's dispatch.
    pub launch_us: f64,
}

impl KernelEfficiency {
    /// One set of figures for every class: `compute` of peak for GEMMs and convolutions, no fast
    /// algorithms.
    #[cfg(test)]
    pub(crate) fn uniform(compute: f64, memory: f64, launch_us: f64) -> KernelEfficiency {
        KernelEfficiency {
            gemm: compute,
            conv: compute,
            tensor: compute,
            tensor_conv: compute,
            winograd_speedup: 1.0,
            fft_speedup: 1.0,
            memory,
            launch_us,
        }
    }

    /// Share of peak FLOPs for `class` and the factor its algorithm saves on nominal FLOPs.
    pub(crate) fn compute(&self, class: KernelClass) -> (f64, f64) {
        match class {
            KernelClass::Gemm | KernelClass::Attention => (self.gemm, 1.0),
            KernelClass::ConvWinograd => (self.conv, self.winograd_speedup),
            KernelClass::ConvFft => (self.conv, self.fft_speedup),
            KernelClass::Conv | KernelClass::Memory => (self.conv, 1.0),
        }
    }
}

/// Efficiencies per architecture.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelTable {
    rows: Vec<(Arch, KernelEfficiency)>,
    /// For an architecture without a row.
    fallback: KernelEfficiency,
}

impl KernelTable {
    /// The same figures for every architecture.
    #[cfg(test)]
    pub(crate) fn uniform(e: KernelEfficiency) -> KernelTable {
        KernelTable {
            rows: Vec::new(),
            fallback: e,
        }
    }

    /// A table of `rows`, with `fallback` for the architectures it lacks.
    pub(crate) fn new(
        rows: Vec<(Arch, KernelEfficiency)>,
        fallback: KernelEfficiency,
    ) -> KernelTable {
        KernelTable { rows, fallback }
    }

    pub fn get(&self, arch: Arch) -> &KernelEfficiency {
        self.rows
            .iter()
            .find(|(a, _)| *a == arch)
            .map_or(&self.fallback, |(_, e)| e)
    }

    pub fn rows(&self) -> &[(Arch, KernelEfficiency)] {
        &self.rows
    }

    pub fn fallback(&self) -> &KernelEfficiency {
        &self.fallback
    }

    /// The table shipped with the tool: see [`SHIPPED`].
    pub(crate) fn shipped() -> KernelTable {
        let row = |&(gemm, conv, tensor): &Shares| shared(gemm, conv, tensor);
        let rows = SHIPPED.iter().map(|(arch, r)| (*arch, row(r))).collect();
        KernelTable::new(rows, row(&FALLBACK))
    }

    /// This table with `arch`'s row replaced (or added).
    pub(crate) fn with_row(mut self, arch: Arch, row: KernelEfficiency) -> KernelTable {
        match self.rows.iter_mut().find(|(a, _)| *a == arch) {
            Some(slot) => slot.1 = row,
            None => self.rows.push((arch, row)),
        }
        self
    }
}

impl Default for KernelTable {
    fn default() -> Self {
        KernelTable::shipped()
    }
}

/// The figures fitted once for all architectures (`topoplace fidelity --calibrate`): the fast
/// algorithms' speed-ups, the memory-bound share of peak bandwidth and the fixed cost per op.
pub(crate) const SHARED: SharedFit = SharedFit {
    winograd_speedup: 2.4678,
    fft_speedup: 3.1533,
    memory: 1.0,
    launch_us: 4.418,
};

/// The shared part of the fit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SharedFit {
    pub winograd_speedup: f64,
    pub fft_speedup: f64,
    pub memory: f64,
    pub launch_us: f64,
}

/// Architecture → (GEMM share of FP32 peak, convolution share of FP32 peak, tensor-core shares of
/// matrix products and of convolutions),
/// fitted by `topoplace fidelity --calibrate` in two stages. First the FP32 shares and
/// [`SHARED`], to the TensorFlow calibration scenarios of [`crate::fidelity::scenarios`]
/// (resnet50, alexnet and vgg16 on each GPU but the P100); then, those held fixed, one
/// pair of tensor-core shares per architecture to the PyTorch TF32 and mixed-precision calibration
/// scenarios (BERT-large and ResNet-50 on one A100 and one V100), so the FP32 figures do not
/// move. An architecture without a PyTorch scenario takes the mean tensor shares. Hopper, last,
/// is fitted relative to Ampere: Lambda ran the same benchmarks on an A100 and an H100, and
/// its H100 rows are fitted as the simulated A100 time times Lambda's H100/A100 ratio, which
/// cancels what Lambda's harness adds on both; its FP32 GEMM share is Ampere's (no FP32 GEMM
/// run on Hopper is published; on an H100 an 8192³ GEMM reaches 77% of the FP32 peak, 80% of
/// TF32's and 79% of bf16's, docs/modelling.md). Ampere's
/// convolution share exceeds 1 because frameworks run FP32 convolutions as TF32 on its tensor
/// cores (156 TFLOPS dense), while the share is taken of the 19.5 TFLOPS FP32 peak.
/// Memory-bound kernels fit at the full datasheet bandwidth (the bound of the fit): the graphs'
/// byte counts do not know which elementwise ops frameworks fuse.
pub(crate) const SHIPPED: &[(Arch, Shares)] = &[
    (Arch::Kepler, (0.5462, 0.3005, TENSOR_MEAN)),
    (Arch::Pascal, (0.6405, 0.5067, TENSOR_MEAN)),
    (Arch::Volta, (0.6607, 0.7479, TENSOR_VOLTA)),
    (Arch::Turing, (0.7575, 0.7083, TENSOR_MEAN)),
    (Arch::Ampere, (0.7327, 1.3636, TENSOR_AMPERE)),
    (Arch::Hopper, (0.7327, 0.6538, (0.5033, 0.2475))),
];

/// (GEMM, convolution, (tensor-core GEMM, tensor-core convolution)) shares.
type Shares = (f64, f64, (f64, f64));

const TENSOR_VOLTA: (f64, f64) = (0.6887, 0.5371);
const TENSOR_AMPERE: (f64, f64) = (0.7105, 0.4165);
const TENSOR_MEAN: (f64, f64) = (
    (TENSOR_VOLTA.0 + TENSOR_AMPERE.0) / 2.0,
    (TENSOR_VOLTA.1 + TENSOR_AMPERE.1) / 2.0,
);

/// The shares for architectures without measurements (consumer Ampere): the mean of the fitted
/// rows.
pub(crate) const FALLBACK: Shares = (0.6675, 0.7254, TENSOR_MEAN);

fn shared(gemm: f64, conv: f64, (tensor, tensor_conv): (f64, f64)) -> KernelEfficiency {
    KernelEfficiency {
        gemm,
        conv,
        tensor,
        tensor_conv,
        winograd_speedup: SHARED.winograd_speedup,
        fft_speedup: SHARED.fft_speedup,
        memory: SHARED.memory,
        launch_us: SHARED.launch_us,
    }
}
