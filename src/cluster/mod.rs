//! The cluster: machines, device groups, devices, links and the routes between devices.
//!
//! A **device group** is the set of same-type GPUs in one machine sharing one intra-machine
//! bandwidth (TAG §4.2); strategies choose device groups. **Links** are FIFO channels, one per
//! direction: one per ordered pair of devices inside a machine, per device an egress and an
//! ingress port ([`interconnect`]: the PCIe slot or the NVLink bricks all its traffic shares), and
//! per machine a NIC-out and a NIC-in link. A transfer inside a machine holds the pair's link and
//! both ends' ports; a transfer across machines uses the source's NIC-out then the destination's
//! NIC-in, so concurrent transfers leaving one machine queue on its NIC. A measured device-pair
//! bandwidth matrix (MOIRAI Table III), when given, overrides the modelled route bandwidths.
//!
//! Clusters come from TOML ([`config`]), or from the random generator ([`random`]).

pub mod catalog;
pub(crate) mod config;
pub(crate) mod interconnect;
pub mod random;
pub(crate) mod routes;

pub(crate) use catalog::Arch;
pub use catalog::CATALOG;
pub(crate) use catalog::GpuSpec;
pub use catalog::find_gpu;

pub use catalog::lookup_gpu;
pub use config::load_cluster;
pub use config::parse_cluster;
pub use interconnect::Interconnect;
pub use interconnect::parse_nvidia_smi_topo;
pub(crate) use interconnect::port_lanes;
pub use random::GpuMix;
pub use random::TopologyDistribution;
pub use random::gbps_range_problem;
pub use random::random_cluster;
pub use random::random_cluster_within;
pub(crate) use routes::RouteLinks;

use serde::Serialize;

use crate::units;
pub(crate) use catalog::check_profile_key;

/// One physical server (host). It may hold several device groups when it mixes GPU types.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    /// Position of this machine in [`Cluster::machines`].
    pub index: usize,
    /// The machine's name (its `[[machine]]` entry's, or the shared `server` of a mixed machine);
    /// its devices are named after it.
    pub name: String,
    /// NIC bandwidth per direction, B/µs.
    pub nic_bandwidth: f64,
    /// Device groups on this machine, in index order.
    pub groups: Vec<usize>,
    /// Devices on this machine, in index order.
    pub devices: Vec<usize>,
    /// Index of this machine's outgoing NIC link.
    pub nic_out: usize,
    /// Index of this machine's incoming NIC link.
    pub nic_in: usize,
}

/// Same-type GPUs in one machine sharing one intra-machine bandwidth (TAG §4.2).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceGroup {
    /// Position of this group in [`Cluster::groups`].
    pub index: usize,
    /// The `[[machine]]` entry's name: the machine's name unless the machine mixes GPU types.
    pub name: String,
    /// Index of the machine holding this group, in [`Cluster::machines`].
    pub machine: usize,
    /// Catalog spec of the GPU type every device of the group has.
    pub gpu: GpuSpec,
    /// Devices of this group, in index order ([`Cluster::devices`] indices).
    pub devices: Vec<usize>,
    /// Bandwidth between two devices of this group, per direction, B/µs.
    pub intra_bandwidth: f64,
    /// Latency of one transfer between two devices of this group, µs.
    pub intra_latency_us: f64,
    /// How the group's GPUs are wired.
    pub interconnect: Interconnect,
    /// Capacity of each GPU's port per direction, B/µs: lanes × `intra_bandwidth`.
    pub port_bandwidth: f64,
}

impl DeviceGroup {
    /// Transfers each GPU's port serves at once.
    pub fn port_lanes(&self) -> u32 {
        port_lanes(self.port_bandwidth, self.intra_bandwidth)
    }
}

/// One GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    /// Position of this device in [`Cluster::devices`]; placements refer to devices by it.
    pub index: usize,
    /// Index of the machine holding this device, in [`Cluster::machines`].
    pub machine: usize,
    /// Index of this device's group, in [`Cluster::groups`].
    pub group: usize,
    /// Catalog spec of this GPU (compute throughput, default memory).
    pub gpu: GpuSpec,
    /// "<machine>:<k>", k counting the machine's devices from 0.
    pub name: String,
    /// Usable device memory in bytes: the catalog's unless the config overrides it.
    pub memory_bytes: f64,
    /// Indices of this device's egress and ingress port links (assigned by [`Cluster::new`]).
    pub port_out: usize,
    /// Index of this device's ingress port link (assigned by [`Cluster::new`]).
    pub port_in: usize,
}

