//! The caller-facing types of an evaluation: options, input bindings, and the per-lane result.

/// Which numeric and naming conventions the evaluator follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Dialect {
    /// R7RS naming and truthiness (only `#f` is false); unclamped `sqrt`/`log`; `logdet` = log det.
    #[default]
    Default,
    /// The seed system's conventions: `sqrt`/`log` clamp their argument to at least 1e-8, `logdet` is
    /// log|det|, `modulo` truncates and `remainder` floors, and the number 0 counts as false.
    Reference,
}

/// The element type of the lanes: payloads, tape and kernels compute in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub enum Precision {
    /// IEEE double precision (the default; the oracle's conventions).
    #[default]
    F64,
    /// IEEE single precision: every operation rounds to `f32` (relative error of one op ≤ 2⁻²⁴
    /// ≈ 6e-8; `libm`'s `f32` functions within a few ulp), half the memory traffic per lane.
    /// Inputs are rounded to `f32` once; results and gradients are widened exactly. The sums of
    /// reductions (`sum`, `dot`, `norm`, `matmul`, …, each term list) accumulate in `f32` too, so
    /// their error grows with the term count n as n·2⁻²⁴·Σ|terms| at worst.
    F32,
}

impl Precision {
    /// `"f64"` or `"f32"`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F64 => "f64",
            Precision::F32 => "f32",
        }
    }

    /// The precision named `"f64"` or `"f32"`.
    pub fn from_name(name: &str) -> Option<Precision> {
        match name {
            "f64" => Some(Precision::F64),
            "f32" => Some(Precision::F32),
            _ => None,
        }
    }
}

/// Knobs of one evaluator.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalOptions {
    /// Number of lanes B evaluated in one walk.
    pub n_lanes: usize,
    /// Numeric conventions.
    pub dialect: Dialect,
    /// Work units allowed per run before `ErrorKind::StepBudget`: each form visit counts one, and
    /// primitives that touch many elements count them (list cells walked, characters printed,
    /// vector elements written, multiply-adds of a tensor op), charged before the work when its
    /// size is known. Units do not scale with the lane count.
    pub max_steps: u64,
    /// Nesting depth of non-tail evaluation allowed before `ErrorKind::DepthLimit`.
    pub max_depth: u32,
    /// Bytes a run may hold (payload arena, tape, heap cells, runtime pairs, closures and frames)
    /// before `ErrorKind::MemoryLimit`. An allocation whose size the program chooses is checked
    /// before it is made; gradual growth is checked every few thousand work units.
    pub max_memory: u64,
    /// The instant after which a run stops with `ErrorKind::Deadline` (checked every few thousand
    /// work units in the walk and every few thousand tape nodes in a replay); `None`: no deadline.
    pub deadline: Option<std::time::Instant>,
    /// A flag another thread may raise to stop the runs early: a raised one stops a run where a
    /// passed deadline would (with `ErrorKind::Deadline`); `None`: nothing can cancel.
    pub cancel: Option<Cancel>,
    /// Replay the last recorded trace instead of walking again when only the differentiated
    /// inputs changed and every guard holds (bit-identical to a walk; on by default). Gradient
    /// runs record; a forward-only run records when it repeats the program of the run before it,
    /// and replays forward only.
    pub replay: bool,
    /// How `(soft-choice (e1 e2 …) logits)` blends its options: mode, temperature, Gumbel noise.
    pub soft_choice: SoftChoice,
    /// How a replay splits the lanes into blocks, each replayed forward and swept backward
    /// before the next, so that one block's share of the recorded arena stays in the caches.
    /// The results are bit-identical whatever the blocks (each lane's arithmetic is the same).
    pub lane_block: LaneBlock,
    /// The lanes' element type (`f64` by default).
    pub precision: Precision,
}

