//! The proposer section: the kind with only its own keys (replay, grammar, evolve, llm), the
//! operator and tree vocabulary, the factor shapes and the batch.

use super::*;

/// Why a task with `proposer.kind: llm` cannot run in a build without the `llm` feature.
pub const LLM_FEATURE_MISSING: &str = "`kind: llm` needs an ndvm-search built with the `llm` \
     feature, and this one was built without it: install with `cargo install --path search \
     --features llm` (or build with `cargo build --release -p ndvm-search --features llm`)";

/// Most additive terms of a grammar candidate.
pub const MAX_TERMS: usize = 64;

/// Largest `proposer.max_depth` (nesting of a tree grammar's factor).
pub const MAX_TREE_DEPTH: usize = 16;

/// Largest `proposer.max_size` (nodes of an evolved program; the validator refuses past 256
/// levels or 20,000 cells anyway).
pub const MAX_TREE_SIZE: usize = 2_000;

/// Largest `proposer.population`.
pub const MAX_POPULATION: usize = 100_000;

/// The proposer a task uses, resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum ProposerConfig {
    /// Replay a JSONL cache in file order.
    Replay {
        /// The cache file.
        cache: PathBuf,
    },
    /// Seeded random programs.
    Grammar {
        /// Unary operators.
        operators: Vec<String>,
        /// Most additive terms.
        max_terms: usize,
        /// The tree grammar (`max_depth` or `factors` given): its shape; `None` is the sum-of-terms grammar.
        tree: Option<TreeShape>,
    },
    /// Evolution of calibrated programs, seeded from random programs of the tree grammar, the
    /// cache (replayed first) or an LLM (`Task::llm`).
    Evolve {
        /// Unary operators.
        operators: Vec<String>,
        /// The tree grammar's shape.
        tree: TreeShape,
        /// Population and islands.
        population: usize,
        /// Subpopulations.
        islands: usize,
        /// Programs proposed first that join the population.
        seeds: Seeds,
    },
    /// An OpenAI-compatible endpoint (`kind: llm`): its cache is replayed first, then it is
    /// asked for more.
    Llm(Box<LlmConfig>),
}

/// Where an evolving population's first programs come from besides the random ones.
#[derive(Clone, Debug, PartialEq)]
pub enum Seeds {
    /// None: random programs of the tree grammar only.
    None,
    /// A cache, replayed first.
    Cache(PathBuf),
    /// An LLM endpoint (its cache replayed first, then its answers).
    Llm(Box<LlmConfig>),
}

impl ProposerConfig {
    /// The llm endpoint the proposer asks, as the proposer (`kind: llm`) or as an evolving
    /// population's seeds.
    pub fn llm(&self) -> Option<&LlmConfig> {
        match self {
            ProposerConfig::Llm(c)
            | ProposerConfig::Evolve {
                seeds: Seeds::Llm(c),
                ..
            } => Some(c.as_ref()),
            _ => None,
        }
    }

    /// [`Self::llm`], mutable (the run sets its failure log).
    pub fn llm_mut(&mut self) -> Option<&mut LlmConfig> {
        match self {
            ProposerConfig::Llm(c)
            | ProposerConfig::Evolve {
                seeds: Seeds::Llm(c),
                ..
            } => Some(c.as_mut()),
            _ => None,
        }
    }
}

/// The tree grammar's shape (`binary`, `max_terms`, `max_depth`, `max_size`).
#[derive(Clone, Debug, PartialEq)]
pub struct TreeShape {
    /// Two-argument operators by name (`+ - * / pow`).
    pub binary: Vec<String>,
    /// Most additive terms of a random program.
    pub max_terms: usize,
    /// Most levels of nesting of a term's factor.
    pub max_depth: usize,
    /// Most nodes of an evolved program.
    pub max_size: usize,
    /// The shaped factors named by `factors:` (`None`: the default draw, fresh constants).
    pub factors: Option<Vec<FactorShape>>,
}

