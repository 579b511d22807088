//! `CoreError`: whole-program failures (structure, arity, types, budgets); per-lane numeric faults are not errors.

use crate::heap::NodeId;

/// What went wrong, as a stable short code users can search for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A variable is not bound in any enclosing scope (E001).
    Unbound,
    /// A procedure got the wrong number of arguments (E002).
    Arity,
    /// A primitive got a value of the wrong type (E003).
    Type,
    /// Vector or matrix shapes do not fit (E004).
    Shape,
    /// A special form is malformed (E005).
    Syntax,
    /// The head of an application is not a procedure (E006).
    NotProcedure,
    /// The evaluation step budget ran out (E007).
    StepBudget,
    /// Non-tail recursion went deeper than the limit (E008).
    DepthLimit,
    /// Lanes disagree on structure that cannot be merged (E009).
    Divergence,
    /// An index is out of range or not the same on every active lane (E010).
    Index,
    /// A binding supplied by the caller is malformed (E011).
    Input,
    /// A primitive has no derivative (E012).
    NotDifferentiable,
}

impl ErrorKind {
    /// The stable code, e.g. `E001`.
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::Unbound => "E001",
            ErrorKind::Arity => "E002",
            ErrorKind::Type => "E003",
            ErrorKind::Shape => "E004",
            ErrorKind::Syntax => "E005",
            ErrorKind::NotProcedure => "E006",
            ErrorKind::StepBudget => "E007",
            ErrorKind::DepthLimit => "E008",
            ErrorKind::Divergence => "E009",
            ErrorKind::Index => "E010",
            ErrorKind::Input => "E011",
            ErrorKind::NotDifferentiable => "E012",
        }
    }

    /// A short lowercase name, e.g. `unbound variable`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Unbound => "unbound variable",
            ErrorKind::Arity => "wrong number of arguments",
            ErrorKind::Type => "type error",
            ErrorKind::Shape => "shape mismatch",
            ErrorKind::Syntax => "bad syntax",
            ErrorKind::NotProcedure => "not a procedure",
            ErrorKind::StepBudget => "step budget exceeded",
            ErrorKind::DepthLimit => "recursion too deep",
            ErrorKind::Divergence => "lane divergence",
            ErrorKind::Index => "bad index",
            ErrorKind::Input => "bad input",
            ErrorKind::NotDifferentiable => "not differentiable",
        }
    }
}

/// A failure of the whole program (every lane), with the heap node of the offending form.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{}: {message}", kind.name())]
pub struct CoreError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// Human-readable detail, lowercase, no trailing period.
    pub message: String,
    /// The form that failed, when known; front ends map it to a source span.
    pub node: Option<NodeId>,
}

impl CoreError {
    /// A new error without a location.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        CoreError {
            kind,
            message: message.into(),
            node: None,
        }
    }

    /// Attaches the offending node unless one is already attached.
    pub fn at(mut self, node: NodeId) -> Self {
        if self.node.is_none() {
            self.node = Some(node);
        }
        self
    }
}

/// Result alias for this crate.
pub type Result<T, E = CoreError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    #[test]
    fn core_error_is_send_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<super::CoreError>();
    }
}
