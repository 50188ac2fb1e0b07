//! One error type for every bad input the tool can meet.
//!
//! Users feed the tool files they wrote or exported themselves; when one is wrong the message must
//! say which file and which field, so every input error carries both.

use std::fmt;

/// A problem with something the user gave us: which file (or `<zoo>`/`<cli>` for built-in
/// sources), which field inside it, and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct InputError {
    pub file: String,
    pub field: String,
    pub message: String,
}

impl InputError {
    pub fn new(
        file: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        InputError {
            file: file.into(),
            field: field.into(),
            message: message.into(),
        }
    }
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
    #[error("{0}")]
    Input(#[from] InputError),
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The simulator refused the execution graph (a dependency cycle).
    #[error(transparent)]
    Sim(#[from] crate::sim::SimError),
    #[error(transparent)]
    Metis(#[from] MetisError),
    #[error(transparent)]
    Grouping(#[from] GroupingError),
    #[error(transparent)]
    Solver(#[from] SolverError),
    #[error(transparent)]
    Gnn(#[from] GnnError),
    #[error(transparent)]
    Search(#[from] SearchError),
    #[error(transparent)]
    Train(#[from] TrainError),
    #[error("placement order has {entries} entries for {ops} ops")]
    OrderLength { entries: usize, ops: usize },
    #[error("serialising {what}: {message}")]
    Serialise { what: String, message: String },
    /// A name the tool does not know: a placement or grouping method, a formulation, a device.
    #[error("unknown {kind} \"{name}\" ({expected})")]
    Unknown {
        kind: &'static str,
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
    #[error("metis: {weights} compute times for {ops} ops")]
    WeightCount { weights: usize, ops: usize },
    #[error("metis: {weights} compute times and {memory} memory sizes for {ops} ops")]
    WeightAndMemoryCount {
        weights: usize,
        memory: usize,
        ops: usize,
    },
    #[error(
        "metis: inconsistent CSR (n = {n}, xadj {xadj}, vwgt {vwgt}, adjncy {adjncy}, adjwgt {adjwgt})"
    )]
    InconsistentCsr {
        n: usize,
        xadj: usize,
        vwgt: usize,
        adjncy: usize,
        adjwgt: usize,
    },
    #[error("metis: bad input graph: {0}")]
    BadInput(String),
    #[error("metis: partitioning failed: {0}")]
    Failed(String),
}

/// A grouping request that cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum GroupingError {
    #[error("grouping: {ids} group ids for {ops} ops")]
    IdCount { ids: usize, ops: usize },
    #[error("grouping: bandwidth must be positive and finite, got {0}")]
    Bandwidth(f64),
    #[error("grouping: {weights} compute times for {ops} ops")]
    WeightCount { weights: usize, ops: usize },
    #[error(
        "grouping: compute time of op {op} (\"{name}\") is {weight}; it must be finite and non-negative"
    )]
    BadWeight {
        op: usize,
        name: String,
        weight: f64,
    },
    #[error(
        "celeritas: need bandwidth > 0, R ≥ 1 and a memory limit (got {bandwidth}, {range}, {memory_limit})"
    )]
    CeleritasOptions {
        bandwidth: f64,
        range: usize,
        memory_limit: f64,
    },
    #[error("quickp: percentile must be in (0, 1], got {0}")]
    QuickpPercentile(f64),
    #[error(
        "{model}: the {method} grouping's group graph has a cycle; solve it without --coarsen or \
         with another method"
    )]
    CyclicGroups { model: String, method: String },
}

/// The MILP solver (HiGHS) refused a model or ended without a usable answer.
#[derive(Debug, thiserror::Error)]
pub enum SolverError {
    #[error("HiGHS rejected the model: {0}")]
    Rejected(String),
    #[error("HiGHS refused the warm start: {0}")]
    WarmStart(String),
    #[error("HiGHS failed: {0}")]
    Failed(String),
    #[error("HiGHS ended with {0}")]
    Ended(String),
    #[error("HiGHS option {key}: {message}")]
    Option { key: String, message: String },
    /// The solve ended (infeasible, out of time) with no placement to return.
    #[error("{0}")]
    NoSolution(String),
    /// The model would not fit the memory limit; refused before it is built.
    #[error(
        "the {formulation} MILP of this instance ({nodes} nodes, {devices} GPUs) would have about \
         {rows:.2e} rows and {nonzeros:.2e} nonzeros, {gib:.1} GiB, over the memory limit of \
         {limit_gib:.1} GiB: coarsen further (--coarsen chunks -k N) or raise --memory-limit"
    )]
    TooLarge {
        formulation: &'static str,
        nodes: usize,
        devices: usize,
        rows: f64,
        nonzeros: f64,
        gib: f64,
        limit_gib: f64,
    },
}

