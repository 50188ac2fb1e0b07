//! `topoplace fidelity`: the simulator against published measurements, and the calibration of
//! its kernel efficiencies.

use clap::Args;

use super::common::print_json;
use topoplace::cost::{CostModel, KernelEfficiency};
use topoplace::error::Result;
use topoplace::fidelity::{calibrate, fidelity_table, render_markdown, scenarios};

#[derive(Args)]
pub struct FidelityArgs {
    /// Fit the kernel-efficiency table to the calibration scenarios and print it (the shipped
    /// table in src/cost/kernels.rs is this output).
    #[arg(long)]
    calibrate: bool,
    /// The comparison table as JSON (one object per scenario).
    #[arg(long, conflicts_with = "calibrate")]
    json: bool,
}

pub fn run(args: FidelityArgs) -> Result<()> {
    let all = scenarios();
    if args.calibrate {
        let fit = calibrate(&all)?;
        outln!(
            "fitted to {} calibration scenarios, rms log error {:.4}",
            fit.scenarios,
            fit.rms_log_error
        )?;
        for (arch, e) in fit.table.rows() {
            outln!("{arch:?}: {}", row(e))?;
        }
        outln!("fallback: {}", row(fit.table.fallback()))?;
        if let Some(h) = fit.allocator_headroom {
            outln!("PyTorch allocator headroom: {h:.4} of the allocated peak")?;
        }
        return Ok(());
    }
    let rows = fidelity_table(&all, &CostModel::default())?;
    if args.json {
        return print_json(&rows);
    }
    out!("{}", render_markdown(&rows))?;
    Ok(())
}

fn row(e: &KernelEfficiency) -> String {
    format!(
        "gemm {:.4}, conv {:.4}, tensor {:.4}, tensor conv {:.4}, winograd {:.4}, fft {:.4}, \
         memory {:.4}, launch {:.3} us",
        e.gemm,
        e.conv,
        e.tensor,
        e.tensor_conv,
        e.winograd_speedup,
        e.fft_speedup,
        e.memory,
        e.launch_us
    )
}