/// What a link connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// Device `src` to device `dst` inside one machine.
    Intra {
        /// Sending device index.
        src: usize,
        /// Receiving device index.
        dst: usize,
    },
    /// A machine's NIC, sending.
    NicOut {
        /// Index of the machine whose NIC sends.
        machine: usize,
    },
    /// A machine's NIC, receiving.
    NicIn {
        /// Index of the machine whose NIC receives.
        machine: usize,
    },
    /// A device's port, sending (its share of the machine's fabric).
    PortOut {
        /// Index of the device whose port sends.
        device: usize,
    },
    /// A device's port, receiving.
    PortIn {
        /// Index of the device whose port receives.
        device: usize,
    },
}

/// A FIFO channel in one direction.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    /// Position of this link in [`Cluster::links`]; routes and traces refer to links by it.
    pub index: usize,
    /// What the link connects: a device pair, a NIC direction or a device port direction.
    pub kind: LinkKind,
    /// B/µs.
    pub bandwidth: f64,
    /// µs added once per transfer crossing this link. The inter-machine latency sits on NIC-out
    /// links (NIC-in links carry 0) so that a route's latency is the sum over its links.
    pub latency_us: f64,
    /// Transfers the link carries at once, each at `bandwidth` (ports of an NVLink mesh: one per
    /// peer its bricks reach at once; every other link: 1).
    pub lanes: u32,
}

/// The links a transfer from one device to another crosses, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// Indices into [`Cluster::links`] of the links crossed, in order (empty to itself).
    pub links: Vec<usize>,
    /// Bottleneck bandwidth, B/µs (the measured one when the cluster has a matrix; infinite for a
    /// device to itself).
    pub bandwidth: f64,
    /// Latency of one transfer along the route, µs: the sum of its links' latencies.
    pub latency_us: f64,
}

/// A whole cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    /// The cluster's name from its config (or the generator's label).
    pub name: String,
    /// Free-text description from the config; may be empty.
    pub description: String,
    /// Latency of one transfer between machines, µs.
    pub inter_latency_us: f64,
    /// The machines, indexed by [`Machine::index`].
    pub machines: Vec<Machine>,
    /// Every GPU of the cluster, indexed by [`Device::index`].
    pub devices: Vec<Device>,
    /// The device groups, indexed by [`DeviceGroup::index`].
    pub groups: Vec<DeviceGroup>,
    /// Every link (pair links, NICs, then device ports), indexed by [`Link::index`].
    pub links: Vec<Link>,
    /// Measured device-pair bandwidths, B/µs, `measured[src][dst]`; the diagonal is unused.
    pub measured: Option<Vec<Vec<f64>>>,
    /// Each device's position in its machine's `devices`: locates pair links without an n×n table
    /// (a machine's k(k−1) pair links come right before its NIC-out link, row by row).
    local: Vec<usize>,
}

impl Cluster {
    /// Build a cluster from its machines, device groups and devices, adding the links: one per
    /// ordered device pair inside a machine, then the machine's NIC-out and NIC-in. The indices in
    /// `machines[..].groups/devices`, `groups[..].devices` and the devices' `machine`/`group` must
    /// agree; `nic_out`/`nic_in` are assigned here. Configs and the random generator go through
    /// this; other code should prefer [`parse_cluster`].
    pub(crate) fn new(
        name: String,
        description: String,
        inter_latency_us: f64,
        mut machines: Vec<Machine>,
        groups: Vec<DeviceGroup>,
        mut devices: Vec<Device>,
        measured: Option<Vec<Vec<f64>>>,
    ) -> Cluster {
        let mut links = Vec::new();
        let mut local = vec![0; devices.len()];
        for m in &mut machines {
            for (i, &a) in m.devices.iter().enumerate() {
                local[a] = i;
                for &b in &m.devices {
                    if a != b {
                        let (bandwidth, latency_us) = intra_pair(&groups, &devices[a], &devices[b]);
                        links.push(Link {
                            index: links.len(),
                            kind: LinkKind::Intra { src: a, dst: b },
                            bandwidth,
                            latency_us,
                            lanes: 1,
                        });
                    }
                }
            }
            m.nic_out = links.len();
            links.push(Link {
                index: links.len(),
                kind: LinkKind::NicOut { machine: m.index },
                bandwidth: m.nic_bandwidth,
                latency_us: inter_latency_us,
                lanes: 1,
            });
            m.nic_in = links.len();
            links.push(Link {
                index: links.len(),
                kind: LinkKind::NicIn { machine: m.index },
                bandwidth: m.nic_bandwidth,
                latency_us: 0.0,
                lanes: 1,
            });
        }
        // Ports after every machine's pair and NIC links, so `pair_link`'s arithmetic holds.
        for d in &mut devices {
            let g = &groups[d.group];
            for kind in [
                LinkKind::PortOut { device: d.index },
                LinkKind::PortIn { device: d.index },
            ] {
                if matches!(kind, LinkKind::PortOut { .. }) {
                    d.port_out = links.len();
                } else {
                    d.port_in = links.len();
                }
                links.push(Link {
                    index: links.len(),
                    kind,
                    bandwidth: g.intra_bandwidth,
                    latency_us: 0.0,
                    lanes: g.port_lanes(),
                });
            }
        }
        Cluster {
            name,
            description,
            inter_latency_us,
            machines,
            devices,
            groups,
            links,
            measured,
            local,
        }
    }