/// A cancel flag shared between threads: the work that holds a clone stops at its next look once
/// any clone is raised (it stays raised). Clones compare equal; separate flags do not.
#[derive(Clone, Debug, Default)]
pub struct Cancel(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Cancel {
    /// A flag not raised yet.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Raises the flag for every clone.
    pub fn raise(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether some clone raised it.
    pub fn is_raised(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl PartialEq for Cancel {
    fn eq(&self, other: &Cancel) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Whether work under `deadline` and `cancel` must stop now.
pub(crate) fn halted(deadline: Option<std::time::Instant>, cancel: Option<&Cancel>) -> bool {
    cancel.is_some_and(Cancel::is_raised)
        || deadline.is_some_and(|d| std::time::Instant::now() >= d)
}

/// How a trace replay groups lanes (see [`EvalOptions::lane_block`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneBlock {
    /// Equal blocks of about as many lanes as fit their share of the recorded payload arena into
    /// `bytes`, counting 8 bytes a float (a multiple of 8 lanes; the fit taken as at least
    /// [`LaneBlock::MIN_AUTO_LANES`]; an `f32` arena's blocks are as wide, half the bytes);
    /// one block when B is less than one and a half fits.
    Cache {
        /// The working-set budget of one block, in bytes.
        bytes: u64,
    },
    /// Blocks of exactly this many lanes (the last one shorter); 0 means one block.
    Lanes(usize),
}

impl LaneBlock {
    /// Default budget of [`LaneBlock::Cache`]: 8 MiB of recorded floats per block (Kalman at
    /// B = 1024: four blocks of 256 lanes; blocks of 128 or 64 measured slower on a 2-core VM
    /// with 1 MiB L2 and a shared 32 MiB L3, the per-node cost of a pass outweighing the gain).
    pub const DEFAULT_BYTES: u64 = 8 << 20;
    /// Smallest automatic block: below it the per-node cost of a pass outweighs the cache gain.
    pub const MIN_AUTO_LANES: usize = 128;

    /// The block width for `n_lanes` lanes whose recorded arena holds `floats` floats (of either
    /// width, so `f32` blocks have as many lanes as `f64` ones): `n_lanes` when the replay is not
    /// split.
    pub fn width(self, n_lanes: usize, floats: usize) -> usize {
        let n = n_lanes.max(1);
        match self {
            LaneBlock::Lanes(0) => n,
            LaneBlock::Lanes(w) => w.min(n),
            // A block is never narrower than `MIN_AUTO_LANES` (and the divisions cost a B = 1
            // replay a few percent).
            LaneBlock::Cache { .. } if n <= Self::MIN_AUTO_LANES => n,
            LaneBlock::Cache { bytes } => {
                let per_lane = (floats as u64 * 8).div_ceil(n as u64).max(1);
                let fit = ((bytes / per_lane) as usize).max(Self::MIN_AUTO_LANES);
                // Equal blocks, as many as the budget asks for to the nearest whole number, each
                // a multiple of 8 lanes.
                let blocks = ((n + fit / 2) / fit).max(1);
                n.div_ceil(blocks).next_multiple_of(8).min(n)
            }
        }
    }
}

impl Default for LaneBlock {
    fn default() -> Self {
        LaneBlock::Cache {
            bytes: Self::DEFAULT_BYTES,
        }
    }
}

/// How a `soft-choice` turns its logits into a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ChoiceMode {
    /// Σ wᵢ·eᵢ with w = softmax(z), z = (logits + noise) / temperature; every option is
    /// evaluated and gets the gradient wᵢ, the logits get the softmax's.
    #[default]
    Soft,
    /// Straight-through: the value is the option of the largest z (exactly its value), its
    /// gradient goes to that option alone, and the logits get the soft blend's gradient. A
    /// gradient run evaluates every option (the logits' gradient needs their values); a run
    /// without gradients evaluates, on each lane, only the option it picks.
    StraightThrough,
    /// The option of the largest z, evaluated on its lanes only; no gradient reaches the logits
    /// (the read-out and the fit of a fixed structure).
    Hard,
}

/// The `soft-choice` settings of a run (part of [`EvalOptions`]; no process-global state).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SoftChoice {
    /// Soft, straight-through or hard.
    pub mode: ChoiceMode,
    /// The softmax temperature τ (> 0): z = (logits + noise) / τ.
    pub temperature: f64,
    /// Gumbel noise: `Some(seed)` adds −ln(−ln U) to every logit, U drawn from a ChaCha8 stream
    /// seeded by `seed` and the site (the soft-choice's position in the program), the same on every
    /// lane, so a batch equals its lanes run alone. `None`: no noise.
    pub gumbel: Option<u64>,
}

impl Default for SoftChoice {
    fn default() -> Self {
        SoftChoice {
            mode: ChoiceMode::Soft,
            temperature: 1.0,
            gumbel: None,
        }
    }
}

impl EvalOptions {
    /// Default step budget: 200 million form visits.
    pub const DEFAULT_MAX_STEPS: u64 = 200_000_000;
    /// Default depth limit for non-tail recursion.
    pub const DEFAULT_MAX_DEPTH: u32 = 10_000;
    /// Default memory limit: 512 MiB. The arenas are vectors that grow by doubling, so a run that
    /// just stays under the limit may briefly hold up to twice its live bytes; 512 MiB keeps one
    /// calibration under about 1 GiB resident, and a machine running one calibration per core
    /// stays within ordinary RAM. Real model programs use a few MiB even at a thousand lanes.
    pub const DEFAULT_MAX_MEMORY: u64 = 536_870_912;

    /// Options for `n_lanes` lanes in the default dialect with the default budgets.
    pub fn new(n_lanes: usize) -> Self {
        EvalOptions {
            n_lanes,
            dialect: Dialect::Default,
            max_steps: Self::DEFAULT_MAX_STEPS,
            max_depth: Self::DEFAULT_MAX_DEPTH,
            max_memory: Self::DEFAULT_MAX_MEMORY,
            deadline: None,
            cancel: None,
            replay: true,
            soft_choice: SoftChoice::default(),
            lane_block: LaneBlock::default(),
            precision: Precision::F64,
        }
    }

    /// The same options in another precision.
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// The same options with another lane blocking of replays (see `lane_block`).
    pub fn with_lane_block(mut self, lane_block: LaneBlock) -> Self {
        self.lane_block = lane_block;
        self
    }

    /// The same options with other `soft-choice` settings.
    pub fn with_soft_choice(mut self, soft_choice: SoftChoice) -> Self {
        self.soft_choice = soft_choice;
        self
    }

    /// The same options with another work budget (see `max_steps`).
    pub fn with_max_steps(mut self, max_steps: u64) -> Self {
        self.max_steps = max_steps;
        self
    }

    /// The same options with another depth limit.
    pub fn with_max_depth(mut self, max_depth: u32) -> Self {
        self.max_depth = max_depth;
        self
    }

    /// The same options with another memory limit in bytes.
    pub fn with_max_memory(mut self, max_memory: u64) -> Self {
        self.max_memory = max_memory;
        self
    }

    /// The same options with a deadline (or none).
    pub fn with_deadline(mut self, deadline: Option<std::time::Instant>) -> Self {
        self.deadline = deadline;
        self
    }

    /// The same options with a cancel flag (or none; see `cancel`).
    pub fn with_cancel(mut self, cancel: Option<Cancel>) -> Self {
        self.cancel = cancel;
        self
    }

    /// Whether a run must stop now: the deadline has passed or the cancel flag is raised.
    pub(crate) fn halted(&self) -> bool {
        halted(self.deadline, self.cancel.as_ref())
    }

    /// The same options with trace replay on or off.
    pub fn with_replay(mut self, replay: bool) -> Self {
        self.replay = replay;
        self
    }

    /// The same options in another dialect.
    pub fn with_dialect(mut self, dialect: Dialect) -> Self {
        self.dialect = dialect;
        self
    }
}

/// The value bound to one input name.
#[derive(Clone, Debug, PartialEq)]
pub enum InputValue {
    /// One number shared by every lane (stored once).
    Uniform(f64),
    /// One number per lane; the length must equal the lane count.
    Lanes(Vec<f64>),
    /// One number per run of `group` consecutive lanes: lane `l` takes `values[l / group]`, and
    /// `values.len() * group` is the lane count. A calibrator's parameters (one value per start,
    /// held by each of its points' lanes) without the caller spelling out every lane.
    Grouped {
        /// One number per group.
        values: Vec<f64>,
        /// Lanes per group.
        group: usize,
    },
    /// The same numbers for every run of `values.len()` consecutive lanes: lane `l` takes
    /// `values[l % values.len()]`, the lane count a multiple of the length. A calibrator's data
    /// columns (its points, once per start): a replay compares `values.len()` numbers with the
    /// recorded ones rather than every lane.
    Cycled(Vec<f64>),
    /// One number per lane, lent by the caller rather than handed over (see [`ValueSource`]).
    Lent(Lent),
    /// A vector shared by every lane, lent.
    LentVector(Lent),
    /// A row-major matrix shared by every lane, lent.
    LentMatrix {
        /// Row count.
        rows: usize,
        /// Column count.
        cols: usize,
        /// `rows * cols` values, row-major.
        data: Lent,
    },
    /// A vector shared by every lane.
    Vector(Vec<f64>),
    /// A row-major matrix shared by every lane.
    Matrix {
        /// Row count.
        rows: usize,
        /// Column count.
        cols: usize,
        /// `rows * cols` values, row-major.
        data: Vec<f64>,
    },
}

/// Numbers stored elsewhere and lent for the length of a read: a run copies them into its arena
/// when it binds its inputs (the one copy made) and a replay compares them with what it recorded,
/// each through [`ValueSource::read`], so storage another runtime owns (a numpy array, read under
/// its interpreter's lock) is read in place. A lent input is otherwise what its owned counterpart
/// is: [`InputValue::Lent`] per lane, [`InputValue::LentVector`], [`InputValue::LentMatrix`].
pub trait ValueSource: Send + Sync {
    /// How many numbers it holds.
    fn count(&self) -> usize;
    /// Calls `f` once with the numbers (`count()` of them).
    fn read(&self, f: &mut dyn FnMut(&[f64]));
}

/// A shared [`ValueSource`]; two are equal when they are the same source.
#[derive(Clone)]
pub struct Lent(pub std::sync::Arc<dyn ValueSource>);

impl Lent {
    /// Lends `source`.
    pub fn new(source: impl ValueSource + 'static) -> Self {
        Lent(std::sync::Arc::new(source))
    }

    /// How many numbers it holds.
    pub fn count(&self) -> usize {
        self.0.count()
    }

    /// Calls `f` with the values when there are exactly `n` of them; false (and `f` not called)
    /// otherwise.
    pub(crate) fn read_exactly(&self, n: usize, f: &mut dyn FnMut(&[f64])) -> bool {
        let mut called = false;
        self.0.read(&mut |xs| {
            if xs.len() == n {
                f(xs);
                called = true;
            }
        });
        called
    }
}

impl PartialEq for Lent {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for Lent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lent({} numbers)", self.count())
    }
}

/// One named binding placed in the global scope before the program runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Input {
    /// The variable name the program refers to.
    pub name: String,
    /// Its value.
    pub value: InputValue,
    /// Whether gradients with respect to it are reported (scalars only).
    pub grad: bool,
}

