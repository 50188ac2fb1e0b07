//! Users' own profiles as a directory of CSV files (format in `docs/formats.md`):
//! `ops.csv` (with a `# batch_size=N` line before the header), `edges.csv`, optional
//! `gradients.csv`. Every error names the file, the line number and the column.
//!
//! The reader is a small hand-written one (comma-separated, double quotes around a field that
//! holds commas, `""` for a quote inside one, no line breaks inside fields) so the crate needs no
//! CSV dependency for files this simple.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::has_extension;
use crate::error::{InputError, Result};
use crate::graph::validate::{
    MAX_BYTES, MAX_OP_FLOPS, MAX_OP_PARAMS, MAX_OP_US, check_file_graph, check_plausible,
};
use crate::graph::{Edge, GradientLink, Graph, Op, Phase, Splittability};

/// Prefix of the per-device measured-time columns of ops.csv.
pub(crate) const TIME_PREFIX: &str = "time_us:";

/// The `# key=value` directives, given before the header of ops.csv. A `#` line of that form
/// with any other one-word key is refused ([`directive`]); other `#` lines are comments.
const DIRECTIVES: &[&str] = &["batch_size", "name"];

const OPS_REQUIRED: &[&str] = &["id", "name", "op_type", "phase"];
const OPS_OPTIONAL: &[&str] = &[
    "flops",
    "bytes_accessed",
    "output_bytes",
    "resident_bytes",
    "params",
    "split",
    "batch_scaled",
];

/// Read the CSV layout from a directory, or from the path of one of its files (`ops.csv` or a
/// sibling: `edges.csv`/`gradients.csv` mean the `ops.csv` next to them).
pub(crate) fn import_csv(path: &Path) -> Result<Graph> {
    if !path.is_dir() && !has_extension(path, "csv") {
        return Err(InputError::new(
            path.display().to_string(),
            "--format csv",
            "not a .csv file: the CSV format reads a folder holding ops.csv and edges.csv, or one \
             of its files",
        )
        .into());
    }
    let (dir, ops_path) = locate(path);
    let ops_file = Table::read(&ops_path)?;
    let edges_file = Table::read(&dir.join("edges.csv"))?;
    let grads_path = dir.join("gradients.csv");
    let grads_file = if grads_path.exists() {
        Some(Table::read(&grads_path)?)
    } else {
        None
    };
    for table in std::iter::once(&edges_file).chain(&grads_file) {
        if let Some((key, line)) = table.directive_lines.iter().min_by_key(|d| d.1) {
            return Err(InputError::new(
                &table.source,
                format!("line {line}, {key}"),
                "directives belong in ops.csv, before its header",
            )
            .into());
        }
    }
    let name = graph_name(&ops_file, &dir)?;
    Ok(build(&ops_file, &edges_file, grads_file.as_ref(), &name)?)
}

/// The files a graph path reads when it is a CSV layout (a directory, or a `.csv` file in one):
/// its ops file and the directory's `edges.csv` and `gradients.csv`; none for any other path.
/// What an output must not be written over.
pub fn csv_files(path: &Path) -> Vec<PathBuf> {
    if !path.is_dir() && !super::has_extension(path, "csv") {
        return Vec::new();
    }
    let (dir, ops) = locate(path);
    vec![ops, dir.join("edges.csv"), dir.join("gradients.csv")]
}

/// The directory and the ops file a CSV path stands for.
fn locate(path: &Path) -> (PathBuf, PathBuf) {
    if path.is_dir() {
        return (path.to_path_buf(), path.join("ops.csv"));
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().to_ascii_lowercase());
    match file.as_deref() {
        Some("edges.csv" | "gradients.csv") => (dir.clone(), dir.join("ops.csv")),
        _ => (dir, path.to_path_buf()),
    }
}

