//! `Evolve`: the evolutionary proposer. Islands of calibrated programs (as [`Tree`]s) breed
//! children by mutation (subtree replacement, operator swap, term insertion and removal,
//! parameter insertion, leaf change, simplification, factor insertion, replacement and removal,
//! operator insertion above a subtree and operand insertion beside one) and crossover, the move chosen by a
//! [`Bandit`] from how often each recently bred a child that beat its parent; parents are picked by
//! tournament on the validation score, or from the island's score/complexity Pareto front (the
//! complexity pressure). A child inherits its parents' fitted constants as its first start. The
//! best of each island migrates to the next; an island that stops improving restarts from random
//! programs around its best. Seeds (a replayed cache, an LLM) join the population as they are
//! calibrated. Everything flows from the task seed through ChaCha and from the engine's feedback,
//! which arrives in index order: the same task gives the same stream at any thread count.

use std::collections::{BTreeMap, HashSet};

use ndvm_core::{Heap, Program};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::bandit::Bandit;
use super::sampler::{self, Sampler};
use super::tree::{BinOp, Names, Node, Tree};
use super::{Candidate, Proposer, RequestStats, Vocabulary};
use crate::error::Result;
use crate::events::Event;

/// How evolution runs (from the task's `proposer:` keys).
#[derive(Clone, Debug, PartialEq)]
pub struct EvolveSettings {
    /// Individuals kept over all islands.
    pub population: usize,
    /// Islands (subpopulations that exchange their best).
    pub islands: usize,
    /// Most nodes of a child.
    pub max_size: usize,
    /// Candidates per `propose` call (the engine's round: feedback arrives between calls).
    pub chunk: usize,
}

/// One calibrated program of an island.
#[derive(Clone, Debug)]
struct Individual {
    tree: Tree,
    score: f64,
    complexity: usize,
}

/// A subpopulation.
#[derive(Clone, Debug, Default)]
struct Island {
    members: Vec<Individual>,
    best: f64,
    since_improved: usize,
}

/// A proposed candidate waiting for its calibration.
#[derive(Clone, Debug)]
struct Waiting {
    /// The tree it was printed from (`None` for a seed, read back from its source).
    tree: Option<Tree>,
    island: usize,
    /// Its id in the seed proposer's stream.
    inner_id: Option<u64>,
    /// How it was bred (`None`: a random program or a seed).
    origin: Option<Origin>,
}

/// How a child was bred: what its score is credited to.
#[derive(Clone, Copy, Debug)]
struct Origin {
    /// The move (a mutation's number or [`CROSSOVER`]).
    arm: usize,
    /// The parent's score, which the child must beat for its move to be credited a success.
    parent: f64,
    /// The factor-draw arms it used (bit `k`: arm `k` of [`Sampler::shape_chances`]).
    shapes: u32,
}

/// Feedbacks between migrations.
const MIGRATE_EVERY: u64 = 50;
/// Children an island makes without improving before it restarts.
const STAGNATION: usize = 200;
/// Most remembered sources (for avoiding repeats); past it new ones are not remembered.
const MAX_SEEN: usize = 1 << 20;
/// Tries at a new child before a random program is taken.
const TRIES: usize = 32;

/// The mutations of [`Evolve::mutate`], by their number there, then crossover: the moves the
/// population's [`Bandit`] chooses among.
const MUTATIONS: usize = 12;
/// The crossover move.
const CROSSOVER: usize = MUTATIONS;
/// The factor mutations (replacement, removal): only for tasks that draw shaped factors.
const FACTOR_MOVES: [usize; 2] = [8, 9];

/// The evolutionary proposer.
pub struct Evolve {
    rng: ChaCha8Rng,
    sampler: Sampler,
    settings: EvolveSettings,
    vocabulary: Vocabulary,
    /// Every unary operator of the runtime (a seed may use any).
    all_unary: Vec<&'static str>,
    islands: Vec<Island>,
    waiting: BTreeMap<u64, Waiting>,
    seen: HashSet<String>,
    next: u64,
    feedbacks: u64,
    seeds: Option<Box<dyn Proposer>>,
    /// The seed proposer's stream has ended.
    seeds_done: bool,
    /// Which move breeds the next child, by what has improved on its parent.
    moves: Bandit,
    /// Which named shape (or the input itself, or an operator of it) a factor draw takes, by
    /// the same measure (`None`: the task draws no named shapes).
    shapes: Option<Bandit>,
}

