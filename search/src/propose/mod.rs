//! Proposers: where candidate programs come from. `Proposer` is one method; `replay` reads a
//! JSONL cache in file order, `grammar` draws seeded random programs and `llm` asks an
//! OpenAI-compatible chat endpoint (only when a task says `kind: llm`), appending every answer to
//! the cache so that replaying it later gives the same stream offline.

pub mod grammar;
pub mod llm;
pub mod replay;

use crate::error::Result;
use crate::task::{ProposerConfig, Task};

/// One proposed program, numbered by its position in the proposer's stream.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Candidate {
    /// Position in the stream (0-based); the candidate's id everywhere.
    pub id: u64,
    /// Program text (Scheme).
    pub src: String,
}

/// A source of candidates. Deterministic: the same task gives the same stream.
pub trait Proposer {
    /// Up to `n` further candidates; an empty vector means the stream is exhausted.
    fn propose(&mut self, n: usize) -> Result<Vec<Candidate>>;

    /// Problems noticed so far that did not stop the stream (a truncated cache line).
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }

    /// A short name (`replay`, `grammar`, `llm`).
    fn name(&self) -> &'static str;

    /// Feedback from the engine: candidate `id` reached `score` (higher is better; validation R²
    /// or the negated loss). The `llm` proposer shows the best ones as examples in later prompts;
    /// the others ignore it.
    fn feedback(&mut self, id: u64, score: f64) {
        let _ = (id, score);
    }
}

/// The proposer a task asks for.
pub fn for_task(task: &Task) -> Result<Box<dyn Proposer>> {
    if let Some(config) = &task.llm {
        return Ok(Box::new(llm::LlmProposer::new(
            config.clone(),
            // Shared inputs (matrices) are variables a program may read, as in the engine.
            task.inputs
                .iter()
                .cloned()
                .chain(task.shared.iter().map(|(n, _)| n.clone()))
                .collect(),
            task.params.iter().map(|p| p.name.clone()).collect(),
            task.forbidden_forms.clone(),
        )?));
    }
    Ok(match &task.proposer {
        ProposerConfig::Replay { cache } => Box::new(replay::CacheReplay::open(cache)?),
        ProposerConfig::Grammar {
            operators,
            max_terms,
        } => Box::new(grammar::Grammar::new(
            task.seed,
            task.inputs.clone(),
            task.params.iter().map(|p| p.name.clone()).collect(),
            operators.clone(),
            *max_terms,
        )),
    })
}
