//! The `calibrate` subcommand: fits a program's parameters to a CSV table with a header (the
//! target column is what the program should return; every other column binds the program input
//! of the same name) and reports the fitted values, loss, R², stop reason and evaluation counts.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;

use ndvm_core::{Dialect, Heap, ParamKind, Precision};
use ndvm_optimizers::{
    CalibrateConfig, CalibrateError, Calibration, Calibrator, Dataset, Optimizer, ParamSpec,
    RaceCut, race_problem,
};
use serde::Serialize;

use crate::error::{CsvProblem, Result, SearchError};
use crate::matrix_csv;
use crate::report::{JsonNumber, human_number, json_line};
use crate::source::{choose_frontend, parse_program};

/// One `--params` entry: `NAME`, `NAME=INIT`, `NAME:KIND` or `NAME:KIND=INIT` with KIND one of
/// free, positive, unit.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamArg {
    /// The variable name.
    pub name: String,
    /// The kind, when given.
    pub kind: Option<ParamKind>,
    /// The first start's value, when given.
    pub init: Option<f64>,
}

impl ParamArg {
    /// Parses a comma-separated `--params` list such as `Vmax:positive=10,Km`.
    pub fn parse_list(arg: &str) -> Result<Vec<ParamArg>> {
        let bad = |message: String| SearchError::BadArgument {
            arg: arg.to_string(),
            message,
        };
        let mut out = Vec::new();
        for item in arg.split(',') {
            let item = item.trim();
            let (head, init) = match item.split_once('=') {
                Some((h, v)) => {
                    let v = v.trim();
                    let x = v
                        .parse::<f64>()
                        .map_err(|_| bad(format!("`{v}` is not a number")))?;
                    (h.trim(), Some(x))
                }
                None => (item, None),
            };
            let (name, kind) = match head.split_once(':') {
                Some((n, k)) => {
                    let kind = match k.trim() {
                        "free" => ParamKind::Free,
                        "positive" => ParamKind::Positive,
                        "unit" => ParamKind::Unit,
                        other => {
                            return Err(bad(format!(
                                "unknown kind `{other}` (expected free, positive or unit)"
                            )));
                        }
                    };
                    (n.trim(), Some(kind))
                }
                None => (head, None),
            };
            if name.is_empty()
                || name.parse::<f64>().is_ok()
                || name
                    .chars()
                    .any(|c| c.is_whitespace() || "()[]'`,\";#".contains(c))
            {
                return Err(bad(format!("`{name}` is not a parameter name")));
            }
            out.push(ParamArg {
                name: name.to_string(),
                kind,
                init,
            });
        }
        Ok(out)
    }
}

/// Parses a `--race` schedule: `off` (no racing) or comma-separated cuts `STEP:KEEP`, such as
/// `10:8,30:4` (after 10 screen steps keep the best 8 starts, after 30 the best 4).
pub fn parse_race(arg: &str) -> Result<Vec<RaceCut>> {
    let bad = |message: String| SearchError::BadArgument {
        arg: format!("--race {arg}"),
        message,
    };
    if arg.trim() == "off" {
        return Ok(Vec::new());
    }
    let mut cuts = Vec::new();
    for item in arg.split(',') {
        let item = item.trim();
        let number = |v: &str| {
            v.trim()
                .parse::<usize>()
                .map_err(|_| bad(format!("`{}` is not a whole number", v.trim())))
        };
        let Some((at, keep)) = item.split_once(':') else {
            return Err(bad(format!(
                "`{item}` is not a cut STEP:KEEP (or write `off` for no racing)"
            )));
        };
        cuts.push(RaceCut::new(number(at)?, number(keep)?));
    }
    if let Some((_, message)) = race_problem(&cuts) {
        return Err(bad(message));
    }
    Ok(cuts)
}