fn graph_name(ops: &Table, dir: &Path) -> Result<String, InputError> {
    if let Some(n) = ops.directives.get("name") {
        if crate::error::is_blank(n) {
            let line = ops.directive_lines["name"];
            return Err(InputError::new(
                &ops.source,
                format!("line {line}, name"),
                "is empty: give the model's name, or leave the line out to use the folder's",
            ));
        }
        return Ok(n.clone());
    }
    let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    Ok(canonical
        .file_name()
        .map_or_else(|| "graph".to_string(), |n| n.to_string_lossy().to_string()))
}

/// Build the graph from the three parsed files.
fn build(
    ops_t: &Table,
    edges_t: &Table,
    grads_t: Option<&Table>,
    name: &str,
) -> Result<Graph, InputError> {
    let batch = ops_t.batch_size()?;
    let ops = read_ops(ops_t)?;
    let index = id_index(ops_t, &ops)?;
    let edges = read_edges(edges_t, &index)?;
    // The graph loader refuses several ops with no edge; say it in this file's terms.
    if edges.is_empty() && ops.len() >= 2 {
        return Err(InputError::new(
            &edges_t.source,
            "rows",
            format!(
                "the file lists no edges: the {} ops of ops.csv would run unconnected",
                ops.len()
            ),
        ));
    }
    let gradients = match grads_t {
        Some(t) => read_gradients(t, &index, &ops, &edges)?,
        None => Vec::new(),
    };
    check_optimizers_fed(ops_t, &ops, &gradients)?;
    // What is left for validation is graph-wide (cycles), which concerns edges.csv, or a field
    // of one row (a name's control character), told by its file and line.
    let graph = Graph::new(&edges_t.source, name, batch, ops, edges, gradients)
        .map_err(|e| in_csv_terms(e, ops_t, edges_t, grads_t))?;
    // The file checks `import` makes of every graph, said here of the CSV rows.
    check_file_graph(&edges_t.source, &graph)
        .map_err(|e| in_csv_terms(e, ops_t, edges_t, grads_t))?;
    Ok(graph)
}

/// `e`, the graph loader's error about `ops[i]…`, `edges[k]…` or `gradients[k]…`, said of the
/// CSV file and line that row came from (`ops.csv: line 5, name`); other errors as they are.
fn in_csv_terms(
    e: InputError,
    ops_t: &Table,
    edges_t: &Table,
    grads_t: Option<&Table>,
) -> InputError {
    if let Some(&line) = ops_t
        .directive_lines
        .get("name")
        .filter(|_| e.field == "name")
    {
        return InputError::new(&ops_t.source, format!("line {line}, name"), e.message);
    }
    let tables = [
        ("ops[", Some(ops_t)),
        ("edges[", Some(edges_t)),
        ("gradients[", grads_t),
    ];
    for (prefix, table) in tables {
        let Some(table) = table else { continue };
        let Some(rest) = e.field.strip_prefix(prefix) else {
            continue;
        };
        let Some((index, after)) = rest.split_once(']') else {
            continue;
        };
        let Some(&(line, _)) = index.parse::<usize>().ok().and_then(|i| table.rows.get(i)) else {
            continue;
        };
        // `.name`, `.flops (op 5 "x")`, `.profiled_us.V100`: the column is the first word.
        let column =
            (after.trim_start_matches('.').split([' ', '.', '[']).next()).unwrap_or_default();
        let field = match column.is_empty() {
            true => format!("line {line}"),
            false => format!("line {line}, column \"{column}\""),
        };
        return InputError::new(&table.source, field, e.message);
    }
    e
}

/// One parsed CSV file: directives, header and data rows with their line numbers.
struct Table {
    source: String,
    directives: HashMap<String, String>,
    directive_lines: HashMap<String, usize>,
    header: Vec<String>,
    header_line: usize,
    rows: Vec<(usize, Vec<String>)>,
}

impl Table {
    fn read(path: &Path) -> Result<Table> {
        let source = path.display().to_string();
        Ok(Table::parse(&crate::io::read_text_file(path)?, &source)?)
    }