    /// The intra-machine link from `a` to `b`, or `None` when they sit on different machines.
    fn pair_link(&self, a: usize, b: usize) -> Option<usize> {
        let m = self.devices[a].machine;
        if m != self.devices[b].machine || a == b {
            return None;
        }
        let k = self.machines[m].devices.len();
        let (i, j) = (self.local[a], self.local[b]);
        let base = self.machines[m].nic_out - k * (k - 1);
        Some(base + i * (k - 1) + if j > i { j - 1 } else { j })
    }

    /// A short label for a link, for reports and traces: "v100:0->v100:1", "v100 nic-out".
    pub fn link_name(&self, link: usize) -> String {
        match self.links[link].kind {
            LinkKind::Intra { src, dst } => {
                format!("{}->{}", self.devices[src].name, self.devices[dst].name)
            }
            LinkKind::NicOut { machine } => format!("{} nic-out", self.machines[machine].name),
            LinkKind::NicIn { machine } => format!("{} nic-in", self.machines[machine].name),
            LinkKind::PortOut { device } => format!("{} port-out", self.devices[device].name),
            LinkKind::PortIn { device } => format!("{} port-in", self.devices[device].name),
        }
    }

    /// Number of GPUs in the cluster.
    pub fn num_devices(&self) -> usize {
        self.devices.len()
    }

    /// The route from device `a` to device `b`.
    pub fn path(&self, a: usize, b: usize) -> Route {
        Route {
            links: self.route_links(a, b).iter().map(|&l| l as usize).collect(),
            bandwidth: self.bandwidth(a, b),
            latency_us: self.latency(a, b),
        }
    }

    /// The links from `a` to `b`: the pair's link and both ports inside a machine, both NICs
    /// between machines, none to itself.
    pub(crate) fn route_links(&self, a: usize, b: usize) -> RouteLinks {
        if a == b {
            return RouteLinks::of(&[]);
        }
        match self.pair_link(a, b) {
            Some(l) => RouteLinks::of(&[l, self.devices[a].port_out, self.devices[b].port_in]),
            None => {
                let src = &self.machines[self.devices[a].machine];
                let dst = &self.machines[self.devices[b].machine];
                RouteLinks::of(&[src.nic_out, dst.nic_in])
            }
        }
    }

    /// Bottleneck bandwidth from `a` to `b`, B/µs (the measured one when the cluster has a
    /// matrix; infinite when `a == b`).
    pub fn bandwidth(&self, a: usize, b: usize) -> f64 {
        if a == b {
            return f64::INFINITY;
        }
        match &self.measured {
            Some(m) => m[a][b],
            None => self
                .route_links(a, b)
                .iter()
                .map(|&l| self.links[l as usize].bandwidth)
                .fold(f64::INFINITY, f64::min),
        }
    }

    /// Latency from `a` to `b`, µs: the sum of its links'.
    pub fn latency(&self, a: usize, b: usize) -> f64 {
        self.route_links(a, b)
            .iter()
            .map(|&l| self.links[l as usize].latency_us)
            .sum()
    }

    /// Latency plus `bytes` over the bottleneck bandwidth from `a` to `b`, µs (0 to itself).
    pub fn transfer_us(&self, a: usize, b: usize, bytes: f64) -> f64 {
        if a == b {
            0.0
        } else {
            self.latency(a, b) + bytes / self.bandwidth(a, b)
        }
    }

