//! Literal lifting: the numbers a language model writes into a program become fitted parameters
//! started at the values it wrote (as LLM-SR and the genetic-programming tools fit every
//! constant), so `2.5 * exp(-0.7 * x)` is a candidate rather than a program "without parameters".
//! The program's text is rewritten in place, through its front end's lexemes: each lifted number
//! is replaced by one of the task's parameters the program does not use yet.

use std::collections::BTreeMap;

use ndvm_frontends::{Frontend, Lexeme};

/// A program whose literals became parameters, and the values they start from.
#[derive(Clone, Debug, PartialEq)]
pub struct Lifted {
    /// The rewritten program.
    pub src: String,
    /// Each lifted parameter's starting value (the number it replaced).
    pub init: BTreeMap<String, f64>,
}

/// Whether a literal is kept as written: small whole numbers are structure (`x^2`, `1 + x`,
/// `(- 1 u)`), not constants to fit.
fn kept(value: f64) -> bool {
    value.fract() == 0.0 && value.abs() <= 3.0
}

/// Rewrites `src` with its literals (all but the small whole numbers, in order of appearance)
/// replaced by the parameters of `params` it does not name, as many as there are; `None` when
/// nothing is lifted (no such literal, no free parameter, or a text the front end cannot lex).
pub fn lift_literals(reader: &dyn Frontend, src: &str, params: &[String]) -> Option<Lifted> {
    let lexemes = reader.lexemes(src)?;
    let text = |start: u32, end: u32| src.get(start as usize..end as usize).unwrap_or("");
    let named: Vec<&str> = lexemes
        .iter()
        .filter_map(|l| match l {
            Lexeme::Name(s) => Some(text(s.start, s.end)),
            Lexeme::Number(..) => None,
        })
        .collect();
    let mut free = params.iter().filter(|p| !named.contains(&p.as_str()));
    let mut swaps = Vec::new();
    for l in &lexemes {
        if let Lexeme::Number(span, value) = *l
            && !kept(value)
            && value.is_finite()
        {
            let Some(name) = free.next() else { break };
            swaps.push((span, name, value));
        }
    }
    if swaps.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(src.len());
    let mut at = 0usize;
    let mut init = BTreeMap::new();
    for (span, name, value) in swaps {
        out.push_str(&src[at..span.start as usize]);
        out.push_str(name);
        at = span.end as usize;
        init.insert(name.clone(), value);
    }
    out.push_str(&src[at..]);
    Some(Lifted { src: out, init })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndvm_frontends::{infix::Infix, scheme::Scheme};

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn scheme_literals_become_unused_parameters() {
        let p = names(&["a", "b", "c", "d"]);
        let l = lift_literals(&Scheme, "(* a (exp (* -0.3 x)) (cos (* 2 x)))", &p).unwrap();
        assert_eq!(l.src, "(* a (exp (* b x)) (cos (* 2 x)))");
        assert_eq!(l.init, BTreeMap::from([("b".to_string(), -0.3)]));
        let l = lift_literals(&Scheme, "(* -1.3025 (+ 1 x) 68479)", &p).unwrap();
        assert_eq!(l.src, "(* a (+ 1 x) b)");
        assert_eq!(l.init["a"], -1.3025);
        assert_eq!(l.init["b"], 68479.0);
        // A number at the head of a list is no constant (infix read as Scheme): not lifted.
        assert_eq!(lift_literals(&Scheme, "(-0.3 * x)", &p), None);
        // Small whole numbers stay; nothing else to lift is no rewrite.
        assert_eq!(lift_literals(&Scheme, "(* a (expt x 2))", &p), None);
        // More literals than free parameters: the first ones are lifted.
        let two = names(&["a", "b"]);
        let l = lift_literals(&Scheme, "(+ 0.5 (* 1.5 x) 4.5)", &two).unwrap();
        assert_eq!(l.src, "(+ a (* b x) 4.5)");
        // A text that does not lex is left to the validator.
        assert_eq!(lift_literals(&Scheme, "(* 0.5 #<bad", &p), None);
    }

    #[test]
    fn infix_literals_become_unused_parameters() {
        let p = names(&["a", "b", "c"]);
        let l = lift_literals(&Infix, "2.5 * exp(-0.7 * x) + c * x^2", &p).unwrap();
        assert_eq!(l.src, "a * exp(-b * x) + c * x^2");
        assert_eq!(
            l.init,
            BTreeMap::from([("a".to_string(), 2.5), ("b".to_string(), 0.7)])
        );
        let l = lift_literals(&Infix, "y = 1e-3 * x", &p).unwrap();
        assert_eq!(l.src, "y = a * x");
        assert_eq!(l.init["a"], 1e-3);
    }
}
