//! The `eval` subcommand: one program file, bindings from the command line (`--bind`, `--input`,
//! `--data`), lanes and dialect; returns the value and gradients as an [`EvalReport`].

use std::collections::HashSet;
use std::path::PathBuf;

use ndvm_core::{
    Dialect, EvalOptions, Evaluation, Evaluator, Heap, InputValue, Inputs, Precision, Program,
};

use ndvm_frontends::Registry;

use crate::error::{Result, SearchError};
use crate::matrix_csv;
use crate::report::EvalReport;
use crate::selfhost::{SelfHost, Sources};
use crate::source::{choose_frontend, hint_unbound, parse_program};

/// One `--bind NAME=V[,V…]` (differentiable) or `--input NAME=V[,V…]` (not differentiated)
/// argument: one value for every lane, or one value per lane.
#[derive(Clone, Debug, PartialEq)]
pub struct Binding {
    /// The variable name the program refers to.
    pub name: String,
    /// One value (uniform) or one per lane.
    pub values: Vec<f64>,
    /// Whether gradients with respect to it are computed.
    pub grad: bool,
}

impl Binding {
    /// Parses `--bind` syntax, `q=0.05` or `q=0.05,0.06,0.07`, as a differentiable parameter.
    pub fn parse_param(arg: &str) -> Result<Binding> {
        Self::parse(arg, true)
    }

    /// Parses `--input` syntax, `x=1.5` or `x=1,2,3`, as a non-differentiated input.
    pub fn parse_input(arg: &str) -> Result<Binding> {
        Self::parse(arg, false)
    }

    fn parse(arg: &str, grad: bool) -> Result<Binding> {
        let bad = |message: String| SearchError::BadArgument {
            arg: arg.to_string(),
            message,
        };
        let (name, rhs) = split_name(arg).map_err(bad)?;
        if rhs.trim().is_empty() {
            return Err(bad("expected NAME=VALUE[,VALUE…]".to_string()));
        }
        let values = rhs
            .split(',')
            .map(|field| {
                let field = field.trim();
                field
                    .parse::<f64>()
                    .map_err(|_| bad(format!("`{field}` is not a number")))
            })
            .collect::<Result<Vec<f64>>>()?;
        Ok(Binding {
            name: name.to_string(),
            values,
            grad,
        })
    }
}

/// One `--data NAME=FILE.csv` argument: a shared matrix read from a CSV file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataBinding {
    /// The variable name the program refers to.
    pub name: String,
    /// The CSV file.
    pub path: PathBuf,
}

impl DataBinding {
    /// Parses `obs=obs.csv`.
    pub fn parse(arg: &str) -> Result<DataBinding> {
        let (name, path) = split_name(arg).map_err(|message| SearchError::BadArgument {
            arg: arg.to_string(),
            message,
        })?;
        if path.is_empty() {
            return Err(SearchError::BadArgument {
                arg: arg.to_string(),
                message: "expected NAME=FILE.csv".to_string(),
            });
        }
        Ok(DataBinding {
            name: name.to_string(),
            path: PathBuf::from(path),
        })
    }
}

/// Splits `name=rest` and checks that `name` can be a variable.
fn split_name(arg: &str) -> std::result::Result<(&str, &str), String> {
    let Some((name, rest)) = arg.split_once('=') else {
        return Err("expected NAME=VALUE".to_string());
    };
    let name = name.trim();
    if name.is_empty() {
        return Err("the name is empty".to_string());
    }
    if name.parse::<f64>().is_ok()
        || name
            .chars()
            .any(|c| c.is_whitespace() || "()[]'`,\";#".contains(c))
    {
        return Err(format!("`{name}` is not a variable name"));
    }
    Ok((name, rest))
}

/// Parses a dialect name: `default` or `reference`.
pub fn parse_dialect(name: &str) -> Option<Dialect> {
    match name {
        "default" => Some(Dialect::Default),
        "reference" => Some(Dialect::Reference),
        _ => None,
    }
}

/// The resource limits `eval`, `eval --jsonl` and `calibrate` take from the command line.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LimitArgs {
    /// Work units per evaluation (default [`EvalOptions::DEFAULT_MAX_STEPS`]).
    pub max_work: Option<u64>,
    /// Mebibytes one evaluation may hold (default [`EvalOptions::DEFAULT_MAX_MEMORY`]).
    pub max_memory_mb: Option<u64>,
    /// Non-tail nesting depth (default [`EvalOptions::DEFAULT_MAX_DEPTH`]).
    pub max_depth: Option<u32>,
    /// Wall-clock seconds of one evaluation (`eval`, each `--jsonl` line; default
    /// [`LimitArgs::DEFAULT_TIMEOUT`]) or of one calibration (`calibrate`; default none).
    pub timeout: Option<f64>,
}

impl LimitArgs {
    /// Seconds one `eval` run or `--jsonl` line may take by default.
    pub const DEFAULT_TIMEOUT: f64 = 60.0;

