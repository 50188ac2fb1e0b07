//! `topoplace._topoplace`, the native half of the Python package: the library's three jobs
//! (`topoplace::api`) called with Python's arguments and answered as the JSON the command line
//! prints with `--json`. The Python half (`python/topoplace/`) wraps the answers in objects and
//! the errors in its exception classes.
//!
//! Every call runs on a worker thread while the calling thread waits without the GIL, checking
//! for Ctrl-C every 100 ms: a KeyboardInterrupt returns at once and asks the abandoned worker to
//! stop (`topoplace::interrupt`); it ends at its next check, its result dropped.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use topoplace::api::{
    self, CompareRequest, Comparison, Numerics, PlaceRequest, Placed, PlannerChoice,
    SimulateRequest,
};
use topoplace::error::{Error, InputError, SearchError};
use topoplace::mcts::{GroupOrder, SearchSplit};
use topoplace::sim::Order;
use topoplace::strategy::{AllReducePacking, BatchSplit, HOROVOD_FUSION_BYTES};

/// How often the waiting thread looks for Ctrl-C.
const SIGNAL_POLL: Duration = Duration::from_millis(100);

/// Runs `job` on a worker thread; the caller waits with the GIL released and answers Ctrl-C.
fn run_detached<T: Send + 'static>(
    py: Python<'_>,
    job: impl FnOnce() -> topoplace::Result<T> + Send + 'static,
) -> PyResult<T> {
    let (tx, rx) = channel();
    // A receiver is not shared between threads; a lock around it is.
    let rx = Mutex::new(rx);
    let stop = Arc::new(AtomicBool::new(false));
    let asked = stop.clone();
    std::thread::spawn(move || {
        let done = topoplace::interrupt::stoppable(asked, || catch_unwind(AssertUnwindSafe(job)));
        let _ = tx.send(done);
    });
    loop {
        let received = py.detach(|| match rx.lock() {
            Ok(rx) => rx.recv_timeout(SIGNAL_POLL),
            Err(_) => Err(RecvTimeoutError::Disconnected),
        });
        match received {
            Ok(Ok(result)) => return result.map_err(|e| to_python(py, e)),
            Ok(Err(panic)) => return Err(internal_error(panic)),
            Err(RecvTimeoutError::Timeout) => {
                if let Err(interrupted) = py.check_signals() {
                    stop.store(true, Ordering::Relaxed);
                    return Err(interrupted);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(PyRuntimeError::new_err(
                    "topoplace: the worker thread vanished",
                ));
            }
        }
    }
}

/// Fails when Ctrl-C abandoned this call: its result is dropped, so it must not write the
/// files it was asked for either (they would replace the user's with a cut-short search's).
fn not_stopped() -> topoplace::Result<()> {
    match topoplace::interrupt::requested() {
        true => Err(Error::io(
            "<interrupted>",
            std::io::Error::new(std::io::ErrorKind::Interrupted, "interrupted"),
        )),
        false => Ok(()),
    }
}

fn internal_error(panic: Box<dyn std::any::Any + Send>) -> PyErr {
    let what = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".to_string());
    PyRuntimeError::new_err(format!("topoplace: internal error: {what}"))
}

/// The library's error as an exception of `topoplace.errors`: `InputError` (with `file`,
/// `field` and `reason`) for bad input, `DoesNotFitError` when no plan fits, `TopoplaceError`
/// for the rest. A command-line flag (`<cli>`, `--cluster`) is shown as the Python argument
/// (`<argument>`, `cluster`).
fn to_python(py: Python<'_>, e: Error) -> PyErr {
    let raised = || -> PyResult<PyErr> {
        let errors = py.import("topoplace.errors")?;
        let exception = match &e {
            Error::Input(i) => {
                let (file, field) = match i.file.as_str() {
                    "<cli>" => (
                        "<argument>".to_string(),
                        i.field.trim_start_matches('-').replace('-', "_"),
                    ),
                    _ => (i.file.clone(), i.field.clone()),
                };
                errors
                    .getattr("InputError")?
                    .call1((file, field, i.message.clone()))?
            }
            Error::Search(SearchError::DoesNotFit { .. }) => {
                errors.getattr("DoesNotFitError")?.call1((e.to_string(),))?
            }
            _ => errors.getattr("TopoplaceError")?.call1((e.to_string(),))?,
        };
        Ok(PyErr::from_value(exception))
    };
    raised().unwrap_or_else(|failed| failed)
}

fn json<T: serde::Serialize>(value: &T) -> topoplace::Result<String> {
    serde_json::to_string(value).map_err(|e| Error::serialise("result", e))
}

/// How the model trains, from the keyword arguments every job takes.
fn numerics(
    precision: &str,
    framework: &str,
    seq: Option<usize>,
    optimizer: Option<&str>,
    memory_format: Option<&str>,
) -> topoplace::Result<Numerics> {
    let bad =
        |field: &str, why: String| Error::from(topoplace::InputError::new("<cli>", field, why));
    if seq == Some(0) {
        return Err(bad("--seq", "must be at least 1".into()));
    }
    Ok(Numerics {
        precision: precision.parse().map_err(|why| bad("--precision", why))?,
        framework: framework.parse().map_err(|why| bad("--framework", why))?,
        seq,
        optimizer: optimizer
            .map(|o| o.parse().map_err(|why| bad("--optimizer", why)))
            .transpose()?,
        memory_format: memory_format
            .map(|m| m.parse().map_err(|why| bad("--memory-format", why)))
            .transpose()?,
    })
}

fn usage(field: &str, why: impl Into<String>) -> Error {
    topoplace::InputError::new("<cli>", field, why.into()).into()
}

/// One training iteration of `strategy` (`single`, `dp`, `dp-p` or a strategy file), or of the
/// hybrid plan in the file `plan`; the summary `simulate --json` prints.
#[pyfunction]
#[pyo3(signature = (model, cluster, strategy="dp", *, batch=None, precision="fp32", framework="tf1",
    seq=None, optimizer=None, memory_format=None, order=None, plan=None, trace=None))]
