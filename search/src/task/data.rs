//! The data section: tables generated from the seed or read from CSV, the train/validation/test
//! split, named test tables, shared matrices, the screen, and the scores they make undefined.

use super::*;

/// Most points of a generated table (one evaluation lane per point).
pub const MAX_GENERATE_N: usize = 1_000_000;

/// Without `data.screen_rows`, a training table with more rows than this is screened …
pub const AUTO_SCREEN_ABOVE: usize = 2_000;

/// … on a seeded sample of this many rows.
pub const AUTO_SCREEN_ROWS: usize = 1_000;

/// A table of rows: input columns (in `Task::inputs` order) and the target.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// One column per input.
    pub columns: Vec<Vec<f64>>,
    /// The target (empty for program-loss tasks).
    pub target: Vec<f64>,
}

impl Table {
    /// Number of rows.
    pub fn n_rows(&self) -> usize {
        self.target.len()
    }

    /// The table of `rows` (indices into this one), in that order.
    pub(crate) fn take(&self, rows: &[usize]) -> Table {
        Table {
            columns: self
                .columns
                .iter()
                .map(|c| rows.iter().map(|&r| c[r]).collect())
                .collect(),
            target: rows.iter().map(|&r| self.target[r]).collect(),
        }
    }

    /// This table's rows, then `other`'s (the same inputs).
    pub(crate) fn concat(&self, other: &Table) -> Table {
        let join = |a: &[f64], b: &[f64]| a.iter().chain(b).copied().collect::<Vec<f64>>();
        Table {
            columns: self
                .columns
                .iter()
                .zip(&other.columns)
                .map(|(a, b)| join(a, b))
                .collect(),
            target: join(&self.target, &other.target),
        }
    }
}

/// Row-subsample screening: each candidate is calibrated on `train` (a seeded sample of the
/// training rows, in file order) first, then refitted on every training row from that fit.
#[derive(Clone, Debug, PartialEq)]
pub struct Screen {
    /// The sampled training rows.
    pub train: Table,
    /// Whether the default chose it (no `data.screen_rows` in the task).
    pub automatic: bool,
}

impl Screen {
    /// Rows of the sample.
    pub fn rows(&self) -> usize {
        self.train.n_rows()
    }
}

