//! The streaming scheduler behind [`super::run`]: `threads` workers pull validated candidates from
//! a queue the engine thread fills, with no round barrier; the engine thread puts the results
//! back in index order, feeds them to the proposer with a fixed lag, and stops where a round
//! engine would have, so the outcome does not depend on the thread count.
//!
//! The contract with the proposer (only ever called from the engine thread):
//! - it is asked for candidates in chunks of [`Proposer::chunk`], only when the engine has used
//!   every candidate it gave before;
//! - when it is asked while `d` distinct valid candidates have been taken, it has received
//!   [`Proposer::feedback`] for exactly this shard's events with index `< d − batch`, in index
//!   order (the engine waits for those results, and holds later ones back until the next ask);
//! - when the run ends, the outcome's events not yet fed back are fed back in index order,
//!   before `on_finish`: over a whole run the proposer sees every event of the outcome once.
//!
//! Stopping, as the round engine did with rounds of `batch` distinct candidates: when index `s`
//! is the first success and the task stops on success, the outcome holds exactly the indices
//! below the end of `s`'s round, `min(⌈(s+1)/batch⌉·batch, budget.calibrations)`; candidates
//! past it that were already running are waited for and left out (their events reach the
//! observers, but not the outcome), those not started are not started. `budget.calibrations`
//! takes exactly that many distinct candidates. `budget.seconds` and an interrupt stop new
//! calibrations from starting; those running finish. Suspects (see
//! [`RunOptions::suspects`]) run alone: nothing else is in flight while one runs.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

use super::{Event, Outcome, Pending, RunClock, RunOptions, StopKind, StreamStats, latest_finish};
use crate::error::{Result, SearchError};
use crate::observe::Observer;
use crate::propose::{Candidate, Proposer};
use crate::task::Task;
use crate::validate;

/// One calibration as a worker runs it: `None` when it was not started (interrupt).
pub(crate) type Attempt<'a> = dyn Fn(&Pending, Option<Instant>) -> Option<Event> + Sync + 'a;

/// A worker's answer for one candidate index: its event, `None` when it did not start, or the
/// panic that ended it.
type Answer = (u64, std::thread::Result<Option<Event>>);

/// Runs the stream of `proposer` on `opts.threads` workers, each candidate calibrated by
/// `attempt`.
pub(crate) fn run(
    task: &Task,
    opts: &RunOptions,
    proposer: &mut dyn Proposer,
    observer: &mut dyn Observer,
    attempt: &Attempt,
) -> Result<Outcome> {
    let started = Instant::now();
    let deadline = task
        .budget_seconds
        .map(|s| started + Duration::from_secs_f64(s));
    // A resumed session's clock starts where the events on disk end.
    let offset = opts
        .known
        .values()
        .filter_map(|e| e.finished_s)
        .fold(0.0, f64::max);
    let clock = RunClock { started, offset };
    let threads = opts.threads.max(1);
    // Candidates at or past this index are not started (the end of the success round, or 0 to
    // abandon the run after an error).
    let shared = Shared {
        limit: AtomicU64::new(u64::MAX),
        busy_ns: AtomicU64::new(0),
        started: Instant::now(),
        threads,
    };
    observer.on_start(task, opts.known.len());
    let mut engine = Engine::new(task, opts, proposer, clock, deadline, &shared);
    let (job_tx, job_rx) = mpsc::channel::<Pending>();
    let job_rx = Mutex::new(job_rx);
    let ended = std::thread::scope(|scope| -> Result<()> {
        let (done_tx, done_rx) = mpsc::channel::<Answer>();
        let mut spawned = Ok(());
        for n in 0..threads {
            let (job_rx, done_tx, shared) = (&job_rx, done_tx.clone(), &shared);
            let worker = move || work(job_rx, &done_tx, shared, deadline, attempt);
            if let Err(e) = std::thread::Builder::new()
                .name(format!("calibrate-{n}"))
                .spawn_scoped(scope, worker)
            {
                spawned = Err(SearchError::BadArgument {
                    arg: format!("--threads {}", opts.threads),
                    message: e.to_string(),
                });
                break;
            }
        }
        drop(done_tx);
        let ended = spawned.and_then(|()| engine.drive(observer, &job_tx, &done_rx));
        // Workers finish what they run, skip what is queued, and leave when the queue closes.
        if ended.is_err() {
            shared.limit.store(0, Ordering::SeqCst);
        }
        drop(job_tx);
        ended
    });
    if let Some(panic) = engine.panic.take() {
        std::panic::resume_unwind(panic);
    }
    ended?;
    Ok(engine.finish(observer))
}