impl std::fmt::Debug for Evolve {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Evolve")
            .field("settings", &self.settings)
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

impl Evolve {
    /// An evolutionary proposer over `sampler`'s grammar, seeded with `seed`; `seeds` (a cache
    /// or an LLM) proposes first and its programs join the population.
    pub(crate) fn new(
        seed: u64,
        vocabulary: Vocabulary,
        sampler: Sampler,
        settings: EvolveSettings,
        seeds: Option<Box<dyn Proposer>>,
    ) -> Result<Evolve> {
        vocabulary.printer()?;
        let islands = settings.islands.max(1);
        let shapes = shape_bandit(sampler.factors.as_ref().map(Vec::len));
        Ok(Evolve {
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x6576_6f6c_7665_0000),
            sampler,
            settings,
            vocabulary,
            all_unary: ndvm_core::unary_operators().collect(),
            islands: vec![Island::default(); islands],
            waiting: BTreeMap::new(),
            seen: HashSet::new(),
            next: 0,
            feedbacks: 0,
            seeds,
            seeds_done: false,
            moves: Bandit::new(move_weights()),
            shapes,
        })
    }

    fn names(&self) -> Names<'_> {
        self.vocabulary.names()
    }

    fn capacity(&self) -> usize {
        (self.settings.population / self.islands.len()).max(4)
    }

    /// Members an island needs before it breeds (fewer: it gets random programs).
    fn min_members(&self) -> usize {
        (self.capacity() / 2).max(3)
    }

    /// The tree printed by the task's front end, or `None` when it cannot be.
    fn print(&self, tree: &Tree) -> Option<String> {
        let mut heap = Heap::new();
        let root = tree.to_heap(&mut heap, &self.names())?;
        let program = Program::new(&heap, vec![root]);
        let frontend = self.vocabulary.printer().ok()?;
        frontend.print(&heap, &program).ok()
    }

    /// The next child (or random program) for the island of the next id.
    fn child(&mut self) -> Candidate {
        let island = (self.next % self.islands.len() as u64) as usize;
        let mut last = None;
        for _ in 0..TRIES {
            let breed = self.islands[island].members.len() >= self.min_members()
                && self.rng.random_bool(0.95);
            let (tree, origin) = if breed {
                let (tree, origin) = self.breed(island);
                (tree, Some(origin))
            } else {
                (self.sampler.program(&mut self.rng).simplify(), None)
            };
            if tree.len() > self.settings.max_size || tree.n_params() > self.vocabulary.params.len()
            {
                continue;
            }
            let Some(src) = self.print(&tree) else {
                continue;
            };
            let novel = !self.seen.contains(&src);
            last = Some((tree, src, origin));
            if novel {
                break;
            }
        }
        let (tree, src, origin) = last.unwrap_or_else(|| {
            let tree = sampler::param();
            let src = self.print(&tree).unwrap_or_default();
            (tree, src, None)
        });
        if self.seen.len() < MAX_SEEN {
            self.seen.insert(src.clone());
        }
        let init = tree.inherited(&self.names()).into_iter().collect();
        let id = self.next;
        self.next += 1;
        self.waiting.insert(
            id,
            Waiting {
                tree: Some(tree),
                island,
                inner_id: None,
                origin,
            },
        );
        Candidate {
            id,
            src,
            frontend: self.vocabulary.frontend.clone(),
            init,
        }
    }

    /// A parent of `island` and its score: the tournament winner of three (ties to the
    /// simpler), or one of the island's Pareto front.
    fn select(&mut self, island: usize) -> (Tree, f64) {
        let members = &self.islands[island].members;
        if self.rng.random_bool(0.2) {
            let front = pareto_front(members);
            let pick = &members[front[self.rng.random_range(0..front.len())]];
            return (pick.tree.clone(), pick.score);
        }
        let mut best = self.rng.random_range(0..members.len());
        for _ in 0..2 {
            let other = self.rng.random_range(0..members.len());
            let (a, b) = (&members[other], &members[best]);
            if a.score > b.score || (a.score == b.score && a.complexity < b.complexity) {
                best = other;
            }
        }
        (members[best].tree.clone(), members[best].score)
    }

    /// A child of `island`, simplified, with its origin: the move the bandit chose (crossover
    /// or a mutation) and the parent's score, which the child's score is credited against.
    fn breed(&mut self, island: usize) -> (Tree, Origin) {
        if let Some(shapes) = &self.shapes {
            self.sampler.shape_chances = shapes.chances(|_| true);
        }
        self.sampler.drawn.set(0);
        let factored = self.sampler.factors.is_some();
        let arm = self
            .moves
            .pick(&mut self.rng, |k| factored || !FACTOR_MOVES.contains(&k))
            .unwrap_or(CROSSOVER);
        let (parent, score) = self.select(island);
        let child = if arm == CROSSOVER {
            let (other, _) = self.select(island);
            let i = self.rng.random_range(0..parent.len());
            let j = self.rng.random_range(0..other.len());
            parent.replace(i, &other.subtree(j))
        } else {
            self.mutate(&parent, arm)
        };
        let origin = Origin {
            arm,
            parent: score,
            shapes: self.sampler.drawn.get(),
        };
        (sampler::guard(&child.simplify()), origin)
    }

    /// Mutation number `kind` (below [`MUTATIONS`]) of `t`, at a random place.
    fn mutate(&mut self, t: &Tree, kind: usize) -> Tree {
        let rng = &mut self.rng;
        let i = rng.random_range(0..t.len());
        match kind {
            // Subtree replacement.
            0 => {
                let depth = rng.random_range(1..=self.sampler.max_depth.max(1));
                t.replace(i, &self.sampler.subtree(rng, depth))
            }
            // Operator swap (at the nearest operator from a random place).
            1 => match (i..t.len()).chain(0..i).find(|&k| t.nodes[k].is_operator()) {
                Some(k) => self.swap_operator(t, k),
                None => t.clone(),
            },
            // Term insertion.
            2 => Tree::binary(BinOp::Add, t, &self.sampler.term(rng)),
            // Term removal: a sum or difference keeps one side.
            3 => {
                let sums: Vec<usize> = (0..t.len())
                    .filter(|&k| matches!(t.nodes[k], Node::Binary(BinOp::Add | BinOp::Sub)))
                    .collect();
                if sums.is_empty() {
                    return t.clone();
                }
                let k = sums[rng.random_range(0..sums.len())];
                let first = k + 1;
                let second = t.end(first);
                let keep = if rng.random_bool(0.5) { first } else { second };
                t.replace(k, &t.subtree(keep))
            }
            // Parameter insertion: a subtree scaled or shifted by a new parameter.
            4 => {
                let s = t.subtree(i);
                let p = sampler::param();
                let with = if rng.random_bool(0.5) {
                    Tree::binary(BinOp::Mul, &p, &s)
                } else {
                    Tree::binary(BinOp::Add, &s, &p)
                };
                t.replace(i, &with)
            }
            // Leaf change: another input, a parameter or a literal.
            5 => match (i..t.len())
                .chain(0..i)
                .find(|&k| !t.nodes[k].is_operator())
            {
                Some(k) => t.replace(k, &self.sampler.leaf(rng)),
                None => t.clone(),
            },
            // Factor insertion: a subtree (or the whole program) multiplied by a new factor.
            6 => {
                let at = if rng.random_bool(0.5) { 0 } else { i };
                let with = Tree::binary(BinOp::Mul, &t.subtree(at), &self.sampler.factor(rng));
                t.replace(at, &with)
            }
            // Simplification (done after every mutation too): a no-op here is fine.
            7 => t.simplify(),
            // Factor replacement: a factor of a product by another shape of the same input.
            8 => replace_factor(&self.sampler, rng, t),
            // Factor removal: a product without one of its factors.
            9 => drop_factor(rng, t),
            // Operator insertion: a subtree `s` becomes `op(p·s)` or `op(p·s + q)`, so that
            // an operator can take a sum (`sqrt` of a sum of squares, `log(x² + 1)`).
            10 => match self.sampler.unary.len() {
                0 => t.clone(),
                n => {
                    let op = self.sampler.unary[rng.random_range(0..n)];
                    let scaled = Tree::binary(BinOp::Mul, &sampler::param(), &t.subtree(i));
                    let arg = match rng.random_bool(0.5) {
                        true => Tree::binary(BinOp::Add, &scaled, &sampler::param()),
                        false => scaled,
                    };
                    t.replace(i, &sampler::protect_unary(op, arg))
                }
            },
            // Operand insertion: a subtree `s` becomes `s ∘ e` for a two-argument operator and
            // a small random `e` (`x1` becomes `x1 - x2`).
            _ => match self.sampler.binary.len() {
                0 => t.clone(),
                n => {
                    let op = self.sampler.binary[rng.random_range(0..n)];
                    let depth = rng.random_range(1..=2);
                    let e = self.sampler.subtree(rng, depth);
                    t.replace(i, &sampler::protect_binary(op, t.subtree(i), e))
                }
            },
        }
    }

    /// `t` with the operator at `k` replaced by another of the same arity, domain-safe.
    fn swap_operator(&mut self, t: &Tree, k: usize) -> Tree {
        match t.nodes[k] {
            Node::Unary(_) if !self.sampler.unary.is_empty() => {
                let op = self.sampler.unary[self.rng.random_range(0..self.sampler.unary.len())];
                t.replace(k, &sampler::protect_unary(op, t.subtree(k + 1)))
            }
            Node::Binary(_) if !self.sampler.binary.is_empty() => {
                let op = self.sampler.binary[self.rng.random_range(0..self.sampler.binary.len())];
                let a = t.subtree(k + 1);
                let b = t.subtree(t.end(k + 1));
                t.replace(k, &sampler::protect_binary(op, a, b))
            }
            _ => t.clone(),
        }
    }

    /// A calibrated program joins `island` (if it is not there already); the worst member that
    /// is off the Pareto front leaves when the island is full.
    fn admit(&mut self, island: usize, ind: Individual) {
        let capacity = self.capacity();
        let isle = &mut self.islands[island];
        if isle.members.iter().any(|m| m.tree == ind.tree) {
            return;
        }
        if isle.members.is_empty() || ind.score > isle.best {
            isle.best = ind.score;
            isle.since_improved = 0;
        }
        isle.members.push(ind);
        if isle.members.len() > capacity {
            let front = pareto_front(&isle.members);
            let worst = (0..isle.members.len())
                .filter(|k| !front.contains(k))
                .min_by(|&a, &b| isle.members[a].score.total_cmp(&isle.members[b].score));
            let worst = worst.unwrap_or_else(|| {
                (0..isle.members.len())
                    .min_by(|&a, &b| isle.members[a].score.total_cmp(&isle.members[b].score))
                    .unwrap_or(0)
            });
            isle.members.remove(worst);
        }
    }

    /// Every [`MIGRATE_EVERY`] feedbacks, each island's best joins the next island; an island
    /// that has not improved for [`STAGNATION`] children keeps only its best (and so refills
    /// with random programs).
    fn tend(&mut self) {
        let n = self.islands.len();
        if self.feedbacks.is_multiple_of(MIGRATE_EVERY) && n > 1 {
            let bests: Vec<Option<Individual>> = self.islands.iter().map(best_of).collect();
            for (k, best) in bests.into_iter().enumerate() {
                if let Some(b) = best {
                    self.admit((k + 1) % n, b);
                }
            }
        }
        for isle in &mut self.islands {
            if isle.since_improved > STAGNATION {
                let best = best_of(isle);
                isle.members = best.into_iter().collect();
                isle.since_improved = 0;
            }
        }
    }

    /// Seeds from the seed proposer: all of a chunk while the population is empty, else half.
    fn take_seeds(
        &mut self,
        n: usize,
        report: &mut dyn FnMut(&RequestStats),
    ) -> Result<Vec<Candidate>> {
        let Some(seeds) = self.seeds.as_mut().filter(|_| !self.seeds_done) else {
            return Ok(Vec::new());
        };
        let empty = self.islands.iter().all(|i| i.members.is_empty());
        let want = if empty { n } else { n.div_ceil(2) };
        let got = seeds.propose_reporting(want, report)?;
        self.seeds_done = got.is_empty() && seeds.exhausted();
        let mut out = Vec::with_capacity(got.len());
        for c in got {
            let id = self.next;
            self.next += 1;
            if self.seen.len() < MAX_SEEN {
                self.seen.insert(c.src.clone());
            }
            self.waiting.insert(
                id,
                Waiting {
                    tree: None,
                    island: (id % self.islands.len() as u64) as usize,
                    inner_id: Some(c.id),
                    origin: None,
                },
            );
            out.push(Candidate { id, ..c });
        }
        Ok(out)
    }

    /// A seed's program read back as a tree, valued by its fit (`None` if it is not an
    /// expression a tree can hold).
    fn read_seed(&self, event: &Event) -> Option<Tree> {
        let frontend = self.vocabulary.frontends.by_name(&event.frontend)?;
        let mut heap = Heap::new();
        let program = frontend.parse(&mut heap, &event.src).ok()?;
        let [root] = program.forms() else {
            return None;
        };
        Tree::from_heap(
            &heap,
            *root,
            &self.names(),
            &self.all_unary,
            |name| event.params.get(name).copied(),
            4 * self.settings.max_size,
        )
    }
}

