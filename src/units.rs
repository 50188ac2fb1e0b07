//! Units at the edges of the tool.
//!
//! Inside the code every time is in microseconds, every size in bytes and every bandwidth in bytes
//! per microsecond (B/µs). Humans write "100 Gbps", "1.5 ms" or "32 GiB"; this module converts such
//! strings once, where they enter (configs, CLI), and formats numbers back for reports.
//!
//! Decimal prefixes are powers of 1000 (1 GB = 1e9 bytes), binary ones powers of 1024
//! (1 GiB = 2^30 bytes). A lowercase `b` means bits, an uppercase `B` bytes: 1 Gbps = 1e9 bit/s =
//! 125 B/µs and 1 GB/s = 1000 B/µs.

/// Bytes per microsecond in one gigabit per second.
pub const GBPS: f64 = 125.0;
/// Bytes per microsecond in one gigabyte (1e9 bytes) per second.
pub const GB_PER_S: f64 = 1000.0;
/// Bytes in one gibibyte.
pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
/// Bytes in a mebibyte.
pub(crate) const MIB: f64 = 1024.0 * 1024.0;
/// Microseconds in one millisecond.
pub(crate) const MS: f64 = 1000.0;
/// Microseconds in one second.
pub(crate) const SECOND: f64 = 1_000_000.0;

/// Bandwidth units understood by [`parse_bandwidth`], with their size in B/µs.
const BANDWIDTH_UNITS: &[(&str, f64)] = &[
    ("Tbps", 1000.0 * GBPS),
    ("Gbps", GBPS),
    ("Mbps", GBPS / 1000.0),
    ("Kbps", GBPS / 1e6),
    ("Tb/s", 1000.0 * GBPS),
    ("Gb/s", GBPS),
    ("Mb/s", GBPS / 1000.0),
    ("Kb/s", GBPS / 1e6),
    ("TB/s", 1000.0 * GB_PER_S),
    ("GB/s", GB_PER_S),
    ("MB/s", GB_PER_S / 1000.0),
    ("KB/s", GB_PER_S / 1e6),
    ("TiB/s", 1024.0 * GIB / SECOND),
    ("GiB/s", GIB / SECOND),
    ("MiB/s", GIB / 1024.0 / SECOND),
    ("B/us", 1.0),
    ("B/µs", 1.0),
];

/// Time units understood by [`parse_time`], with their size in µs.
const TIME_UNITS: &[(&str, f64)] = &[
    ("ns", 1e-3),
    ("us", 1.0),
    ("µs", 1.0),
    ("ms", MS),
    ("s", SECOND),
];

/// Size units understood by [`parse_size`], with their size in bytes.
const SIZE_UNITS: &[(&str, f64)] = &[
    ("B", 1.0),
    ("KB", 1e3),
    ("MB", 1e6),
    ("GB", 1e9),
    ("TB", 1e12),
    ("KiB", 1024.0),
    ("MiB", 1024.0 * 1024.0),
    ("GiB", GIB),
    ("TiB", 1024.0 * GIB),
];

/// Parse a bandwidth such as "100 Gbps", "50 GB/s" or "600 MB/s" into bytes per microsecond.
///
/// The prefix letter is case-insensitive ("gbps" works) but `b`/`B` keeps its meaning: bits or
/// bytes. The error message lists the accepted units.
pub(crate) fn parse_bandwidth(text: &str) -> Result<f64, String> {
    parse_with(text, BANDWIDTH_UNITS, "bandwidth")
}

/// Parse a duration such as "5 us", "1.5 ms" or "2 s" into microseconds.
pub(crate) fn parse_time(text: &str) -> Result<f64, String> {
    parse_with(text, TIME_UNITS, "time")
}

/// Parse a memory size such as "32 GiB", "16 GB" or "11GiB" into bytes. A size too large for a
/// float is infinity, for the caller to refuse with its own maximum.
pub fn parse_size(text: &str) -> Result<f64, String> {
    parse_with(text, SIZE_UNITS, "size")
}