#[allow(clippy::too_many_arguments)]
fn simulate(
    py: Python<'_>,
    model: String,
    cluster: String,
    strategy: &str,
    batch: Option<u32>,
    precision: &str,
    framework: &str,
    seq: Option<usize>,
    optimizer: Option<&str>,
    memory_format: Option<&str>,
    order: Option<&str>,
    plan: Option<PathBuf>,
    trace: Option<PathBuf>,
) -> PyResult<String> {
    let strategy = strategy.to_string();
    let numerics = numerics(precision, framework, seq, optimizer, memory_format)
        .map_err(|e| to_python(py, e))?;
    let order = match order {
        None => None,
        Some("fifo") => Some(Order::Fifo),
        Some("priority") => Some(Order::Priority),
        Some(other) => {
            let why = format!("\"{other}\" is neither \"fifo\" nor \"priority\"");
            return Err(to_python(py, usage("--order", why)));
        }
    };
    run_detached(py, move || {
        if let Some(plan) = plan {
            return json(&api::simulate_plan(&model, &cluster, &plan, numerics)?);
        }
        let simulated = api::simulate(&SimulateRequest {
            model: &model,
            batch,
            cluster: &cluster,
            strategy: &strategy,
            numerics,
            order,
            every_replica: trace.is_some(),
        })?;
        if let Some(path) = &trace {
            not_stopped()?;
            let api::Loaded { graph, cluster, .. } = &simulated.inputs;
            api::write_trace(path, graph, cluster, &simulated.evaluation)?;
        }
        json(&simulated.summary)
    })
}

/// Places `model` on `cluster` as `topoplace place` does; returns the summary `place --json`
/// prints and the chosen strategy (or hybrid plan) as its file's JSON.
#[pyfunction]
#[pyo3(signature = (model, cluster, *, batch=None, precision="fp32", framework="tf1", seq=None,
    optimizer=None, memory_format=None, policy="shipped", budget=300, time=None, seed=0,
    planner="auto",
    groups=None, pipeline_leaves=None, batch_split="even", group_order="compute", out=None,
    trace=None, progress=true))]