    /// The serialisable overview used by `topoplace cluster`.
    pub fn summary(&self) -> ClusterSummary {
        let n = self.devices.len();
        let bandwidth_gbs = (0..n)
            .map(|a| {
                (0..n)
                    .map(|b| {
                        if a == b {
                            0.0
                        } else {
                            units::to_gbs(self.bandwidth(a, b))
                        }
                    })
                    .collect()
            })
            .collect();
        ClusterSummary {
            name: self.name.clone(),
            devices: self
                .devices
                .iter()
                .map(|d| DeviceSummary {
                    index: d.index,
                    name: d.name.clone(),
                    machine: self.machines[d.machine].name.clone(),
                    gpu: d.gpu.name.to_string(),
                    memory_gib: units::to_gib(d.memory_bytes),
                    fp32_tflops: d.gpu.fp32_tflops,
                })
                .collect(),
            groups: self
                .groups
                .iter()
                .map(|g| GroupSummary {
                    index: g.index,
                    machine: self.machines[g.machine].name.clone(),
                    gpu: g.gpu.name.to_string(),
                    devices: g.devices.clone(),
                    intra_bandwidth_gbs: units::to_gbs(g.intra_bandwidth),
                })
                .collect(),
            bandwidth_gbs,
        }
    }
}

/// Bandwidth and latency between two devices of one machine: their group's figures, or, for
/// devices of two groups in a mixed machine, the slower bandwidth and the larger latency
/// (the transfer goes through whichever interconnect is the weaker).
fn intra_pair(groups: &[DeviceGroup], a: &Device, b: &Device) -> (f64, f64) {
    let (ga, gb) = (&groups[a.group], &groups[b.group]);
    (
        ga.intra_bandwidth.min(gb.intra_bandwidth),
        ga.intra_latency_us.max(gb.intra_latency_us),
    )
}

/// A device row of [`ClusterSummary`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceSummary {
    /// The device's index in the cluster.
    pub index: usize,
    /// The device's name, "<machine>:<k>".
    pub name: String,
    /// Name of the machine holding the device.
    pub machine: String,
    /// GPU model name from the catalog.
    pub gpu: String,
    /// Usable device memory, GiB.
    pub memory_gib: f64,
    /// Peak FP32 throughput of the GPU, TFLOPS.
    pub fp32_tflops: f64,
}

/// A device-group row of [`ClusterSummary`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupSummary {
    /// The group's index in the cluster.
    pub index: usize,
    /// Name of the machine holding the group.
    pub machine: String,
    /// GPU model name shared by the group's devices.
    pub gpu: String,
    /// Indices of the group's devices.
    pub devices: Vec<usize>,
    /// Bandwidth between two devices of the group, per direction, GB/s.
    pub intra_bandwidth_gbs: f64,
}

/// What `topoplace cluster` prints, in JSON or as text. Keys are stable.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterSummary {
    /// The cluster's name.
    pub name: String,
    /// One row per device, in index order.
    pub devices: Vec<DeviceSummary>,
    /// One row per device group, in index order.
    pub groups: Vec<GroupSummary>,
    /// Device-pair bandwidth in GB/s, 0 on the diagonal.
    pub bandwidth_gbs: Vec<Vec<f64>>,
}

impl ClusterSummary {
    /// Devices table, device groups, and the bandwidth matrix in GB/s.
    pub fn render_text(&self) -> String {
        let mut out = format!(
            "cluster {}: {} devices in {} device groups\n\ndevices\n",
            self.name,
            self.devices.len(),
            self.groups.len()
        );
        out += &format!(
            "{:>4}  {:<16} {:<14} {:<16} {:>8} {:>8}\n",
            "idx", "name", "machine", "gpu", "mem GiB", "TFLOPS"
        );
        for d in &self.devices {
            out += &format!(
                "{:>4}  {:<16} {:<14} {:<16} {:>8.1} {:>8.2}\n",
                d.index, d.name, d.machine, d.gpu, d.memory_gib, d.fp32_tflops
            );
        }
        out += "\ndevice groups\n";
        for g in &self.groups {
            out += &format!(
                "{:>4}  {:<14} {:<16} devices {:?}  intra {} GB/s\n",
                g.index,
                g.machine,
                g.gpu,
                g.devices,
                trim(g.intra_bandwidth_gbs)
            );
        }
        out += "\nbandwidth GB/s (row = source, column = destination)\n";
        out += "    ";
        for j in 0..self.devices.len() {
            out += &format!("{j:>9}");
        }
        out += "\n";
        for (i, row) in self.bandwidth_gbs.iter().enumerate() {
            out += &format!("{i:>4}");
            for v in row {
                out += &format!("{:>9}", trim(*v));
            }
            out += "\n";
        }
        out
    }
}

/// Three decimals at most, no trailing zeros: matrices stay readable.
fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}
