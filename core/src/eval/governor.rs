//! The resource governor of one run: work charged by elements touched, bytes held by the arenas
//! (checked before program-sized allocations and periodically), and the wall-clock deadline.
//!
//! The walk's hot path pays one compare per step: `steps > next_check`. `next_check` is the next
//! periodic look (every [`Evaluator::check_every`] work units) or the budget, whichever is first;
//! the cold `govern` then reports the budget, sums the arenas' bytes against `max_memory` and
//! reads the clock against the deadline.
//!
//! Every allocation is charged at least one work unit per element (per lane), so between two
//! looks the arenas grow by at most `check_every × (8·B + 64)` bytes; the interval shrinks with
//! the lane count B to keep that under [`CHECK_BYTES`]. Allocations of more than
//! [`RESERVE_ABOVE`] elements are also reserved before they are made, so no single one can jump
//! far past the limit.

use super::{Machine, Result, err};
use crate::error::ErrorKind;
use crate::heap::{Node, SrcSpan};
use crate::real::Real;

/// Most work units between two looks at memory and the clock.
pub(super) const CHECK_EVERY: u64 = 4096;

/// Fewest work units between two looks (at very many lanes).
const CHECK_MIN: u64 = 16;

/// Bytes the arenas may grow between two looks (the interval shrinks with the lane count).
pub(super) const CHECK_BYTES: u64 = 4 << 20;

/// Largest allocation (elements per lane) made without a reservation: the periodic look bounds
/// the small ones, which are most of a walk's allocations.
pub(super) const RESERVE_ABOVE: usize = 64;

/// Capacity (bytes) each arena may keep after a run that ended at a limit.
const KEEP_AFTER_LIMIT: usize = 16 << 20;

/// The most a forward-only run's optional recording may hold (also at most a quarter of
/// `max_memory`): past it the run stops recording and goes on as a plain walk.
pub(super) const FORWARD_RECORD_CAP: u64 = 64 << 20;

/// Bytes held by a run, by arena.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct MemUse {
    /// Payload floats and their metadata.
    pub(super) arena: u64,
    /// Tape nodes and their operand lists, the adjoint arena and the tensor ops' term lists.
    pub(super) tape: u64,
    /// Heap cells, runtime pairs, closures, frames, slots and globals.
    pub(super) heap: u64,
}

impl MemUse {
    fn total(self) -> u64 {
        self.arena + self.tape + self.heap
    }
}

fn mb(bytes: u64) -> String {
    if bytes >= 10 << 20 {
        format!("{} MB", bytes / 1_000_000)
    } else if bytes >= 10_000 {
        format!("{} kB", bytes / 1000)
    } else {
        format!("{bytes} B")
    }
}

impl<R: Real> Machine<R> {
    /// Sets the deadline of the next runs (a pooled evaluator is re-armed before each use).
    pub(crate) fn set_deadline(&mut self, deadline: Option<std::time::Instant>) {
        self.opts.deadline = deadline;
    }

    /// Sets the cancel flag of the next runs.
    pub(crate) fn set_cancel(&mut self, cancel: Option<crate::api::Cancel>) {
        self.opts.cancel = cancel;
    }

    /// Sets the work budget, depth limit and memory limit of the next runs.
    pub(crate) fn set_limits(&mut self, max_steps: u64, max_depth: u32, max_memory: u64) {
        if max_depth != self.opts.max_depth {
            // The decoded forms were checked against the old depth limit.
            self.cache = None;
            self.trace.invalidate();
        }
        self.opts.max_steps = max_steps;
        self.opts.max_depth = max_depth;
        self.opts.max_memory = max_memory;
    }

    /// Work units (steps weighted by elements touched) the last run took.
    pub(crate) fn last_work(&self) -> u64 {
        self.steps
    }

    /// Bytes the arenas hold now (payloads, tape, heap and runtime structure).
    pub(crate) fn memory_in_use(&self) -> u64 {
        self.mem_use().total()
    }

    pub(super) fn mem_use(&self) -> MemUse {
        use std::mem::size_of;
        let arena = (self.lanes.n_floats() * R::BYTES) as u64
            + self.lanes.len() as u64 * size_of::<crate::lanes::Meta>() as u64;
        let tape = self.tape.nodes.len() as u64 * size_of::<crate::tape::TapeNode>() as u64
            + self.tape.extra.len() as u64 * 4
            + self.tape.side_bytes()
            + self.term_cache.bytes()
            + self.trace.block_bytes();
        let heap = self.heap.len() as u64
            * (size_of::<Node>() + size_of::<Option<SrcSpan>>()) as u64
            + self.pairs.len() as u64
                * size_of::<(crate::value::Value, crate::value::Value)>() as u64
            + self.closures.len() as u64 * 8
            + self.frames.len() as u64 * 8
            + (self.slots.len() + self.globals.len() + self.argstack.len()) as u64
                * size_of::<crate::value::Value>() as u64
            + self.codes.bytes()
            // Interned names (with their table entries), about 64 bytes each; the names every
            // heap starts with (forms and primitives) are not the program's.
            + (self.heap.symbols().len())
                .saturating_sub(crate::vocab::forms_interner().len()) as u64
                * 64;
        MemUse { arena, tape, heap }
    }