#[allow(clippy::too_many_arguments)]
fn place(
    py: Python<'_>,
    model: String,
    cluster: String,
    batch: Option<u32>,
    precision: &str,
    framework: &str,
    seq: Option<usize>,
    optimizer: Option<&str>,
    memory_format: Option<&str>,
    policy: &str,
    budget: usize,
    time: Option<f64>,
    seed: u64,
    planner: &str,
    groups: Option<usize>,
    pipeline_leaves: Option<usize>,
    batch_split: &str,
    group_order: &str,
    out: Option<PathBuf>,
    trace: Option<PathBuf>,
    progress: bool,
) -> PyResult<(String, String)> {
    let started = Instant::now();
    let checked = || -> topoplace::Result<_> {
        let numerics = numerics(precision, framework, seq, optimizer, memory_format)?;
        let planner = match planner {
            "auto" => PlannerChoice::Auto,
            "tag" => PlannerChoice::Tag,
            "hybrid" => PlannerChoice::Hybrid,
            other => {
                return Err(usage(
                    "--planner",
                    format!("\"{other}\": auto, tag or hybrid"),
                ));
            }
        };
        let batch_split = match batch_split {
            "even" => SearchSplit::Even,
            "auto" => SearchSplit::Auto,
            other => return Err(usage("--batch-split", format!("\"{other}\": even or auto"))),
        };
        let group_order = match group_order {
            "compute" => GroupOrder::Compute,
            "impact" => GroupOrder::Impact,
            other => {
                return Err(usage(
                    "--group-order",
                    format!("\"{other}\": compute or impact"),
                ));
            }
        };
        if budget == 0 {
            return Err(usage("--budget", "must be at least 1"));
        }
        if let Some(t) = time {
            api::check_seconds(t).map_err(|why| usage("--time", why))?;
        }
        for path in [&out, &trace].into_iter().flatten() {
            topoplace::io::check_writable(path)?;
        }
        Ok((numerics, planner, batch_split, group_order))
    };
    let (numerics, planner, batch_split, group_order) = checked().map_err(|e| to_python(py, e))?;
    let policy = policy.to_string();
    run_detached(py, move || {
        let defaults = PlaceRequest::new(&model, &cluster);
        let request = PlaceRequest {
            batch,
            numerics,
            policy: &policy,
            budget,
            time,
            groups: groups.unwrap_or(defaults.groups),
            group_order,
            batch_split,
            pipeline_leaves: pipeline_leaves.unwrap_or(defaults.pipeline_leaves),
            seed,
            planner,
            started,
            ..defaults
        };
        let placed = api::place_showing_progress(&request, progress)?;
        match placed {
            Placed::Tag(t) => {
                not_stopped()?;
                t.write_outputs(out.as_deref(), trace.as_deref())?;
                Ok((json(&t.summary)?, t.strategy_json()?))
            }
            Placed::Hybrid(h) => {
                if trace.is_some() {
                    // There is no op-level timeline of a hybrid plan to trace.
                    let reason = "a hybrid plan has no op-level trace; planner=\"tag\" places the model by op groups and traces that";
                    return Err(InputError::new("<argument>", "trace", reason).into());
                }
                not_stopped()?;
                if let Some(path) = &out {
                    h.write_plan(path)?;
                }
                Ok((json(&*h)?, json(&h.plan)?))
            }
        }
    })
}

/// Runs `methods` on every model × cluster as `topoplace compare` does; returns the rows
/// `compare --json` prints, and writes results.csv, results.md and the charts when `out` is
/// given.
#[pyfunction]
#[pyo3(signature = (models, clusters, methods="all", *, batch=None, precision="fp32",
    framework="tf1", seq=None, optimizer=None, memory_format=None, seed=0, budget=100,
    time_limit=None, out=None,
    progress=true))]
#[allow(clippy::too_many_arguments)]
fn compare(
    py: Python<'_>,
    models: Vec<String>,
    clusters: Vec<String>,
    methods: &str,
    batch: Option<u32>,
    precision: &str,
    framework: &str,
    seq: Option<usize>,
    optimizer: Option<&str>,
    memory_format: Option<&str>,
    seed: u64,
    budget: usize,
    time_limit: Option<f64>,
    out: Option<PathBuf>,
    progress: bool,
) -> PyResult<String> {
    let checked = || -> topoplace::Result<Numerics> {
        topoplace::placers::compare::parse_methods(methods)
            .map_err(|e| usage("--methods", e.to_string()))?;
        if budget == 0 {
            return Err(usage("--budget", "must be at least 1"));
        }
        if let Some(t) = time_limit {
            api::check_seconds(t).map_err(|why| usage("--time-limit", why))?;
        }
        numerics(precision, framework, seq, optimizer, memory_format)
    };
    let numerics = checked().map_err(|e| to_python(py, e))?;
    let methods = methods.to_string();
    run_detached(py, move || {
        let comparison = Comparison::prepare(&CompareRequest {
            models: &models,
            batch,
            numerics,
            clusters: &clusters,
            methods: &methods,
            seed,
            budget,
            time_limit,
        })?;
        let rows = comparison.run_showing_progress(progress)?;
        if let Some(dir) = &out {
            not_stopped()?;
            topoplace::placers::compare::write_outputs(dir, &rows)?;
        }
        json(&rows)
    })
}

/// The names of the shipped cluster configs.
#[pyfunction]
fn shipped_clusters() -> Vec<String> {
    topoplace::assets::CONFIGS
        .iter()
        .map(|(name, _)| name.to_string())
        .collect()
}