/// The bindings of one run, in order (a later binding of the same name wins).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inputs {
    /// The bindings.
    pub entries: Vec<Input>,
}

impl Inputs {
    /// No bindings.
    pub fn new() -> Self {
        Inputs::default()
    }

    /// Adds a differentiable parameter with the same value on every lane.
    pub fn param(mut self, name: &str, value: f64) -> Self {
        self.push(name, InputValue::Uniform(value), true);
        self
    }

    /// Adds a differentiable parameter with one value per lane.
    pub fn param_lanes(mut self, name: &str, values: Vec<f64>) -> Self {
        self.push(name, InputValue::Lanes(values), true);
        self
    }

    /// Adds a non-differentiated input with the same value on every lane.
    pub fn input(mut self, name: &str, value: f64) -> Self {
        self.push(name, InputValue::Uniform(value), false);
        self
    }

    /// Adds a non-differentiated input with one value per lane.
    pub fn input_lanes(mut self, name: &str, values: Vec<f64>) -> Self {
        self.push(name, InputValue::Lanes(values), false);
        self
    }

    /// Adds a shared row-major matrix (not differentiated).
    pub fn matrix(mut self, name: &str, rows: usize, cols: usize, data: Vec<f64>) -> Self {
        self.push(name, InputValue::Matrix { rows, cols, data }, false);
        self
    }