impl Node {
    fn is_operator(self) -> bool {
        matches!(self, Node::Unary(_) | Node::Binary(_))
    }
}

/// The factors of `t`'s products: operands of a `*` that read exactly one input and are not
/// themselves products, as (the product's position, the factor's, its input).
fn factors(t: &Tree) -> Vec<(usize, usize, u16)> {
    let mut spots = Vec::new();
    for k in 0..t.len() {
        if t.nodes[k] != Node::Binary(BinOp::Mul) {
            continue;
        }
        let first = k + 1;
        for at in [first, t.end(first)] {
            if t.nodes.get(at) == Some(&Node::Binary(BinOp::Mul)) {
                continue;
            }
            if let Some(input) = single_input(&t.nodes[at..t.end(at)]) {
                spots.push((k, at, input));
            }
        }
    }
    spots
}

/// `t` with one factor of a product (see [`factors`]) replaced by a new factor of the same
/// input; with none, `t` times a new factor.
fn replace_factor(sampler: &Sampler, rng: &mut ChaCha8Rng, t: &Tree) -> Tree {
    let spots = factors(t);
    if spots.is_empty() {
        return Tree::binary(BinOp::Mul, t, &sampler.factor(rng));
    }
    let (_, at, input) = spots[rng.random_range(0..spots.len())];
    t.replace(at, &sampler.factor_of(rng, input))
}