/// A GNN policy that cannot be built, read or written.
#[derive(Debug, thiserror::Error)]
pub enum GnnError {
    #[error("{0}")]
    Config(String),
    #[error("{path}: cannot read the GNN policy: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a topoplace GNN policy: {why}")]
    NotAPolicy { path: String, why: String },
    #[error("{path}: {message}")]
    Save { path: String, message: String },
    #[error("the GNN device wgpu needs a build with `--features wgpu`")]
    NoWgpu,
}

/// A search that cannot start or found nothing usable.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("the graph has no ops to place")]
    NoOps,
    #[error("{0} actions is too many")]
    TooManyActions(usize),
    #[error("training targets need a search with a policy")]
    TargetsNeedPolicy,
    #[error("a list scheduler ran past its deadline")]
    OutOfTime,
    #[error(
        "no pipeline of {model} on {cluster}: a pipeline needs two GPUs and a batch that splits \
         into micro-batches"
    )]
    NoPipeline { model: String, cluster: String },
    #[error(
        "{model} does not fit on {cluster}: all {simulated} strategies tried (DP-NCCL included) \
         run out of GPU memory"
    )]
    DoesNotFit {
        model: String,
        cluster: String,
        simulated: usize,
    },
}

/// A training run, a checkpoint or a game file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("model \"{0}\" is not in the recipe")]
    UnknownModel(String),
    #[error("recipe {recipe}: without {model} it trains on no model")]
    NothingLeft { recipe: String, model: String },
    #[error("{path}: holds game {step}/{worker} instead")]
    WrongGame {
        path: String,
        step: u64,
        worker: u64,
    },
    /// A file of the run that does not read back (corrupt, truncated, of another format).
    #[error("{path}: {message}")]
    Corrupt { path: String, message: String },
    #[error(
        "{path}: the run has checkpoints already; pass --resume to continue it, or choose another \
         output directory"
    )]
    AlreadyStarted { path: String },
    #[error("{path}: a checkpoint of recipe \"{found}\", not \"{expected}\"")]
    OtherRecipe {
        path: String,
        found: String,
        expected: String,
    },
    #[error(
        "{path}: the recipe differs from the run's in {keys} (only `steps` may change on \
         --resume); start a new run for another recipe"
    )]
    RecipeChanged { path: String, keys: String },
    #[error("{path}: the checkpoint's GNN is {found}, the recipe asks for {expected}")]
    OtherGnn {
        path: String,
        found: String,
        expected: String,
    },
    #[error(
        "{path}: the recipe has a warm start; run `topoplace train --samples` first: it does the \
         warm start and writes generation 0's weights"
    )]
    WarmStartFirst { path: String },
    #[error(
        "{path}: no snapshot of generation {generation}; run `topoplace train --samples` until it \
         asks for that generation's games"
    )]
    NoSnapshot { path: String, generation: u64 },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
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
    } else if value.is_infinite() {
        Err(InputError::new(
            file,
            field,
            "is too large: it overflows to infinity",
        ))
    } else if value < 0.0 {
        Err(InputError::new(
            file,
            field,
            format!("is negative ({value})"),
        ))
    } else {
        Ok(())
    }
}

/// Like [`check_non_negative`], and zero is refused too (bandwidths, capacities, peak rates).
pub(crate) fn check_positive(file: &str, field: &str, value: f64) -> Result<(), InputError> {
    check_non_negative(file, field, value)?;
    if value == 0.0 {
        return Err(InputError::new(file, field, "must be greater than zero"));
    }
    Ok(())
}