/// Everything `ndvm-search calibrate FILE` needs.
#[derive(Clone, Debug, PartialEq)]
pub struct CalibrateArgs {
    /// `--max-work`, `--max-memory-mb`, `--max-depth`, `--timeout` (the whole calibration).
    pub limits: crate::evalcmd::LimitArgs,
    /// The program file.
    pub program: PathBuf,
    /// `--frontend NAME`; when absent the file's extension picks the front end.
    pub frontend: Option<String>,
    /// The CSV table (first line: column names).
    pub data: PathBuf,
    /// The target column.
    pub target: String,
    /// A column of per-point weights (then the loss is the weighted MSE).
    pub weights: Option<String>,
    /// `--params`: which parameters to fit. Entries without a kind or initial value keep the
    /// program's `(params …)` declaration, or are free with initial value 1.
    pub params: Vec<ParamArg>,
    /// `--starts K`.
    pub n_starts: Option<usize>,
    /// `--optimizer`.
    pub optimizer: Option<Optimizer>,
    /// `--polish-method`.
    pub polish: Option<ndvm_optimizers::Polish>,
    /// `--seed`.
    pub seed: Option<u64>,
    /// `--max-iters`.
    pub max_iters: Option<usize>,
    /// `--race`: the portfolio's racing screen (`Some(vec![])`: none).
    pub race: Option<Vec<RaceCut>>,
    /// `--dialect`.
    pub dialect: Dialect,
    /// `--precision`: the evaluator's lane type (the optimiser itself computes in `f64`).
    pub precision: Precision,
    /// `--prelude FILE`, `--via FILE`.
    pub selfhost: crate::selfhost::SelfHost,
}

/// The result of `calibrate`, ready to be printed.
#[derive(Clone, Debug, PartialEq)]
pub struct CalibrateReport {
    /// Number of data rows.
    pub n_points: usize,
    /// What the calibrator returned.
    pub calibration: Calibration,
}

/// Reads `path` as a table with a header line; returns the column names and the row-major data.
fn read_table(path: &Path) -> Result<(Vec<String>, matrix_csv::Matrix)> {
    let m = matrix_csv::read(path)?;
    let header = m.require_header(path)?.to_vec();
    Ok((header, m))
}

/// Runs `ndvm-search calibrate FILE --data CSV --target COL`.
pub fn run(args: &CalibrateArgs) -> Result<CalibrateReport> {
    run_with(args, &ndvm_frontends::Registry::default())
}

/// [`run`] with the front ends of `frontends`.
pub fn run_with(
    args: &CalibrateArgs,
    frontends: &ndvm_frontends::Registry,
) -> Result<CalibrateReport> {
    let src = std::fs::read_to_string(&args.program).map_err(|source| SearchError::Read {
        path: args.program.clone(),
        source,
    })?;
    let (header, table) = read_table(&args.data)?;
    let column = |name: &str, role: &'static str| -> Result<usize> {
        header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| SearchError::Csv {
                path: args.data.clone(),
                line: Some(1),
                problem: CsvProblem::MissingColumn {
                    role,
                    name: name.to_string(),
                    columns: header.clone(),
                },
            })
    };
    let target_col = column(&args.target, "target")?;
    let weight_col = args
        .weights
        .as_deref()
        .map(|w| column(w, "weight"))
        .transpose()?;
    let col_values = |c: usize| table.column(c);
    let mut data = Dataset::new().target(col_values(target_col));
    if let Some(w) = weight_col {
        data = data.weights(col_values(w));
    }
    for (c, name) in header.iter().enumerate() {
        if c != target_col && Some(c) != weight_col {
            data = data.column(name, col_values(c));
        }
    }

    let label = args.program.display().to_string();
    let mut heap = Heap::new();
    let frontend = choose_frontend(frontends, args.frontend.as_deref(), &args.program)?;
    let program = parse_program(&mut heap, frontend, &label, &src)?;
    let single = crate::selfhost::Sources::single(&label, &src);
    let declared =
        ndvm_core::params::declarations(&heap, &program).map_err(|e| single.error(&heap, e))?;
    let mut params = merge_params(&args.params, &declared, args.selfhost.via.is_some());
    if args.selfhost.via.is_some() {
        // The evaluator sees the program as quoted data, so the calibrator cannot read its
        // declarations: they are passed as settings instead.
        for d in &declared {
            if !params.iter().any(|p| p.name == d.name) {
                params.push(ParamSpec::new(&d.name, d.kind, d.init));
            }
        }
    }
    let mut names: Vec<&str> = header
        .iter()
        .enumerate()
        .filter(|&(c, _)| c != target_col && Some(c) != weight_col)
        .map(|(_, h)| h.as_str())
        .collect();
    names.extend(params.iter().map(|p| p.name.as_str()));
    let (program, sources) =
        crate::selfhost::prepare(&mut heap, program, (&label, &src), &args.selfhost, &names)?;
    let rendered = |heap: &Heap, error: ndvm_core::CoreError| sources.error(heap, error);
    let mut config = CalibrateConfig::recommended();
    config.params = params;
    config.dialect = args.dialect;
    config.precision = args.precision;
    if weight_col.is_some() {
        config.loss = ndvm_optimizers::Loss::WeightedMse;
    }
    if let Some(k) = args.n_starts {
        config.n_starts = k;
    }
    if let Some(o) = args.optimizer {
        config.optimizer = o;
    }
    if let Some(p) = args.polish {
        config.polish = p;
    }
    if let Some(s) = args.seed {
        config.seed = s;
    }
    if let Some(m) = args.max_iters {
        config.max_iters = m;
    }
    if let Some(r) = &args.race {
        config.race = r.clone();
    }
    args.limits.check()?;
    args.limits.apply(&mut config);
    let calibrated =
        Calibrator::new(config).and_then(|mut c| c.calibrate(&mut heap, &program, &data));
    let calibration = match calibrated {
        Ok(c) => c,
        Err(CalibrateError::Eval { error }) => {
            let hint = data_hint(&header, args, &declared);
            return Err(rendered(&heap, crate::source::hint_unbound(error, &hint)));
        }
        Err(error) => return Err(cli_error(args, error)),
    };
    Ok(CalibrateReport {
        n_points: data.n_points(),
        calibration,
    })
}

