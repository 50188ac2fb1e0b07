//! How fast fused attention runs: the published forward + backward speeds of the kernels
//! PyTorch's `scaled_dot_product_attention` dispatches to in 16 bits, by sequence length, head
//! size and causal mask, as a share of the GPU's 16-bit tensor-core peak.
//!
//! A fused attention kernel does not run at a matrix product's share of peak: its two products
//! are small per head (a head's 64–128 elements deep), it runs a softmax between them, and its
//! backward recomputes the scores. How close it gets grows with the sequence (more work per
//! block of queries) and the head size, and a causal mask costs speed (the diagonal blocks are
//! half wasted). The figures are those the kernels' authors published, each on one reference GPU:
//!
//! - **Ampere (A100)**: FlashAttention-2, which PyTorch's flash backend is. Tri Dao's benchmark
//!   (`assets/flash2_a100_fwd_bwd_benchmark.png` of Dao-AILab/flash-attention; A100 80GB SXM4,
//!   16k tokens per batch, hidden 2,048, fp16), sequence 512 to 16k, head size 64 and 128, with
//!   and without a causal mask. Three bars are hidden under the legend and read from their height:
//!   non-causal head 64 at 1k (153) and head 128 at 512 and 1k (150, 173), ±2.
//! - **Hopper (H100)**: cuDNN's fused attention, which PyTorch prefers on Hopper from 2.11 on (its
//!   `check_prefer_cudnn_attention` once the bundled cuDNN passes 9.15.1). NVIDIA's
//!   cudnn-frontend benchmark (`benchmark/benchmark_results.csv`; an H200 at locked 1,980 MHz
//!   clocks, bf16, head size 128) gives 4k to 16k tokens; shorter sequences and head size 64
//!   take FlashAttention-2's shape on the H100 (`assets/flash2_h100_fwd_bwd_benchmark.png`):
//!   cuDNN's figure at the nearest measured length times FlashAttention-2's ratio between the
//!   two shapes. The H200 has the H100's SMs and clocks, and more memory bandwidth, which a
//!   compute-bound kernel does not use.
//!
//! The FLOPs are counted the way both benchmarks count them and the zoo builds its graphs: the
//! forward does `4 · s_q · s_k · hidden` per sample (half that under a causal mask) and the
//! backward 2.5 times as much; the published speed is the two together, so the forward and the
//! backward each run at it. Between measured lengths the speed is interpolated in log₂ of the
//! sequence (the geometric mean of the query and key lengths), between head sizes linearly, and
//! outside the measured range it is held at the nearest end. Other architectures have no
//! published figure (FlashAttention-2 needs Ampere; Volta and Turing run the memory-efficient
//! kernel) and run attention at their matrix-product share, as 32-bit attention does everywhere.

use crate::cluster::Arch;
use crate::graph::AttentionShape;

/// Sequence lengths of the FlashAttention-2 benchmarks, tokens.
const FA2_SEQ: [f64; 6] = [512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0];

/// One GPU's FlashAttention-2 forward + backward speeds, TFLOP/s, at [`FA2_SEQ`].
struct Fa2Curves {
    /// The reference GPU's dense 16-bit tensor-core peak, TFLOP/s.
    peak: f64,
    /// Without a mask: head size 64, head size 128.
    full: [[f64; 6]; 2],
    /// With a causal mask: head size 64, head size 128.
    causal: [[f64; 6]; 2],
}

/// A100 80GB SXM4 (312 TFLOP/s dense fp16).
const FA2_A100: Fa2Curves = Fa2Curves {
    peak: 312.0,
    full: [
        [132.0, 153.0, 162.0, 171.0, 175.0, 176.0],
        [150.0, 173.0, 187.0, 196.0, 201.0, 203.0],
    ],
    causal: [
        [88.0, 119.0, 140.0, 156.0, 165.0, 171.0],
        [99.0, 133.0, 155.0, 173.0, 182.0, 189.0],
    ],
};

/// H100 80GB SXM5 (989.5 TFLOP/s dense fp16).
const FA2_H100: Fa2Curves = Fa2Curves {
    peak: 989.5,
    full: [
        [215.0, 254.0, 274.0, 288.0, 294.0, 296.0],
        [248.0, 294.0, 320.0, 326.0, 335.0, 338.0],
    ],
    causal: [
        [141.0, 192.0, 232.0, 257.0, 273.0, 284.0],
        [163.0, 221.0, 265.0, 294.0, 308.0, 328.0],
    ],
};

/// Sequence lengths of cuDNN's published Hopper figures, tokens.
const CUDNN_SEQ: [f64; 3] = [4096.0, 8192.0, 16384.0];

/// cuDNN's bf16 forward + backward speeds at head size 128 on Hopper, TFLOP/s, at [`CUDNN_SEQ`]:
/// without a mask and with a causal one.
const CUDNN_HOPPER: [[f64; 3]; 2] = [[550.15, 563.68, 564.45], [467.94, 490.27, 520.26]];

