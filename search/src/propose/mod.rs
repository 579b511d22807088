//! Proposers: where candidate programs come from. `Proposer::propose` hands out the next ones;
//! `replay` reads a JSONL cache in file order, `grammar` draws seeded random programs, `evolve`
//! breeds calibrated programs (seeded by a cache or an LLM) and `llm` asks an OpenAI-compatible
//! chat endpoint (only when a task names one), appending every answer to the cache so that
//! replaying it later gives the same stream offline. The `llm` proposer exists only in a build
//! with the `llm` cargo feature.

mod bandit;
pub mod evolve;
pub mod grammar;
pub mod lift;
#[cfg(feature = "llm")]
pub mod llm;
pub mod replay;
pub mod salvage;
mod sampler;
mod tree;

use std::collections::BTreeMap;

use crate::error::Result;
use crate::events::Event;
use crate::task::{ProposerConfig, Seeds, Task, TreeShape};

/// One proposed program, numbered by its position in the proposer's stream.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Candidate {
    /// Position in the stream (0-based); the candidate's id everywhere.
    pub id: u64,
    /// Program text, in the notation of `frontend`.
    pub src: String,
    /// The name of the front end that reads `src`.
    pub frontend: String,
    /// Starting values for some of its parameters (an evolved child inherits its parent's
    /// fitted constants): the calibrator's first start uses them instead of the task's `init`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub init: BTreeMap<String, f64>,
}

impl Candidate {
    /// A candidate with no inherited starting values.
    pub fn new(id: u64, src: String, frontend: String) -> Candidate {
        Candidate {
            id,
            src,
            frontend,
            init: BTreeMap::new(),
        }
    }
}

/// A source of candidates. Deterministic: the same task gives the same stream.
pub trait Proposer {
    /// Up to `n` further candidates; an empty vector means the stream is exhausted, unless
    /// [`exhausted`](Proposer::exhausted) says it goes on.
    fn propose(&mut self, n: usize) -> Result<Vec<Candidate>>;

    /// As [`propose`](Proposer::propose), telling `report` how the requests of a proposer that
    /// asks a service (the `llm` proposer) stand while it waits; the others only propose.
    fn propose_reporting(
        &mut self,
        n: usize,
        report: &mut dyn FnMut(&RequestStats),
    ) -> Result<Vec<Candidate>> {
        let _ = report;
        self.propose(n)
    }

    /// Problems noticed so far that did not stop the stream (a truncated cache line).
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }

    /// Whether the stream has ended, for a caller that got an empty answer from a stream that
    /// may go on (an LLM whose last wave gave no program, or whose answers arrive while
    /// evolution runs): the engine and `evolve` ask again while this is false. By default an
    /// empty answer is the end, so this is true.
    fn exhausted(&self) -> bool {
        true
    }

    /// The run has ended: a proposer with requests in flight waits for their answers and keeps
    /// them (`wait`), or abandons them (`wait` false: an interrupt). The others do nothing.
    fn finish(&mut self, wait: bool) {
        let _ = wait;
    }

    /// What its language model did, for a proposer that asks one (an `evolve` asks its seeds).
    fn llm_report(&self) -> Option<crate::events::LlmReport> {
        None
    }

    /// A short name (`replay`, `grammar`, `evolve`, `llm`).
    fn name(&self) -> &'static str;

    /// How many candidates the engine asks for at a time (at least 1). Feedback arrives between
    /// asks: see the engine's contract in `engine/stream.rs`.
    fn chunk(&self) -> usize {
        64
    }

    /// Feedback from the engine, for every calibrated candidate in index order: its event and
    /// its ranking score (higher is better: validation R² or the negated loss; `None` when it
    /// failed). The `llm` proposer shows the best ones as examples in later prompts; `evolve`
    /// breeds from them; the others ignore it.
    fn feedback(&mut self, event: &Event, score: Option<f64>) {
        let _ = (event, score);
    }
}

/// Requests of a proposer that asks a service, for progress displays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestStats {
    /// Requests sent so far (each counted once, however many attempts it took).
    pub sent: usize,
    /// Requests waiting for their answer now.
    pub in_flight: usize,
    /// Requests that failed for good (after their retries).
    pub failed: usize,
    /// Attempts repeated after a transient failure (429, 5xx, a timeout, no connection).
    pub retried: usize,
}

/// The file of a run folder where the `llm` proposer logs failed requests (one JSON line each);
/// the cache keeps answers only.
pub const LLM_FAILURES_FILE: &str = "llm-failures.jsonl";

pub use crate::task::LLM_FEATURE_MISSING;

