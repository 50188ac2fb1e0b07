//! Human-readable output: aligned text tables and number formatting shared by every command.

use std::fmt::Write;

/// A plain text table with a header row. Columns whose cells all look numeric are right-aligned,
/// the others left-aligned.
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    pub fn render(&self) -> String {
        let columns = self.header.len();
        let mut width = vec![0usize; columns];
        for line in std::iter::once(&self.header).chain(&self.rows) {
            for (c, cell) in line.iter().enumerate().take(columns) {
                width[c] = width[c].max(cell.chars().count());
            }
        }
        let numeric: Vec<bool> = (0..columns)
            .map(|c| {
                !self.rows.is_empty()
                    && self
                        .rows
                        .iter()
                        .all(|r| r.get(c).is_some_and(|cell| looks_numeric(cell)))
            })
            .collect();
        let mut out = String::new();
        let mut line = |cells: &[String]| {
            let mut text = String::new();
            for (c, w) in width.iter().enumerate() {
                let cell = cells.get(c).map(String::as_str).unwrap_or("");
                let sep = if c == 0 { "" } else { "  " };
                if numeric[c] {
                    let _ = write!(text, "{sep}{cell:>w$}");
                } else {
                    let _ = write!(text, "{sep}{cell:<w$}");
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        line(&self.header);
        line(&width.iter().map(|&w| "-".repeat(w)).collect::<Vec<_>>());
        for row in &self.rows {
            line(row);
        }
        out
    }
}

fn looks_numeric(cell: &str) -> bool {
    cell.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+' || c == '.')
}

/// 143667240 → "143.67M"; keeps small counts exact.
pub fn count(n: f64) -> String {
    let a = n.abs();
    if a >= 1e9 {
        format!("{:.2}G", n / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", n / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", n / 1e3)
    } else {
        format!("{n:.0}")
    }
}

/// Bytes in binary units: "548.0 MiB".
pub fn bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut u = 0;
    while v.abs() >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Microseconds shown in ms with three significant decimals: "12.345 ms".
pub fn millis(us: f64) -> String {
    format!("{:.3} ms", crate::units::to_ms(us))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() {
        let mut t = Table::new(["name", "value"]);
        t.row(["a", "1"]);
        t.row(["long-name", "12345"]);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "name       value");
        assert_eq!(lines[2], "a              1");
        assert_eq!(lines[3], "long-name  12345");
    }

    #[test]
    fn numbers_format_in_human_units() {
        assert_eq!(count(143_667_240.0), "143.67M");
        assert_eq!(count(512.0), "512");
        assert_eq!(bytes(574_668_960.0), "548.0 MiB");
        assert_eq!(bytes(100.0), "100 B");
        assert_eq!(millis(12_345.0), "12.345 ms");
    }
}