/// TAG's tree as an episodic environment (`topoplace::mcts::Environment`) over owned inputs;
/// `topoplace.env.PlacementEnv` gives it Gymnasium's shape.
#[pyclass(module = "topoplace._topoplace")]
struct Environment {
    inputs: api::Loaded,
    env: topoplace::mcts::Environment,
    /// The vertex the next step decides (for the priors).
    at: Option<topoplace::mcts::Observation>,
    /// A GNN policy, read on the first call for priors.
    policy: Option<(String, topoplace::gnn::GnnPolicy)>,
}

/// An observation as plain Python values: every array flat, with its row width.
fn observation<'py>(
    py: Python<'py>,
    o: &topoplace::mcts::Observation,
) -> PyResult<Bound<'py, PyDict>> {
    use topoplace::gnn::features::{DEV_FEATURES, EDGE_FEATURES, OP_FEATURES};
    let d = PyDict::new(py);
    let g = &o.graph;
    d.set_item("group", o.group)?;
    d.set_item("op_features", (&g.op_features, OP_FEATURES))?;
    d.set_item("dev_features", (&g.dev_features, DEV_FEATURES))?;
    for (name, edges) in [
        ("op_op", &g.op_op),
        ("dev_dev", &g.dev_dev),
        ("op_dev", &g.op_dev),
    ] {
        d.set_item(
            name,
            (&edges.src, &edges.dst, &edges.features, EDGE_FEATURES),
        )?;
    }
    Ok(d)
}

#[pymethods]
impl Environment {
    #[new]
    #[pyo3(signature = (model, cluster, *, groups=None, batch=None, precision="fp32",
        framework="tf1", seq=None, optimizer=None, memory_format=None, batch_split="even",
        allreduce="auto"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        model: String,
        cluster: String,
        groups: Option<usize>,
        batch: Option<u32>,
        precision: &str,
        framework: &str,
        seq: Option<usize>,
        optimizer: Option<&str>,
        memory_format: Option<&str>,
        batch_split: &str,
        allreduce: &str,
    ) -> PyResult<Self> {
        let checked = || -> topoplace::Result<_> {
            let numerics = numerics(precision, framework, seq, optimizer, memory_format)?;
            let split = match batch_split {
                "even" => BatchSplit::Even,
                "proportional" => BatchSplit::Proportional,
                other => {
                    let why = format!("\"{other}\": even or proportional");
                    return Err(usage("--batch-split", why));
                }
            };
            let packing = match allreduce {
                "auto" => None,
                "per-tensor" => Some(AllReducePacking::PerTensor),
                "packed" => Some(AllReducePacking::Packed),
                "buckets" => Some(AllReducePacking::Buckets(HOROVOD_FUSION_BYTES)),
                other => {
                    let why = format!("\"{other}\": auto, per-tensor, packed or buckets");
                    return Err(usage("--allreduce", why));
                }
            };
            if groups == Some(0) {
                return Err(usage("--groups", "must be at least 1"));
            }
            Ok((numerics, split, packing))
        };
        let (numerics, split, packing) = checked().map_err(|e| to_python(py, e))?;
        let groups = groups.unwrap_or(topoplace::mcts::DEFAULT_GROUPS);
        run_detached(py, move || {
            let inputs = api::Loaded::load(&model, batch, &cluster, numerics)?;
            let env = topoplace::mcts::Environment::new(&inputs.problem(), groups, split, packing)?;
            Ok(Environment {
                inputs,
                env,
                at: None,
                policy: None,
            })
        })
    }

    /// Starts an episode; the first observation.
    fn reset<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let Environment { inputs, env, .. } = self;
        let o = py
            .detach(|| env.reset(&inputs.problem()))
            .map_err(|e| to_python(py, e))?;
        let shown = observation(py, &o);
        self.at = Some(o);
        shown
    }

    /// Takes `action` for the next op group: (observation or None, reward, iteration µs, fits).
    fn step<'py>(
        &mut self,
        py: Python<'py>,
        action: usize,
    ) -> PyResult<(Option<Bound<'py, PyDict>>, f64, f64, bool)> {
        let Environment { inputs, env, .. } = self;
        let t = py
            .detach(|| env.step(&inputs.problem(), action))
            .map_err(|e| to_python(py, e))?;
        let o = t
            .observation
            .as_ref()
            .map(|o| observation(py, o))
            .transpose()?;
        self.at = t.observation;
        Ok((o, t.reward, t.iteration_us, t.fits))
    }

    /// A GNN policy's priors over every action at the vertex the next step decides: `policy`
    /// is `shipped` or a policy file, as `place --policy` takes.
    #[pyo3(signature = (policy="shipped"))]
    fn priors(&mut self, py: Python<'_>, policy: &str) -> PyResult<Vec<f32>> {
        let Some(at) = &self.at else {
            let why = "no vertex to score: reset the episode, or it is over";
            return Err(to_python(
                py,
                topoplace::InputError::new("<env>", "step", why).into(),
            ));
        };
        if self.policy.as_ref().is_none_or(|(name, _)| name != policy) {
            let loaded = api::load_policy(policy, "cpu").map_err(|e| to_python(py, e))?;
            let Some(gnn) = loaded.0 else {
                let why = "\"none\" has no priors: they are uniform";
                return Err(to_python(py, usage("--policy", why)));
            };
            self.policy = Some((policy.to_string(), gnn));
        }
        let (_, gnn) = self.policy.as_ref().expect("loaded above");
        let env = &self.env;
        Ok(py.detach(|| env.priors(gnn, at)))
    }

    /// The completed choice's strategy as its file's JSON.
    fn strategy_json(&self, py: Python<'_>) -> PyResult<String> {
        let api::Loaded { graph, cluster, .. } = &self.inputs;
        let text = || -> topoplace::Result<String> {
            let strategy = self.env.strategy(&self.inputs.problem())?;
            topoplace::strategy::strategy_text(&strategy, None, graph, &cluster.name)
        };
        py.detach(text).map_err(|e| to_python(py, e))
    }

    /// Each action's devices (cluster indices) and replication option.
    #[getter]
    fn actions(&self) -> Vec<(Vec<usize>, String)> {
        self.env
            .actions()
            .iter()
            .map(|a| (a.devices.clone(), a.option.name().to_string()))
            .collect()
    }

    /// Each action as the GNN's decoder sees it: 0/1 per device group, and the option's index.
    #[getter]
    fn slices(&self) -> Vec<(Vec<f32>, usize)> {
        self.env
            .slices()
            .iter()
            .map(|s| (s.placement.clone(), s.option))
            .collect()
    }

    /// Op groups an episode decides.
    #[getter]
    fn groups(&self) -> usize {
        self.env.groups()
    }

    /// DP-NCCL's iteration time, µs: the reward's reference.
    #[getter]
    fn dp_us(&self) -> f64 {
        self.env.dp_us()
    }

    /// The actions taken so far.
    #[getter]
    fn choice(&self) -> Vec<u16> {
        self.env.choice().to_vec()
    }
}