    /// Adds a shared vector (not differentiated).
    pub fn vector(mut self, name: &str, data: Vec<f64>) -> Self {
        self.push(name, InputValue::Vector(data), false);
        self
    }

    /// Appends one binding.
    pub fn push(&mut self, name: &str, value: InputValue, grad: bool) {
        self.entries.push(Input {
            name: name.to_string(),
            value,
            grad,
        });
    }
}

/// The value of a program, per lane.
#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    /// A number per lane.
    Number(Vec<f64>),
    /// A boolean per lane.
    Bool(Vec<bool>),
    /// A vector per lane: `data[lane * len + i]`.
    Vector {
        /// Elements per lane.
        len: usize,
        /// Lane-major elements.
        data: Vec<f64>,
    },
    /// A matrix per lane: `data[lane * rows * cols + r * cols + c]`.
    Matrix {
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
        /// Lane-major, row-major elements.
        data: Vec<f64>,
    },
    /// Any other value (list, symbol, procedure, …), printed once for lane 0 (structure is shared).
    Other(String),
}

impl Output {
    /// The numeric value of `lane` for a scalar output.
    pub fn number(&self, lane: usize) -> Option<f64> {
        match self {
            Output::Number(v) => v.get(lane).copied(),
            _ => None,
        }
    }
}

