//! One error type for every bad input the tool can meet.
//!
//! Users feed the tool files they wrote or exported themselves; when one is wrong the message must
//! say which file and which field, so every input error carries both.

use std::fmt;

/// A problem with something the user gave us: which file (or `<zoo>`/`<cli>` for built-in
/// sources), which field inside it, and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct InputError {
    /// The file the bad input came from, or `<zoo>`/`<cli>` for built-in models and flags.
    pub file: String,
    /// The field, flag or line inside `file` that is wrong; empty when the whole file is.
    pub field: String,
    /// What is wrong with it, one line, as printed after the file and field.
    pub message: String,
}

impl InputError {
    /// An error about `field` of `file` (empty `field` for the file as a whole).
    pub fn new(
        file: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        InputError {
            file: file.into(),
            field: field.into(),
            message: without_type_names(message.into()),
        }
    }
}

/// `message` with serde's names of this crate's types put as a file's author knows them:
/// "expected struct Stage" is "expected an object", and a struct read from an array ("invalid
/// length 0, expected struct HybridPlan with 6 elements") is an array where an object belongs.
fn without_type_names(message: String) -> String {
    let message = without_primitive_names(message);
    let Some(at) = message.find("expected struct ") else {
        return message;
    };
    let after = &message[at + "expected struct ".len()..];
    let name_end = after
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(after.len());
    let mut rest = &after[name_end..];
    let from_array = rest.starts_with(" with ") && message.starts_with("invalid length ");
    if from_array {
        rest = rest
            .find(" elements")
            .map_or(rest, |i| &rest[i + " elements".len()..]);
        return format!("invalid type: array, expected an object{rest}");
    }
    format!("{}expected an object{rest}", &message[..at])
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}: {}: {}", self.file, self.field, self.message)
        }
    }
}

impl std::error::Error for InputError {}