/// The parameters a calibration fits from `--params` entries and the program's `(params …)`
/// declarations: an entry with neither kind nor initial value keeps its declaration (left to
/// the calibrator, which reads declarations itself, unless `every` asks for every entry, as a
/// program run through `--via` needs), otherwise its kind and initial value fall back to the
/// declaration's, then to free and 1. `ndvm calibrate` in Python uses the same rule.
pub fn merge_params(
    entries: &[ParamArg],
    declared: &[ndvm_core::ParamDecl],
    every: bool,
) -> Vec<ParamSpec> {
    let mut params = Vec::new();
    for p in entries {
        let decl = declared.iter().find(|d| d.name == p.name);
        if decl.is_some() && p.kind.is_none() && p.init.is_none() && !every {
            continue;
        }
        let kind = p.kind.or(decl.map(|d| d.kind)).unwrap_or(ParamKind::Free);
        let init = p.init.or(decl.map(|d| d.init)).unwrap_or(1.0);
        params.push(ParamSpec::new(&p.name, kind, init));
    }
    params
}

/// What a `calibrate` run binds, for an unbound-variable error: `the data has columns: S, v
/// (target v); the parameters are Vmax, Km`.
fn data_hint(header: &[String], args: &CalibrateArgs, declared: &[ndvm_core::ParamDecl]) -> String {
    let mut roles = vec![format!("target {}", args.target)];
    if let Some(w) = &args.weights {
        roles.push(format!("weights {w}"));
    }
    let mut params: Vec<&str> = declared.iter().map(|d| d.name.as_str()).collect();
    for p in &args.params {
        if !params.contains(&p.name.as_str()) {
            params.push(&p.name);
        }
    }
    format!(
        "the data has columns: {} ({}); the parameters are {}",
        header.join(", "),
        roles.join(", "),
        params.join(", ")
    )
}

/// The calibrator's error in the command line's terms: a setting names the flag that sets it
/// (`--starts`, not the field `n_starts`), and no parameters points at `--params`.
fn cli_error(args: &CalibrateArgs, error: CalibrateError) -> SearchError {
    match error {
        CalibrateError::NoParameters => SearchError::NoParameters {
            program: args.program.clone(),
        },
        CalibrateError::InvalidConfig { field, message } => {
            let arg = match field {
                "n_starts" => args.n_starts.map(|k| format!("--starts {k}")),
                "params" => Some("--params".to_string()),
                "max_work" => Some("--max-work".to_string()),
                "max_memory" => Some("--max-memory-mb".to_string()),
                "max_depth" => Some("--max-depth".to_string()),
                _ => None,
            };
            match arg {
                Some(arg) => SearchError::BadArgument { arg, message },
                None => SearchError::Calibrate {
                    error: CalibrateError::InvalidConfig { field, message },
                },
            }
        }
        error => SearchError::Calibrate { error },
    }
}