/// A shaped factor of one input `u` the tree grammar draws (`proposer.factors:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FactorShape {
    /// `u / (u + p)` (needs `/`).
    Saturating,
    /// `exp(p·(u + q)²)` (needs `exp`).
    Bell,
    /// `1 / (1 + exp(p·(u + q)))` (needs `/` and `exp`).
    Switch,
    /// `u²` or `u³`.
    Power,
    /// `exp(p·|u + q|)`, a peak with exponential tails (needs `exp`).
    Cusp,
    /// `1 / ((1 + exp(p·(u + q)))·(1 + exp(r·(u + s))))`, a rising and a falling switch: an
    /// asymmetric plateau (needs `/` and `exp`).
    Bump,
}

impl FactorShape {
    /// Every shape, by its name in a task file.
    pub const ALL: [(&'static str, FactorShape); 6] = [
        ("saturating", FactorShape::Saturating),
        ("bell", FactorShape::Bell),
        ("switch", FactorShape::Switch),
        ("power", FactorShape::Power),
        ("cusp", FactorShape::Cusp),
        ("bump", FactorShape::Bump),
    ];
}

/// The unary operators the grammar (and an llm's prompt) uses by default.
pub const DEFAULT_OPERATORS: &[&str] = &["exp", "sin", "cos", "log", "sqrt"];

/// The unary operators an evolving search uses by default (the grammar's and `tanh`, `square`).
pub const EVOLVE_OPERATORS: &[&str] = &["sin", "cos", "exp", "log", "sqrt", "tanh", "square"];

/// The named factor shapes an evolving search draws by default: all of them, each input's
/// starting at its centre and spread, chosen by what pays off during the run.
pub const EVOLVE_FACTORS: [FactorShape; 6] = [
    FactorShape::Saturating,
    FactorShape::Bell,
    FactorShape::Switch,
    FactorShape::Power,
    FactorShape::Cusp,
    FactorShape::Bump,
];

/// An evolving search's default `population` and `max_terms`.
pub const EVOLVE_POPULATION: usize = 128;
/// See [`EVOLVE_POPULATION`].
pub const EVOLVE_MAX_TERMS: usize = 4;

/// Refuses an operator the runtime's vocabulary does not offer (`what`, `known` decide which):
/// the message lists the unary operators.
pub(super) fn check_operators(
    ops: &[Spanned<String>],
    what: &str,
    known: impl Fn(&str) -> bool,
) -> Result<()> {
    match ops.iter().find(|o| !known(&o.value)) {
        None => Ok(()),
        Some(o) => {
            let list: Vec<&str> = ndvm_core::unary_operators().collect();
            Err(spec_err(
                Some(o.referenced),
                format!("unknown {what} `{}` (known: {})", o.value, list.join(", ")),
            ))
        }
    }
}

/// The cache file `file` (named at `at`), which must exist.
pub(super) fn existing_cache(file: &Path, at: &Spanned<String>) -> Result<PathBuf> {
    if !file.is_file() {
        return Err(spec_err(
            Some(at.referenced),
            format!("cache {} does not exist", file.display()),
        ));
    }
    Ok(file.to_path_buf())
}

/// Refuses a generating proposer (`what`) without inputs or parameters to build from.
pub(super) fn needs_vocabulary(what: &str, inputs: &[String], params: &[ParamSpec]) -> Result<()> {
    if inputs.is_empty() || params.is_empty() {
        return Err(spec_err(
            None,
            format!("the {what} proposer needs `inputs` and `params`"),
        ));
    }
    Ok(())
}

/// Refuses a generating proposer's key under a kind it does not apply to (`population` under
/// `replay`, say), at the key.
pub(super) fn check_kind_keys(kind: ProposerName, p: &ProposerSpec) -> Result<()> {
    use ProposerName::{Evolve, Grammar, Llm};
    let at = |v: Option<Location>, key: &'static str, kinds: &'static [ProposerName]| {
        v.filter(|_| !kinds.contains(&kind))
            .map(|loc| (key, loc, kinds))
    };
    let misplaced = [
        at(
            p.population.as_ref().map(|v| v.referenced),
            "population",
            &[Evolve],
        ),
        at(
            p.islands.as_ref().map(|v| v.referenced),
            "islands",
            &[Evolve],
        ),
        at(
            p.max_size.as_ref().map(|v| v.referenced),
            "max_size",
            &[Evolve],
        ),
        at(
            p.max_depth.as_ref().map(|v| v.referenced),
            "max_depth",
            &[Grammar, Evolve],
        ),
        at(
            p.max_terms.as_ref().map(|v| v.referenced),
            "max_terms",
            &[Grammar, Evolve],
        ),
        at(
            p.factors
                .as_ref()
                .and_then(|f| f.first())
                .map(|v| v.referenced),
            "factors",
            &[Grammar, Evolve],
        ),
        at(
            p.binary
                .as_ref()
                .and_then(|b| b.first())
                .map(|v| v.referenced),
            "binary",
            &[Grammar, Evolve],
        ),
        at(
            p.operators
                .as_ref()
                .and_then(|o| o.first())
                .map(|v| v.referenced),
            "operators",
            &[Grammar, Evolve, Llm],
        ),
    ];
    match misplaced.into_iter().flatten().next() {
        None => Ok(()),
        Some((key, loc, kinds)) => {
            let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
            Err(spec_err(
                Some(loc),
                format!(
                    "`proposer.{key}` only applies to `kind: {}`",
                    names.join("` or `kind: ")
                ),
            ))
        }
    }
}

/// A whole-number key `key` in 1..=`max`, `default` when absent.
pub(super) fn count_key(
    value: Option<&Spanned<usize>>,
    key: &str,
    max: usize,
    default: usize,
) -> Result<usize> {
    match value {
        Some(v) if v.value == 0 || v.value > max => Err(spec_err(
            Some(v.referenced),
            format!("`{key}` must be at least 1 and at most {max}"),
        )),
        Some(v) => Ok(v.value),
        None => Ok(default.min(max)),
    }
}

/// The unary operators of a grammar or evolve proposer (checked against the vocabulary), else
/// `default`.
pub(super) fn resolve_unary(p: &ProposerSpec, default: &[&str]) -> Result<Vec<String>> {
    Ok(match &p.operators {
        Some(ops) => {
            check_operators(ops, "grammar operator", |o| {
                ndvm_core::unary_operators().any(|k| k == o)
            })?;
            ops.iter().map(|o| o.value.clone()).collect()
        }
        None => default.iter().map(|s| s.to_string()).collect(),
    })
}

/// The two-argument operators a tree grammar may use.
pub const BINARY_OPERATORS: &[&str] = &["+", "-", "*", "/", "pow", "expt"];

/// The tree grammar's shape from `binary`, `max_terms` (default `terms`), `max_depth`,
/// `max_size` and `factors` (default `factors`).
pub(super) fn resolve_shape(
    p: &ProposerSpec,
    terms: usize,
    factors: Option<&[FactorShape]>,
) -> Result<TreeShape> {
    let binary = match &p.binary {
        Some(ops) => {
            if let Some(o) = ops
                .iter()
                .find(|o| !BINARY_OPERATORS.contains(&o.value.as_str()))
            {
                return Err(spec_err(
                    Some(o.referenced),
                    format!(
                        "unknown binary operator `{}` (known: {})",
                        o.value,
                        BINARY_OPERATORS.join(", ")
                    ),
                ));
            }
            ops.iter().map(|o| o.value.clone()).collect()
        }
        None => ["+", "-", "*", "/", "pow"].map(String::from).to_vec(),
    };
    Ok(TreeShape {
        binary,
        max_terms: count_key(p.max_terms.as_ref(), "max_terms", MAX_TERMS, terms)?,
        max_depth: count_key(p.max_depth.as_ref(), "max_depth", MAX_TREE_DEPTH, 3)?,
        max_size: count_key(p.max_size.as_ref(), "max_size", MAX_TREE_SIZE, 40)?,
        factors: resolve_factors(p, factors)?,
    })
}

/// `proposer.factors:` checked: known shape names, each once; `[]` is none (factors with fresh
/// constants). Absent: `default`.
pub(super) fn resolve_factors(
    p: &ProposerSpec,
    default: Option<&[FactorShape]>,
) -> Result<Option<Vec<FactorShape>>> {
    let Some(names) = &p.factors else {
        return Ok(default.map(<[FactorShape]>::to_vec));
    };
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let err = |msg: String| Err(spec_err(Some(name.referenced), msg));
        let Some(&(_, shape)) = FactorShape::ALL.iter().find(|(n, _)| *n == name.value) else {
            let known: Vec<&str> = FactorShape::ALL.iter().map(|(n, _)| *n).collect();
            return err(format!(
                "unknown factor shape `{}` (known: {})",
                name.value,
                known.join(", ")
            ));
        };
        if out.contains(&shape) {
            return err(format!("factor shape `{}` is named twice", name.value));
        }
        out.push(shape);
    }
    Ok(Some(out).filter(|o| !o.is_empty()))
}

