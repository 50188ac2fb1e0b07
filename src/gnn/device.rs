//! The devices the GNN runs on: burn's flex CPU backend, or wgpu with the `wgpu` feature.

use burn::prelude::*;

use crate::error::{Error, Result};

/// The CPU device the GNN runs on by default: burn's pure-Rust flex backend.
pub fn cpu() -> Device {
    Device::flex()
}

/// The GPU device (burn wgpu), with the `wgpu` feature.
#[cfg(feature = "wgpu")]
pub(crate) fn gpu() -> Device {
    Device::wgpu(Default::default())
}

/// The device called `name`: `cpu` (flex) or `wgpu` (only in builds with the `wgpu` feature).
pub fn device_named(name: &str) -> Result<Device> {
    match name {
        "cpu" => Ok(cpu()),
        #[cfg(feature = "wgpu")]
        "wgpu" => Ok(gpu()),
        #[cfg(not(feature = "wgpu"))]
        "wgpu" => Err(crate::error::GnnError::NoWgpu.into()),
        other => Err(Error::Unknown {
            kind: "GNN device",
            name: other.to_string(),
            expected: "known: cpu, wgpu".into(),
        }),
    }
}