/// `k` of the row indices `0..n` (all of them when `k ≥ n`), drawn with ChaCha8 from `seed`,
/// in increasing order.
pub(crate) fn sample_rows(n: usize, k: usize, seed: u64) -> Vec<usize> {
    if k >= n {
        return (0..n).collect();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut rows: Vec<usize> = rand::seq::index::sample(&mut rng, n, k).into_vec();
    rows.sort_unstable();
    rows
}

/// The screening of a training table of `train` rows under `data.screen_rows` (`spec`): `None`
/// when it does not apply (`off`, a small table, or no per-point table).
pub(super) fn resolve_screen(
    spec: Option<&Spanned<ScreenRows>>,
    train: &Table,
    seed: u64,
) -> Result<Option<Screen>> {
    let n = train.n_rows();
    let (rows, automatic) = match spec {
        Some(s) => match s.value {
            ScreenRows::Off => return Ok(None),
            ScreenRows::Rows(k) if k < 2 => {
                return Err(spec_err(
                    Some(s.referenced),
                    format!(
                        "`screen_rows: {k}` is too few to fit on; give at least 2 rows, or `off`"
                    ),
                ));
            }
            ScreenRows::Rows(k) => (usize::try_from(k).unwrap_or(usize::MAX), false),
        },
        None if n > AUTO_SCREEN_ABOVE => (AUTO_SCREEN_ROWS, true),
        None => return Ok(None),
    };
    if rows >= n {
        return Ok(None);
    }
    Ok(Some(Screen {
        train: train.take(&sample_rows(n, rows, seed ^ 0x5eed_0002)),
        automatic,
    }))
}

/// The data section resolved: the tables, the screen, shared matrices and the generated table.
pub(super) struct Data {
    pub(super) train: Table,
    pub(super) validation: Table,
    pub(super) tests: Vec<(String, Table)>,
    pub(super) screen: Option<Screen>,
    pub(super) shared: Vec<(String, ndvm_optimizers::Shared)>,
    pub(super) generated: Option<(Table, Vec<&'static str>)>,
}

/// What every part of the data section reads: the folder its paths are relative to, the spec
/// and its inputs.
pub(super) struct DataCx<'a> {
    pub(super) base: &'a Path,
    pub(super) spec: &'a TaskSpec,
    pub(super) inputs: &'a [String],
}

impl DataCx<'_> {
    fn err(&self, loc: Location, msg: String) -> SearchError {
        spec_err(Some(loc), msg)
    }

    /// A table held in memory (`field` names it in errors): the inputs and the target by name,
    /// columns of equal length, every value finite (or the row dropped with `drop_nonfinite`).
    fn columns_table(&self, field: &str, columns: &Columns) -> Result<Table> {
        let bad = |message: String| spec_err(None, format!("{field}: {message}"));
        let Some(target) = &self.spec.target else {
            return Err(bad("a table needs `target`".into()));
        };
        if columns.names.len() != columns.values.len() {
            return Err(bad(format!(
                "{} names for {} columns",
                columns.names.len(),
                columns.values.len()
            )));
        }
        let column = |name: &str| -> Result<&Vec<f64>> {
            let mut found = columns
                .names
                .iter()
                .zip(&columns.values)
                .filter(|(n, _)| *n == name);
            match (found.next(), found.next()) {
                (Some((_, v)), None) => Ok(v),
                (Some(_), Some(_)) => Err(bad(format!("column `{name}` appears twice"))),
                (None, _) => Err(bad(format!(
                    "no column `{name}` (the columns are {})",
                    columns.names.join(", ")
                ))),
            }
        };
        let mut table = Table {
            columns: self
                .inputs
                .iter()
                .map(|n| column(n).cloned())
                .collect::<Result<_>>()?,
            target: column(&target.value)?.clone(),
        };
        let n = table.target.len();
        if let Some(c) = table.columns.iter().position(|c| c.len() != n) {
            return Err(bad(format!(
                "column `{}` has {} values but `{}` has {n}",
                self.inputs[c],
                table.columns[c].len(),
                target.value
            )));
        }
        let finite = |r: usize| {
            table.target[r].is_finite() && table.columns.iter().all(|c| c[r].is_finite())
        };
        let keep: Vec<usize> = (0..n).filter(|&r| finite(r)).collect();
        if keep.len() < n {
            if !self.spec.data.drop_nonfinite {
                let r = (0..n).find(|&r| !finite(r)).unwrap_or(0);
                return Err(bad(format!(
                    "row {r} holds a value that is not finite; drop such rows with `drop_nonfinite`"
                )));
            }
            table = table.take(&keep);
        }
        Ok(table)
    }

    /// A CSV table of the task (main or test), errors located at the key naming the file.
    fn table_at(&self, file: &Spanned<String>, opts: CsvOptions) -> Result<Table> {
        let Some(target) = &self.spec.target else {
            return Err(self.err(file.referenced, "a table needs `target`".into()));
        };
        read_table(
            &self.base.join(&file.value),
            self.inputs,
            &target.value,
            opts,
        )
        .map_err(|e| self.err(file.referenced, crate::error::with_causes(&e)))
    }
}

/// Rows of the train and validation parts of an `n`-row table: `split:` (row counts or
/// fractions, checked), else 70 % / 30 %.
fn split_sizes(cx: &DataCx<'_>, n: usize) -> Result<(usize, usize)> {
    let spec = cx.spec;
    let err = |loc: Location, msg: String| cx.err(loc, msg);
    Ok(match &spec.split {
        Some(s) => {
            let count = |v: &Spanned<f64>, key: &str| -> Result<usize> {
                let x = v.value;
                if x > 0.0 && x < 1.0 {
                    let k = (x * n as f64).round() as usize;
                    if k == 0 {
                        return Err(err(
                            v.referenced,
                            format!(
                                "`{key}: {x}` of {n} rows rounds to an empty part; give a row count or a larger fraction"
                            ),
                        ));
                    }
                    Ok(k)
                } else if x >= 1.0 && x.fract() == 0.0 {
                    Ok(if x > n as f64 { n + 1 } else { x as usize })
                } else {
                    Err(err(
                        v.referenced,
                        "a split is a whole row count ≥ 1 or a fraction in (0, 1)".into(),
                    ))
                }
            };
            let (a, b) = (
                count(&s.train, "train")?,
                count(&s.validation, "validation")?,
            );
            if a + b > n {
                return Err(err(
                    s.validation.referenced,
                    format!(
                        "train + validation = {} rows (fractions round to whole rows) but the table has {n}; the parts would overlap",
                        a + b
                    ),
                ));
            }
            (a, b)
        }
        None => {
            let a = ((0.7 * n as f64).round() as usize).clamp(1, n - 1);
            (a, n - a)
        }
    })
}

