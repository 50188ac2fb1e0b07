//! The cluster's TOML form.
//!
//! ```toml
//! name = "tag-testbed"
//! description = "TAG §5.2 on-premise testbed"   # optional
//! inter_latency = "10 us"                       # optional, default 10 µs per cross-machine transfer
//!
//! [[machine]]
//! name = "v100"
//! gpu = "V100-32GB"            # catalog name or alias, case-insensitive
//! gpus = 4
//! intra_bandwidth = "150 GB/s" # between two GPUs of this entry, per direction
//! intra_latency = "5 us"       # optional, default 5 µs
//! nic = "100 Gbps"             # per direction
//! count = 1                    # optional: identical machines; names get "-0", "-1", … when > 1
//! memory = "30 GiB"            # optional: usable memory per GPU, default the catalog's
//! server = "host1"             # optional, see below
//! interconnect = "nvlink"      # optional: "pcie", "nvlink" (a mesh) or "nvswitch"; default by GPU
//! port_bandwidth = "150 GB/s"  # optional: each GPU's fabric capacity per direction (see below)
//!
//! [bandwidth_matrix]           # optional measured device-pair bandwidths, row = source
//! unit = "Gbps"
//! values = [[0, 44.26], [42.39, 0]]
//! ```
//!
//! Quantities are strings with a unit ("100 Gbps", "50 GB/s", "5 us", "32 GiB") or plain numbers
//! in a documented unit: bandwidths in GB/s, latencies in µs, memory in GiB.
//!
//! **Machines mixing GPU types**: each `[[machine]]` entry is one device group. Entries that name
//! the same `server` are device groups of one physical machine called `server` (their `name`
//! labels the group); they must agree on `nic` and have `count = 1`. Two devices of different
//! groups on one server talk at the lower of the two entries' `intra_bandwidth` and the higher
//! `intra_latency`; a measured matrix overrides this.
//!
//! **Ports**: every GPU's intra-machine traffic shares its port (`cluster::interconnect`). On
//! `pcie` and `nvswitch` the port carries one transfer at a time at `intra_bandwidth`; on an
//! `nvlink` mesh it carries `port_bandwidth / intra_bandwidth` at once (default `port_bandwidth`:
//! the GPU's aggregate NVLink bandwidth, 150 GB/s for an SXM2 V100, 80 GB/s for an SXM2 P100).
//! The default interconnect is the GPU's form factor's: NVLink mesh for SXM2 V100/P100, NVSwitch
//! for SXM A100/H100, PCIe otherwise.
//!
//! Devices are numbered machine by machine, groups in file order within a machine; a measured
//! matrix is indexed in that order.

use serde::{Deserialize, Serialize};

use super::interconnect::MAX_GPUS_PER_ENTRY;
use super::{Cluster, Device, DeviceGroup, Interconnect, Machine, catalog};
use crate::error::{InputError, check_non_negative, check_positive};
use crate::units;

/// Default latency of a transfer between two machines.
pub(crate) const DEFAULT_INTER_LATENCY_US: f64 = 10.0;
/// Default latency of a transfer between two GPUs of one machine.
pub(crate) const DEFAULT_INTRA_LATENCY_US: f64 = 5.0;
/// Most identical machines one entry may expand to.
pub(crate) const MAX_COUNT: i64 = 4096;
/// Most GPUs in a whole cluster: what the tool is measured to handle (`simulate --strategy dp`
/// of bert-large on 1,024 GPUs, two simulations, takes 5.7 s and 1.5 GB on 2 cores; the routes
/// and reports are n×n). A 2,048-machine config is refused at once instead of hanging.
pub(crate) const MAX_DEVICES: usize = 1_024;

/// A number with a unit as text, or a bare number in the field's documented unit.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub(crate) enum Quantity {
    Number(f64),
    Text(String),
}

/// Hand-written so a wrong type says what is expected (serde's untagged error names no unit).
impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(QuantityVisitor)
    }
}

struct QuantityVisitor;