/// Every error the library returns. Each message is one line, as the command line prints it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file, model or flag the user gave is malformed or out of range.
    #[error("{0}")]
    Input(#[from] InputError),
    /// Reading, writing or creating a file or directory failed, or a child process would not run.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory (or command) the operation was on, as shown to the user.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The simulator refused the execution graph (a dependency cycle).
    #[error(transparent)]
    Sim(#[from] crate::sim::SimError),
    /// METIS refused or failed a graph partitioning.
    #[error(transparent)]
    Metis(#[from] MetisError),
    /// A grouping (coarsening) request with bad inputs or options, or an unusable grouping.
    #[error(transparent)]
    Grouping(#[from] GroupingError),
    /// The MILP solver rejected the model or ended without a placement.
    #[error(transparent)]
    Solver(#[from] SolverError),
    /// A GNN policy could not be built, read or written.
    #[error(transparent)]
    Gnn(#[from] GnnError),
    /// A placement search could not start or found nothing usable.
    #[error(transparent)]
    Search(#[from] SearchError),
    /// A training run, checkpoint or game file could not be used.
    #[error(transparent)]
    Train(#[from] TrainError),
    /// A placement's explicit op order does not list exactly one entry per op of the graph.
    #[error("placement order has {entries} entries for {ops} ops")]
    OrderLength {
        /// Entries in the given order.
        entries: usize,
        /// Ops in the graph.
        ops: usize,
    },
    /// A value (graph, trace, run state, output) could not be serialised for writing.
    #[error("serialising {what}: {message}")]
    Serialise {
        /// What was being serialised ("graph vgg19", "the run state").
        what: String,
        /// The serialiser's error message.
        message: String,
    },
    /// A name the tool does not know: a placement or grouping method, a formulation, a device.
    #[error("unknown {kind} \"{name}\" ({expected})")]
    Unknown {
        /// What sort of name it is ("placement method", "grouping method", "GNN device").
        kind: &'static str,
        /// The name as the user gave it.
        name: String,
        /// The valid names, as the message lists them ("known: a, b" or "expected a or b").
        expected: String,
    },
    /// A benchmark that could not run (a bad size, a child process that failed).
    #[error("bench: {0}")]
    Bench(String),
}

/// METIS refused or failed a partitioning request.
#[derive(Debug, thiserror::Error)]
pub enum MetisError {
    /// The per-op compute times passed to a partitioning do not cover every op of the graph.
    #[error("metis: {weights} compute times for {ops} ops")]
    WeightCount {
        /// Compute times given.
        weights: usize,
        /// Ops in the graph.
        ops: usize,
    },
    /// A memory-balanced partitioning got compute times or memory sizes not one per op.
    #[error("metis: {weights} compute times and {memory} memory sizes for {ops} ops")]
    WeightAndMemoryCount {
        /// Compute times given.
        weights: usize,
        /// Memory sizes given.
        memory: usize,
        /// Ops in the graph.
        ops: usize,
    },
    /// The CSR arrays handed to METIS disagree in length (an internal bug, not a user input).
    #[error(
        "metis: inconsistent CSR (n = {n}, xadj {xadj}, vwgt {vwgt}, adjncy {adjncy}, adjwgt {adjwgt})"
    )]
    InconsistentCsr {
        /// Vertices in the graph.
        n: usize,
        /// Length of the row-offset array (should be `n + 1`).
        xadj: usize,
        /// Length of the vertex-weight array (should be `n` times the constraint count).
        vwgt: usize,
        /// Length of the adjacency array.
        adjncy: usize,
        /// Length of the edge-weight array (should equal `adjncy`).
        adjwgt: usize,
    },
    /// METIS refused the graph when it was handed over; holds METIS's error.
    #[error("metis: bad input graph: {0}")]
    BadInput(String),
    /// METIS's k-way partitioning itself failed; holds METIS's error.
    #[error("metis: partitioning failed: {0}")]
    Failed(String),
}

/// A grouping request that cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum GroupingError {
    /// A grouping was given a group id list that is not one id per op.
    #[error("grouping: {ids} group ids for {ops} ops")]
    IdCount {
        /// Group ids given.
        ids: usize,
        /// Ops in the graph.
        ops: usize,
    },
    /// A grouping did not end within its time limit (`group --time-limit`).
    #[error(
        "{method}'s grouping of {model} ({ops} ops) did not end within --time-limit {seconds} s"
    )]
    OutOfTime {
        /// The grouping method.
        method: String,
        /// The graph's name.
        model: String,
        /// The graph's op count.
        ops: usize,
        /// The time limit, seconds.
        seconds: f64,
    },
    /// The bandwidth (bytes/µs) used to cost cut edges is zero, negative, NaN or infinite.
    #[error("grouping: bandwidth must be positive and finite, got {0}")]
    Bandwidth(f64),
    /// The per-op compute times given to a grouping method do not cover every op.
    #[error("grouping: {weights} compute times for {ops} ops")]
    WeightCount {
        /// Compute times given.
        weights: usize,
        /// Ops in the graph.
        ops: usize,
    },
    /// An op's compute time is NaN, infinite or negative.
    #[error(
        "grouping: compute time of op {op} (\"{name}\") is {weight}; it must be finite and non-negative"
    )]
    BadWeight {
        /// Index of the op in the graph.
        op: usize,
        /// The op's name.
        name: String,
        /// The offending compute time (µs).
        weight: f64,
    },
    /// Celeritas fusion options out of range: bandwidth not positive, range `R` of 0, or a NaN
    /// memory limit.
    #[error(
        "celeritas: need bandwidth > 0, R ≥ 1 and a memory limit (got {bandwidth}, {range}, {memory_limit})"
    )]
    CeleritasOptions {
        /// The bandwidth given (bytes/µs).
        bandwidth: f64,
        /// The fusion range `R` given.
        range: usize,
        /// The memory limit given (bytes).
        memory_limit: f64,
    },
    /// The quickp percentile (of op compute times) is outside (0, 1].
    #[error("quickp: percentile must be in (0, 1], got {0}")]
    QuickpPercentile(f64),
    /// The grouping's coarse graph has a cycle, so it cannot be scheduled group by group
    /// (raised when solving a coarsened instance).
    #[error(
        "{model}: the {method} grouping's group graph has a cycle; solve it without --coarsen or \
         with another method"
    )]
    CyclicGroups {
        /// The model (graph) name.
        model: String,
        /// The grouping method that produced the cycle.
        method: String,
    },
}