/// A random cluster from TAG's distribution or today's (`topoplace topology random --seed
/// --distribution`), as its TOML.
#[pyfunction]
#[pyo3(signature = (seed, distribution="tag"))]
fn random_topology(py: Python<'_>, seed: u64, distribution: &str) -> PyResult<String> {
    let Some(drawn) = topoplace::cluster::TopologyDistribution::named(distribution) else {
        let why = format!("\"{distribution}\": expected one of tag, today");
        let e = topoplace::InputError::new("<cli>", "distribution", why);
        return Err(to_python(py, e.into()));
    };
    Ok(topoplace::cluster::random_cluster_within(seed, drawn).to_toml())
}

/// A `[[machine]]` entry from `nvidia-smi topo -m` output, as `topoplace topology nvidia-smi`
/// prints it: `gpu` names the GPU type of the catalog.
#[pyfunction]
#[pyo3(signature = (text, gpu, name="machine"))]
fn nvidia_smi_machine(py: Python<'_>, text: &str, gpu: &str, name: &str) -> PyResult<String> {
    let machine = || -> topoplace::Result<String> {
        let gpu = topoplace::cluster::lookup_gpu("<cli>", "--gpu", gpu)?;
        let topo = topoplace::cluster::parse_nvidia_smi_topo(text)
            .map_err(|m| topoplace::InputError::new("<nvidia-smi>", "topo", m))?;
        if name.trim().is_empty() {
            return Err(
                topoplace::InputError::new("<argument>", "name", "must not be empty").into(),
            );
        }
        if let Some(why) = topo.gpu_problem(gpu) {
            return Err(topoplace::InputError::new("<argument>", "gpu", why).into());
        }
        Ok(topo.machine_toml(name, gpu))
    };
    machine().map_err(|e| to_python(py, e))
}

#[pymodule]
fn _topoplace(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(place, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(shipped_clusters, m)?)?;
    m.add_function(wrap_pyfunction!(random_topology, m)?)?;
    m.add_function(wrap_pyfunction!(nvidia_smi_machine, m)?)?;
    m.add_class::<Environment>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