impl serde::de::Visitor<'_> for QuantityVisitor {
    type Value = Quantity;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(
            "a number or a string with a unit, such as \"100 Gbps\", \"5 us\" or \"32 GiB\"",
        )
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Quantity, E> {
        Ok(Quantity::Number(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Quantity, E> {
        Ok(Quantity::Number(v as f64))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Quantity, E> {
        Ok(Quantity::Number(v as f64))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Quantity, E> {
        Ok(Quantity::Text(v.to_string()))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClusterFile {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inter_latency: Option<Quantity>,
    #[serde(rename = "machine")]
    pub machines: Vec<MachineEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_matrix: Option<MatrixEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MachineEntry {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    pub gpu: String,
    pub gpus: i64,
    pub intra_bandwidth: Quantity,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intra_latency: Option<Quantity>,
    pub nic: Quantity,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interconnect: Option<Interconnect>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_bandwidth: Option<Quantity>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MatrixEntry {
    pub unit: String,
    pub values: Vec<Vec<f64>>,
}

/// Parse a cluster from TOML text; `source` names the file in errors.
pub fn parse_cluster(text: &str, source: &str) -> Result<Cluster, InputError> {
    let file: ClusterFile = crate::io::parse_toml(text, source)?;
    build(&file, source)
}

/// Read and parse a cluster TOML file.
pub fn load_cluster(path: impl AsRef<std::path::Path>) -> crate::error::Result<Cluster> {
    let path = path.as_ref();
    let shown = path.display().to_string();
    let text = crate::io::read_text_file(path)?;
    Ok(parse_cluster(&text, &shown)?)
}

impl Cluster {
    /// The cluster as TOML that [`parse_cluster`] reads back to an equal cluster.
    pub fn to_toml(&self) -> String {
        toml::to_string(&self.to_file()).expect("a cluster always serialises to TOML")
    }

    fn to_file(&self) -> ClusterFile {
        let machines = self.groups.iter().map(|g| self.group_entry(g)).collect();
        let bandwidth_matrix = self.measured.as_deref().map(matrix_entry);
        ClusterFile {
            name: self.name.clone(),
            description: self.description.clone(),
            inter_latency: Some(time_text(self.inter_latency_us)),
            machines,
            bandwidth_matrix,
        }
    }

    /// One `[[machine]]` entry per device group; a `server` key only where the group's name
    /// differs from its machine's or the machine has several groups.
    fn group_entry(&self, g: &DeviceGroup) -> MachineEntry {
        let m = &self.machines[g.machine];
        let server = (m.groups.len() > 1 || m.name != g.name).then(|| m.name.clone());
        let default_memory = g.gpu.memory_bytes();
        let memory = self.devices[g.devices[0]].memory_bytes;
        MachineEntry {
            name: g.name.clone(),
            server,
            gpu: g.gpu.name.to_string(),
            gpus: g.devices.len() as i64,
            intra_bandwidth: Quantity::Text(units::bandwidth_text(g.intra_bandwidth)),
            intra_latency: Some(time_text(g.intra_latency_us)),
            nic: Quantity::Text(units::bandwidth_text(m.nic_bandwidth)),
            count: None,
            memory: (memory != default_memory)
                .then(|| Quantity::Text(units::exact_text(memory, units::GIB, "GiB", "B"))),
            interconnect: Some(g.interconnect),
            port_bandwidth: (g.port_bandwidth
                != g.interconnect
                    .default_port_bandwidth(&g.gpu, g.intra_bandwidth))
            .then(|| Quantity::Text(units::bandwidth_text(g.port_bandwidth))),
        }
    }
}

/// The measured matrix in Gbps (as papers report it) when every value converts back exactly,
/// else in B/µs.
fn matrix_entry(m: &[Vec<f64>]) -> MatrixEntry {
    let in_gbps: Vec<Vec<f64>> = m
        .iter()
        .map(|r| r.iter().map(|v| v / units::GBPS).collect())
        .collect();
    let exact = in_gbps
        .iter()
        .flatten()
        .zip(m.iter().flatten())
        .all(|(g, v)| g * units::GBPS == *v);
    if exact {
        MatrixEntry {
            unit: "Gbps".to_string(),
            values: in_gbps,
        }
    } else {
        MatrixEntry {
            unit: "B/us".to_string(),
            values: m.to_vec(),
        }
    }
}

fn time_text(us: f64) -> Quantity {
    Quantity::Text(format!("{us} us"))
}

/// Convert a quantity to internal units: text through `parse`, a bare number times `factor`.
/// The value is the caller's to check; one that overflows is infinity.
fn quantity(
    q: &Quantity,
    source: &str,
    field: &str,
    parse: fn(&str) -> Result<f64, String>,
    factor: f64,
) -> Result<f64, InputError> {
    Ok(match q {
        Quantity::Number(x) => x * factor,
        Quantity::Text(t) => parse(t).map_err(|m| InputError::new(source, field, m))?,
    })
}

/// The slowest link a config may give, B/µs: 1 Mbps. Slower ones are typos, and their
/// iteration times would print with hundreds of digits.
pub(crate) const SLOWEST_LINK: f64 = 0.125;
/// The fastest, B/µs: 1 PB/s, far above any GPU fabric.
pub(crate) const FASTEST_LINK: f64 = 1e9;

fn bandwidth(q: &Quantity, source: &str, field: &str) -> Result<f64, InputError> {
    let v = quantity(q, source, field, units::parse_bandwidth, units::GB_PER_S)?;
    check_link(source, field, v)?;
    Ok(v)
}

/// A link's bandwidth `v` (B/µs): positive and within [`SLOWEST_LINK`]..=[`FASTEST_LINK`].
fn check_link(source: &str, field: &str, v: f64) -> Result<(), InputError> {
    check_within(
        source,
        field,
        v,
        SLOWEST_LINK..=FASTEST_LINK,
        "outside 1 Mbps to 1 PB/s: no GPU link is that slow or that fast",
    )
}

/// `v` positive and within `range`; `why` says what lies outside it.
fn check_within(
    source: &str,
    field: &str,
    v: f64,
    range: std::ops::RangeInclusive<f64>,
    why: &str,
) -> Result<(), InputError> {
    // Past the largest float (a number that overflows in its unit) is past the range too.
    if v == f64::INFINITY {
        return Err(InputError::new(source, field, why));
    }
    check_positive(source, field, v)?;
    if !range.contains(&v) {
        return Err(InputError::new(source, field, why));
    }
    Ok(())
}

/// The least memory a GPU may be given, bytes: 1 MiB, below any GPU since the 1990s (tests use
/// it to make every op run out of memory).
const LEAST_MEMORY: f64 = units::MIB;
/// The most, bytes: 16 TiB, fifty times today's largest GPU (288 GB).
const MOST_MEMORY: f64 = 16.0 * 1024.0 * units::GIB;

/// A GPU's `memory`: positive and within [`LEAST_MEMORY`]..=[`MOST_MEMORY`]. 1e-300 GiB ran every
/// op out of memory with no sign of the typo, and 1,000 TiB hid every out-of-memory.
fn gpu_memory(q: &Quantity, source: &str, field: &str) -> Result<f64, InputError> {
    let v = quantity(q, source, field, units::parse_size, units::GIB)?;
    check_within(
        source,
        field,
        v,
        LEAST_MEMORY..=MOST_MEMORY,
        "outside 1 MiB to 16 TiB: no GPU has that little or that much memory",
    )?;
    Ok(v)
}

fn latency(
    q: Option<&Quantity>,
    default: f64,
    source: &str,
    field: &str,
) -> Result<f64, InputError> {
    let v = q.map_or(Ok(default), |q| {
        quantity(q, source, field, units::parse_time, 1.0)
    })?;
    if v > MOST_LATENCY {
        return Err(InputError::new(
            source,
            field,
            "is too large: at most 1 s (no GPU link waits that long)",
        ));
    }
    check_non_negative(source, field, v)?;
    Ok(v)
}

/// The longest latency a link may be given, µs: a second, thousands of times any network's.
const MOST_LATENCY: f64 = units::SECOND;

/// One `[[machine]]` entry, checked and converted.
struct Entry {
    gpu: &'static catalog::GpuSpec,
    gpus: usize,
    count: usize,
    intra_bandwidth: f64,
    intra_latency_us: f64,
    nic: f64,
    memory: Option<f64>,
    interconnect: Interconnect,
    port_bandwidth: f64,
}

fn check_entry(e: &MachineEntry, i: usize, source: &str) -> Result<Entry, InputError> {
    let f = |name: &str| format!("machine[{i}].{name}");
    let gpu = catalog::lookup_gpu(source, &f("gpu"), &e.gpu)?;
    if !(1..=MAX_GPUS_PER_ENTRY).contains(&e.gpus) {
        return Err(InputError::new(
            source,
            f("gpus"),
            format!(
                "must be at least 1 and at most {MAX_GPUS_PER_ENTRY} (got {})",
                e.gpus
            ),
        ));
    }
    let count = e.count.unwrap_or(1);
    if !(1..=MAX_COUNT).contains(&count) {
        return Err(InputError::new(
            source,
            f("count"),
            format!("must be at least 1 and at most {MAX_COUNT} (got {count})"),
        ));
    }
    if e.server.is_some() && count != 1 {
        return Err(InputError::new(
            source,
            f("count"),
            "must be 1 when `server` is set",
        ));
    }
    let memory = match &e.memory {
        Some(q) => Some(gpu_memory(q, source, &f("memory"))?),
        None => None,
    };
    // `memory` is what is usable of the GPU's own: more than the board has is a typo (or the
    // wrong GPU), and would hide every out-of-memory the real GPU would meet.
    if let Some(m) = memory
        && m > gpu.memory_bytes()
    {
        return Err(InputError::new(
            source,
            f("memory"),
            format!(
                "is {} but a {} has {} GiB: give at most that",
                units::exact_text(m, units::GIB, "GiB", "B"),
                gpu.name,
                gpu.memory_gib
            ),
        ));
    }
    let intra_bandwidth = bandwidth(&e.intra_bandwidth, source, &f("intra_bandwidth"))?;
    let interconnect = e
        .interconnect
        .unwrap_or_else(|| Interconnect::default_for(gpu));
    let port_bandwidth = match &e.port_bandwidth {
        Some(q) => bandwidth(q, source, &f("port_bandwidth"))?,
        None => interconnect.default_port_bandwidth(gpu, intra_bandwidth),
    };
    Ok(Entry {
        gpu,
        gpus: e.gpus as usize,
        count: count as usize,
        intra_bandwidth,
        interconnect,
        port_bandwidth,
        intra_latency_us: latency(
            e.intra_latency.as_ref(),
            DEFAULT_INTRA_LATENCY_US,
            source,
            &f("intra_latency"),
        )?,
        nic: bandwidth(&e.nic, source, &f("nic"))?,
        memory,
    })
}

/// A physical machine being assembled: its name, NIC and (entry index, group name) pairs.
struct Host {
    name: String,
    nic: f64,
    first_entry: usize,
    groups: Vec<(usize, String)>,
}

/// Group entries into hosts: an entry without `server` makes `count` hosts of one group each;
/// entries sharing a `server` make one host.
fn hosts(file: &ClusterFile, entries: &[Entry], source: &str) -> Result<Vec<Host>, InputError> {
    let mut hosts: Vec<Host> = Vec::new();
    let mut server_host = std::collections::BTreeMap::new();
    for (i, (e, raw)) in entries.iter().zip(&file.machines).enumerate() {
        if let Some(server) = &raw.server {
            if let Some(&h) = server_host.get(server) {
                let host: &mut Host = &mut hosts[h];
                if host.nic != e.nic {
                    return Err(InputError::new(
                        source,
                        format!("machine[{i}].nic"),
                        format!(
                            "differs from machine[{}].nic on the same server {server:?}",
                            host.first_entry
                        ),
                    ));
                }
                host.groups.push((i, raw.name.clone()));
            } else {
                server_host.insert(server.clone(), hosts.len());
                hosts.push(Host {
                    name: server.clone(),
                    nic: e.nic,
                    first_entry: i,
                    groups: vec![(i, raw.name.clone())],
                });
            }
            continue;
        }
        for c in 0..e.count {
            let name = if e.count > 1 {
                format!("{}-{c}", raw.name)
            } else {
                raw.name.clone()
            };
            hosts.push(Host {
                name: name.clone(),
                nic: e.nic,
                first_entry: i,
                groups: vec![(i, name)],
            });
        }
    }
    check_unique(
        hosts.iter().map(|h| (h.first_entry, h.name.as_str())),
        source,
        "machine name",
    )?;
    let groups = hosts
        .iter()
        .flat_map(|h| h.groups.iter().map(|(i, n)| (*i, n.as_str())));
    check_unique(groups, source, "device group name")?;
    Ok(hosts)
}

fn check_unique<'a>(
    names: impl Iterator<Item = (usize, &'a str)>,
    source: &str,
    what: &str,
) -> Result<(), InputError> {
    let mut seen = std::collections::BTreeSet::new();
    for (i, name) in names {
        if !seen.insert(name) {
            return Err(InputError::new(
                source,
                format!("machine[{i}].name"),
                format!("duplicate {what} {name:?}"),
            ));
        }
    }
    Ok(())
}

/// Check a parsed file and build the cluster.
pub(crate) fn build(file: &ClusterFile, source: &str) -> Result<Cluster, InputError> {
    // Reports, result tables and strategy files name the cluster and its machines by these.
    if crate::error::is_blank(&file.name) {
        return Err(InputError::new(
            source,
            "name",
            "is empty: give the cluster a name",
        ));
    }
    crate::error::check_printable(source, "name", &file.name)?;
    for (i, m) in file.machines.iter().enumerate() {
        let names = [("name", Some(&m.name)), ("server", m.server.as_ref())];
        for (field, name) in &names {
            if let Some(why) = name.and_then(|n| crate::error::unprintable(n)) {
                return Err(InputError::new(
                    source,
                    format!("machine[{i}].{field}"),
                    why,
                ));
            }
        }
        if let Some((field, _)) = names
            .iter()
            .find(|(_, n)| n.is_some_and(|n| crate::error::is_blank(n)))
        {
            return Err(InputError::new(
                source,
                format!("machine[{i}].{field}"),
                "is empty: give the machine a name",
            ));
        }
    }
    if file.machines.is_empty() {
        return Err(InputError::new(
            source,
            "machine",
            "at least one [[machine]] is required",
        ));
    }
    let inter_latency_us = latency(
        file.inter_latency.as_ref(),
        DEFAULT_INTER_LATENCY_US,
        source,
        "inter_latency",
    )?;
    let entries = file
        .machines
        .iter()
        .enumerate()
        .map(|(i, e)| check_entry(e, i, source))
        .collect::<Result<Vec<_>, _>>()?;
    let total: usize = entries.iter().map(|e| e.gpus * e.count).sum();
    if total > MAX_DEVICES {
        return Err(InputError::new(
            source,
            "machine",
            format!(
                "{total} GPUs in all; at most {MAX_DEVICES} are supported (the largest cluster \
                 the simulator is measured on)"
            ),
        ));
    }
    let hosts = hosts(file, &entries, source)?;

    let (mut machines, mut groups, mut devices) = (Vec::new(), Vec::new(), Vec::new());
    for host in hosts {
        let mut machine = Machine {
            index: machines.len(),
            name: host.name,
            nic_bandwidth: host.nic,
            groups: Vec::new(),
            devices: Vec::new(),
            nic_out: 0,
            nic_in: 0,
        };
        for (entry, group_name) in host.groups {
            let e = &entries[entry];
            let mut group = DeviceGroup {
                index: groups.len(),
                name: group_name,
                machine: machine.index,
                gpu: *e.gpu,
                devices: Vec::new(),
                intra_bandwidth: e.intra_bandwidth,
                intra_latency_us: e.intra_latency_us,
                interconnect: e.interconnect,
                port_bandwidth: e.port_bandwidth,
            };
            for _ in 0..e.gpus {
                let index = devices.len();
                devices.push(Device {
                    index,
                    machine: machine.index,
                    group: group.index,
                    gpu: *e.gpu,
                    name: format!("{}:{}", machine.name, machine.devices.len()),
                    memory_bytes: e.memory.unwrap_or_else(|| e.gpu.memory_bytes()),
                    port_out: 0,
                    port_in: 0,
                });
                group.devices.push(index);
                machine.devices.push(index);
            }
            machine.groups.push(group.index);
            groups.push(group);
        }
        machines.push(machine);
    }
    let measured = match &file.bandwidth_matrix {
        Some(m) => Some(matrix(m, devices.len(), source)?),
        None => None,
    };
    Ok(Cluster::new(
        file.name.clone(),
        file.description.clone(),
        inter_latency_us,
        machines,
        groups,
        devices,
        measured,
    ))
}

/// Check a measured matrix (n×n, within a link's range off the diagonal) and convert it to B/µs.
fn matrix(m: &MatrixEntry, n: usize, source: &str) -> Result<Vec<Vec<f64>>, InputError> {
    let factor = units::bandwidth_unit(&m.unit)
        .map_err(|msg| InputError::new(source, "bandwidth_matrix.unit", msg))?;
    if m.values.len() != n {
        return Err(InputError::new(
            source,
            "bandwidth_matrix.values",
            format!(
                "must be {n}×{n} (one row per device), got {} rows",
                m.values.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(n);
    for (i, row) in m.values.iter().enumerate() {
        if row.len() != n {
            return Err(InputError::new(
                source,
                format!("bandwidth_matrix.values[{i}]"),
                format!("must have {n} entries (one per device), got {}", row.len()),
            ));
        }
        for (j, &v) in row.iter().enumerate() {
            let field = format!("bandwidth_matrix.values[{i}][{j}]");
            // The diagonal is never read, so a value there is a row or column shifted by one
            // (or a matrix of another cluster); off it, 1e-300 GB/s gave 3.2e304 ms and 5e-324
            // NaN.
            if i == j {
                if v != 0.0 {
                    return Err(InputError::new(
                        source,
                        field,
                        format!("is {v}: a device's bandwidth to itself is not used, give 0"),
                    ));
                }
            } else {
                check_link(source, &field, v * factor)?;
            }
        }
        out.push(row.iter().map(|v| v * factor).collect());
    }
    Ok(out)
}