/// The MILP solver (HiGHS) refused a model or ended without a usable answer.
#[derive(Debug, thiserror::Error)]
pub enum SolverError {
    /// HiGHS would not accept the built model for optimisation; holds HiGHS's error.
    #[error("HiGHS rejected the model: {0}")]
    Rejected(String),
    /// HiGHS refused the warm-start solution handed to it; holds HiGHS's error.
    #[error("HiGHS refused the warm start: {0}")]
    WarmStart(String),
    /// The HiGHS solve call itself failed; holds HiGHS's error.
    #[error("HiGHS failed: {0}")]
    Failed(String),
    /// HiGHS ended with a model status the tool does not handle (e.g. unbounded); holds it.
    #[error("HiGHS ended with {0}")]
    Ended(String),
    /// HiGHS refused to set one of its options (time limit, gap, threads, seed, ...).
    #[error("HiGHS option {key}: {message}")]
    Option {
        /// The HiGHS option name.
        key: String,
        /// HiGHS's error.
        message: String,
    },
    /// The solve ended (infeasible, out of time) with no placement to return.
    #[error("{0}")]
    NoSolution(String),
    /// The constraint-programming prover beside HiGHS failed (its thread could not start, or
    /// stopped on an internal error); holds what it said. No answer is given without it.
    #[error("the CP prover failed: {0}")]
    Prover(String),
    /// The model would not fit the memory limit; refused before it is built.
    #[error(
        "the {formulation} MILP of this instance ({nodes} nodes, {devices} GPUs) would have \
         {about} {rows:.2e} rows and {nonzeros:.2e} nonzeros, {needed}, over the memory limit \
         of {limit}: coarsen further (--coarsen chunks -k N) or raise --memory-limit"
    )]
    TooLarge {
        /// The MILP formulation that was to be built.
        formulation: &'static str,
        /// Nodes of the instance (ops, or groups when coarsened).
        nodes: usize,
        /// GPUs in the cluster.
        devices: usize,
        /// Estimated constraint rows of the model.
        rows: f64,
        /// Estimated nonzeros of the constraint matrix.
        nonzeros: f64,
        /// Estimated memory of the model, as the reports print sizes ("1.3 GiB").
        needed: String,
        /// The memory limit it exceeds, printed so ("900.0 MiB").
        limit: String,
        /// "about" for the full estimate, "at least" for the floor a large graph is refused on.
        about: &'static str,
    },
}