/// The share of `arch`'s 16-bit tensor-core peak that fused attention of `shape` reaches in 16
/// bits; `None` where no figure is published.
pub(crate) fn attention_share(arch: Arch, shape: &AttentionShape) -> Option<f64> {
    let seq = (f64::from(shape.seq_q) * f64::from(shape.seq_k)).sqrt();
    let head = f64::from(shape.head_dim);
    match arch {
        Arch::Ampere => Some(FA2_A100.speed(seq, head, shape.causal) / FA2_A100.peak),
        Arch::Hopper => Some(cudnn_hopper(seq, head, shape.causal) / FA2_H100.peak),
        _ => None,
    }
}

impl Fa2Curves {
    /// TFLOP/s at `seq` tokens and head size `head`.
    fn speed(&self, seq: f64, head: f64, causal: bool) -> f64 {
        let [h64, h128] = if causal { &self.causal } else { &self.full };
        let at64 = interpolate_log2(&FA2_SEQ, h64, seq);
        let at128 = interpolate_log2(&FA2_SEQ, h128, seq);
        let t = ((head - 64.0) / 64.0).clamp(0.0, 1.0);
        at64 + t * (at128 - at64)
    }
}

/// cuDNN on Hopper: its measured speed at the nearest measured length (head size 128), times
/// FlashAttention-2's ratio on the H100 between the shape asked for and that one.
fn cudnn_hopper(seq: f64, head: f64, causal: bool) -> f64 {
    let measured = &CUDNN_HOPPER[usize::from(causal)];
    let nearest = seq.clamp(CUDNN_SEQ[0], CUDNN_SEQ[2]);
    let at_nearest = interpolate_log2(&CUDNN_SEQ, measured, nearest);
    at_nearest * FA2_H100.speed(seq, head, causal) / FA2_H100.speed(nearest, 128.0, causal)
}

/// Piecewise linear in log₂ x through the points (`xs`, `ys`), held at the ends.
fn interpolate_log2<const N: usize>(xs: &[f64; N], ys: &[f64; N], x: f64) -> f64 {
    if x <= xs[0] {
        return ys[0];
    }
    for i in 1..N {
        if x <= xs[i] {
            let t = (x / xs[i - 1]).log2() / (xs[i] / xs[i - 1]).log2();
            return ys[i - 1] + t * (ys[i] - ys[i - 1]);
        }
    }
    ys[N - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(seq: u32, head_dim: u32, causal: bool) -> AttentionShape {
        AttentionShape {
            seq_q: seq,
            seq_k: seq,
            head_dim,
            causal,
        }
    }

    fn tflops(arch: Arch, peak: f64, s: AttentionShape) -> f64 {
        attention_share(arch, &s).unwrap() * peak
    }

    #[test]
    fn the_a100_runs_at_flash_attention_2s_published_speeds() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9 * b;
        assert!(close(
            tflops(Arch::Ampere, 312.0, shape(512, 64, false)),
            132.0
        ));
        assert!(close(
            tflops(Arch::Ampere, 312.0, shape(2048, 128, false)),
            187.0
        ));
        assert!(close(
            tflops(Arch::Ampere, 312.0, shape(1024, 64, true)),
            119.0
        ));
        assert!(close(
            tflops(Arch::Ampere, 312.0, shape(16384, 128, true)),
            189.0
        ));
        // Between head sizes 64 and 128, halfway; beyond the measured range, held.
        assert!(close(
            tflops(Arch::Ampere, 312.0, shape(4096, 96, true)),
            164.5
        ));
        assert!(close(
            tflops(Arch::Ampere, 312.0, shape(128, 64, false)),
            132.0
        ));
        assert!(close(
            tflops(Arch::Ampere, 312.0, shape(65536, 256, true)),
            189.0
        ));
    }

    #[test]
    fn hopper_runs_at_cudnns_published_speeds_and_flash_attention_2s_shape() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9 * b;
        assert!(close(
            tflops(Arch::Hopper, 989.5, shape(4096, 128, false)),
            550.15
        ));
        assert!(close(
            tflops(Arch::Hopper, 989.5, shape(16384, 128, true)),
            520.26
        ));
        // 1k tokens, head size 64, causal: cuDNN at 4k times FA2's 1k/64 over 4k/128.
        let expected = 467.94 * 192.0 / 294.0;
        assert!(close(
            tflops(Arch::Hopper, 989.5, shape(1024, 64, true)),
            expected
        ));
    }

    #[test]
    fn attention_speeds_grow_with_the_sequence_and_the_head_and_drop_under_a_mask() {
        for arch in [Arch::Ampere, Arch::Hopper] {
            let share = |seq, head, causal| attention_share(arch, &shape(seq, head, causal));
            let mut last = 0.0;
            for seq in [256, 512, 768, 1024, 3000, 4096, 8192, 12000, 16384, 32768] {
                for head in [64, 80, 128] {
                    let s = share(seq, head, false).unwrap();
                    assert!(
                        s >= share(seq, head, true).unwrap(),
                        "{arch:?} {seq} {head}"
                    );
                    assert!(
                        s <= share(seq, 128, false).unwrap(),
                        "{arch:?} {seq} {head}"
                    );
                    assert!(s > 0.0 && s < 1.0, "{arch:?} {seq} {head}: {s}");
                }
                let s = share(seq, 64, true).unwrap();
                assert!(s >= last, "{arch:?} {seq}");
                last = s;
            }
        }
        assert_eq!(attention_share(Arch::Volta, &shape(1024, 64, true)), None);
    }
}