/// `t` with one factor of a product (see [`factors`]) dropped: the product becomes its other
/// operand (`t` itself when it has none).
fn drop_factor(rng: &mut ChaCha8Rng, t: &Tree) -> Tree {
    let spots = factors(t);
    if spots.is_empty() {
        return t.clone();
    }
    let (k, at, _) = spots[rng.random_range(0..spots.len())];
    let other = if at == k + 1 { t.end(k + 1) } else { k + 1 };
    t.replace(k, &t.subtree(other))
}

/// The one input `nodes` read, if they read exactly one (possibly several times).
fn single_input(nodes: &[Node]) -> Option<u16> {
    let mut inputs = nodes.iter().filter_map(|n| match n {
        Node::Input(j) => Some(*j),
        _ => None,
    });
    let first = inputs.next()?;
    inputs.all(|j| j == first).then_some(first)
}

/// The prior weights of the moves: crossover one time in five, the mutations evenly.
fn move_weights() -> Vec<f64> {
    let mut w = vec![0.8 / 8.0; MUTATIONS + 1];
    w[CROSSOVER] = 0.2;
    w
}

/// The factor-draw bandit of a task drawing `n` named shapes (see [`sampler::shape_prior`]).
fn shape_bandit(n: Option<usize>) -> Option<Bandit> {
    n.map(|n| Bandit::new((0..n + 2).map(|k| sampler::shape_prior(k, n)).collect()))
}