/// A GNN policy that cannot be built, read or written.
#[derive(Debug, thiserror::Error)]
pub enum GnnError {
    /// The GNN configuration is invalid (fails its check); holds the reason.
    #[error("{0}")]
    Config(String),
    /// A policy file could not be read from disk.
    #[error("{path}: cannot read the GNN policy: {source}")]
    Read {
        /// The policy file.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A file read as a policy is not one (bad header, checksum, old format, wrong contents).
    #[error("{path}: not a topoplace {kind}: {why}")]
    NotAPolicy {
        /// The file.
        path: String,
        /// What it was read as: a GNN policy or a layout policy.
        kind: &'static str,
        /// Why it was rejected.
        why: String,
    },
    /// A policy could not be encoded or written to its file.
    #[error("{path}: {message}")]
    Save {
        /// The policy file being written.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The `wgpu` GNN device was asked for in a build without the `wgpu` feature.
    #[error("the GNN device wgpu needs a build with `--features wgpu`")]
    NoWgpu,
}

/// A search that cannot start or found nothing usable.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// An MCTS search was started on a graph with no ops (no groups to decide).
    #[error("the graph has no ops to place")]
    NoOps,
    /// The cluster yields more placement actions than the search can index (over `u16::MAX`).
    #[error(
        "cluster {cluster} has {device_groups} device groups, which give TAG's search {actions} \
         actions (each group and each pair of groups, with each of 4 replication options): more \
         than the 65535 it can index, which about 180 device groups reach; put the GPUs in fewer \
         machines (a machine's GPUs on one interconnect form one device group)"
    )]
    TooManyActions {
        /// The cluster's name.
        cluster: String,
        /// Its device groups.
        device_groups: usize,
        /// The actions they give.
        actions: usize,
    },
    /// Training targets were asked of a search that runs without a GNN policy.
    #[error("training targets need a search with a policy")]
    TargetsNeedPolicy,
    /// A list scheduler or pipeline planner passed its time budget's deadline.
    #[error("a list scheduler ran past its deadline")]
    OutOfTime,
    /// A compilation or simulation was given up at the wall-clock deadline a search under a
    /// time limit set for it: the search ends with what it has.
    #[error("a simulation was abandoned at the search's deadline")]
    Abandoned,
    /// No pipeline-parallel plan exists: fewer than two GPUs, or a batch that will not split.
    #[error(
        "no pipeline of {model} on {cluster}: a pipeline needs two GPUs and a batch that splits \
         into micro-batches"
    )]
    NoPipeline {
        /// The model (graph) name.
        model: String,
        /// The cluster name.
        cluster: String,
    },
    /// The time limit ended the search before any plan that fits was found, with methods left
    /// unfinished: whether one fits is not known.
    #[error(
        "no plan of {model} on {cluster} that fits was found within --time {seconds} s: none of \
         the {simulated} plans judged fits, and {unfinished} ran out of time; give it more --time"
    )]
    NoneInTime {
        /// The model (graph) name.
        model: String,
        /// The cluster name.
        cluster: String,
        /// The time limit, seconds.
        seconds: f64,
        /// How many plans were simulated.
        simulated: usize,
        /// The methods the limit stopped, for the message.
        unfinished: String,
    },
    /// `place --time` gave up where even one simulation did not finish in the time left: no
    /// plan, rather than a plan past the limit.
    #[error(
        "no plan of {model} on {cluster} within --time {seconds} s: a simulation of its {ops} ops \
         on {gpus} GPUs did not finish in the time left; give it more --time"
    )]
    SimulationTooLong {
        /// The model (graph) name.
        model: String,
        /// The cluster name.
        cluster: String,
        /// The time limit, seconds.
        seconds: f64,
        /// The graph's op count.
        ops: usize,
        /// The cluster's GPU count.
        gpus: usize,
    },
    /// The model's weights, gradients and optimizer state alone are more than all the cluster's
    /// GPU memory: no plan fits, whatever the time given to search.
    #[error(
        "{model} cannot fit on {cluster}: its weights, gradients and optimizer state alone take \
         {needed}, more than the {available} of GPU memory of all its GPUs together"
    )]
    StateExceedsCluster {
        /// The model (graph) name.
        model: String,
        /// The cluster name.
        cluster: String,
        /// The state's bytes, as printed.
        needed: String,
        /// The cluster's GPU memory, as printed.
        available: String,
    },
    /// Every placement `place` simulated runs out of GPU memory on the cluster.
    #[error("{model} does not fit on {cluster}: all {simulated} {tried} run out of GPU memory")]
    DoesNotFit {
        /// The model (graph) name.
        model: String,
        /// The cluster name.
        cluster: String,
        /// How many strategies were simulated.
        simulated: usize,
        /// What was tried, for the message: TAG's strategies or hybrid plans.
        tried: &'static str,
    },
}