/// Factor (in internal units) of a bandwidth unit name, e.g. `"Gbps"` → 125.
pub(crate) fn bandwidth_unit(unit: &str) -> Result<f64, String> {
    lookup_unit(unit, BANDWIDTH_UNITS, "bandwidth")
}

/// Split "12.5GB/s" into number and unit, then scale the number by the unit's factor.
fn parse_with(text: &str, units: &[(&str, f64)], what: &str) -> Result<f64, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')))
        .unwrap_or(trimmed.len());
    // "1e3 B" parses the exponent; a unit starting with 'e'/'E' does not exist, so the scan is safe.
    let (number, unit) = trimmed.split_at(split);
    let value: f64 = number.trim().parse().map_err(|_| {
        format!(
            "cannot read {what} {text:?}: expected a number followed by a unit ({})",
            unit_names(units)
        )
    })?;
    if unit.trim().is_empty() {
        return Err(format!(
            "{what} {text:?} has no unit; accepted units: {}",
            unit_names(units)
        ));
    }
    let factor = lookup_unit(unit.trim(), units, what)?;
    // Said in the user's own unit: the caller's check would show the value in internal units.
    if value < 0.0 {
        return Err(format!("{what} {text:?} is negative"));
    }
    // A number past the largest float ("1e400 GB") or one that overflows in its unit
    // ("1e308 GiB") reads as infinity: the caller's range check names it too large, with the
    // most it takes.
    Ok(value * factor)
}

/// Find a unit: exact spelling first, then ignoring the case of everything but the final
/// bit/byte letter so that "gbps" and "GBPS" differ only where it matters.
fn lookup_unit(unit: &str, units: &[(&str, f64)], what: &str) -> Result<f64, String> {
    if let Some((_, f)) = units.iter().find(|(u, _)| *u == unit) {
        return Ok(*f);
    }
    let loose: Vec<_> = units
        .iter()
        .filter(|(u, _)| loose_key(u) == loose_key(unit))
        .collect();
    if let [(name, f)] = loose.as_slice() {
        // "50 gb/s": bits by the letter, but a lower-case "gb" is as often meant as gigabytes.
        // "gbps" stays bits (the "ps" forms are the networks' spelling).
        if unit.ends_with("b/s") && unit.chars().all(|c| !c.is_ascii_uppercase()) {
            let bytes = name.replace("b/s", "B/s");
            return Err(format!(
                "{what} unit {unit:?} is ambiguous: write {name} for bits or {bytes} for bytes"
            ));
        }
        return Ok(*f);
    }
    Err(format!(
        "unknown {what} unit {unit:?}; accepted units: {}",
        unit_names(units)
    ))
}

/// Lowercase everything except `B` (bytes), which must stay apart from `b` (bits).
fn loose_key(unit: &str) -> String {
    unit.chars()
        .map(|c| if c == 'B' { c } else { c.to_ascii_lowercase() })
        .collect()
}

fn unit_names(units: &[(&str, f64)]) -> String {
    units.iter().map(|(u, _)| *u).collect::<Vec<_>>().join(", ")
}

/// How many times `reference` is `time` (a speed-up): 1 when they are equal, zero times
/// included (a graph whose every kernel was measured at 0 µs printed `speed-up NaNx`).
pub fn speedup(reference: f64, time: f64) -> f64 {
    if reference == time {
        1.0
    } else {
        reference / time
    }
}

/// Bytes per microsecond → GB/s.
pub fn to_gbs(bandwidth: f64) -> f64 {
    bandwidth / GB_PER_S
}

/// Microseconds → milliseconds.
pub fn to_ms(us: f64) -> f64 {
    us / MS
}

/// Bytes → GiB.
pub(crate) fn to_gib(bytes: f64) -> f64 {
    bytes / GIB
}

