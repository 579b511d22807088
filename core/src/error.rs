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
    /// The work budget ran out (E007): evaluation steps weighted by the elements they touch.
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
    /// The run would hold more bytes than `EvalOptions::max_memory` (E013).
    MemoryLimit,
    /// The run passed its `EvalOptions::deadline` (E014).
    Deadline,
    /// A program was used with a heap other than the one it was read into (E015).
    ForeignProgram,
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
            ErrorKind::MemoryLimit => "E013",
            ErrorKind::Deadline => "E014",
            ErrorKind::ForeignProgram => "E015",
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
            ErrorKind::StepBudget => "work budget exceeded",
            ErrorKind::DepthLimit => "recursion too deep",
            ErrorKind::Divergence => "lane divergence",
            ErrorKind::Index => "bad index",
            ErrorKind::Input => "bad input",
            ErrorKind::NotDifferentiable => "not differentiable",
            ErrorKind::MemoryLimit => "memory limit exceeded",
            ErrorKind::Deadline => "time limit exceeded",
            ErrorKind::ForeignProgram => "program from another heap",
        }
    }

    /// Whether the run was stopped by a resource limit (work, depth, memory or deadline) rather
    /// than by a fault of the program's meaning.
    pub fn is_limit(self) -> bool {
        matches!(
            self,
            ErrorKind::StepBudget
                | ErrorKind::DepthLimit
                | ErrorKind::MemoryLimit
                | ErrorKind::Deadline
        )
    }

    /// A stable kebab-case class for grouping failures: `work`, `depth`, `memory`, `deadline`
    /// for the limits, and `unbound`, `arity`, `type`, `shape`, `syntax`, `not-procedure`,
    /// `divergence`, `index`, `input`, `not-differentiable`, `foreign-program` for the rest.
    pub fn class(self) -> &'static str {
        match self {
            ErrorKind::Unbound => "unbound",
            ErrorKind::Arity => "arity",
            ErrorKind::Type => "type",
            ErrorKind::Shape => "shape",
            ErrorKind::Syntax => "syntax",
            ErrorKind::NotProcedure => "not-procedure",
            ErrorKind::StepBudget => "work",
            ErrorKind::DepthLimit => "depth",
            ErrorKind::Divergence => "divergence",
            ErrorKind::Index => "index",
            ErrorKind::Input => "input",
            ErrorKind::NotDifferentiable => "not-differentiable",
            ErrorKind::MemoryLimit => "memory",
            ErrorKind::Deadline => "deadline",
            ErrorKind::ForeignProgram => "foreign-program",
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
    use super::ErrorKind;

    const ALL: [ErrorKind; 15] = [
        ErrorKind::Unbound,
        ErrorKind::Arity,
        ErrorKind::Type,
        ErrorKind::Shape,
        ErrorKind::Syntax,
        ErrorKind::NotProcedure,
        ErrorKind::StepBudget,
        ErrorKind::DepthLimit,
        ErrorKind::Divergence,
        ErrorKind::Index,
        ErrorKind::Input,
        ErrorKind::NotDifferentiable,
        ErrorKind::MemoryLimit,
        ErrorKind::Deadline,
        ErrorKind::ForeignProgram,
    ];

    #[test]
    fn limit_kinds_have_codes_names_and_classes() {
        assert_eq!(ErrorKind::StepBudget.code(), "E007");
        assert_eq!(ErrorKind::StepBudget.name(), "work budget exceeded");
        assert_eq!(ErrorKind::DepthLimit.code(), "E008");
        assert_eq!(ErrorKind::MemoryLimit.code(), "E013");
        assert_eq!(ErrorKind::MemoryLimit.name(), "memory limit exceeded");
        assert_eq!(ErrorKind::Deadline.code(), "E014");
        assert_eq!(ErrorKind::Deadline.name(), "time limit exceeded");
        let classes: Vec<_> = ALL.iter().map(|k| k.class()).collect();
        assert_eq!(
            classes,
            [
                "unbound",
                "arity",
                "type",
                "shape",
                "syntax",
                "not-procedure",
                "work",
                "depth",
                "divergence",
                "index",
                "input",
                "not-differentiable",
                "memory",
                "deadline",
                "foreign-program"
            ]
        );
        let limits: Vec<_> = ALL
            .iter()
            .filter(|k| k.is_limit())
            .map(|k| k.code())
            .collect();
        assert_eq!(limits, ["E007", "E008", "E013", "E014"]);
        // Codes are distinct and numbered in order.
        for (i, k) in ALL.iter().enumerate() {
            assert_eq!(k.code(), format!("E{:03}", i + 1));
        }
    }

    #[test]
    fn core_error_is_send_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<super::CoreError>();
    }
}