    #[cold]
    #[inline(never)]
    fn memory_error(&self, used: MemUse, requested: u64) -> Box<crate::error::CoreError> {
        let what = if requested > 0 {
            format!("; an allocation of {} was refused", mb(requested))
        } else {
            String::new()
        };
        err(
            ErrorKind::MemoryLimit,
            format!(
                "more than {} bytes (payload arena {}, tape {}, heap {}{what})",
                self.opts.max_memory,
                mb(used.arena),
                mb(used.tape),
                mb(used.heap)
            ),
        )
    }

    #[cold]
    #[inline(never)]
    fn work_error(&self) -> Box<crate::error::CoreError> {
        err(
            ErrorKind::StepBudget,
            format!(
                "more than {} work units (steps weighted by elements touched)",
                self.opts.max_steps
            ),
        )
    }

    /// The periodic look: the work budget, then memory, then the clock.
    #[cold]
    #[inline(never)]
    pub(super) fn govern(&mut self) -> Result<()> {
        if self.steps > self.opts.max_steps {
            return Err(self.work_error());
        }
        let used = self.mem_use();
        if used.total() > self.opts.max_memory {
            return Err(self.memory_error(used, 0));
        }
        if self.forward_recording && used.total() > FORWARD_RECORD_CAP.min(self.opts.max_memory / 4)
        {
            // Not worth the memory: the walk goes on without a tape (and is not replayable).
            self.recording = false;
            self.forward_recording = false;
            self.trace.invalidate();
        }
        self.mem_seen.set(used.total());
        if self.opts.halted() {
            return Err(self.deadline_error());
        }
        self.next_check = self
            .steps
            .saturating_add(self.check_every())
            .min(self.opts.max_steps);
        Ok(())
    }

    /// Work units between two periodic looks: [`CHECK_EVERY`], fewer at many lanes so the
    /// arenas grow by at most about [`CHECK_BYTES`] between looks.
    pub(super) fn check_every(&self) -> u64 {
        let per_unit = 8 * self.lanes.n_lanes() as u64 + 64;
        (CHECK_BYTES / per_unit).clamp(CHECK_MIN, CHECK_EVERY)
    }

    #[cold]
    #[inline(never)]
    pub(super) fn deadline_error(&self) -> Box<crate::error::CoreError> {
        let why = if self.opts.cancel.as_ref().is_some_and(|c| c.is_raised()) {
            "the evaluation was cancelled"
        } else {
            "the evaluation passed its deadline"
        };
        err(ErrorKind::Deadline, why.to_string())
    }

    /// Charges `units` of work before doing it; past the budget (or at a periodic look) this
    /// is where the run stops.
    #[inline]
    pub(super) fn charge(&mut self, units: u64) -> Result<()> {
        self.steps = self.steps.saturating_add(units);
        if self.steps > self.next_check {
            self.govern()?;
        }
        Ok(())
    }

    /// Charges a small op (at most [`RESERVE_ABOVE`] elements, a few hundred units): counted
    /// now and looked at by the next step of the walk, which every primitive call is.
    #[inline(always)]
    pub(super) fn charge_small(&mut self, units: u64) {
        self.steps += units;
    }

    /// Refuses an allocation of `bytes` that would take the run past `max_memory`.
    #[inline]
    pub(super) fn reserve(&self, bytes: u64) -> Result<()> {
        let projected = self.mem_seen.get().saturating_add(bytes);
        if projected <= self.opts.max_memory {
            self.mem_seen.set(projected);
            return Ok(());
        }
        self.reserve_measured(bytes)
    }

    /// [`Self::reserve`] when the running bound is too coarse: measures what is in use.
    #[cold]
    #[inline(never)]
    fn reserve_measured(&self, bytes: u64) -> Result<()> {
        let used = self.mem_use();
        let total = used.total().saturating_add(bytes);
        if total > self.opts.max_memory {
            return Err(self.memory_error(used, bytes));
        }
        self.mem_seen.set(total);
        Ok(())
    }

    /// Bytes of a payload of `n` elements, B lanes wide when `varying`.
    #[inline]
    pub(super) fn payload_bytes(&self, n: usize, varying: bool) -> u64 {
        let w = if varying { self.lanes.n_lanes() } else { 1 };
        (n as u64)
            .saturating_mul(w as u64)
            .saturating_mul(R::BYTES as u64)
    }

    /// After a run that ended at a limit: forgets its arenas and gives back capacity above a
    /// modest bound, so a pooled evaluator does not keep a hostile run's gigabyte reserved.
    pub(super) fn release_after_limit(&mut self) {
        self.trace.invalidate();
        self.lanes.clear();
        self.tape.clear();
        self.frames.clear();
        self.slots.clear();
        self.pairs.clear();
        self.closures.clear();
        self.argstack.clear();
        self.recur_args.clear();
        fn trim<T>(v: &mut Vec<T>) {
            let keep = KEEP_AFTER_LIMIT / std::mem::size_of::<T>().max(1);
            if v.capacity() > keep {
                v.truncate(keep);
                v.shrink_to(keep);
            }
        }
        let keep = KEEP_AFTER_LIMIT / R::BYTES;
        if self.lanes.data.capacity() > keep {
            self.lanes.data.shrink_to(keep);
        }
        trim(&mut self.lanes.meta);
        trim(&mut self.tape.nodes);
        trim(&mut self.tape.extra);
        trim(&mut self.frames);
        trim(&mut self.slots);
        trim(&mut self.pairs);
        trim(&mut self.closures);
        trim(&mut self.argstack);
        trim(&mut self.recur_args);
        self.tape.shrink_adjoints(KEEP_AFTER_LIMIT);
    }
}
