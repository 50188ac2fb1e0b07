//! Routes between every pair of devices of a cluster, computed once: the links a transfer
//! crosses, its bottleneck bandwidth and its latency.

use super::Cluster;

/// Routes between every pair of devices, computed once per cluster.
#[derive(Debug, Clone)]
pub struct RouteTable {
    n: usize,
    links: Vec<Vec<u32>>,
    bandwidth: Vec<f64>,
    latency: Vec<f64>,
}

impl RouteTable {
    pub fn new(cluster: &Cluster) -> RouteTable {
        let n = cluster.devices.len();
        let mut t = RouteTable {
            n,
            links: Vec::with_capacity(n * n),
            bandwidth: Vec::with_capacity(n * n),
            latency: Vec::with_capacity(n * n),
        };
        for a in 0..n {
            for b in 0..n {
                if a == b {
                    t.links.push(Vec::new());
                    t.bandwidth.push(f64::INFINITY);
                    t.latency.push(0.0);
                } else {
                    let route = cluster.path(a, b);
                    t.links
                        .push(route.links.iter().map(|&l| l as u32).collect());
                    t.bandwidth.push(route.bandwidth);
                    t.latency.push(route.latency_us);
                }
            }
        }
        t
    }

    pub fn links(&self, a: usize, b: usize) -> &[u32] {
        &self.links[a * self.n + b]
    }

    pub fn bandwidth(&self, a: usize, b: usize) -> f64 {
        self.bandwidth[a * self.n + b]
    }

    pub fn latency(&self, a: usize, b: usize) -> f64 {
        self.latency[a * self.n + b]
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
