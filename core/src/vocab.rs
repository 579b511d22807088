//! The runtime's words, declared once: one row per primitive (in `prims.rs`, beside the opcodes)
//! and one row per special form, auxiliary keyword and known-unsupported form (here). The decoder,
//! the validator, the front ends, the grammar proposer and the LLM prompt read them through
//! [`vocabulary`] and [`word`]; adding a primitive or a form is one row.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::prims::{PRIMITIVES, Prim};
use crate::symbol::Interner;

/// What a word of the vocabulary is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WordKind {
    /// A procedure of the runtime (`+`, `exp`, `matmul`, …), a value that can be passed around.
    Primitive,
    /// A special form (`if`, `let`, `lambda`, `loop`, …): syntax, not a value.
    SpecialForm,
    /// An auxiliary keyword inside a special form (`else`, `=>`, `unquote`): not a form of its own.
    Keyword,
    /// A form NDVM knows of and refuses with a clear error (`call/cc`, `define-syntax`, …).
    Unsupported,
}

/// A word's family, for documentation, prompts and proposers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Group {
    /// `+ - * / min max pow …`: numbers (and tensors, elementwise) to numbers.
    Arithmetic,
    /// One-argument elementwise math (`exp`, `sin`, `sqrt`, …).
    Elementwise,
    /// Numeric comparisons (`<`, `=`, …).
    Comparison,
    /// Predicates and `not`.
    Predicate,
    /// Pairs and lists.
    List,
    /// Procedures applied to procedures (`map`, `apply`, `fold-left`, …).
    HigherOrder,
    /// Vectors and matrices.
    Tensor,
    /// Binding forms (`let`, `lambda`, `define`, `set!`, …).
    Binding,
    /// Control forms (`if`, `cond`, `loop`, `do`, …).
    Control,
    /// Quotation (`quote`, `quasiquote`) and `eval`.
    Quotation,
    /// Declarations (`params`).
    Declaration,
}

/// How many arguments a primitive takes, or how many parts follow a special form's head.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Arity {
    /// Fewest.
    pub min: u32,
    /// Most; `None` when variadic.
    pub max: Option<u32>,
}

impl Arity {
    /// Whether `n` arguments (or parts) are allowed.
    pub fn accepts(self, n: usize) -> bool {
        n >= self.min as usize && self.max.is_none_or(|m| n <= m as usize)
    }
}

/// One word of the runtime's vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Word {
    /// The name as written in a program.
    pub name: &'static str,
    /// Primitive, special form, keyword or unsupported.
    pub kind: WordKind,
    /// Its family.
    pub group: Group,
    /// Arguments of a primitive; parts after the head of a special form.
    pub arity: Arity,
    /// Whether gradients flow through it from its arguments to its value (a primitive whose
    /// derivative is zero everywhere, a comparison, a predicate: false; a special form: true, the
    /// values it passes on keep theirs; a keyword or a refused form: false).
    pub differentiable: bool,
}

/// The special forms and auxiliary keywords the decoder knows, one id each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Form {
    Quote,
    Quasiquote,
    Unquote,
    UnquoteSplicing,
    If,
    Define,
    Set,
    Lambda,
    CaseLambda,
    Let,
    LetStar,
    Letrec,
    LetrecStar,
    Begin,
    Cond,
    Case,
    Else,
    Arrow,
    When,
    Unless,
    And,
    Or,
    Do,
    Loop,
    Recur,
    Params,
    SoftChoice,
    /// A known form outside the language (refused with a clear error).
    Unsupported,
}

/// One special form, keyword or unsupported form.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FormRow {
    pub(crate) name: &'static str,
    pub(crate) form: Form,
    pub(crate) kind: WordKind,
    pub(crate) group: Group,
    pub(crate) min: u32,
    pub(crate) max: Option<u32>,
}

const fn f(name: &'static str, form: Form, group: Group, min: u32, max: Option<u32>) -> FormRow {
    FormRow {
        name,
        form,
        kind: WordKind::SpecialForm,
        group,
        min,
        max,
    }
}

const fn kw(name: &'static str, form: Form, group: Group) -> FormRow {
    FormRow {
        name,
        form,
        kind: WordKind::Keyword,
        group,
        min: 0,
        max: None,
    }
}

const fn no(name: &'static str, group: Group) -> FormRow {
    FormRow {
        name,
        form: Form::Unsupported,
        kind: WordKind::Unsupported,
        group,
        min: 0,
        max: None,
    }
}