    /// `# key=value` lines before the header are directives; other `#` lines and blank lines
    /// are skipped.
    fn parse(text: &str, source: &str) -> Result<Table, InputError> {
        let mut t = Table {
            source: source.to_string(),
            directives: HashMap::new(),
            directive_lines: HashMap::new(),
            header: Vec::new(),
            header_line: 0,
            rows: Vec::new(),
        };
        for (k, raw) in text.lines().enumerate() {
            let line_no = k + 1;
            let line = raw.trim_end_matches('\r');
            if line.trim().is_empty() {
                continue;
            }
            if let Some(comment) = line.trim_start().strip_prefix('#') {
                if let Some((key, value)) = directive(comment) {
                    let field = format!("line {line_no}, {key}");
                    // A misspelt directive would otherwise be a comment, leaving its value
                    // unused without a word (`# nmae=x` keeps the folder's name).
                    if !DIRECTIVES.contains(&key) {
                        return Err(InputError::new(
                            source,
                            field,
                            format!(
                                "unknown directive \"{key}\" (known: {}); a comment holding \
                                 \"=\" needs a word before it that is not a directive's",
                                DIRECTIVES.join(", ")
                            ),
                        ));
                    }
                    // Only the lines before the header are read as directives; a later one
                    // would be ignored, as a second one before it is refused.
                    if !t.header.is_empty() {
                        return Err(InputError::new(
                            source,
                            field,
                            format!(
                                "comes after the header (line {}): directives go before it",
                                t.header_line
                            ),
                        ));
                    }
                    if let Some(first) = t.directive_lines.insert(key.to_string(), line_no) {
                        return Err(InputError::new(
                            source,
                            field,
                            format!("given twice (also on line {first}): keep one line"),
                        ));
                    }
                    t.directives
                        .insert(key.to_string(), value.trim().to_string());
                }
                continue;
            }
            let cells = split_line(line)
                .map_err(|m| InputError::new(source, format!("line {line_no}"), m))?;
            if t.header.is_empty() {
                t.header = cells.into_iter().map(|c| c.trim().to_string()).collect();
                t.header_line = line_no;
            } else {
                t.rows.push((line_no, cells));
            }
        }
        if t.header.is_empty() {
            return Err(InputError::new(
                source,
                "header",
                "the file has no header row",
            ));
        }
        Ok(t)
    }

    fn field(&self, line: usize, column: &str) -> String {
        format!("line {line}, column \"{column}\"")
    }

    fn err(&self, line: usize, column: &str, message: impl Into<String>) -> InputError {
        InputError::new(&self.source, self.field(line, column), message)
    }

    /// Positions of the named columns; a missing required one is an error naming the header line.
    fn columns(
        &self,
        required: &[&str],
        optional: &[&str],
    ) -> Result<HashMap<String, usize>, InputError> {
        let mut cols = HashMap::new();
        for (i, h) in self.header.iter().enumerate() {
            let known = required.contains(&h.as_str()) || optional.contains(&h.as_str());
            if !known && !h.starts_with(TIME_PREFIX) {
                return Err(self.err(self.header_line, h, "unknown column"));
            }
            if cols.insert(h.clone(), i).is_some() {
                return Err(self.err(self.header_line, h, "column appears twice"));
            }
        }
        if let Some(missing) = required.iter().find(|c| !cols.contains_key(**c)) {
            return Err(InputError::new(
                &self.source,
                format!("line {}, column \"{missing}\"", self.header_line),
                format!("missing column (the header needs {})", required.join(",")),
            ));
        }
        Ok(cols)
    }

    fn batch_size(&self) -> Result<u32, InputError> {
        let Some(v) = self.directives.get("batch_size") else {
            return Err(InputError::new(
                &self.source,
                "batch_size",
                "missing: put a line \"# batch_size=N\" before the header",
            ));
        };
        let line = self.directive_lines["batch_size"];
        match v.parse::<u32>() {
            Ok(b) if b >= 1 => Ok(b),
            _ => Err(InputError::new(
                &self.source,
                format!("line {line}, batch_size"),
                format!("\"{v}\" is not a positive whole number"),
            )),
        }
    }
}