/// Refuses `kind: llm` (at `loc`) in a build without the `llm` feature (`built` is false).
pub(super) fn llm_feature(loc: Option<Location>, built: bool) -> Result<()> {
    if built {
        return Ok(());
    }
    Err(spec_err(loc, LLM_FEATURE_MISSING))
}

/// The proposer's kind: as written, else replay with a cache and evolve without one.
pub(super) fn proposer_kind(p: &ProposerSpec) -> ProposerName {
    p.kind
        .as_ref()
        .map(|k| k.value)
        .unwrap_or(if p.cache.is_some() {
            ProposerName::Replay
        } else {
            ProposerName::Evolve
        })
}

/// The proposer section resolved.
pub(super) struct Proposed {
    pub(super) proposer: ProposerConfig,
    pub(super) batch: usize,
}

/// `proposer:`: the kind (default: replay with a cache, else evolve) with its own keys only, the
/// llm endpoint when one is asked, and the batch.
pub(super) fn resolve_proposer(
    base: &Path,
    spec: &TaskSpec,
    inputs: &[String],
    params: &[ParamSpec],
    purpose: Purpose,
) -> Result<Proposed> {
    let err = |loc: Location, msg: String| spec_err(Some(loc), msg);
    let rel = |s: &str| base.join(s);
    let p = &spec.proposer;
    let kind = proposer_kind(p);
    if let Some(e) = p.evolve.as_ref().filter(|_| kind != ProposerName::Llm) {
        return Err(err(
            e.referenced,
            "`proposer.evolve` only applies to `kind: llm`".into(),
        ));
    }
    let evolves = evolves(p);
    let proposer = match kind {
        ProposerName::Replay => {
            let Some(cache) = &p.cache else {
                return Err(spec_err(
                    None,
                    "`proposer.kind: replay` needs `proposer.cache`",
                ));
            };
            ProposerConfig::Replay {
                cache: existing_cache(&rel(&cache.value), cache)?,
            }
        }
        ProposerName::Grammar => {
            needs_vocabulary("grammar", inputs, params)?;
            // `max_depth` or `factors` switches to the tree grammar.
            let tree = match p.max_depth.is_some() || p.factors.is_some() {
                true => Some(resolve_shape(p, 3, None)?),
                false => None,
            };
            ProposerConfig::Grammar {
                operators: resolve_unary(p, DEFAULT_OPERATORS)?,
                max_terms: count_key(p.max_terms.as_ref(), "max_terms", MAX_TERMS, 2)?,
                tree,
            }
        }
        ProposerName::Evolve | ProposerName::Llm if evolves => {
            needs_vocabulary(kind.as_str(), inputs, params)?;
            let population = count_key(
                p.population.as_ref(),
                "population",
                MAX_POPULATION,
                EVOLVE_POPULATION,
            )?;
            let islands = count_key(p.islands.as_ref(), "islands", population, 4)?;
            let asks_a_model = p
                .base_url
                .as_ref()
                .map(|_| ())
                .or(p.models.as_ref().map(|_| ()));
            let seeds = match (&p.cache, asks_a_model) {
                _ if kind == ProposerName::Llm => {
                    Seeds::Llm(Box::new(llm_seeds(base, spec, p, purpose)?))
                }
                (_, Some(_)) => Seeds::Llm(Box::new(llm_seeds(base, spec, p, purpose)?)),
                (Some(cache), None) => Seeds::Cache(existing_cache(&rel(&cache.value), cache)?),
                (None, None) => Seeds::None,
            };
            ProposerConfig::Evolve {
                operators: resolve_unary(p, EVOLVE_OPERATORS)?,
                tree: resolve_shape(p, EVOLVE_MAX_TERMS, Some(&EVOLVE_FACTORS))?,
                population,
                islands,
                seeds,
            }
        }
        // `kind: llm` with `evolve: false` (`kind: evolve` always evolves, above).
        ProposerName::Llm | ProposerName::Evolve => {
            let config = resolve_llm(base, spec, inputs.is_empty() || params.is_empty())?;
            llm_feature(
                p.kind.as_ref().map(|k| k.referenced),
                cfg!(feature = "llm") || purpose == Purpose::Check,
            )?;
            ProposerConfig::Llm(Box::new(config))
        }
    };
    if proposer.llm().is_none() {
        refuse_llm_keys(p)?;
    }
    check_kind_keys(if evolves { ProposerName::Evolve } else { kind }, p)?;
    let batch = match &p.batch {
        Some(b) if b.value == 0 || b.value > MAX_BATCH => {
            return Err(err(
                b.referenced,
                format!("`batch` must be at least 1 and at most {MAX_BATCH}"),
            ));
        }
        Some(b) => b.value,
        None => 8,
    };
    Ok(Proposed { proposer, batch })
}