/// The proposer a task asks for.
pub fn for_task(task: &Task) -> Result<Box<dyn Proposer>> {
    Ok(match &task.proposer {
        ProposerConfig::Evolve {
            operators,
            tree,
            population,
            islands,
            seeds,
        } => {
            let seeds = match seeds {
                Seeds::Llm(config) => Some(llm_proposer(task, config, true)?),
                Seeds::Cache(cache) => Some(Box::new(
                    replay::CacheReplay::open(cache, &task.frontends, &task.frontend)?.as_seeds(),
                ) as Box<dyn Proposer>),
                Seeds::None => None,
            };
            Box::new(evolve::Evolve::new(
                task.seed,
                Vocabulary::of(task),
                sampler_for(task, operators, tree),
                evolve::EvolveSettings {
                    population: *population,
                    islands: *islands,
                    max_size: tree.max_size,
                    chunk: task.batch,
                },
                seeds,
            )?)
        }
        ProposerConfig::Llm(config) => llm_proposer(task, config, false)?,
        ProposerConfig::Replay { cache } => replay(task, cache)?,
        ProposerConfig::Grammar {
            operators,
            max_terms,
            tree,
        } => Box::new(grammar::Grammar::new(
            task.seed,
            Vocabulary::of(task),
            operators.clone(),
            *max_terms,
            tree.as_ref().map(|t| sampler_for(task, operators, t)),
        )?),
    })
}

/// What a generating proposer (grammar, evolve) builds programs from, and the front end that
/// prints them.
#[derive(Clone, Debug)]
pub(crate) struct Vocabulary {
    /// Input names.
    pub(crate) inputs: Vec<String>,
    /// Parameter names, used in order of appearance.
    pub(crate) params: Vec<String>,
    /// The front ends.
    pub(crate) frontends: std::sync::Arc<ndvm_frontends::Registry>,
    /// The name of the one that prints.
    pub(crate) frontend: String,
}

impl Vocabulary {
    /// The names a [`tree::Tree`] is printed with.
    pub(crate) fn names(&self) -> tree::Names<'_> {
        tree::Names {
            inputs: &self.inputs,
            params: &self.params,
        }
    }

    /// The front end that prints, or the error naming the known ones.
    pub(crate) fn printer(&self) -> Result<&dyn ndvm_frontends::Frontend> {
        self.frontends.by_name(&self.frontend).ok_or_else(|| {
            crate::error::SearchError::UnknownFrontend {
                message: self.frontends.unknown(&self.frontend),
            }
        })
    }

    /// A task's inputs, parameters and front end.
    pub(crate) fn of(task: &Task) -> Vocabulary {
        Vocabulary {
            inputs: task.inputs.clone(),
            params: task.params.iter().map(|p| p.name.clone()).collect(),
            frontends: task.frontends.clone(),
            frontend: task.frontend.clone(),
        }
    }
}

/// The replay of `cache` in the task's notation.
fn replay(task: &Task, cache: &std::path::Path) -> Result<Box<dyn Proposer>> {
    Ok(Box::new(replay::CacheReplay::open(
        cache,
        &task.frontends,
        &task.frontend,
    )?))
}

/// The tree grammar of a task's `operators` and tree shape.
fn sampler_for(task: &Task, operators: &[String], tree: &TreeShape) -> sampler::Sampler {
    let unary = ndvm_core::unary_operators()
        .filter(|u| operators.iter().any(|o| o == u))
        .collect();
    let mut binary: Vec<tree::BinOp> = Vec::new();
    for op in tree.binary.iter().filter_map(|b| tree::BinOp::named(b)) {
        if !binary.contains(&op) {
            binary.push(op);
        }
    }
    sampler::Sampler {
        n_inputs: task.inputs.len(),
        unary,
        binary,
        max_depth: tree.max_depth,
        max_terms: tree.max_terms,
        max_params: task.params.len(),
        factors: tree.factors.clone(),
        spreads: task
            .train
            .columns
            .iter()
            .map(|c| crate::task::spread(c))
            .collect(),
        shape_chances: Vec::new(),
        drawn: std::cell::Cell::new(0),
    }
}

/// The `llm` proposer of `config` (an error in a build without the `llm` feature).
/// The `llm` proposer of a task; `seeds`: as the seeds of an `evolve` (requests in the
/// background).
fn llm_proposer(
    task: &Task,
    config: &crate::task::LlmConfig,
    seeds: bool,
) -> Result<Box<dyn Proposer>> {
    #[cfg(not(feature = "llm"))]
    {
        let _ = (task, config, seeds);
        Err(crate::error::SearchError::Proposer {
            proposer: "llm",
            message: LLM_FEATURE_MISSING.to_string(),
        })
    }
    #[cfg(feature = "llm")]
    {
        let proposer = llm::LlmProposer::new(
            config.clone(),
            // Shared inputs (matrices) are variables a program may read, as in the engine.
            task.inputs
                .iter()
                .cloned()
                .chain(task.shared.iter().map(|(n, _)| n.clone()))
                .collect(),
            task.params.iter().map(|p| p.name.clone()).collect(),
            task.forbidden_forms.clone(),
            task.frontends.clone(),
            task.frontend.clone(),
        )?;
        Ok(Box::new(match seeds {
            true => proposer.seeding(),
            false => proposer,
        }))
    }
}