    /// Checks each limit: positive, and the timeout finite and at most a year.
    pub fn check(&self) -> Result<()> {
        let bad = |arg: &str, message: String| SearchError::BadArgument {
            arg: arg.to_string(),
            message,
        };
        if self.max_work == Some(0) {
            return Err(bad("--max-work", "must be at least 1".into()));
        }
        if self.max_memory_mb == Some(0) || self.max_memory_mb.is_some_and(|m| m > 1 << 20) {
            return Err(bad(
                "--max-memory-mb",
                "must be between 1 and 1048576".into(),
            ));
        }
        if self.max_depth == Some(0) {
            return Err(bad("--max-depth", "must be at least 1".into()));
        }
        if let Some(t) = self.timeout {
            crate::task::check_budget_seconds(t).map_err(|m| bad("--timeout", m))?;
        }
        Ok(())
    }

    /// `opts` with these limits, and a deadline of the timeout from now.
    pub fn eval_options(&self, mut opts: EvalOptions) -> EvalOptions {
        if let Some(w) = self.max_work {
            opts.max_steps = w;
        }
        if let Some(m) = self.max_memory_mb {
            opts.max_memory = m * 1024 * 1024;
        }
        if let Some(d) = self.max_depth {
            opts.max_depth = d;
        }
        let t = self.timeout.unwrap_or(Self::DEFAULT_TIMEOUT);
        opts.deadline = Some(std::time::Instant::now() + std::time::Duration::from_secs_f64(t));
        opts
    }

    /// Applies the limits to a calibration (the timeout bounds the whole calibration).
    pub fn apply(&self, cfg: &mut ndvm_optimizers::CalibrateConfig) {
        if let Some(w) = self.max_work {
            cfg.max_work = w;
        }
        if let Some(m) = self.max_memory_mb {
            cfg.max_memory = m * 1024 * 1024;
        }
        if let Some(d) = self.max_depth {
            cfg.max_depth = d;
        }
        if let Some(t) = self.timeout {
            cfg.time_limit = Some(std::time::Duration::from_secs_f64(t));
        }
    }
}

/// Everything `ndvm-search eval FILE` needs.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalArgs {
    /// The program file.
    pub program: PathBuf,
    /// `--frontend NAME`; when absent the file's extension picks the front end (the registry's
    /// fallback when no front end claims it).
    pub frontend: Option<String>,
    /// `--bind` and `--input` bindings, in command-line order.
    pub bindings: Vec<Binding>,
    /// `--data` matrices.
    pub data: Vec<DataBinding>,
    /// `--lanes B`; when absent B is the value count of the per-lane bindings (or 1).
    pub n_lanes: Option<usize>,
    /// `--grad`: compute gradients with respect to every `--bind` parameter.
    pub grad: bool,
    /// `--dialect`.
    pub dialect: Dialect,
    /// `--precision`: the lanes' element type.
    pub precision: Precision,
    /// `--max-work`, `--max-memory-mb`, `--max-depth`, `--timeout`.
    pub limits: LimitArgs,
    /// `--prelude FILE`, `--via FILE`.
    pub selfhost: SelfHost,
}

/// The lane count: `n_lanes` when given, else the common length of the multi-valued bindings, else 1.
/// Every binding must have one value or exactly that many.
pub fn lane_count(bindings: &[Binding], n_lanes: Option<usize>) -> Result<usize> {
    lane_count_of(
        bindings.iter().map(|b| (b.name.as_str(), b.values.len())),
        n_lanes,
    )
}

/// [`lane_count`] from each binding's name and number of values (one: the same on every lane).
pub fn lane_count_of<'a>(
    bindings: impl IntoIterator<Item = (&'a str, usize)>,
    n_lanes: Option<usize>,
) -> Result<usize> {
    if n_lanes == Some(0) {
        return Err(SearchError::BadArgument {
            arg: "--lanes 0".to_string(),
            message: "there must be at least one lane".to_string(),
        });
    }
    let mut resolved = n_lanes;
    for (name, len) in bindings {
        if len == 1 {
            continue;
        }
        match resolved {
            None => resolved = Some(len),
            Some(n) if n != len => {
                return Err(SearchError::LaneCount {
                    name: name.to_string(),
                    found: len,
                    n_lanes: n,
                });
            }
            Some(_) => {}
        }
    }
    Ok(resolved.unwrap_or(1))
}

/// Runs `ndvm-search eval FILE`: reads the program and data files, binds, evaluates.
pub fn run(args: &EvalArgs) -> Result<EvalReport> {
    run_with(args, &Registry::default())
}