use Group::{Binding, Control, Declaration, Quotation};

/// Every special form, keyword and refused form. The decoder matches on `Form` exhaustively, so a
/// new form does not compile until it is decoded.
pub(crate) const FORMS: &[FormRow] = &[
    f("quote", Form::Quote, Quotation, 1, Some(1)),
    f("quasiquote", Form::Quasiquote, Quotation, 1, Some(1)),
    kw("unquote", Form::Unquote, Quotation),
    kw("unquote-splicing", Form::UnquoteSplicing, Quotation),
    f("if", Form::If, Control, 2, Some(3)),
    f("define", Form::Define, Binding, 2, None),
    f("set!", Form::Set, Binding, 2, Some(2)),
    f("lambda", Form::Lambda, Binding, 2, None),
    f("case-lambda", Form::CaseLambda, Binding, 1, None),
    f("let", Form::Let, Binding, 2, None),
    f("let*", Form::LetStar, Binding, 2, None),
    f("letrec", Form::Letrec, Binding, 2, None),
    f("letrec*", Form::LetrecStar, Binding, 2, None),
    f("begin", Form::Begin, Control, 1, None),
    f("cond", Form::Cond, Control, 0, None),
    f("case", Form::Case, Control, 1, None),
    kw("else", Form::Else, Control),
    kw("=>", Form::Arrow, Control),
    f("when", Form::When, Control, 2, None),
    f("unless", Form::Unless, Control, 2, None),
    f("and", Form::And, Control, 0, None),
    f("or", Form::Or, Control, 0, None),
    f("do", Form::Do, Control, 2, None),
    f("loop", Form::Loop, Control, 2, None),
    f("recur", Form::Recur, Control, 0, None),
    f("params", Form::Params, Declaration, 0, None),
    f("soft-choice", Form::SoftChoice, Control, 2, Some(2)),
    no("call/cc", Control),
    no("call-with-current-continuation", Control),
    no("dynamic-wind", Control),
    no("values", Control),
    no("call-with-values", Control),
    no("let-values", Binding),
    no("let*-values", Binding),
    no("define-values", Binding),
    no("receive", Binding),
    no("define-syntax", Binding),
    no("let-syntax", Binding),
    no("letrec-syntax", Binding),
    no("syntax-rules", Binding),
    no("define-record-type", Binding),
    no("parameterize", Binding),
    no("fluid-let", Binding),
    no("delay", Control),
    no("delay-force", Control),
    no("force", Control),
    no("guard", Control),
    no("raise", Control),
    no("error", Control),
    no("set-car!", Binding),
    no("set-cdr!", Binding),
    no("vector-set!", Binding),
    no("string-append", Quotation),
    no("display", Quotation),
    no("newline", Quotation),
    no("import", Declaration),
    no("define-library", Declaration),
    no("include", Declaration),
];

/// Why a refused form is refused, for its error message.
pub(crate) fn unsupported_reason(name: &str) -> &'static str {
    match name {
        "call/cc" | "call-with-current-continuation" | "dynamic-wind" => {
            "first-class continuations are not part of the language"
        }
        "values" | "call-with-values" | "let-values" | "let*-values" | "define-values"
        | "receive" => "multiple values are not supported; return a list or a vector",
        "define-syntax" | "let-syntax" | "letrec-syntax" | "syntax-rules" => {
            "macros are not supported; write a procedure"
        }
        "set-car!" | "set-cdr!" | "vector-set!" => {
            "data is immutable; build a new list or vector (set! works on variables)"
        }
        "string-append" | "display" | "newline" => {
            "strings and output are not part of the language"
        }
        "delay" | "delay-force" | "force" => "promises are not supported",
        "guard" | "raise" | "error" => "exceptions are not supported",
        _ => "it is outside NDVM's language",
    }
}

/// Every word the runtime knows: primitives in the order of their rows, then special forms,
/// keywords and the forms it refuses with a clear error.
pub fn vocabulary() -> &'static [Word] {
    static WORDS: OnceLock<Vec<Word>> = OnceLock::new();
    WORDS.get_or_init(|| {
        let prims = PRIMITIVES.iter().map(|r| Word {
            name: r.name,
            kind: WordKind::Primitive,
            group: r.group,
            arity: Arity {
                min: r.arity.0,
                max: (r.arity.1 != u32::MAX).then_some(r.arity.1),
            },
            differentiable: r.differentiable,
        });
        let forms = FORMS.iter().map(|r| Word {
            name: r.name,
            kind: r.kind,
            group: r.group,
            arity: Arity {
                min: r.min,
                max: r.max,
            },
            differentiable: matches!(r.kind, WordKind::SpecialForm),
        });
        prims.chain(forms).collect()
    })
}