impl CalibrateReport {
    /// `name = value` per parameter, then loss, R², stop reason, evaluation counts and starts.
    pub fn to_human(&self) -> String {
        let c = &self.calibration;
        let mut out = String::new();
        for (name, value) in c.names.iter().zip(&c.params) {
            out += &format!("{name} = {}\n", human_number(*value));
        }
        out += &format!("loss = {}\n", human_number(c.loss));
        if let Some(r2) = c.r2 {
            out += &format!("r2 = {}\n", human_number(r2));
        }
        out += &format!("grad_norm = {}\n", human_number(c.grad_norm));
        out += &format!("stop = {}\n", c.stop_reason);
        out += &format!(
            "evaluations = {} ({} with gradients, {} replayed)\n",
            c.n_evals, c.n_grad_evals, c.n_replayed
        );
        let best = c
            .best_start
            .map(|b| b.to_string())
            .unwrap_or_else(|| "none".into());
        out += &format!(
            "starts = {} (best {best}), points = {}, time = {:.3} s\n",
            c.starts.len(),
            self.n_points,
            c.wall_time.as_secs_f64()
        );
        out
    }

    /// One JSON object: `{"params":{…},"loss":…,"r2":…,"grad_norm":…,"stop":"…","n_evals":…,
    /// "n_grad_evals":…,"n_replayed":…,"starts":K,"best_start":…,"n_points":N,"wall_s":…}`.
    pub fn to_json(&self) -> String {
        let c = &self.calibration;
        json_line(&CalibrateJson {
            params: (c.names.iter().map(String::as_str))
                .zip(c.params.iter().map(|x| JsonNumber(*x)))
                .collect(),
            loss: JsonNumber(c.loss),
            r2: c.r2.map(JsonNumber),
            grad_norm: JsonNumber(c.grad_norm),
            stop: c.stop_reason.to_string(),
            n_evals: c.n_evals,
            n_grad_evals: c.n_grad_evals,
            n_replayed: c.n_replayed,
            starts: c.starts.len(),
            best_start: c.best_start,
            n_points: self.n_points,
            wall_s: JsonNumber(c.wall_time.as_secs_f64()),
        })
    }
}

/// `calibrate --json`, in this key order.
#[derive(Serialize)]
struct CalibrateJson<'a> {
    params: IndexMap<&'a str, JsonNumber>,
    loss: JsonNumber,
    r2: Option<JsonNumber>,
    grad_norm: JsonNumber,
    stop: String,
    n_evals: u64,
    n_grad_evals: u64,
    n_replayed: u64,
    starts: usize,
    best_start: Option<usize>,
    n_points: usize,
    wall_s: JsonNumber,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn race_parses() {
        assert_eq!(
            parse_race("10:8, 30:4").unwrap(),
            vec![RaceCut::new(10, 8), RaceCut::new(30, 4)]
        );
        assert_eq!(parse_race("off").unwrap(), Vec::new());
        let err = |s: &str| parse_race(s).unwrap_err().to_string();
        assert_eq!(
            err("10"),
            "bad argument `--race 10`: `10` is not a cut STEP:KEEP (or write `off` for no racing)"
        );
        assert_eq!(
            err("10:x"),
            "bad argument `--race 10:x`: `x` is not a whole number"
        );
        assert_eq!(
            err("10:8,5:4"),
            "bad argument `--race 10:8,5:4`: cut 2 (step 5) must come after cut 1 (step 10)"
        );
        assert_eq!(
            err("0:8"),
            "bad argument `--race 0:8`: cut 1 is at step 0; a cut follows at least one step"
        );
    }

    #[test]
    fn params_parse() {
        let list = ParamArg::parse_list("Vmax:positive=10, Km,b=0.5").unwrap();
        assert_eq!(
            list,
            vec![
                ParamArg {
                    name: "Vmax".into(),
                    kind: Some(ParamKind::Positive),
                    init: Some(10.0)
                },
                ParamArg {
                    name: "Km".into(),
                    kind: None,
                    init: None
                },
                ParamArg {
                    name: "b".into(),
                    kind: None,
                    init: Some(0.5)
                },
            ]
        );
        let err = |s: &str| ParamArg::parse_list(s).unwrap_err().to_string();
        assert_eq!(
            err("a:big"),
            "bad argument `a:big`: unknown kind `big` (expected free, positive or unit)"
        );
        assert_eq!(err("a=x"), "bad argument `a=x`: `x` is not a number");
        assert_eq!(
            err("a,,b"),
            "bad argument `a,,b`: `` is not a parameter name"
        );
    }
}