/// [`run`] with the front ends of `frontends`.
pub fn run_with(args: &EvalArgs, frontends: &Registry) -> Result<EvalReport> {
    args.limits.check()?;
    let src = std::fs::read_to_string(&args.program).map_err(|source| SearchError::Read {
        path: args.program.clone(),
        source,
    })?;
    let n_lanes = lane_count(&args.bindings, args.n_lanes)?;

    let mut seen = HashSet::new();
    let names = args
        .bindings
        .iter()
        .map(|b| &b.name)
        .chain(args.data.iter().map(|d| &d.name));
    for name in names {
        if !seen.insert(name.as_str()) {
            return Err(SearchError::DuplicateBinding { name: name.clone() });
        }
    }

    let mut inputs = Inputs::new();
    for b in &args.bindings {
        let value = match b.values.as_slice() {
            [x] => InputValue::Uniform(*x),
            xs => InputValue::Lanes(xs.to_vec()),
        };
        inputs.push(&b.name, value, b.grad);
    }
    for d in &args.data {
        let m = matrix_csv::read(&d.path)?;
        inputs.push(
            &d.name,
            InputValue::Matrix {
                rows: m.rows,
                cols: m.cols,
                data: m.data,
            },
            false,
        );
    }

    let label = args.program.display().to_string();
    let mut heap = Heap::new();
    let frontend = choose_frontend(frontends, args.frontend.as_deref(), &args.program)?;
    let program = parse_program(&mut heap, frontend, &label, &src)?;
    let opts = args
        .limits
        .eval_options(EvalOptions::new(n_lanes).with_dialect(args.dialect))
        .with_precision(args.precision);
    let names: Vec<&str> = inputs.entries.iter().map(|i| i.name.as_str()).collect();
    let (program, sources) =
        crate::selfhost::prepare(&mut heap, program, (&label, &src), &args.selfhost, &names)?;
    let hint = if names.is_empty() {
        "the command line binds nothing (bind names with --bind, --input or --data)".to_string()
    } else {
        format!("the command line binds {}", names.join(", "))
    };
    let evaluation = evaluate(
        &mut heap, &program, &inputs, opts, args.grad, &sources, &hint,
    )?;
    Ok(EvalReport {
        n_lanes,
        grad: args.grad,
        evaluation,
    })
}

/// Evaluates (with gradients when `grad`); a failure becomes [`SearchError::Eval`] rendered as
/// `file:line:col: error[…]` (in the file of `sources` the node was read from), an unbound
/// variable followed by `; {unbound_hint}` (what is bound).
pub(crate) fn evaluate(
    heap: &mut Heap,
    program: &Program,
    inputs: &Inputs,
    opts: EvalOptions,
    grad: bool,
    sources: &Sources,
    unbound_hint: &str,
) -> Result<Evaluation> {
    let mut evaluator = Evaluator::new(opts);
    let res = if grad {
        evaluator.eval_grad(heap, program, inputs)
    } else {
        evaluator.eval(heap, program, inputs)
    };
    res.map_err(|error| {
        let error = hint_unbound(error, unbound_hint);
        sources.error(heap, error)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(arg: &str) -> std::result::Result<Binding, String> {
        Binding::parse_param(arg).map_err(|e| e.to_string())
    }

    #[test]
    fn bindings_parse() {
        assert_eq!(
            binding("q=0.05").unwrap(),
            Binding {
                name: "q".into(),
                values: vec![0.05],
                grad: true
            }
        );
        assert_eq!(binding("q = 1, 2,3").unwrap().values, vec![1.0, 2.0, 3.0]);
        assert!(!Binding::parse_input("x=1").unwrap().grad);
        assert_eq!(
            binding("q").unwrap_err(),
            "bad argument `q`: expected NAME=VALUE"
        );
        assert_eq!(
            binding("q=").unwrap_err(),
            "bad argument `q=`: expected NAME=VALUE[,VALUE…]"
        );
        assert_eq!(
            binding("q=1,,2").unwrap_err(),
            "bad argument `q=1,,2`: `` is not a number"
        );
        assert_eq!(
            binding("(q)=1").unwrap_err(),
            "bad argument `(q)=1`: `(q)` is not a variable name"
        );
        assert_eq!(
            DataBinding::parse("obs=data/obs.csv").unwrap().path,
            PathBuf::from("data/obs.csv")
        );
    }

    #[test]
    fn lane_counts() {
        let b = |name: &str, n: usize| Binding {
            name: name.into(),
            values: vec![0.5; n],
            grad: true,
        };
        assert_eq!(lane_count(&[b("q", 1)], None).unwrap(), 1);
        assert_eq!(lane_count(&[b("q", 1), b("r", 4)], None).unwrap(), 4);
        assert_eq!(lane_count(&[b("q", 1)], Some(8)).unwrap(), 8);
        assert_eq!(
            lane_count(&[b("q", 3)], Some(4)).unwrap_err().to_string(),
            "`q` has 3 values but there are 4 lanes"
        );
        assert_eq!(
            lane_count(&[b("q", 3), b("r", 2)], None)
                .unwrap_err()
                .to_string(),
            "`r` has 2 values but there are 3 lanes"
        );
        assert!(lane_count(&[], Some(0)).is_err());
    }
}
