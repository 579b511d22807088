//! `Grammar`: seeded random programs over the task's inputs, parameters and unary operators, so the
//! tool works with no network and no cache. A candidate is a sum of 1..=max_terms terms plus an
//! optional offset; a term is a parameter times one or two factors; a factor is an input, an
//! input squared, or a unary operator applied to `p·input` or `p·input + p`. Each parameter
//! occurrence takes the next unused parameter name (a literal 1 when the names run out). With
//! `max_depth`, programs come from the tree grammar (`sampler.rs`) instead.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use ndvm_core::{Heap, NodeId, Program};

use super::sampler::Sampler;
use super::{Candidate, Proposer, Vocabulary};
use crate::error::{Result, SearchError};

/// The grammar proposer.
#[derive(Debug)]
pub struct Grammar {
    rng: ChaCha8Rng,
    vocabulary: Vocabulary,
    operators: Vec<String>,
    max_terms: usize,
    /// The tree grammar, when the task gives `max_depth` (else the sum-of-terms grammar).
    tree: Option<Sampler>,
    next: u64,
}

impl Grammar {
    /// A generator seeded with `seed`.
    pub(crate) fn new(
        seed: u64,
        vocabulary: Vocabulary,
        operators: Vec<String>,
        max_terms: usize,
        tree: Option<Sampler>,
    ) -> Result<Grammar> {
        vocabulary.printer()?;
        Ok(Grammar {
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x6772_616d_6d61_7200),
            vocabulary,
            operators,
            max_terms: max_terms.max(1),
            tree,
            next: 0,
        })
    }

    fn param(&mut self, heap: &mut Heap, used: &mut usize) -> NodeId {
        let node = match self.vocabulary.params.get(*used) {
            Some(name) => heap.sym(name),
            None => heap.num(1.0),
        };
        *used += 1;
        node
    }

    fn input(&mut self, heap: &mut Heap) -> NodeId {
        let i = self.rng.random_range(0..self.vocabulary.inputs.len());
        heap.sym(&self.vocabulary.inputs[i])
    }

    /// `(op args…)` on `heap`.
    fn call(heap: &mut Heap, op: &str, args: &[NodeId]) -> NodeId {
        let mut items = vec![heap.sym(op)];
        items.extend_from_slice(args);
        heap.list(&items)
    }

    fn factor(&mut self, heap: &mut Heap, used: &mut usize) -> NodeId {
        let roll = self.rng.random_range(0..10);
        if roll < 2 || self.operators.is_empty() {
            return self.input(heap);
        }
        if roll < 3 {
            let a = self.input(heap);
            let b = self.input(heap);
            return Self::call(heap, "*", &[a, b]);
        }
        let op = self.operators[self.rng.random_range(0..self.operators.len())].clone();
        let x = self.input(heap);
        let p = self.param(heap, used);
        let px = Self::call(heap, "*", &[p, x]);
        let arg = if self.rng.random_bool(0.5) {
            px
        } else {
            let q = self.param(heap, used);
            Self::call(heap, "+", &[px, q])
        };
        Self::call(heap, &op, &[arg])
    }

    /// One random program, as data on `heap`.
    fn program(&mut self, heap: &mut Heap) -> NodeId {
        let mut used = 0;
        let n_terms = self.rng.random_range(1..=self.max_terms);
        let mut terms = Vec::new();
        for _ in 0..n_terms {
            let p = self.param(heap, &mut used);
            let f1 = self.factor(heap, &mut used);
            let term = if self.rng.random_bool(0.5) {
                let f2 = self.factor(heap, &mut used);
                Self::call(heap, "*", &[p, f1, f2])
            } else {
                Self::call(heap, "*", &[p, f1])
            };
            terms.push(term);
        }
        if self.rng.random_bool(0.3) {
            let c = self.param(heap, &mut used);
            terms.push(c);
        }
        match terms.as_slice() {
            [one] => *one,
            _ => Self::call(heap, "+", &terms),
        }
    }

    /// One random program, as text in the task's notation.
    fn source(&mut self) -> Result<String> {
        let mut heap = Heap::new();
        let root = match &self.tree {
            Some(sampler) => {
                let tree = sampler.program(&mut self.rng).simplify();
                tree.to_heap(&mut heap, &self.vocabulary.names())
                    .ok_or_else(|| SearchError::Proposer {
                        proposer: "grammar",
                        message: "a tree grammar program has more parameters than names".into(),
                    })?
            }
            None => self.program(&mut heap),
        };
        let program = Program::new(&heap, vec![root]);
        self.vocabulary
            .printer()?
            .print(&heap, &program)
            .map_err(|e| SearchError::Proposer {
                proposer: "grammar",
                message: format!(
                    "the {} front end cannot print a program: {e}",
                    self.vocabulary.frontend
                ),
            })
    }
}

impl Proposer for Grammar {
    fn propose(&mut self, n: usize) -> Result<Vec<Candidate>> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let src = self.source()?;
            out.push(Candidate::new(
                self.next,
                src,
                self.vocabulary.frontend.clone(),
            ));
            self.next += 1;
        }
        Ok(out)
    }

    fn name(&self) -> &'static str {
        "grammar"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndvm_frontends::Registry;
    use std::sync::Arc;

    fn vocabulary(inputs: Vec<String>, params: Vec<String>, frontend: &str) -> Vocabulary {
        Vocabulary {
            inputs,
            params,
            frontends: Arc::new(Registry::default()),
            frontend: frontend.into(),
        }
    }

    fn g(seed: u64) -> Grammar {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        Grammar::new(
            seed,
            vocabulary(s(&["x"]), s(&["a", "b", "c", "d", "e", "f"]), "scheme"),
            s(&["exp", "cos"]),
            2,
            None,
        )
        .unwrap()
    }

    #[test]
    fn programs_are_printed_by_the_task_front_end() {
        // The start of `tasks/symreg.yaml`'s stream, as the grammar wrote it when it built
        // Scheme text itself (before it built heap data for the task's front end to print).
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let mut symreg = Grammar::new(
            7,
            vocabulary(s(&["x"]), s(&["a", "b", "c", "d", "e", "f"]), "scheme"),
            s(&["exp", "sin", "cos", "log", "sqrt"]),
            2,
            None,
        )
        .unwrap();
        let srcs: Vec<String> = symreg
            .propose(3)
            .unwrap()
            .into_iter()
            .map(|c| c.src)
            .collect();
        assert_eq!(
            srcs,
            [
                "(+ (* a (sqrt (+ (* b x) c)) (sqrt (+ (* d x) e))) (* f x))",
                "(* a x (sin (+ (* b x) c)))",
                "(+ (* a (* x x) x) (* b (exp (* c x))) d)",
            ]
        );
        let e = Grammar::new(1, vocabulary(vec![], vec![], "cobol"), vec![], 1, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown front end `cobol`"), "{e}");
    }

    #[test]
    fn same_seed_same_stream() {
        let a = g(1).propose(20).unwrap();
        assert_eq!(a, g(1).propose(20).unwrap());
        assert_ne!(a, g(2).propose(20).unwrap());
        for c in &a {
            let (_, _, checked) = crate::validate::check_source(
                &ndvm_frontends::scheme::Scheme,
                &c.src,
                &["x".to_string()],
                &["a", "b", "c", "d", "e", "f"].map(String::from),
                &[],
            )
            .unwrap();
            assert!(!checked.params.is_empty());
        }
    }
}