/// The key and value of a `#` line of the form `key=value` whose key is one word (letters,
/// digits, `_`, `-`): a directive, known or not. Any other `#` line is a comment, even one
/// holding `=` (`# note: a=b`).
fn directive(comment: &str) -> Option<(&str, &str)> {
    let (key, value) = comment.split_once('=')?;
    let key = key.trim();
    let word = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    word.then_some((key, value))
}

/// Split one CSV line into cells.
fn split_line(line: &str) -> Result<Vec<String>, String> {
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            (true, '"') => quoted = false,
            (false, '"') if cell.trim().is_empty() => {
                cell.clear();
                quoted = true;
            }
            (false, ',') => cells.push(std::mem::take(&mut cell)),
            _ => cell.push(c),
        }
    }
    if quoted {
        return Err("a quoted field is not closed".to_string());
    }
    cells.push(cell);
    Ok(cells)
}

/// A data row with its columns, so cell readers can name line and column in errors.
struct Row<'a> {
    table: &'a Table,
    line: usize,
    cells: &'a [String],
    cols: &'a HashMap<String, usize>,
}

impl Row<'_> {
    /// The trimmed cell, `None` when the column is absent or the cell empty.
    fn get(&self, column: &str) -> Option<&str> {
        let i = *self.cols.get(column)?;
        self.cells
            .get(i)
            .map(|c| c.trim())
            .filter(|c| !c.is_empty())
    }

    fn err(&self, column: &str, message: impl Into<String>) -> InputError {
        self.table.err(self.line, column, message)
    }

    fn required(&self, column: &str) -> Result<&str, InputError> {
        self.get(column).ok_or_else(|| self.err(column, "is empty"))
    }

    fn id(&self, column: &str) -> Result<u64, InputError> {
        let v = self.required(column)?;
        v.parse::<u64>().map_err(|_| {
            self.err(
                column,
                format!("\"{v}\" is not a non-negative whole number (an op id)"),
            )
        })
    }

    /// A size, count or time: numeric, finite, not negative and at most `limit` (the graph
    /// loader's bound, checked here so the error names this file, line and column). Empty
    /// means 0.
    fn size(&self, column: &str, limit: f64) -> Result<f64, InputError> {
        let Some(v) = self.get(column) else {
            return Ok(0.0);
        };
        let x = v
            .parse::<f64>()
            .map_err(|_| self.err(column, format!("\"{v}\" is not a number")))?;
        check_plausible(
            &self.table.source,
            || self.table.field(self.line, column),
            x,
            limit,
        )?;
        Ok(x)
    }

    fn count(&self, column: &str, limit: u64) -> Result<u64, InputError> {
        let Some(v) = self.get(column) else {
            return Ok(0);
        };
        let n = v.parse::<u64>().map_err(|_| {
            self.err(
                column,
                format!("\"{v}\" is not a non-negative whole number"),
            )
        })?;
        if n > limit {
            return Err(self.err(
                column,
                format!("is implausibly large ({n}, the most accepted is {limit})"),
            ));
        }
        Ok(n)
    }

    fn check_width(&self) -> Result<(), InputError> {
        let want = self.table.header.len();
        if self.cells.len() != want {
            return Err(InputError::new(
                &self.table.source,
                format!("line {}", self.line),
                format!(
                    "has {} cells but the header has {want} columns",
                    self.cells.len()
                ),
            ));
        }
        Ok(())
    }
}

fn rows<'a>(t: &'a Table, cols: &'a HashMap<String, usize>) -> impl Iterator<Item = Row<'a>> {
    t.rows.iter().map(move |(line, cells)| Row {
        table: t,
        line: *line,
        cells,
        cols,
    })
}