/// The member with the highest score.
fn best_of(isle: &Island) -> Option<Individual> {
    isle.members
        .iter()
        .max_by(|a, b| a.score.total_cmp(&b.score))
        .cloned()
}

/// Positions of the members no other member beats on both score and complexity.
fn pareto_front(members: &[Individual]) -> Vec<usize> {
    (0..members.len())
        .filter(|&i| {
            let a = &members[i];
            !members.iter().any(|b| {
                b.score >= a.score
                    && b.complexity <= a.complexity
                    && (b.score > a.score || b.complexity < a.complexity)
            })
        })
        .collect()
}

impl Proposer for Evolve {
    fn propose(&mut self, n: usize) -> Result<Vec<Candidate>> {
        self.propose_reporting(n, &mut |_| {})
    }

    fn propose_reporting(
        &mut self,
        n: usize,
        report: &mut dyn FnMut(&RequestStats),
    ) -> Result<Vec<Candidate>> {
        let n = n.min(self.settings.chunk).max(1);
        let mut out = self.take_seeds(n, report)?;
        while out.len() < n {
            out.push(self.child());
        }
        Ok(out)
    }

    fn warnings(&self) -> Vec<String> {
        self.seeds
            .as_ref()
            .map(|s| s.warnings())
            .unwrap_or_default()
    }