/// What the engine thread shares with the workers.
struct Shared {
    /// Candidates at or past this index are not started (the end of the success round, or 0 to
    /// abandon the run after an error).
    limit: AtomicU64,
    /// Nanoseconds the workers spent calibrating.
    busy_ns: AtomicU64,
    /// When the workers started.
    started: Instant,
    /// How many there are.
    threads: usize,
}

impl Shared {
    /// Seconds the workers spent without a calibration to run so far.
    fn idle_s(&self) -> f64 {
        let total = self.started.elapsed().as_secs_f64() * self.threads as f64;
        (total - self.busy_ns.load(Ordering::Relaxed) as f64 * 1e-9).max(0.0)
    }
}

/// A worker: takes the next queued candidate, calibrates it unless it lies past `limit` or the
/// run's deadline has passed, and sends the answer back; leaves when the queue closes.
fn work(
    jobs: &Mutex<Receiver<Pending>>,
    done: &Sender<Answer>,
    shared: &Shared,
    deadline: Option<Instant>,
    attempt: &Attempt,
) {
    let limit = &shared.limit;
    loop {
        // A poisoned lock only means another worker panicked while it waited; the queue is fine.
        let job = jobs.lock().unwrap_or_else(|p| p.into_inner()).recv();
        let Ok(p) = job else { return };
        let skip = p.index >= limit.load(Ordering::SeqCst)
            || deadline.is_some_and(|d| Instant::now() >= d);
        let answer = if skip {
            Ok(None)
        } else {
            let t = Instant::now();
            let a =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| attempt(&p, deadline)));
            let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
            shared.busy_ns.fetch_add(ns, Ordering::Relaxed);
            a
        };
        if done.send((p.index, answer)).is_err() {
            return;
        }
    }
}

/// Where a taken distinct candidate stands.
enum Slot {
    /// Another shard's.
    NotMine,
    /// Queued or running.
    Waiting,
    /// Its event: reused (`fresh` false) or calibrated by this run.
    Done { event: Box<Event>, fresh: bool },
    /// Not calibrated (interrupt, deadline, or past the end of the success round).
    Skipped,
}

/// The engine thread's state.
struct Engine<'a> {
    task: &'a Task,
    opts: &'a RunOptions,
    proposer: &'a mut dyn Proposer,
    clock: RunClock,
    deadline: Option<Instant>,
    input_names: Vec<String>,
    param_names: Vec<String>,
    buffer: VecDeque<Candidate>,
    exhausted: bool,
    seen: HashSet<String>,
    stream: StreamStats,
    /// The stream counts when `distinct` reached each round end not yet passed by `slots`.
    round_stats: VecDeque<(u64, StreamStats)>,
    /// Taken candidates not yet put in the outcome, from index `first` on, one per index.
    slots: VecDeque<Slot>,
    first: u64,
    /// Taken candidates of this shard waiting to be queued, in index order.
    ready: VecDeque<Pending>,
    /// Queued or running calibrations.
    outstanding: usize,
    /// A suspect is running (nothing else is queued meanwhile).
    suspect_running: bool,
    /// The cap on `ready` plus `outstanding`.
    cap: usize,
    /// The outcome's events so far, in index order; the first `fed` were fed back.
    events: Vec<Event>,
    fed: usize,
    first_success: Option<u64>,
    /// The end of the success round, when the task stops on success.
    cutoff: Option<u64>,
    /// Why no further candidate is taken, when an interrupt or the deadline says so.
    halted: Option<StopKind>,
    /// A slot of the outcome's range was not calibrated.
    incomplete: bool,
    /// Processed slots when `on_round` was last called.
    reported: u64,
    n_fresh: u64,
    /// Shared with the workers: the index limit, their busy time.
    shared: &'a Shared,
    /// A worker's panic, raised again once every worker has stopped.
    panic: Option<Box<dyn std::any::Any + Send>>,
}