/// Per-lane gradient of the output with respect to one differentiable input.
#[derive(Clone, Debug, PartialEq)]
pub struct Gradient {
    /// The input name.
    pub name: String,
    /// One derivative per lane. For a vector or matrix output it is the gradient of the sum of
    /// its elements.
    pub per_lane: Vec<f64>,
}

/// One `soft-choice` site a run reached: which option each lane took.
#[derive(Clone, Debug, PartialEq)]
pub struct ChoiceReadout {
    /// The site: the soft-choice's ordinal in the program (0 for the first one decoded).
    pub site: u32,
    /// The `(soft-choice …)` form's heap node.
    pub node: crate::heap::NodeId,
    /// Each option expression's heap node, in order.
    pub options: Vec<crate::heap::NodeId>,
    /// Per lane: the index of the option with the largest z = (logits + noise) / τ (the first on
    /// ties), or [`ChoiceReadout::NOT_REACHED`].
    pub picks: Vec<u32>,
    /// softmax(z) per lane, lane-major: `weights[lane * options.len() + i]` (NaN on a lane that
    /// never reached the site).
    pub weights: Vec<f64>,
}

impl ChoiceReadout {
    /// A lane that never reached the site, in `picks`.
    pub const NOT_REACHED: u32 = u32::MAX;

    /// The pick of `lane`, if it reached the site.
    pub fn pick(&self, lane: usize) -> Option<usize> {
        self.picks
            .get(lane)
            .filter(|&&p| p != Self::NOT_REACHED)
            .map(|&p| p as usize)
    }

    /// The weights softmax(z) of `lane`, if it reached the site.
    pub fn weights_of(&self, lane: usize) -> Option<&[f64]> {
        let k = self.options.len();
        self.pick(lane)?;
        self.weights.get(lane * k..(lane + 1) * k)
    }
}

/// What one run produced.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    /// The value.
    pub value: Output,
    /// Gradients for each `grad` input, in binding order (empty for forward-only runs).
    pub grads: Vec<Gradient>,
    /// `faults[lane]` is true when that lane's value or a gradient is not finite.
    pub faults: Vec<bool>,
}

impl Evaluation {
    /// An evaluation with no value yet, to be filled by `Evaluator::eval_into`.
    pub fn empty() -> Self {
        Evaluation {
            value: Output::Number(Vec::new()),
            grads: Vec::new(),
            faults: Vec::new(),
        }
    }

    /// The gradient with respect to `name`, if it was requested.
    pub fn grad(&self, name: &str) -> Option<&[f64]> {
        self.grads
            .iter()
            .find(|g| g.name == name)
            .map(|g| g.per_lane.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::{Cancel, EvalOptions};

    #[test]
    fn limits_have_defaults_and_builders() {
        let o = EvalOptions::new(4);
        assert_eq!(o.max_steps, 200_000_000);
        assert_eq!(o.max_depth, 10_000);
        assert_eq!(o.max_memory, 536_870_912);
        assert_eq!(o.deadline, None);
        let t = std::time::Instant::now();
        let o = o
            .with_max_steps(7)
            .with_max_depth(8)
            .with_max_memory(9)
            .with_deadline(Some(t));
        assert_eq!(
            (o.max_steps, o.max_depth, o.max_memory, o.deadline),
            (7, 8, 9, Some(t))
        );
    }

    #[test]
    fn cancel_is_shared_by_clones_and_halts_options() {
        let flag = Cancel::new();
        let o = EvalOptions::new(1).with_cancel(Some(flag.clone()));
        assert!(!o.halted());
        assert_eq!(o.cancel, Some(flag.clone()));
        assert_ne!(o.cancel, Some(Cancel::new()));
        flag.raise();
        assert!(o.cancel.as_ref().is_some_and(Cancel::is_raised));
        assert!(o.halted());
        let past = std::time::Instant::now();
        assert!(EvalOptions::new(1).with_deadline(Some(past)).halted());
        assert!(!EvalOptions::new(1).halted());
    }
}
