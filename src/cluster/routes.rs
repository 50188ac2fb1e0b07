//! Routes between pairs of devices: the links a transfer crosses, its bottleneck bandwidth and
//! its latency. A route is at most three links (a GPU pair's link and the two ports inside a
//! machine; the two NICs between machines), so it is worked out on demand from the cluster's
//! structure: a table of every pair would cost O(GPUs²) time and memory (a million routes on
//! 1,024 GPUs) before anything is simulated.

use std::ops::Deref;

use super::Cluster;

/// The links of one route, in order, held inline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteLinks {
    links: [u32; 3],
    len: u8,
}

impl RouteLinks {
    pub(super) fn of(links: &[usize]) -> RouteLinks {
        let mut out = RouteLinks {
            links: [0; 3],
            len: links.len() as u8,
        };
        for (slot, &l) in out.links.iter_mut().zip(links) {
            *slot = l as u32;
        }
        out
    }
}

impl Deref for RouteLinks {
    type Target = [u32];

    fn deref(&self) -> &[u32] {
        &self.links[..self.len as usize]
    }
}

/// Routes of one cluster, for the compiler and the placers (which ask for many of them).
#[derive(Debug, Clone)]
pub struct RouteTable {
    cluster: Cluster,
}

impl RouteTable {
    pub fn new(cluster: &Cluster) -> RouteTable {
        RouteTable {
            cluster: cluster.clone(),
        }
    }

    pub fn links(&self, a: usize, b: usize) -> RouteLinks {
        self.cluster.route_links(a, b)
    }

    pub fn bandwidth(&self, a: usize, b: usize) -> f64 {
        self.cluster.bandwidth(a, b)
    }

    pub fn latency(&self, a: usize, b: usize) -> f64 {
        self.cluster.latency(a, b)
    }

    /// Latency plus bytes over the bottleneck bandwidth.
    pub fn transfer_us(&self, a: usize, b: usize, bytes: f64) -> f64 {
        if a == b {
            0.0
        } else {
            self.latency(a, b) + bytes / self.bandwidth(a, b)
        }
    }
}