/// The word named `name`, if the runtime knows it.
pub fn word(name: &str) -> Option<&'static Word> {
    static INDEX: OnceLock<HashMap<&'static str, usize>> = OnceLock::new();
    let index = INDEX.get_or_init(|| {
        vocabulary()
            .iter()
            .enumerate()
            .map(|(i, w)| (w.name, i))
            .collect()
    });
    index.get(name).map(|&i| &vocabulary()[i])
}

/// Whether `name` is a special form of the language (`if`, `let`, `lambda`, `loop`, …); the
/// auxiliary keywords `else`, `=>` and `unquote` are not forms of their own.
pub fn is_special_form(name: &str) -> bool {
    word(name).is_some_and(|w| w.kind == WordKind::SpecialForm)
}

/// Whether `name` is a primitive of the runtime. Both dialects know the same names (they differ
/// only in what some of them compute), so no dialect is asked for.
pub fn is_primitive(name: &str) -> bool {
    word(name).is_some_and(|w| w.kind == WordKind::Primitive)
}

/// The one-argument elementwise primitives with a derivative (`exp`, `sin`, `sqrt`, …): the
/// operators a grammar or a prompt may offer.
pub fn unary_operators() -> impl Iterator<Item = &'static str> {
    vocabulary()
        .iter()
        .filter(|w| {
            w.kind == WordKind::Primitive
                && w.group == Group::Elementwise
                && w.differentiable
                && w.arity.accepts(1)
        })
        .map(|w| w.name)
}

/// The name of the decoder's temporaries (`case` keys, `cond` `=>` tests).
pub(crate) const HIDDEN: &str = " key";

/// What every heap starts from: an interner holding the names of [`FORMS`], then the hidden name,
/// then every primitive's name (so their ids are the same small numbers in every heap), with room
/// for a program's own; and, by symbol id, the primitive table row each of those names denotes.
pub(crate) struct Template {
    pub(crate) interner: Interner,
    pub(crate) prim_rows: Vec<Option<u16>>,
}

pub(crate) fn template() -> &'static Template {
    static TEMPLATE: OnceLock<Template> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let mut interner = Interner::default();
        for row in FORMS {
            interner.intern(row.name);
        }
        interner.intern(HIDDEN);
        let mut prim_rows = vec![None; interner.len()];
        for row in crate::prims::PRIMITIVES {
            let sym = interner.intern(row.name);
            prim_rows.resize(interner.len(), None);
            let slot = &mut prim_rows[sym.0 as usize];
            if slot.is_none() {
                *slot = Prim::lookup_row(row.name).and_then(|r| u16::try_from(r).ok());
            }
        }
        // At most a quarter full: a look-up of a program's own name (a miss here) ends after a probe
        // or two.
        interner.spread(4 * interner.len());
        Template {
            interner,
            prim_rows,
        }
    })
}

/// The interner every heap starts from (see [`Template`]).
pub(crate) fn forms_interner() -> &'static Interner {
    &template().interner
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_form_has_a_row() {
        let mut seen = std::collections::HashSet::new();
        for w in vocabulary() {
            assert!(seen.insert(w.name), "`{}` has two rows", w.name);
        }
        for form in [
            Form::Quote,
            Form::Set,
            Form::CaseLambda,
            Form::Do,
            Form::Arrow,
            Form::Params,
        ] {
            assert!(FORMS.iter().any(|r| r.form == form), "{form:?}");
        }
        assert!(is_special_form("do") && is_special_form("set!"));
        assert!(!is_special_form("else") && !is_special_form("call/cc"));
        assert!(is_primitive("expt") && !is_primitive("if"));
        assert_eq!(word("call/cc").map(|w| w.kind), Some(WordKind::Unsupported));
    }

    #[test]
    fn unary_operators_are_the_smooth_elementwise_functions() {
        let ops: Vec<&str> = unary_operators().collect();
        for op in ["exp", "sin", "cos", "log", "sqrt", "tanh", "abs", "sigmoid"] {
            assert!(ops.contains(&op), "{op} missing from {ops:?}");
        }
        for op in ["floor", "car", "-", "det", "not"] {
            assert!(!ops.contains(&op), "{op} in {ops:?}");
        }
    }
}
