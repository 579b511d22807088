//! ndvm-core: the differentiable evaluator over heap programs, with batched lanes and a reverse-mode tape.
//!
//! Programs are s-expression data on a [`Heap`]; one [`Evaluator`] walks them for B lanes at once.
//! Structure (symbols, pairs, closures, control) is shared by all lanes; numbers are payloads of B
//! lanes (or one value when uniform). Recording a tape along the executed trace gives exact per-lane
//! gradients with respect to every differentiable input.

mod aligned;
pub mod api;
mod decode;
pub mod elementary;
mod elementary32;
pub mod error;
pub mod eval;
mod flat;
pub mod heap;
mod lanes;
mod linalg;
mod mask;
pub mod params;
pub mod planted;
mod prims;
pub mod print;
mod real;
pub mod selfhost;
mod smallmat;
pub mod symbol;
mod tape;
mod value;
mod vocab;
pub mod widest;

pub use api::{
    Cancel, ChoiceMode, ChoiceReadout, Dialect, EvalOptions, Evaluation, Gradient, Input,
    InputValue, Inputs, LaneBlock, Lent, Output, Precision, SoftChoice, ValueSource,
};
pub use error::{CoreError, ErrorKind, Result};
pub use eval::Evaluator;
pub use heap::{Heap, Node, NodeId, Program, SrcSpan};
pub use params::{ParamDecl, ParamKind};
pub use symbol::{Interner, Symbol};
pub use vocab::{
    Arity, Group, Word, WordKind, is_primitive, is_special_form, unary_operators, vocabulary, word,
};