impl<'a> Engine<'a> {
    fn new(
        task: &'a Task,
        opts: &'a RunOptions,
        proposer: &'a mut dyn Proposer,
        clock: RunClock,
        deadline: Option<Instant>,
        shared: &'a Shared,
    ) -> Self {
        let threads = shared.threads;
        Engine {
            task,
            opts,
            proposer,
            clock,
            deadline,
            input_names: task
                .inputs
                .iter()
                .cloned()
                .chain(task.shared.iter().map(|(n, _)| n.clone()))
                .collect(),
            param_names: task.params.iter().map(|p| p.name.clone()).collect(),
            buffer: VecDeque::new(),
            exhausted: false,
            seen: HashSet::new(),
            stream: StreamStats::default(),
            round_stats: VecDeque::new(),
            slots: VecDeque::new(),
            first: 0,
            ready: VecDeque::new(),
            outstanding: 0,
            suspect_running: false,
            cap: threads + task.batch,
            events: Vec::new(),
            fed: 0,
            first_success: None,
            cutoff: None,
            halted: None,
            incomplete: false,
            reported: 0,
            n_fresh: 0,
            shared,
            panic: None,
        }
    }

    fn interrupted(&self) -> bool {
        self.opts.interrupt.as_ref().is_some_and(|i| i.is_raised())
    }

    /// The lag of the proposer's feedback, in distinct candidates.
    fn lag(&self) -> u64 {
        self.task.batch as u64
    }

    /// The end of the round (of `batch` distinct candidates, the last one cut at the calibration
    /// budget) that holds `index`.
    fn round_end(&self, index: u64) -> u64 {
        let batch = self.task.batch as u64;
        let end = (index / batch + 1) * batch;
        self.task
            .budget_calibrations
            .map_or(end, |b| end.min(b as u64))
    }

    /// Whether another distinct candidate may be taken (noting an interrupt or the deadline).
    fn may_take(&mut self) -> bool {
        if self.halted.is_none() {
            if self.interrupted() {
                self.halted = Some(StopKind::Interrupted);
            } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
                self.halted = Some(StopKind::BudgetSeconds);
            }
        }
        let d = self.stream.distinct;
        self.halted.is_none()
            && !(self.exhausted && self.buffer.is_empty())
            && self.task.budget_calibrations.is_none_or(|b| d < b as u64)
            && self.cutoff.is_none_or(|c| d < c)
    }

    /// Takes candidates while the queue has room, asking the proposer when its last chunk is
    /// used up (after feeding back what the contract says it must have seen).
    fn take(&mut self, observer: &mut dyn Observer) -> Result<()> {
        while self.may_take() && self.ready.len() + self.outstanding < self.cap {
            if self.buffer.is_empty() {
                // What is ready goes to the workers before the proposer is asked: a proposer
                // may block (an LLM's requests), and the calibrators should not wait on it.
                if !self.ready.is_empty() {
                    return Ok(());
                }
                let seen_below = self.stream.distinct.saturating_sub(self.lag());
                if self.first < seen_below {
                    // The proposer must first see results still being calibrated.
                    return Ok(());
                }
                self.feed(seen_below);
                let (task, started) = (self.task, self.clock.started);
                let more = self
                    .proposer
                    .propose_reporting(self.proposer.chunk().max(1), &mut |r| {
                        observer.on_requests(task, r, started.elapsed().as_secs_f64())
                    })?;
                // An empty answer ends the stream unless the proposer says it goes on (an
                // LLM's wave that gave nothing: the deadline is checked before the next ask).
                self.exhausted = more.is_empty() && self.proposer.exhausted();
                self.buffer.extend(more);
                continue;
            }
            if let Some(cand) = self.buffer.pop_front() {
                self.admit(cand, observer)?;
            }
        }
        Ok(())
    }

    /// Validates one proposed candidate and, when it is new, gives it the next index and a slot.
    fn admit(&mut self, cand: Candidate, observer: &mut dyn Observer) -> Result<()> {
        let task = self.task;
        self.stream.proposed += 1;
        let checked = match validate::check_source(
            task.frontend_named(&cand.frontend)?,
            &cand.src,
            &self.input_names,
            &self.param_names,
            &task.forbidden_forms,
        ) {
            Err(r) => {
                *self.stream.rejected.entry(r.class.to_string()).or_insert(0) += 1;
                if self.stream.rejection_examples.len() < 10 {
                    self.stream
                        .rejection_examples
                        .push(format!("{}: {}: {}", cand.id, r.class, r.message));
                }
                return Ok(());
            }
            Ok((_, _, checked)) => checked,
        };
        if !self.seen.insert(checked.skeleton.clone()) {
            self.stream.duplicates += 1;
            return Ok(());
        }
        let index = self.stream.distinct;
        self.stream.distinct += 1;
        let slot = if !self.opts.shard.owns(index) {
            Slot::NotMine
        } else if let Some(e) = self.opts.known.get(&index) {
            Slot::Done {
                event: Box::new(e.clone()),
                fresh: false,
            }
        } else if !self.opts.calibrate_missing {
            return Err(SearchError::RunFolder {
                path: task.output.clone(),
                message: format!(
                    "no shard holds candidate index {index} (id {}): run every shard to the end before merging",
                    cand.id
                ),
            });
        } else {
            self.ready.push_back(Pending {
                index,
                cand,
                checked,
            });
            Slot::Waiting
        };
        self.slots.push_back(slot);
        if self.stream.distinct == self.round_end(index) {
            self.round_stats
                .push_back((self.stream.distinct, self.stream.clone()));
        }
        self.settle(observer);
        Ok(())
    }
}