/// Whether the proposer is the evolutionary search: `kind: evolve`, or `kind: llm` unless
/// `evolve: false` (the model's programs are then its seeds, and the keys of `evolve` apply).
pub(super) fn evolves(p: &ProposerSpec) -> bool {
    match proposer_kind(p) {
        ProposerName::Evolve => true,
        ProposerName::Llm => p.evolve.as_ref().is_none_or(|e| e.value),
        ProposerName::Replay | ProposerName::Grammar => false,
    }
}

/// The llm endpoint of an evolve proposer seeded by a model (refused in a build without the
/// `llm` feature, unless only checked).
fn llm_seeds(
    base: &Path,
    spec: &TaskSpec,
    p: &ProposerSpec,
    purpose: Purpose,
) -> Result<LlmConfig> {
    let config = resolve_llm(base, spec, false)?;
    llm_feature(
        p.kind.as_ref().map(|k| k.referenced),
        cfg!(feature = "llm") || purpose == Purpose::Check,
    )?;
    Ok(config)
}

/// The llm-only keys in a task whose proposer asks no llm are refused at their line.
pub(super) fn refuse_llm_keys(p: &ProposerSpec) -> Result<()> {
    let err = |loc: Location, msg: String| spec_err(Some(loc), msg);
    let llm_only = [
        p.base_url.as_ref().map(|v| ("base_url", v.referenced)),
        p.models
            .as_ref()
            .and_then(|m| m.first())
            .map(|v| ("models", v.referenced)),
        p.model.as_ref().map(|v| ("model", v.referenced)),
        p.prompt.as_ref().map(|v| ("prompt", v.referenced)),
        p.temperature
            .as_ref()
            .map(|v| ("temperature", v.referenced)),
        p.concurrency
            .as_ref()
            .map(|v| ("concurrency", v.referenced)),
        p.max_requests
            .as_ref()
            .map(|v| ("max_requests", v.referenced)),
    ];
    if let Some((key, loc)) = llm_only.into_iter().flatten().next() {
        return Err(err(
            loc,
            format!(
                "`proposer.{key}` only applies to `kind: llm` (or an LLM-seeded `kind: evolve`)"
            ),
        ));
    }
    Ok(())
}