/// A training run, a checkpoint or a game file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// A model was named that the recipe's training set does not hold.
    #[error("model \"{0}\" is not in the recipe")]
    UnknownModel(String),
    /// A held-out experiment would leave the recipe with no model to train on.
    #[error("recipe {recipe}: without {model} it trains on no model")]
    NothingLeft {
        /// The recipe name.
        recipe: String,
        /// The model held out.
        model: String,
    },
    /// A game file holds a different `(step, worker)` game than its name says.
    #[error("{path}: holds game {step}/{worker} instead")]
    WrongGame {
        /// The game file.
        path: String,
        /// The training step recorded inside it.
        step: u64,
        /// The worker recorded inside it.
        worker: u64,
    },
    /// A game file of the right step and worker that another recipe (another seed, model list
    /// or training set) drew: its targets are not this run's.
    #[error(
        "{path}: played for another run ({found}, where this recipe draws {expected}); give \
         `train` the games of its own run"
    )]
    ForeignGame {
        /// The game file.
        path: String,
        /// The seed, model and cluster recorded inside it.
        found: String,
        /// What this run's recipe draws for that step and worker.
        expected: String,
    },
    /// A file of the run that does not read back (corrupt, truncated, of another format).
    #[error("{path}: {message}")]
    Corrupt {
        /// The file that failed to read back.
        path: String,
        /// The decoder's error.
        message: String,
    },
    /// A new training run was started in a directory that already has checkpoints, without
    /// `--resume`.
    #[error(
        "{path}: the run has checkpoints already; pass --resume to continue it, or choose another \
         output directory"
    )]
    AlreadyStarted {
        /// The run's output directory.
        path: String,
    },
    /// Another process holds the run directory's lock: two runs would interleave checkpoints.
    #[error(
        "{path}: another training run holds this directory; wait for it or choose another --out"
    )]
    Locked {
        /// The run's lock file.
        path: String,
    },
    /// On `--resume`, the checkpoint belongs to a recipe of another name.
    #[error("{path}: a checkpoint of recipe \"{found}\", not \"{expected}\"")]
    OtherRecipe {
        /// The checkpoint's state file.
        path: String,
        /// The recipe name in the checkpoint.
        found: String,
        /// The recipe name given now.
        expected: String,
    },
    /// On `--resume`, the recipe differs from the checkpoint's copy in more than `steps`.
    #[error(
        "{path}: the recipe differs from the run's in {keys} (only `steps` may change on \
         --resume); start a new run for another recipe"
    )]
    RecipeChanged {
        /// The checkpoint's copy of the recipe.
        path: String,
        /// The differing keys, comma-separated.
        keys: String,
    },
    /// On `--resume`, the run is already past the recipe's `steps`.
    #[error(
        "{path}: the run is already at step {step}, past the recipe's `steps` = {steps}: it is \
         complete; raise `steps` above {step} to train it further"
    )]
    PastSteps {
        /// The checkpoint's state.
        path: String,
        /// The step the run reached.
        step: u64,
        /// The recipe's `steps`.
        steps: u64,
    },
    /// On `--resume`, the checkpoint's GNN configuration differs from the recipe's.
    #[error("{path}: the checkpoint's GNN is {found}, the recipe asks for {expected}")]
    OtherGnn {
        /// The checkpoint directory.
        path: String,
        /// The checkpoint's GNN configuration.
        found: String,
        /// The GNN configuration the recipe asks for.
        expected: String,
    },
    /// Generation 0's policy was asked for before the recipe's warm start was run.
    #[error(
        "{path}: the recipe has a warm start; run `topoplace train --samples` first: it does the \
         warm start and writes generation 0's weights"
    )]
    WarmStartFirst {
        /// Where generation 0's snapshot is expected.
        path: String,
    },
    /// The policy snapshot of a generation (after 0) has not been written yet.
    #[error(
        "{path}: no snapshot of generation {generation}; run `topoplace train --samples` until it \
         asks for that generation's games"
    )]
    NoSnapshot {
        /// Where the snapshot is expected.
        path: String,
        /// The generation asked for.
        generation: u64,
    },
}

/// The library's result type; the error defaults to [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether this is a usage error: bad input from the command line's flags (`<cli>`), which
    /// exits with status 2 as clap's own usage errors do.
    pub fn is_usage(&self) -> bool {
        matches!(self, Error::Input(e) if e.file == "<cli>")
    }

    /// An [`Error::Io`] for an operation on `path` (as shown to the user).
    pub fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// A value that failed to serialise (`what`: "graph vgg19", "the run state").
    pub fn serialise(what: impl Into<String>, error: impl std::fmt::Display) -> Self {
        Error::Serialise {
            what: what.into(),
            message: error.to_string(),
        }
    }
}

/// Reject NaN, infinities and negative numbers in a size, time or rate.
pub(crate) fn check_non_negative(file: &str, field: &str, value: f64) -> Result<(), InputError> {
    if value.is_nan() {
        Err(InputError::new(file, field, "is NaN"))
    } else if value < 0.0 {
        // Not the value: callers check it in internal units, not the file's.
        Err(InputError::new(file, field, "is negative"))
    } else if value.is_infinite() {
        Err(InputError::new(
            file,
            field,
            "is not finite (infinity, or too large to represent)",
        ))
    } else {
        Ok(())
    }
}

/// Refuses a name the reports would print broken ([`unprintable`]).
pub(crate) fn check_printable(file: &str, field: &str, name: &str) -> Result<(), InputError> {
    match unprintable(name) {
        Some(why) => Err(InputError::new(file, field, why)),
        None => Ok(()),
    }
}