fn read_ops(t: &Table) -> Result<Vec<Op>, InputError> {
    let cols = t.columns(OPS_REQUIRED, OPS_OPTIONAL)?;
    let time_cols: Vec<&str> = t
        .header
        .iter()
        .filter(|h| h.starts_with(TIME_PREFIX))
        .map(String::as_str)
        .collect();
    for col in &time_cols {
        let device = col[TIME_PREFIX.len()..].trim();
        if device.is_empty() {
            return Err(t.err(
                t.header_line,
                col,
                "the column needs a device type after \"time_us:\"",
            ));
        }
        crate::cluster::check_profile_key(device).map_err(|why| t.err(t.header_line, col, why))?;
    }
    let mut ops = Vec::with_capacity(t.rows.len());
    for row in rows(t, &cols) {
        row.check_width()?;
        ops.push(read_op(&row, &time_cols)?);
    }
    if ops.is_empty() {
        return Err(InputError::new(&t.source, "rows", "the file lists no ops"));
    }
    Ok(ops)
}

fn read_op(row: &Row, time_cols: &[&str]) -> Result<Op, InputError> {
    let id = row.id("id")?;
    let name = row
        .get("name")
        .map_or_else(|| id.to_string(), str::to_string);
    let op_type = row.required("op_type")?.to_string();
    let phase = parse_phase(row)?;
    let mut op = Op::new(id, name, op_type, phase);
    op.flops = row.size("flops", MAX_OP_FLOPS)?;
    op.bytes_accessed = row.size("bytes_accessed", MAX_BYTES)?;
    op.output_bytes = row.size("output_bytes", MAX_BYTES)?;
    op.resident_bytes = row.size("resident_bytes", MAX_BYTES)?;
    op.params = row.count("params", MAX_OP_PARAMS)?;
    op.split = parse_split(row)?;
    op.batch_scaled = parse_bool(row, "batch_scaled")?;
    op.profiled_us = read_times(row, time_cols)?;
    Ok(op)
}

fn parse_phase(row: &Row) -> Result<Phase, InputError> {
    let v = row.required("phase")?;
    Phase::ALL
        .into_iter()
        .find(|p| p.name().eq_ignore_ascii_case(v))
        .ok_or_else(|| {
            row.err(
                "phase",
                format!("unknown phase \"{v}\" (input, parameter, forward, backward or optimizer)"),
            )
        })
}

fn parse_split(row: &Row) -> Result<Splittability, InputError> {
    match row.get("split").map(str::to_ascii_lowercase).as_deref() {
        None | Some("none") => Ok(Splittability::None),
        Some("concat") => Ok(Splittability::Concat),
        Some("sum") => Ok(Splittability::Sum),
        Some(other) => Err(row.err(
            "split",
            format!("unknown split \"{other}\" (concat, sum or none)"),
        )),
    }
}

fn parse_bool(row: &Row, column: &str) -> Result<Option<bool>, InputError> {
    match row.get(column).map(str::to_ascii_lowercase).as_deref() {
        None => Ok(None),
        Some("true" | "1" | "yes") => Ok(Some(true)),
        Some("false" | "0" | "no") => Ok(Some(false)),
        Some(other) => Err(row.err(column, format!("\"{other}\" is not true or false"))),
    }
}

/// `time_us:<device>` cells; an empty cell means "not measured on that device".
fn read_times(row: &Row, time_cols: &[&str]) -> Result<BTreeMap<String, f64>, InputError> {
    let mut times = BTreeMap::new();
    for &col in time_cols {
        if row.get(col).is_some() {
            let device = col[TIME_PREFIX.len()..].trim();
            times.insert(device.to_string(), row.size(col, MAX_OP_US)?);
        }
    }
    Ok(times)
}

/// Map file ids to indices; a repeated id names both lines.
fn id_index(t: &Table, ops: &[Op]) -> Result<HashMap<u64, usize>, InputError> {
    let mut index = HashMap::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        if let Some(first) = index.insert(op.id, i) {
            return Err(t.err(
                t.rows[i].0,
                "id",
                format!("duplicate id {} (also on line {})", op.id, t.rows[first].0),
            ));
        }
    }
    Ok(index)
}

