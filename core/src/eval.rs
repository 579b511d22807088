//! `Evaluator`: the single walker over heap programs (placeholder while the runtime is written).

use crate::api::{EvalOptions, Evaluation, Inputs};
use crate::error::{CoreError, ErrorKind, Result};
use crate::heap::{Heap, Program};

/// Walks heap programs for B lanes at once.
#[derive(Debug)]
pub struct Evaluator {
    opts: EvalOptions,
}

impl Evaluator {
    /// An evaluator with the given options.
    pub fn new(opts: EvalOptions) -> Self {
        Evaluator { opts }
    }

    /// The options this evaluator was built with.
    pub fn options(&self) -> &EvalOptions {
        &self.opts
    }

    /// Forward-only evaluation.
    pub fn eval(&mut self, _heap: &mut Heap, _program: &Program, _inputs: &Inputs) -> Result<Evaluation> {
        Err(CoreError::new(ErrorKind::Syntax, "evaluator under construction"))
    }

    /// Evaluation with gradients for every `grad` input.
    pub fn eval_grad(&mut self, _heap: &mut Heap, _program: &Program, _inputs: &Inputs) -> Result<Evaluation> {
        Err(CoreError::new(ErrorKind::Syntax, "evaluator under construction"))
    }
}
