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
    /// A table with these column headers and no rows.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row of cells.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// The table as aligned plain text: header, a dashed rule, then one line per row.
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

impl Table {
    /// The table as GitHub-flavoured Markdown.
    pub fn render_markdown(&self) -> String {
        let mut out = String::new();
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        out.push_str(&line(&self.header));
        out.push_str(&line(&vec!["---".to_string(); self.header.len()]));
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }
}

fn looks_numeric(cell: &str) -> bool {
    cell.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+' || c == '.')
}

/// 143667240 → "143.67M"; keeps small counts exact.
pub(crate) fn count(n: f64) -> String {
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
pub(crate) fn millis(us: f64) -> String {
    format!("{:.3} ms", crate::units::to_ms(us))
}

/// The arithmetic mean; NaN for no values.
pub(crate) fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        f64::NAN
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// `x` with the five XML special characters escaped, for SVG text.
pub(crate) fn xml_escape(x: &str) -> String {
    x.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// An SVG document's opening tag (`width` × `height`, sans-serif 12) and a bold title.
pub(crate) fn svg_open(width: f64, height: f64, title: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(
        s,
        "<text x=\"10\" y=\"18\" font-weight=\"bold\">{}</text>",
        xml_escape(title)
    );
    s
}

/// CSV text: a header line and one line per row; a field holding a comma, quote or newline is
/// quoted (RFC 4180).
pub(crate) fn csv(header: &[&str], rows: &[Vec<String>]) -> String {
    let line = |fields: &mut dyn Iterator<Item = &str>| {
        let quoted: Vec<String> = fields.map(csv_field).collect();
        quoted.join(",") + "\n"
    };
    let mut s = line(&mut header.iter().copied());
    for row in rows {
        s += &line(&mut row.iter().map(String::as_str));
    }
    s
}

fn csv_field(x: &str) -> String {
    if x.contains([',', '"', '\n']) {
        format!("\"{}\"", x.replace('"', "\"\""))
    } else {
        x.to_string()
    }
}

/// A grouped vertical bar chart: one group of bars per category (`(name, values)`, a value per
/// series), a legend of `series`; negative values hang below the zero line.
pub(crate) fn bar_chart(title: &str, series: &[&str], categories: &[(String, Vec<f64>)]) -> String {
    const COLOURS: [&str; 4] = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd"];
    let (left, top, plot_h) = (60.0, 40.0, 220.0);
    let bar_w = 16.0;
    // Wide enough for a model name under each group.
    let group_w = (bar_w * series.len() as f64 + 20.0).max(96.0);
    let width = group_w * categories.len().max(1) as f64;
    let values = || {
        categories
            .iter()
            .flat_map(|c| c.1.iter().copied())
            .filter(|v| v.is_finite())
    };
    let hi = values().fold(0.0, f64::max);
    let lo = values().fold(0.0, f64::min);
    let span = if hi > lo { hi - lo } else { 1.0 };
    let y = |v: f64| top + plot_h * (hi - v) / span;
    let mut s = svg_open(left + width + 170.0, top + plot_h + 50.0, title);
    let zero = y(0.0);
    let _ = writeln!(
        s,
        "<line x1=\"{left}\" y1=\"{zero:.1}\" x2=\"{}\" y2=\"{zero:.1}\" stroke=\"#444\"/>",
        left + width
    );
    for (v, at) in [(hi, y(hi)), (lo, y(lo))] {
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.2}</text>",
            left - 4.0,
            at + 4.0
        );
    }
    for (i, (name, vals)) in categories.iter().enumerate() {
        let x0 = left + (group_w - bar_w * vals.len() as f64) / 2.0 + i as f64 * group_w;
        for (k, &v) in vals.iter().enumerate().filter(|(_, v)| v.is_finite()) {
            let (a, b) = (y(v.max(0.0)), y(v.min(0.0)));
            let _ = writeln!(
                s,
                "<rect x=\"{:.1}\" y=\"{a:.1}\" width=\"{bar_w}\" height=\"{:.1}\" fill=\"{}\"><title>{v:.3}</title></rect>",
                x0 + k as f64 * bar_w,
                (b - a).max(0.5),
                COLOURS[k % COLOURS.len()]
            );
        }
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            x0 + bar_w * vals.len() as f64 / 2.0,
            top + plot_h + 18.0,
            xml_escape(name)
        );
    }
    for (k, name) in series.iter().enumerate() {
        let (lx, ly) = (left + width + 10.0, top + 14.0 + 18.0 * k as f64);
        let _ = writeln!(
            s,
            "<rect x=\"{lx}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>",
            ly - 10.0,
            COLOURS[k % COLOURS.len()]
        );
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{ly}\">{}</text>",
            lx + 16.0,
            xml_escape(name)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// One line of a [`line_chart`]: a name and its (x, y) points (non-finite y are skipped).
pub(crate) struct Series<'a> {
    pub name: &'a str,
    pub colour: &'a str,
    pub points: Vec<(f64, f64)>,
}