fn lookup(row: &Row, column: &str, index: &HashMap<u64, usize>) -> Result<usize, InputError> {
    let id = row.id(column)?;
    index
        .get(&id)
        .copied()
        .ok_or_else(|| row.err(column, format!("no op in ops.csv has id {id}")))
}

fn read_edges(t: &Table, index: &HashMap<u64, usize>) -> Result<Vec<Edge>, InputError> {
    let cols = t.columns(&["src", "dst", "bytes"], &[])?;
    let mut edges = Vec::with_capacity(t.rows.len());
    let mut seen: HashMap<(usize, usize), usize> = HashMap::new();
    for row in rows(t, &cols) {
        row.check_width()?;
        let (src, dst) = (lookup(&row, "src", index)?, lookup(&row, "dst", index)?);
        if src == dst {
            return Err(row.err("dst", "an edge cannot join an op to itself"));
        }
        if let Some(first) = seen.insert((src, dst), row.line) {
            return Err(row.err("dst", format!("duplicate edge (also on line {first})")));
        }
        if row.get("bytes").is_none() {
            return Err(row.err(
                "bytes",
                "is empty: give the tensor's size (0 for a control edge)",
            ));
        }
        let bytes = row.size("bytes", MAX_BYTES)?;
        edges.push(Edge { src, dst, bytes });
    }
    Ok(edges)
}

fn read_gradients(
    t: &Table,
    index: &HashMap<u64, usize>,
    ops: &[Op],
    edges: &[Edge],
) -> Result<Vec<GradientLink>, InputError> {
    let cols = t.columns(&["grad", "optimizer"], &[])?;
    let pairs: HashSet<(usize, usize)> = edges.iter().map(|e| (e.src, e.dst)).collect();
    let mut links = Vec::with_capacity(t.rows.len());
    let mut seen: HashMap<(usize, usize), usize> = HashMap::new();
    for row in rows(t, &cols) {
        row.check_width()?;
        let (grad, optimizer) = (
            lookup(&row, "grad", index)?,
            lookup(&row, "optimizer", index)?,
        );
        if ops[optimizer].phase != Phase::Optimizer {
            return Err(row.err(
                "optimizer",
                format!("op {} is not an optimizer op", ops[optimizer].id),
            ));
        }
        if !pairs.contains(&(grad, optimizer)) {
            return Err(row.err(
                "grad",
                format!(
                    "no edge in edges.csv carries the gradient {} -> {}",
                    ops[grad].id, ops[optimizer].id
                ),
            ));
        }
        // A repeated row would be synchronised, and counted by SFB, as two gradients.
        if let Some(first) = seen.insert((grad, optimizer), row.line) {
            return Err(row.err(
                "optimizer",
                format!("duplicate gradient link (also on line {first})"),
            ));
        }
        links.push(GradientLink { grad, optimizer });
    }
    Ok(links)
}

/// Every optimizer op needs a gradients.csv row; name its line in ops.csv when one has none.
fn check_optimizers_fed(
    t: &Table,
    ops: &[Op],
    gradients: &[GradientLink],
) -> Result<(), InputError> {
    let fed: HashSet<usize> = gradients.iter().map(|l| l.optimizer).collect();
    match (0..ops.len()).find(|i| ops[*i].phase == Phase::Optimizer && !fed.contains(i)) {
        Some(i) => Err(t.err(
            t.rows[i].0,
            "phase",
            format!(
                "optimizer op {} has no row in gradients.csv naming its gradient",
                ops[i].id
            ),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::split_line;

    #[test]
    fn quoted_cells_keep_commas_and_quotes() {
        assert_eq!(
            split_line(r#"1,"a,b","say ""hi""",x"#).unwrap(),
            vec!["1", "a,b", "say \"hi\"", "x"]
        );
        assert_eq!(split_line("a,,b").unwrap(), vec!["a", "", "b"]);
        assert!(split_line(r#"1,"open"#).is_err());
    }
}