impl Engine<'_> {
    /// Queues ready candidates in index order; a suspect waits until nothing is in flight, and
    /// nothing else is queued while it runs.
    fn submit(&mut self, jobs: &Sender<Pending>) {
        while !self.suspect_running {
            let Some(index) = self.ready.front().map(|p| p.index) else {
                break;
            };
            if self.opts.suspects.contains(&index) {
                if self.outstanding > 0 {
                    break;
                }
                self.suspect_running = true;
            }
            let Some(p) = self.ready.pop_front() else {
                break;
            };
            // The queue's receiver lives until the run ends, so this cannot fail; if it did,
            // the candidate would count as not calibrated.
            if jobs.send(p).is_ok() {
                self.outstanding += 1;
            } else {
                self.place(index, Slot::Skipped);
                self.suspect_running = false;
            }
        }
    }

    /// Puts a slot's state (`index` has not gone into the outcome yet).
    fn place(&mut self, index: u64, slot: Slot) {
        let at = index.checked_sub(self.first).map(|i| i as usize);
        if let Some(s) = at.and_then(|i| self.slots.get_mut(i)) {
            *s = slot;
        }
    }

    /// Moves the finished slots at the front into the outcome, in index order, and reports
    /// progress once per `batch` of them.
    fn settle(&mut self, observer: &mut dyn Observer) {
        while self
            .slots
            .front()
            .is_some_and(|s| !matches!(s, Slot::Waiting))
        {
            let index = self.first;
            let slot = self.slots.pop_front();
            self.first += 1;
            if self.cutoff.is_some_and(|c| index >= c) {
                continue;
            }
            match slot {
                Some(Slot::Done { event, fresh }) => self.accept(*event, fresh),
                Some(Slot::Skipped) => self.incomplete = true,
                _ => {}
            }
        }
        if self.cutoff.is_none() {
            // A later success round ends past `first`; older round counts are not needed.
            while self
                .round_stats
                .front()
                .is_some_and(|(d, _)| *d <= self.first)
            {
                self.round_stats.pop_front();
            }
        }
        if self.first >= self.reported + self.task.batch as u64 {
            self.reported = self.first;
            let elapsed = self.clock.started.elapsed().as_secs_f64();
            observer.on_round(self.task, &self.events, &self.stream, elapsed);
        }
    }

    /// One event of the outcome, in index order: the first success ends the run at the end of
    /// its round when the task stops on success.
    fn accept(&mut self, event: Event, fresh: bool) {
        let task = self.task;
        if self.first_success.is_none() && event.is_success(task.metric, task.threshold) {
            self.first_success = Some(event.index);
            if task.stop_on_success {
                let end = self.round_end(event.index);
                self.cutoff = Some(end);
                self.shared.limit.store(end, Ordering::SeqCst);
                let past: Vec<u64> = self
                    .ready
                    .iter()
                    .map(|p| p.index)
                    .filter(|&i| i >= end)
                    .collect();
                self.ready.retain(|p| p.index < end);
                for i in past {
                    self.place(i, Slot::Skipped);
                }
            }
        }
        self.n_fresh += u64::from(fresh);
        self.events.push(event);
    }

    /// Feeds the outcome's events with index below `below` back to the proposer (those not fed
    /// yet, in index order).
    fn feed(&mut self, below: u64) {
        while let Some(e) = self.events.get(self.fed) {
            if e.index >= below {
                break;
            }
            self.proposer.feedback(e, e.score(self.task.metric));
            self.fed += 1;
        }
    }

    /// The engine thread's loop: take and queue candidates, then wait for the next answer, until
    /// nothing is in flight and nothing more may be taken.
    fn drive(
        &mut self,
        observer: &mut dyn Observer,
        jobs: &Sender<Pending>,
        answers: &Receiver<Answer>,
    ) -> Result<()> {
        loop {
            self.take(observer)?;
            self.submit(jobs);
            if self.outstanding == 0 {
                return Ok(());
            }
            let Ok((index, answer)) = answers.recv() else {
                return Ok(());
            };
            self.outstanding -= 1;
            if self.outstanding == 0 {
                self.suspect_running = false;
            }
            let slot = match answer {
                Err(panic) => {
                    self.panic = Some(panic);
                    self.shared.limit.store(0, Ordering::SeqCst);
                    return Ok(());
                }
                Ok(None) => {
                    if self.cutoff.is_none_or(|c| index < c) && self.halted.is_none() {
                        self.halted = Some(if self.interrupted() {
                            StopKind::Interrupted
                        } else {
                            StopKind::BudgetSeconds
                        });
                    }
                    Slot::Skipped
                }
                Ok(Some(mut event)) => {
                    event.finished_s = Some(self.clock.now());
                    observer.on_event(&event)?;
                    Slot::Done {
                        event: Box::new(event),
                        fresh: true,
                    }
                }
            };
            self.place(index, slot);
            self.settle(observer);
        }
    }

    /// Why the run stopped (the round engine's order: an interrupt, then success, then the
    /// calibration budget, the deadline, and the end of the stream).
    fn stop_kind(&self) -> StopKind {
        let budget_used = self
            .task
            .budget_calibrations
            .is_some_and(|b| self.stream.distinct >= b as u64);
        if self.halted == Some(StopKind::Interrupted) || self.interrupted() {
            StopKind::Interrupted
        } else if self.incomplete {
            StopKind::BudgetSeconds
        } else if self.cutoff.is_some() {
            StopKind::Success
        } else if budget_used {
            StopKind::BudgetCalibrations
        } else if let Some(halted) = self.halted {
            halted
        } else {
            StopKind::Exhausted
        }
    }

    /// Feeds back the rest and builds the outcome. The stream counts are those when the last
    /// candidate of the outcome's range was taken.
    fn finish(mut self, observer: &mut dyn Observer) -> Outcome {
        self.feed(u64::MAX);
        let stop = self.stop_kind();
        let time_to_first_success = self.first_success.and_then(|s| {
            let end = self.round_end(s);
            latest_finish(&self.events[..self.events.partition_point(|e| e.index < end)])
        });
        let stream = match self.cutoff {
            Some(c) if self.stream.distinct > c => self
                .round_stats
                .iter()
                .find(|(d, _)| *d == c)
                .map(|(_, s)| s.clone())
                .unwrap_or(self.stream),
            _ => self.stream,
        };
        let run_s = self
            .events
            .iter()
            .filter_map(|e| e.finished_s)
            .fold(0.0, f64::max);
        // Measured before the proposer waits for answers still in flight.
        let idle_s = self.shared.idle_s();
        self.proposer.finish(stop != StopKind::Interrupted);
        let outcome = Outcome {
            events: self.events,
            stream,
            stop,
            first_success: self.first_success,
            time_to_first_success,
            elapsed: self.clock.started.elapsed().as_secs_f64(),
            run_s,
            n_fresh: self.n_fresh,
            warnings: self.proposer.warnings(),
            proposer: self.proposer.name(),
            idle_s,
            llm: self.proposer.llm_report(),
        };
        observer.on_finish(self.task, &outcome);
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{EventStatus, Shard};
    use std::collections::HashMap;
    use std::sync::atomic::AtomicUsize;

    /// A task with batch `batch` that stops on success (validation R² > 0.9), loaded from a
    /// scratch file; `extra` adds lines.
    fn task(name: &str, batch: usize, extra: &str) -> Task {
        let dir = std::env::temp_dir().join(format!("ndvm-stream-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("task.yaml");
        let text = format!(
            "name: t\ndata:\n  generate: {{formula: \"(* 2 x)\", input: x, from: 0, to: 1, n: 20}}\n\
             inputs: [x]\ntarget: y\nparams: [{{name: a}}]\nproposer: {{batch: {batch}}}\n\
             success: {{metric: r2, threshold: 0.9, stop: true}}\n{extra}"
        );
        std::fs::write(&path, text).unwrap();
        let task = crate::task::load(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        task
    }

    /// Proposes distinct programs with a duplicate every 7th and an invalid one every 11th, in
    /// chunks of `chunk`; records, at each ask, the distinct candidates given so far and the
    /// indices fed back so far.
    struct Fake {
        chunk: usize,
        next_id: u64,
        distinct: u64,
        total: u64,
        fed: Vec<u64>,
        asks: Vec<(u64, Vec<u64>)>,
    }

    impl Fake {
        fn new(chunk: usize, total: u64) -> Fake {
            Fake {
                chunk,
                next_id: 0,
                distinct: 0,
                total,
                fed: Vec::new(),
                asks: Vec::new(),
            }
        }
    }

    impl Proposer for Fake {
        fn propose(&mut self, n: usize) -> Result<Vec<Candidate>> {
            self.asks.push((self.distinct, self.fed.clone()));
            let mut out = Vec::new();
            while out.len() < n && self.distinct < self.total {
                let id = self.next_id;
                self.next_id += 1;
                let src = if id % 11 == 5 {
                    "(+ a zz)".to_string()
                } else if id % 7 == 3 && self.distinct > 0 {
                    "(+ a x)".to_string()
                } else {
                    self.distinct += 1;
                    let depth = self.distinct as usize;
                    format!(
                        "(+ a {}x{})",
                        "(sin ".repeat(depth - 1),
                        ")".repeat(depth - 1)
                    )
                };
                out.push(Candidate::new(id, src, "scheme".to_string()));
            }
            Ok(out)
        }

        fn name(&self) -> &'static str {
            "fake"
        }

        fn chunk(&self) -> usize {
            self.chunk
        }

        fn feedback(&mut self, event: &Event, _score: Option<f64>) {
            self.fed.push(event.index);
        }
    }

    /// Records the order in which fresh events arrive.
    #[derive(Default)]
    struct Arrivals(Vec<u64>);

    impl Observer for Arrivals {
        fn on_event(&mut self, event: &Event) -> Result<()> {
            self.0.push(event.index);
            Ok(())
        }
    }

    /// A calibration that runs `hold(index)` (a sleep, say) and scores R² 0.99 at `success`, 0.5
    /// elsewhere; records at each start how many run at once (`running` counts them).
    fn fake_attempt<'a>(
        task: &'a Task,
        success: u64,
        hold: &'a (dyn Fn(u64) + Sync),
        running: &'a AtomicUsize,
        alone: &'a Mutex<Vec<(u64, usize)>>,
    ) -> impl Fn(&Pending, Option<Instant>) -> Option<Event> + Sync + 'a {
        move |p, _| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            alone.lock().unwrap().push((p.index, now));
            hold(p.index);
            let mut ev = super::super::blank_event(task, p);
            ev.status = EventStatus::Ok;
            ev.train_loss = Some(1.0);
            ev.validation_r2 = Some(if p.index == success { 0.99 } else { 0.5 });
            running.fetch_sub(1, Ordering::SeqCst);
            Some(ev)
        }
    }

    /// Everything of an outcome that must not depend on the thread count.
    fn core(o: &Outcome) -> String {
        let events: Vec<Event> = o
            .events
            .iter()
            .map(|e| Event {
                finished_s: None,
                wall_ms: 0.0,
                ..e.clone()
            })
            .collect();
        format!(
            "{events:?} {:?} {:?} {:?}",
            o.stream, o.stop, o.first_success
        )
    }

    struct Ran {
        outcome: Outcome,
        fake: Fake,
        arrivals: Vec<u64>,
        starts: Vec<(u64, usize)>,
    }

    /// A sleep of 0 to 4 ms by index (40 ms at index 2), to mix up the order results come in.
    fn sleep(index: u64) {
        let ms = if index == 2 { 40 } else { (index * 7) % 5 };
        std::thread::sleep(Duration::from_millis(ms));
    }

    fn run_fake(task: &Task, opts: &RunOptions, chunk: usize, total: u64, success: u64) -> Ran {
        run_held(task, opts, chunk, total, success, &sleep)
    }

    fn run_held(
        task: &Task,
        opts: &RunOptions,
        chunk: usize,
        total: u64,
        success: u64,
        hold: &(dyn Fn(u64) + Sync),
    ) -> Ran {
        let running = AtomicUsize::new(0);
        let starts = Mutex::new(Vec::new());
        let attempt = fake_attempt(task, success, hold, &running, &starts);
        let mut fake = Fake::new(chunk, total);
        let mut arrivals = Arrivals::default();
        let outcome = run(task, opts, &mut fake, &mut arrivals, &attempt).unwrap();
        drop(attempt);
        Ran {
            outcome,
            fake,
            arrivals: arrivals.0,
            starts: starts.into_inner().unwrap(),
        }
    }

    #[test]
    fn feedback_lags_by_batch_at_each_ask_and_the_outcome_ignores_threads() {
        let task = task("feedback", 4, "");
        let mut cores = Vec::new();
        for threads in [1, 2, 5] {
            let ran = run_fake(&task, &RunOptions::new(threads), 5, 100, 13);
            // Index 13 succeeds: its round ends at 16.
            let o = &ran.outcome;
            assert_eq!(o.stop, StopKind::Success);
            assert_eq!(o.first_success, Some(13));
            let indices: Vec<u64> = o.events.iter().map(|e| e.index).collect();
            assert_eq!(indices, (0..16).collect::<Vec<u64>>());
            assert_eq!(o.stream.distinct, 16);
            assert_eq!(o.n_fresh, 16);
            assert!(
                o.stream.duplicates > 0 && !o.stream.rejected.is_empty(),
                "{:?}",
                o.stream
            );
            assert!(ran.fake.asks.len() >= 4, "{:?}", ran.fake.asks);
            for (d, fed) in &ran.fake.asks {
                let want: Vec<u64> = (0..d.saturating_sub(4)).collect();
                assert_eq!(fed, &want, "at {d} distinct ({threads} threads)");
            }
            // Every event of the outcome is fed back once, in index order, by the end.
            assert_eq!(ran.fake.fed, indices);
            cores.push(core(o));
        }
        assert_eq!(cores[0], cores[1]);
        assert_eq!(cores[0], cores[2]);
    }

    #[test]
    fn a_slow_candidate_holds_back_no_other_worker() {
        let task = task("barrier", 4, "");
        let one = run_fake(&task, &RunOptions::new(1), 64, 12, u64::MAX);
        // At 2 threads index 2 holds its worker until 7 others have finished (or
        // 5 s pass, as they would behind a round barrier, which waits for index 2 first).
        let others = AtomicUsize::new(0);
        let hold = |index: u64| {
            if index == 2 {
                let until = Instant::now() + Duration::from_secs(5);
                while others.load(Ordering::SeqCst) < 7 && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(1));
                }
            } else {
                others.fetch_add(1, Ordering::SeqCst);
            }
        };
        let two = run_held(&task, &RunOptions::new(2), 64, 12, u64::MAX, &hold);
        assert_eq!(one.arrivals, (0..12).collect::<Vec<u64>>());
        let at = two.arrivals.iter().position(|&i| i == 2).unwrap();
        assert!(at >= 6, "{:?}", two.arrivals);
        assert_eq!(two.outcome.stop, StopKind::Exhausted);
        assert_eq!(core(&one.outcome), core(&two.outcome));
    }

    #[test]
    fn the_calibration_budget_cuts_the_last_round_and_stops_the_stream_there() {
        let task = task("budget", 4, "budget: {calibrations: 10}\n");
        let mut cores = Vec::new();
        for threads in [1, 3] {
            // The success at 9 is in the last round, cut at 10.
            let ran = run_fake(&task, &RunOptions::new(threads), 3, 100, 9);
            assert_eq!(ran.outcome.events.len(), 10);
            assert_eq!(ran.outcome.stop, StopKind::Success);
            assert_eq!(ran.outcome.stream.distinct, 10);
            cores.push(core(&ran.outcome));
        }
        assert_eq!(cores[0], cores[1]);
    }

    #[test]
    fn suspects_run_alone_and_known_events_are_reused_and_fed_back() {
        let task = task("suspects", 4, "");
        let fresh = run_fake(&task, &RunOptions::new(1), 5, 12, u64::MAX);
        let mut opts = RunOptions::new(3);
        opts.suspects = [5, 6].into_iter().collect();
        opts.known = fresh
            .outcome
            .events
            .iter()
            .filter(|e| [1, 7, 8].contains(&e.index))
            .map(|e| (e.index, e.clone()))
            .collect::<HashMap<u64, Event>>();
        let ran = run_fake(&task, &opts, 5, 12, u64::MAX);
        assert_eq!(core(&ran.outcome), core(&fresh.outcome));
        assert_eq!(ran.outcome.n_fresh, 9);
        for (index, running) in &ran.starts {
            assert!(![1, 7, 8].contains(index), "{index} was known");
            if [5, 6].contains(index) {
                assert_eq!(*running, 1, "suspect {index} ran with others");
            }
        }
        assert_eq!(ran.fake.fed, (0..12).collect::<Vec<u64>>());
        for (d, fed) in &ran.fake.asks {
            assert_eq!(fed, &(0..d.saturating_sub(4)).collect::<Vec<u64>>());
        }
    }

    #[test]
    fn a_shard_calibrates_and_feeds_back_only_its_own_indices() {
        let task = task("shard", 4, "");
        let mut opts = RunOptions::new(2);
        opts.shard = Shard { index: 1, count: 3 };
        let ran = run_fake(&task, &opts, 5, 20, u64::MAX);
        let own: Vec<u64> = (0..20).filter(|i| i % 3 == 1).collect();
        let indices: Vec<u64> = ran.outcome.events.iter().map(|e| e.index).collect();
        assert_eq!(indices, own);
        assert_eq!(ran.fake.fed, own);
        for (d, fed) in &ran.fake.asks {
            let want: Vec<u64> = own
                .iter()
                .copied()
                .filter(|&i| i < d.saturating_sub(4))
                .collect();
            assert_eq!(fed, &want);
        }
    }

    #[test]
    fn an_interrupt_starts_nothing_new_and_keeps_what_finished() {
        let task = task("interrupt", 4, "");
        let raised = crate::interrupt::Interrupt::new();
        let mut opts = RunOptions::new(2);
        opts.interrupt = Some(raised.clone());
        let running = AtomicUsize::new(0);
        let starts = Mutex::new(Vec::new());
        let inner = fake_attempt(&task, u64::MAX, &sleep, &running, &starts);
        // As the engine's own attempt: nothing starts once the interrupt is raised (here when
        // index 6 starts; 5 or 7 may be running on the other worker).
        let attempt = |p: &Pending, d: Option<Instant>| {
            if raised.is_raised() {
                return None;
            }
            if p.index == 6 {
                raised.raise();
            }
            inner(p, d)
        };
        let mut fake = Fake::new(64, 100);
        let o = run(&task, &opts, &mut fake, &mut Arrivals::default(), &attempt).unwrap();
        assert_eq!(o.stop, StopKind::Interrupted);
        let n = o.events.len();
        assert!((7..=8).contains(&n), "{n} events");
        let indices: Vec<u64> = o.events.iter().map(|e| e.index).collect();
        assert_eq!(indices, (0..n as u64).collect::<Vec<u64>>());
        assert_eq!(fake.fed, indices);
    }
}
