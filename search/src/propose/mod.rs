//! Proposers: where candidate programs come from. `Proposer` is one method; `replay` reads a
//! JSONL cache in file order and `grammar` draws seeded random programs. The LLM proposer is not
//! built yet.

pub mod grammar;
pub mod replay;

use crate::error::Result;
use crate::task::{ProposerConfig, Task};

/// One proposed program, numbered by its position in the proposer's stream.
#[derive(Clone, Debug, PartialEq)]
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

    /// A short name (`replay`, `grammar`).
    fn name(&self) -> &'static str;
}

/// The proposer a task asks for.
pub fn for_task(task: &Task) -> Result<Box<dyn Proposer>> {
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