/// The data section: shared matrices, the main table and its split, the named test tables and
/// the screen, in the order their errors are reported.
pub(super) fn resolve_data(
    cx: &DataCx<'_>,
    program_loss: bool,
    frontends: &Registry,
    frontend: &str,
) -> Result<Data> {
    let (spec, data) = (cx.spec, &cx.spec.data);
    let csv_opts = csv_options(data)?;
    let shared = resolve_shared(cx, csv_opts)?;
    let main = main_table(cx, csv_opts, frontends, frontend)?;
    let (train, validation, mut tests, generated) = split_table(cx, main, program_loss)?;
    for t in &data.tests {
        tests.push((t.name.clone(), cx.table_at(&t.csv, csv_opts)?));
    }
    for (name, columns) in &data.test_columns {
        let field = format!("data.test_columns `{name}`");
        tests.push((name.clone(), cx.columns_table(&field, columns)?));
    }
    let screen = resolve_screen(data.screen_rows.as_ref(), &train, spec.seed)?;
    Ok(Data {
        train,
        validation,
        tests,
        screen,
        shared,
        generated,
    })
}

/// `data.shared`: matrices every lane reads.
pub(super) fn resolve_shared(
    cx: &DataCx<'_>,
    csv_opts: CsvOptions,
) -> Result<Vec<(String, ndvm_optimizers::Shared)>> {
    let data = &cx.spec.data;
    let err = |loc: Location, msg: String| cx.err(loc, msg);
    let rel = |s: &str| cx.base.join(s);
    let mut shared = Vec::new();
    for s in &data.shared {
        let m = matrix_csv::read_limited(
            &rel(&s.csv.value),
            csv_opts.max_bytes,
            RAISE_CSV_LIMIT,
            csv_opts.delimiter,
        )
        .map_err(|e| err(s.csv.referenced, crate::error::with_causes(&e)))?;
        shared.push((
            s.name.clone(),
            ndvm_optimizers::Shared::Matrix {
                rows: m.rows,
                cols: m.cols,
                data: m.data,
            },
        ));
    }
    Ok(shared)
}