/// A line chart of `series` against a shared x axis, as a standalone SVG document, with the
/// axes' ranges printed at their ends and a legend.
pub(crate) fn line_chart(title: &str, x_label: &str, series: &[Series]) -> String {
    let (left, top, width, height) = (60.0, 30.0, 480.0, 240.0);
    let finite = || {
        series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|p| p.0.is_finite() && p.1.is_finite())
    };
    let (x0, x1) = finite().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
        (a.min(p.0), b.max(p.0))
    });
    let (y0, y1) = finite().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
        (a.min(p.1), b.max(p.1))
    });
    let span = |a: f64, b: f64| if b > a { b - a } else { 1.0 };
    let (x0, y0) = (
        if x0.is_finite() { x0 } else { 0.0 },
        if y0.is_finite() { y0 } else { 0.0 },
    );
    let (sx, sy) = (span(x0, x1), span(y0, y1));
    let px = |x: f64| left + width * (x - x0) / sx;
    let py = |y: f64| top + height * (1.0 - (y - y0) / sy);
    let mut s = svg_open(left + width + 230.0, top + height + 40.0, title);
    let _ = writeln!(
        s,
        "<rect x=\"{left}\" y=\"{top}\" width=\"{width}\" height=\"{height}\" fill=\"none\" stroke=\"#888\"/>"
    );
    let y_top = if y1.is_finite() { y1 } else { y0 + 1.0 };
    for (y, v) in [(top + 4.0, y_top), (top + height, y0)] {
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{y}\" text-anchor=\"end\">{v:.3}</text>",
            left - 4.0
        );
    }
    let x_right = if x1.is_finite() { x1 } else { x0 + 1.0 };
    let base = top + height + 16.0;
    let _ = writeln!(s, "<text x=\"{left}\" y=\"{base}\">{x0}</text>");
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{base}\" text-anchor=\"end\">{x_right}</text>",
        left + width
    );
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
        left + width / 2.0,
        base + 14.0,
        xml_escape(x_label)
    );
    for (i, line) in series.iter().enumerate() {
        let pts: Vec<String> = line
            .points
            .iter()
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        if pts.len() > 1 {
            let _ = writeln!(
                s,
                "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>",
                line.colour,
                pts.join(" ")
            );
        }
        for p in pts.iter().take(if pts.len() == 1 { 1 } else { 0 }) {
            let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(
                s,
                "<circle cx=\"{x}\" cy=\"{y}\" r=\"3\" fill=\"{}\"/>",
                line.colour
            );
        }
        let ly = top + 14.0 + 18.0 * i as f64;
        let lx = left + width + 10.0;
        let _ = writeln!(
            s,
            "<line x1=\"{lx}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"/>",
            ly - 4.0,
            lx + 18.0,
            ly - 4.0,
            line.colour
        );
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{ly}\">{}</text>",
            lx + 22.0,
            xml_escape(line.name)
        );
    }
    s.push_str("</svg>\n");
    s
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