    fn name(&self) -> &'static str {
        "evolve"
    }

    fn llm_report(&self) -> Option<crate::events::LlmReport> {
        self.seeds.as_ref().and_then(|s| s.llm_report())
    }

    fn finish(&mut self, wait: bool) {
        if let Some(seeds) = self.seeds.as_mut() {
            seeds.finish(wait);
        }
    }

    /// One round: feedback arrives between asks.
    fn chunk(&self) -> usize {
        self.settings.chunk
    }

    fn feedback(&mut self, event: &Event, score: Option<f64>) {
        let Some(waiting) = self.waiting.remove(&event.id) else {
            return;
        };
        // Ids below this one got no feedback: rejected, duplicates or another shard's.
        self.waiting = self.waiting.split_off(&event.id);
        // The seed proposer hears of every calibration (an LLM shows the population's best as
        // examples), its own by its own ids.
        if let Some(seeds) = self.seeds.as_mut() {
            match waiting.inner_id {
                Some(inner) => {
                    let mut forwarded = event.clone();
                    forwarded.id = inner;
                    seeds.feedback(&forwarded, score);
                }
                None => seeds.feedback(event, score),
            }
        }
        self.feedbacks += 1;
        if let Some(origin) = waiting.origin {
            let won = score.is_some_and(|s| s.is_finite() && s > origin.parent);
            self.moves.credit(origin.arm, won);
            if let Some(shapes) = self.shapes.as_mut() {
                for arm in (0..shapes.len()).filter(|&k| origin.shapes & (1 << k) != 0) {
                    shapes.credit(arm, won);
                }
            }
        }
        let island = waiting.island;
        self.islands[island].since_improved += 1;
        if let Some(score) = score.filter(|s| s.is_finite()) {
            let tree = match waiting.tree {
                Some(mut tree) => {
                    let names = self.names();
                    tree.set_params(&names, |name| event.params.get(name).copied());
                    Some(tree)
                }
                None => self.read_seed(event),
            };
            if let Some(tree) = tree {
                let complexity = event.complexity;
                self.admit(
                    island,
                    Individual {
                        tree,
                        score,
                        complexity,
                    },
                );
            }
        }
        self.tend();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventStatus;
    use crate::propose::tree::BinOp;
    use ndvm_frontends::Registry;
    use std::sync::Arc;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn evolve(seed: u64, seeds: Option<Box<dyn Proposer>>) -> Evolve {
        let sampler = Sampler {
            n_inputs: 1,
            unary: vec!["exp", "sin", "log"],
            binary: BinOp::ALL.to_vec(),
            max_depth: 3,
            max_terms: 2,
            max_params: 4,
            factors: None,
            spreads: Vec::new(),
            shape_chances: Vec::new(),
            drawn: Default::default(),
        };
        let settings = EvolveSettings {
            population: 16,
            islands: 2,
            max_size: 30,
            chunk: 8,
        };
        let vocabulary = Vocabulary {
            inputs: strings(&["x"]),
            params: strings(&["a", "b", "c", "d"]),
            frontends: Arc::new(Registry::default()),
            frontend: "scheme".into(),
        };
        Evolve::new(seed, vocabulary, sampler, settings, seeds).unwrap()
    }

    /// The event of a calibrated candidate: every parameter fitted to `value`.
    fn event(c: &Candidate, value: f64) -> Event {
        Event {
            index: c.id,
            id: c.id,
            src: c.src.clone(),
            frontend: c.frontend.clone(),
            skeleton: c.src.clone(),
            complexity: c.src.len(),
            seed: 0,
            params: ["a", "b", "c", "d"]
                .iter()
                .map(|n| (n.to_string(), value))
                .collect(),
            choices: Vec::new(),
            train_loss: Some(1.0),
            validation_r2: Some(0.5),
            validation_nmse: Some(0.5),
            status: EventStatus::Ok,
            stop_reason: None,
            error: None,
            error_class: None,
            limit: None,
            n_evals: 1,
            wall_ms: 0.0,
            finished_s: None,
            screen_rows: None,
        }
    }

    /// Proposes `rounds` chunks, feeding each candidate back with its `score`.
    fn run(e: &mut Evolve, rounds: usize, score: fn(&Candidate) -> f64) -> Vec<Candidate> {
        let mut all = Vec::new();
        for _ in 0..rounds {
            let chunk = e.propose(64).unwrap();
            assert!(!chunk.is_empty() && chunk.len() <= 8);
            for c in &chunk {
                e.feedback(&event(c, 1.25), Some(score(c)));
            }
            all.extend(chunk);
        }
        all
    }

    #[test]
    fn same_seed_and_feedback_same_stream() {
        let score = |c: &Candidate| -(c.src.len() as f64);
        let a = run(&mut evolve(1, None), 20, score);
        assert_eq!(a, run(&mut evolve(1, None), 20, score));
        assert_ne!(a, run(&mut evolve(2, None), 20, score));
        // Ids number the stream; sources rarely repeat.
        assert!(a.iter().enumerate().all(|(i, c)| c.id == i as u64));
        let distinct: HashSet<&str> = a.iter().map(|c| c.src.as_str()).collect();
        assert!(distinct.len() > a.len() * 9 / 10, "{}", distinct.len());
    }

    #[test]
    fn children_inherit_fitted_constants_and_selection_prefers_the_better() {
        let mut e = evolve(3, None);
        // Scores favouring programs with parameters (at equal scores the simpler wins).
        let all = run(&mut e, 30, |c| {
            c.src.matches(['a', 'b', 'c', 'd']).count() as f64
        });
        // Members carry their fit.
        let names = e.names();
        for isle in &e.islands {
            assert!(isle.members.len() <= e.capacity());
            for m in &isle.members {
                assert!(m.tree.inherited(&names).iter().all(|(_, v)| *v == 1.25));
            }
        }
        // Children (after the random start) start from their parents' values.
        let later = &all[all.len() / 2..];
        let inheriting = later.iter().filter(|c| !c.init.is_empty()).count();
        assert!(
            inheriting > later.len() / 2,
            "{inheriting} of {}",
            later.len()
        );
        assert!(
            later
                .iter()
                .flat_map(|c| c.init.values())
                .any(|v| *v == 1.25)
        );
        // Scores favouring short programs: the population keeps the shortest.
        let mut e = evolve(3, None);
        let all = run(&mut e, 30, |c| -(c.src.len() as f64));
        let kept: Vec<usize> = e
            .islands
            .iter()
            .flat_map(|i| &i.members)
            .map(|m| e.print(&m.tree).unwrap().len())
            .collect();
        let mean_kept = kept.iter().sum::<usize>() as f64 / kept.len() as f64;
        let mean_all = all.iter().map(|c| c.src.len()).sum::<usize>() as f64 / all.len() as f64;
        assert!(mean_kept < mean_all / 2.0, "{mean_kept} {mean_all}");
    }

    #[test]
    fn factor_replacement_swaps_one_factor_for_a_shape_of_its_input() {
        let sampler = Sampler {
            n_inputs: 2,
            unary: vec!["exp", "sin"],
            binary: BinOp::ALL.to_vec(),
            max_depth: 3,
            max_terms: 3,
            max_params: 6,
            factors: Some(vec![crate::task::FactorShape::Cusp]),
            spreads: vec![(0.0, 1.0), (5.0, 2.0)],
            shape_chances: Vec::new(),
            drawn: Default::default(),
        };
        let x = |j| Tree::leaf(Node::Input(j));
        let sin0 = Tree::unary("sin", &x(0));
        let exp1 = Tree::unary("exp", &x(1));
        // (* (* p (sin x0)) (exp x1)): the factors are (sin x0) and (exp x1), not p.
        let t = Tree::binary(
            BinOp::Mul,
            &Tree::binary(BinOp::Mul, &Tree::leaf(Node::Param(1.5)), &sin0),
            &exp1,
        );
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut replaced = [0; 2];
        for _ in 0..200 {
            let c = replace_factor(&sampler, &mut rng, &t);
            let (head, new) = (c.subtree(1), c.subtree(c.end(1)));
            if head == t.subtree(1) && new != exp1 {
                assert_eq!(single_input(&new.nodes), Some(1), "{c:?}");
                replaced[1] += 1;
            } else {
                assert_eq!(new, exp1, "{c:?}");
                assert_eq!(head.subtree(1).nodes, [Node::Param(1.5)]);
                let f = head.subtree(head.end(1));
                assert_eq!(single_input(&f.nodes), Some(0), "{c:?}");
                replaced[0] += usize::from(f != sin0);
            }
        }
        assert!(replaced[0] > 50 && replaced[1] > 50, "{replaced:?}");
        // Without a product the program is multiplied by a new factor.
        let sum = Tree::binary(BinOp::Add, &x(0), &Tree::leaf(Node::Param(1.5)));
        let c = replace_factor(&sampler, &mut rng, &sum);
        assert_eq!(
            (c.nodes[0], c.subtree(1)),
            (Node::Binary(BinOp::Mul), sum.clone())
        );
        // Dropping a factor keeps the rest of the product.
        let p = Tree::leaf(Node::Param(1.5));
        let mut dropped = std::collections::BTreeSet::new();
        for _ in 0..50 {
            dropped.insert(format!("{:?}", drop_factor(&mut rng, &t).nodes));
        }
        let want = [
            format!("{:?}", Tree::binary(BinOp::Mul, &p, &sin0).nodes),
            format!("{:?}", Tree::binary(BinOp::Mul, &p, &exp1).nodes),
        ];
        assert_eq!(dropped, want.into());
        assert_eq!(drop_factor(&mut rng, &sum), sum);
        assert_eq!(single_input(&[Node::Input(0), Node::Input(1)]), None);
        assert_eq!(single_input(&[Node::Param(1.0)]), None);
    }

    #[test]
    fn operator_and_operand_insertion_put_a_subtree_under_a_new_node() {
        let mut e = evolve(5, None);
        let x = Tree::leaf(Node::Input(0));
        // (+ (* 2 x) 3): five places a subtree starts.
        let t = Tree::binary(
            BinOp::Add,
            &Tree::binary(BinOp::Mul, &Tree::leaf(Node::Param(2.0)), &x),
            &Tree::leaf(Node::Param(3.0)),
        );
        let text = |t: &Tree| format!("{:?}", t.nodes);
        // Operator insertion: `s` becomes `op(p·s)` or `op(p·s + q)`, `log` of `abs`.
        let mut wrapped = std::collections::BTreeSet::new();
        let mut want = std::collections::BTreeSet::new();
        for i in 0..t.len() {
            for op in ["exp", "sin", "log"] {
                let scaled = Tree::binary(BinOp::Mul, &sampler::param(), &t.subtree(i));
                let shifted = Tree::binary(BinOp::Add, &scaled, &sampler::param());
                for arg in [scaled, shifted] {
                    let r = t.replace(i, &sampler::protect_unary(op, arg));
                    want.insert(text(&r));
                }
            }
        }
        for _ in 0..600 {
            let r = e.mutate(&t, 10);
            assert!(
                want.contains(&text(&r)),
                "not an operator insertion of {t:?}: {r:?}"
            );
            assert!(matches!(r.n_params() - t.n_params(), 1 | 2), "{r:?}");
            wrapped.insert(text(&r));
        }
        assert_eq!(
            wrapped.len(),
            want.len(),
            "every place, operator and form is drawn"
        );
        // Operand insertion: `s` becomes `(∘ s e)`, the rest of the program unchanged.
        let mut places = std::collections::BTreeSet::new();
        for _ in 0..300 {
            let r = e.mutate(&t, 11);
            let i = (0..t.len())
                .find(|&i| {
                    let Node::Binary(op) = r.nodes[i] else {
                        return false;
                    };
                    let first = r.subtree(i + 1);
                    let inner = match (op, first.nodes[0]) {
                        (BinOp::Pow, Node::Unary("abs")) => first.subtree(1),
                        _ => first,
                    };
                    r.nodes[..i] == t.nodes[..i]
                        && text(&inner) == text(&t.subtree(i))
                        && text(&Tree {
                            nodes: r.nodes[r.end(i)..].to_vec(),
                        }) == text(&Tree {
                            nodes: t.nodes[t.end(i)..].to_vec(),
                        })
                })
                .unwrap_or_else(|| panic!("not an operand insertion of {t:?}: {r:?}"));
            places.insert(i);
        }
        assert_eq!(places.len(), t.len());
    }

    /// A seed proposer: two fixed programs, then nothing; records the feedback it gets.
    struct Fixed {
        next: usize,
        heard: std::rc::Rc<std::cell::RefCell<Vec<(u64, String)>>>,
    }

    impl Proposer for Fixed {
        fn propose(&mut self, n: usize) -> Result<Vec<Candidate>> {
            let srcs = ["(* a (exp (* b x)))", "(+ (* c (sin x)) d)"];
            let out: Vec<Candidate> = (self.next..srcs.len().min(self.next + n))
                .map(|i| Candidate::new(100 + i as u64, srcs[i].into(), "scheme".into()))
                .collect();
            self.next += out.len();
            Ok(out)
        }

        fn name(&self) -> &'static str {
            "fixed"
        }

        fn feedback(&mut self, event: &Event, _: Option<f64>) {
            self.heard.borrow_mut().push((event.id, event.src.clone()));
        }
    }

    #[test]
    fn seeds_come_first_and_join_the_population() {
        let heard = Default::default();
        let fixed = Fixed {
            next: 0,
            heard: std::rc::Rc::clone(&heard),
        };
        let mut e = evolve(5, Some(Box::new(fixed)));
        let first = e.propose(8).unwrap();
        assert_eq!(first[0].src, "(* a (exp (* b x)))");
        assert_eq!(first[1].src, "(+ (* c (sin x)) d)");
        assert_eq!((first[0].id, first[1].id, first[2].id), (0, 1, 2));
        for c in &first {
            e.feedback(&event(c, 0.75), Some(1.0));
        }
        // The seed proposer hears of every candidate, of its own by its own ids.
        let heard = heard.borrow();
        assert_eq!(heard.len(), first.len());
        assert_eq!(
            heard[..2],
            [
                (100, "(* a (exp (* b x)))".to_string()),
                (101, "(+ (* c (sin x)) d)".to_string())
            ]
        );
        assert_eq!(heard[2], (2, first[2].src.clone()));
        // Both seeds were read back as trees, with their fitted values (renamed in order).
        let names = e.names();
        let members: Vec<String> = e
            .islands
            .iter()
            .flat_map(|i| &i.members)
            .map(|m| e.print(&m.tree).unwrap())
            .collect();
        assert!(members.contains(&"(* a (exp (* b x)))".to_string()));
        assert!(
            members.contains(&"(+ (* a (sin x)) b)".to_string()),
            "{members:?}"
        );
        let seed = e.islands[1].members.iter().find(|m| m.tree.n_params() == 2);
        assert_eq!(
            seed.map(|m| m.tree.inherited(&names)),
            Some(vec![("a".into(), 0.75), ("b".into(), 0.75)])
        );
    }
}