/// Whether `name` shows nothing: empty, or only spaces and invisible format characters (a
/// zero-width space, joiner or mark, a byte-order mark, a soft hyphen), which read as no name.
pub fn is_blank(name: &str) -> bool {
    let invisible = |c: char| matches!(c, '\u{00AD}' | '\u{200B}'..='\u{200F}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}');
    name.chars().all(|c| c.is_whitespace() || invisible(c))
}

/// Why the reports would print `name` broken, if they would: it holds a control character (a
/// line break or tab splits the tables' lines) or a text-direction control (U+202E turns the
/// rest of a line around).
pub fn unprintable(name: &str) -> Option<String> {
    let direction = |c: char| matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
    let c = name.chars().find(|&c| c.is_control() || direction(c))?;
    Some(if c.is_control() {
        "holds a control character (a line break or tab would break the reports' lines)".into()
    } else {
        format!(
            "holds the text-direction control U+{:04X} (it would turn the reports' lines around)",
            u32::from(c)
        )
    })
}

/// Like [`check_non_negative`], and zero is refused too (bandwidths, capacities, peak rates).
pub(crate) fn check_positive(file: &str, field: &str, value: f64) -> Result<(), InputError> {
    check_non_negative(file, field, value)?;
    if value == 0.0 {
        return Err(InputError::new(file, field, "must be greater than zero"));
    }
    Ok(())
}

/// serde's names of Rust's number types as a file's author reads them: "expected u32" is "expected
/// a whole number from 0 to 4294967295", "expected f64" is "expected a number", and a value out
/// of a type's range is said to be so ("integer `2^64` as i128, expected i64").
fn without_primitive_names(message: String) -> String {
    const NAMES: [(&str, &str); 12] = [
        ("u8", "a whole number from 0 to 255"),
        ("u16", "a whole number from 0 to 65535"),
        ("u32", "a whole number from 0 to 4294967295"),
        ("u64", "a whole number from 0 to 18446744073709551615"),
        ("usize", "a whole number from 0 to 18446744073709551615"),
        ("i8", "a whole number"),
        ("i16", "a whole number"),
        ("i32", "a whole number"),
        ("i64", "a whole number"),
        ("isize", "a whole number"),
        ("f32", "a number"),
        ("f64", "a number"),
    ];
    if !message.contains("expected ") {
        return message;
    }
    let mut out = message.replace(" as i128, expected ", " is out of range, expected ");
    for (name, plain) in NAMES {
        let from = format!("expected {name}");
        let mut start = 0;
        while let Some(found) = out[start..].find(&from) {
            let at = start + found;
            let end = at + from.len();
            // A whole word only: "expected u32" but not a longer name that begins with it.
            let whole = out[end..]
                .chars()
                .next()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            if whole {
                out.replace_range(at..end, &format!("expected {plain}"));
                start = at + "expected ".len() + plain.len();
            } else {
                start = end;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::InputError;

    #[test]
    fn serde_names_of_our_types_become_what_the_file_holds() {
        let message = |m: &str| InputError::new("f", "", m).message;
        assert_eq!(
            message("invalid type: integer `5`, expected struct Stage at line 1 column 65"),
            "invalid type: integer `5`, expected an object at line 1 column 65"
        );
        assert_eq!(
            message(
                "invalid length 0, expected struct HybridPlan with 6 elements at line 1 column 2"
            ),
            "invalid type: array, expected an object at line 1 column 2"
        );
        assert_eq!(
            message("invalid type: string \"s\", expected struct HybridPlan"),
            "invalid type: string \"s\", expected an object"
        );
        assert_eq!(
            message("invalid type: string \"4\", expected i64"),
            "invalid type: string \"4\", expected a whole number"
        );
        assert_eq!(
            message("invalid value: integer `-4`, expected u32 at line 1 column 20"),
            "invalid value: integer `-4`, expected a whole number from 0 to 4294967295 at line 1 \
             column 20"
        );
        assert_eq!(
            message("invalid type: null, expected f64"),
            "invalid type: null, expected a number"
        );
        assert_eq!(
            message("invalid value: integer `18446744073709551616` as i128, expected i64"),
            "invalid value: integer `18446744073709551616` is out of range, expected a whole \
             number"
        );
        // Anything else is left as it is.
        assert_eq!(message("must be at least 1"), "must be at least 1");
    }
}