/// Write `value` (internal units) as "<v> <unit>" when that text parses back to exactly `value`,
/// else in the internal unit, so that configs written by the tool round-trip bit for bit.
pub(crate) fn exact_text(value: f64, factor: f64, unit: &str, base_unit: &str) -> String {
    let human = value / factor;
    if human * factor == value {
        format!("{human} {unit}")
    } else {
        format!("{value} {base_unit}")
    }
}

/// A bandwidth as config text: the shorter of its exact GB/s and Gbps spellings ("50 GB/s",
/// "37.88 Gbps"), else B/µs.
pub(crate) fn bandwidth_text(bandwidth: f64) -> String {
    let candidates = [
        exact_text(bandwidth, GB_PER_S, "GB/s", "B/us"),
        exact_text(bandwidth, GBPS, "Gbps", "B/us"),
    ];
    candidates
        .into_iter()
        .min_by_key(|t| (t.ends_with("B/us"), t.len()))
        .expect("two candidates")
}

/// `x` with the negative zero that rounding to `decimals` leaves turned into zero, so reports
/// print "+0.0%" and "0.000 ms", never "-0.0%".
pub(crate) fn no_negative_zero(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    if (x * scale).round() == 0.0 { 0.0 } else { x }
}

/// The sum of `values`, +0 when there are none: `Iterator::sum` of no `f64`s is -0, which reports
/// print as "-0.000 ms" and JSON as `-0.0`.
pub(crate) fn total(values: impl IntoIterator<Item = f64>) -> f64 {
    values.into_iter().fold(0.0, |sum, v| sum + v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidths() {
        assert_eq!(parse_bandwidth("100 Gbps").unwrap(), 12_500.0);
        assert_eq!(parse_bandwidth("10Gbps").unwrap(), 1_250.0);
        assert_eq!(parse_bandwidth("50 GB/s").unwrap(), 50_000.0);
        assert_eq!(parse_bandwidth("600 MB/s").unwrap(), 600.0);
        assert_eq!(parse_bandwidth("900 Mbps").unwrap(), 112.5);
        assert_eq!(parse_bandwidth("10 gbps").unwrap(), 1_250.0);
        assert!(parse_bandwidth("10 furlongs").unwrap_err().contains("Gbps"));
        // All lower case, "gb/s" could be either: refused, naming both spellings.
        let ambiguous = parse_bandwidth("50 gb/s").unwrap_err();
        assert!(
            ambiguous.contains("Gb/s") && ambiguous.contains("GB/s"),
            "{ambiguous}"
        );
        assert_eq!(parse_bandwidth("50 gB/s").unwrap(), 50_000.0);
        assert!(parse_bandwidth("10").unwrap_err().contains("no unit"));
        // Said in the unit written, not as the internal -625 bytes per µs.
        let negative = parse_bandwidth("-5 Gbps").unwrap_err();
        assert!(negative.contains("\"-5 Gbps\" is negative"), "{negative}");
        assert!(parse_size("-1 GiB").unwrap_err().contains("negative"));
    }

    #[test]
    fn times_and_sizes() {
        assert_eq!(parse_time("5 us").unwrap(), 5.0);
        assert_eq!(parse_time("1.5 ms").unwrap(), 1500.0);
        assert_eq!(parse_time("2 s").unwrap(), 2e6);
        assert_eq!(parse_size("32 GiB").unwrap(), 32.0 * GIB);
        assert_eq!(parse_size("16 GB").unwrap(), 16e9);
        assert_eq!(parse_size("11GiB").unwrap(), 11.0 * GIB);
        assert!(parse_size("3 parsecs").unwrap_err().contains("GiB"));
        assert_eq!(parse_size("1e308 GiB").unwrap(), f64::INFINITY);
        assert_eq!(parse_size("1e400 B").unwrap(), f64::INFINITY);
    }

    #[test]
    fn formatting() {
        assert_eq!(exact_text(12_500.0, GBPS, "Gbps", "B/us"), "100 Gbps");
    }
}