/// Where the main table comes from: exactly one of a task's data sources.
pub enum DataSource<'a> {
    /// Columns held in memory (a task built in code).
    Columns(&'a Columns),
    /// A formula on a grid, with seeded noise (`data.generate`).
    Generate(&'a Spanned<GenerateSpec>),
    /// A CSV file (`data.csv`).
    Csv(&'a Spanned<String>),
    /// None: a `loss: program` task.
    Nothing,
}

impl<'a> DataSource<'a> {
    /// The one source `data` names; two are an error at the second.
    pub fn of(data: &'a DataSpec) -> Result<DataSource<'a>> {
        match (&data.columns, &data.generate, &data.csv) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => Err(spec_err(
                None,
                "`data` takes in-memory columns, `generate` or `csv`: one of them",
            )),
            (None, Some(_), Some(c)) => Err(spec_err(
                Some(c.referenced),
                "`data` takes `generate` or `csv`, not both",
            )),
            (Some(c), None, None) => Ok(DataSource::Columns(c)),
            (None, Some(g), None) => Ok(DataSource::Generate(g)),
            (None, None, Some(c)) => Ok(DataSource::Csv(c)),
            (None, None, None) => Ok(DataSource::Nothing),
        }
    }
}

/// The main table from its source (`None`: there is none).
pub(super) fn main_table(
    cx: &DataCx<'_>,
    csv_opts: CsvOptions,
    frontends: &Registry,
    frontend: &str,
) -> Result<Option<Table>> {
    Ok(match DataSource::of(&cx.spec.data)? {
        DataSource::Columns(columns) => Some(cx.columns_table("data.columns", columns)?),
        DataSource::Generate(g) => Some(generated_table(cx, g, frontends, frontend)?),
        DataSource::Csv(c) => Some(cx.table_at(c, csv_opts)?),
        DataSource::Nothing => None,
    })
}

/// `data.generate` checked (one input, a finite ordered grid of 2 to [`MAX_GENERATE_N`] points,
/// finite noise ≥ 0) and generated.
fn generated_table(
    cx: &DataCx<'_>,
    g: &Spanned<GenerateSpec>,
    frontends: &Registry,
    frontend: &str,
) -> Result<Table> {
    let err = |loc: Location, msg: String| cx.err(loc, msg);
    let gs = &g.value;
    if cx.inputs != [gs.input.clone()] {
        return Err(err(
            g.referenced,
            format!(
                "a generated table has one input, `{}`: set `inputs: [{}]`",
                gs.input, gs.input
            ),
        ));
    }
    let finite = gs.from.is_finite() && gs.to.is_finite() && gs.noise.is_finite();
    let ordered = gs.from < gs.to && gs.noise >= 0.0;
    if gs.n < 2 || !ordered || !finite {
        return Err(err(
            g.referenced,
            "`generate` needs n ≥ 2, finite from < to and finite noise ≥ 0".into(),
        ));
    }
    if gs.n > MAX_GENERATE_N {
        return Err(err(
            g.referenced,
            format!("`generate.n` must be at most {MAX_GENERATE_N}"),
        ));
    }
    generate(gs, cx.spec.seed, frontends, frontend).map_err(|m| err(g.referenced, m))
}

/// Train, validation and the rest (`test`) of the main table by `split:` (seeded shuffle), and
/// the generated table with each row's part.
#[allow(clippy::type_complexity)]
pub(super) fn split_table(
    cx: &DataCx<'_>,
    main: Option<Table>,
    program_loss: bool,
) -> Result<(
    Table,
    Table,
    Vec<(String, Table)>,
    Option<(Table, Vec<&'static str>)>,
)> {
    let (spec, data) = (cx.spec, &cx.spec.data);
    let err = |loc: Location, msg: String| cx.err(loc, msg);
    let mut generated = None;
    let (train, validation, tests) = match main {
        Some(mut table) => {
            if program_loss {
                return Err(spec_err(None, "`loss: program` takes no per-point table"));
            }
            let Some(target) = &spec.target else {
                return Err(spec_err(None, "a table needs a `target` column name"));
            };
            if data.generate.is_some() && target.value.is_empty() {
                return Err(err(target.referenced, "empty target name".into()));
            }
            if let Some(max) = data.max_rows
                && table.n_rows() > max
            {
                table = table.take(&sample_rows(table.n_rows(), max, spec.seed ^ 0x5eed_0001));
            }
            let n = table.n_rows();
            if n < 2 {
                let at = data
                    .csv
                    .as_ref()
                    .map(|c| c.referenced)
                    .or(data.generate.as_ref().map(|g| g.referenced));
                return Err(spec_err(
                    at,
                    format!(
                        "the table has {n} row(s); a train and a validation part need at least 2"
                    ),
                ));
            }
            let (n_train, n_val) = split_sizes(cx, n)?;
            let split_seed = spec
                .split
                .as_ref()
                .and_then(|s| s.seed)
                .unwrap_or(spec.seed);
            let mut rng = ChaCha8Rng::seed_from_u64(split_seed);
            let mut order: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                let j = rng.random_range(0..=i);
                order.swap(i, j);
            }
            let mut tr = order[..n_train].to_vec();
            let mut va = order[n_train..n_train + n_val].to_vec();
            let mut te = order[n_train + n_val..].to_vec();
            tr.sort_unstable();
            va.sort_unstable();
            te.sort_unstable();
            if data.generate.is_some() {
                let mut labels = vec!["train"; n];
                for &r in &va {
                    labels[r] = "validation";
                }
                for &r in &te {
                    labels[r] = "test";
                }
                generated = Some((table.clone(), labels));
            }
            let mut tests = Vec::new();
            if !te.is_empty() {
                tests.push(("test".to_string(), table.take(&te)));
            }
            (table.take(&tr), table.take(&va), tests)
        }
        None => {
            if !program_loss {
                return Err(spec_err(
                    None,
                    "`data` needs `generate` or `csv` (only `loss: program` tasks can do without)",
                ));
            }
            (Table::default(), Table::default(), Vec::new())
        }
    };
    Ok((train, validation, tests, generated))
}

/// Refuses data on which the ranking score is undefined: a constant target (at `target:`), or,
/// ranking by validation R², a validation part of fewer than 2 rows or with a constant target.
/// Ranking by the training loss (`success.metric: loss`), such a validation part only warns.
pub(super) fn check_scores(
    spec: &TaskSpec,
    train: &Table,
    validation: &Table,
    tests: &[(String, Table)],
    metric: MetricName,
) -> Result<Vec<String>> {
    let Some(target) = &spec.target else {
        return Ok(Vec::new());
    };
    let split_rows = tests.iter().filter(|(n, _)| n == "test");
    let all = train
        .target
        .iter()
        .chain(&validation.target)
        .chain(split_rows.flat_map(|(_, t)| &t.target));
    if let Some(value) = constant(all) {
        return Err(spec_err(
            Some(target.referenced),
            format!(
                "the target column `{}` holds the same value, {value}, in every row: no model can \
                 be scored against it (R² and NMSE are undefined)",
                target.value
            ),
        ));
    }
    let n = validation.n_rows();
    let problem = if n < 2 {
        Some(format!(
            "the validation part has {n} row(s): R² and NMSE need at least 2"
        ))
    } else {
        constant(validation.target.iter()).map(|v| {
            format!(
                "the validation part's target is {v} in each of its {n} rows: R² and NMSE are \
                 undefined on it"
            )
        })
    };
    let Some(problem) = problem else {
        return Ok(Vec::new());
    };
    let at = spec
        .split
        .as_ref()
        .map_or(target.referenced, |s| s.validation.referenced);
    match metric {
        MetricName::R2 => Err(spec_err(
            Some(at),
            format!(
                "{problem}; give `split:` a larger validation part, or rank by the training loss \
                 with `success: {{metric: loss}}`"
            ),
        )),
        MetricName::Loss => Ok(vec![format!(
            "{problem}; candidates are ranked by the training loss (success.metric: loss)"
        )]),
    }
}

/// The one value every item equals (none for an empty sequence or two different values).
pub(super) fn constant<'a>(mut values: impl Iterator<Item = &'a f64>) -> Option<f64> {
    let first = *values.next()?;
    values.all(|v| *v == first).then_some(first)
}

/// Evaluates the formula on the grid and adds N(0, noise²) noise drawn with ChaCha8 from `seed`
/// (Box–Muller on two uniforms per point, in grid order).
pub(super) fn generate(
    g: &GenerateSpec,
    seed: u64,
    frontends: &Registry,
    frontend: &str,
) -> std::result::Result<Table, String> {
    let xs: Vec<f64> = (0..g.n)
        .map(|i| g.from + (g.to - g.from) * i as f64 / (g.n - 1) as f64)
        .collect();
    validate::precheck_source(&g.formula).map_err(|r| format!("formula: {}", r.message))?;
    let mut heap = Heap::new();
    let frontend = frontends
        .by_name(frontend)
        .ok_or_else(|| frontends.unknown(frontend))?;
    let program = frontend
        .parse(&mut heap, &g.formula)
        .map_err(|e| format!("formula: {}", e.message))?;
    let mut ev = Evaluator::new(EvalOptions::new(g.n));
    let inputs = Inputs::new().input_lanes(&g.input, xs.clone());
    let out = ev.eval(&mut heap, &program, &inputs).map_err(|e| {
        let hint = format!("the formula's only input is `{}` (generate.input)", g.input);
        format!("formula: {}", crate::source::hint_unbound(e, &hint))
    })?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut ys = Vec::with_capacity(g.n);
    #[allow(clippy::needless_range_loop)]
    for i in 0..g.n {
        let y = out
            .value
            .number(i)
            .filter(|y| y.is_finite())
            .ok_or_else(|| format!("formula: not a finite number at {} = {}", g.input, xs[i]))?;
        let u1: f64 = 1.0 - rng.random::<f64>();
        let u2: f64 = rng.random::<f64>();
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        ys.push(y + g.noise * z);
    }
    Ok(Table {
        columns: vec![xs],
        target: ys,
    })
}

/// How the CSV tables of a task are read.
#[derive(Clone, Copy, Debug)]
pub(super) struct CsvOptions {
    /// Largest file read, in bytes.
    max_bytes: u64,
    /// Drop rows with a non-finite input or target instead of refusing the table.
    drop_nonfinite: bool,
    /// The field separator.
    delimiter: u8,
}

/// `data.max_bytes`, `data.drop_nonfinite` and `data.delimiter`, checked.
pub(super) fn csv_options(data: &DataSpec) -> Result<CsvOptions> {
    let err = |loc: Location, msg: &str| spec_err(Some(loc), msg);
    let max_bytes = match &data.max_bytes {
        Some(b) if b.value == 0 => return Err(err(b.referenced, "`max_bytes` must be at least 1")),
        Some(b) => b.value,
        None => textfile::MAX_CSV_BYTES,
    };
    let delimiter = match &data.delimiter {
        None => matrix_csv::COMMA,
        Some(d) => match d.value.as_bytes() {
            [b] if b.is_ascii() && !matches!(b, b'"' | b'\n' | b'\r') => *b,
            _ => {
                return Err(err(
                    d.referenced,
                    "`delimiter` must be one ASCII character other than a quote or a line break (`\";\"`, `\"\\t\"` for tab)",
                ));
            }
        },
    };
    Ok(CsvOptions {
        max_bytes,
        drop_nonfinite: data.drop_nonfinite,
        delimiter,
    })
}

/// How to raise the CSV size limit (the end of its error message).
pub(super) const RAISE_CSV_LIMIT: &str =
    "raise it with `data.max_bytes` in the task, or sample the file down";

/// Reads a CSV table with a header naming `inputs` and `target`; a non-finite value in one of
/// those columns is an error naming the line and column, unless `drop_nonfinite` drops its row.
pub(super) fn read_table(
    path: &Path,
    inputs: &[String],
    target: &str,
    opts: CsvOptions,
) -> Result<Table> {
    let m = matrix_csv::read_limited(path, opts.max_bytes, RAISE_CSV_LIMIT, opts.delimiter)?;
    let header = m.require_header(path)?;
    let csv_err = |line: Option<usize>, problem: CsvProblem| SearchError::Csv {
        path: path.to_path_buf(),
        line,
        problem,
    };
    let col = |name: &str, role: &'static str| -> Result<Vec<f64>> {
        let j = header.iter().position(|h| h == name).ok_or_else(|| {
            csv_err(
                Some(1),
                CsvProblem::MissingColumn {
                    role,
                    name: name.to_string(),
                    columns: header.to_vec(),
                },
            )
        })?;
        Ok(m.column(j))
    };
    let table = Table {
        columns: inputs
            .iter()
            .map(|n| col(n, "input"))
            .collect::<Result<_>>()?,
        target: col(target, "target")?,
    };
    let names: Vec<&str> = inputs.iter().map(String::as_str).chain([target]).collect();
    let mut keep = Vec::with_capacity(table.n_rows());
    for r in 0..table.n_rows() {
        let bad = table
            .columns
            .iter()
            .chain([&table.target])
            .position(|c| !c[r].is_finite());
        match bad {
            None => keep.push(r),
            Some(_) if opts.drop_nonfinite => {}
            Some(j) => {
                let value = table.columns.get(j).unwrap_or(&table.target)[r];
                return Err(csv_err(
                    Some(m.lines[r]),
                    CsvProblem::NonFinite {
                        column: names[j].to_string(),
                        row: r + 1,
                        value,
                    },
                ));
            }
        }
    }
    if keep.len() == table.n_rows() {
        return Ok(table);
    }
    if keep.is_empty() {
        return Err(csv_err(None, CsvProblem::AllNonFinite));
    }
    Ok(table.take(&keep))
}
