//! The links of a route between two devices, held inline. A route is at most three links (a
//! GPU pair's link and the two ports inside a machine; the two NICs between machines), so the
//! cluster works it out on demand from its structure ([`super::Cluster::route_links`]): a table
//! of every pair would cost O(GPUs²) time and memory (a million routes on 1,024 GPUs) before
//! anything is simulated, so no such table exists and nothing is built per cluster.

use std::ops::Deref;

/// The links of one route, in order, held inline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RouteLinks {
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
