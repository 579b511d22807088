//! The `llm` proposer as the seeds of an `evolve` (LLM-SR's loop: the model proposes, evolution
//! refines, the best programs go back into the prompt). Requests run in the background, up to
//! `concurrency` at once, while the engine calibrates evolved programs: each request for seeds
//! takes the answers that arrived since the last one (none is waited for) and sends new requests
//! with the prompt as it stands. Each answer's cache line records the seed request that took it
//! (`ask`), so a replay of the cache hands it out at the same request
//! ([`group_end`](super::super::replay::group_end)) and reproduces the run.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use super::chat::{self, Failure, Policy};
use super::{LlmProposer, Note, Sent, prompt_hash, proposer_err};
use crate::error::Result;
use crate::propose::replay::group_end;
use crate::propose::{Candidate, RequestStats};

/// The background requests of a seeding proposer.
pub(super) struct Seeding {
    /// The number of the next request for seeds.
    ask: u64,
    tx: mpsc::Sender<Note>,
    rx: mpsc::Receiver<Note>,
    /// Raised when the proposer is dropped or a failure ends the run: no request retries.
    cancel: Arc<AtomicBool>,
}

impl Drop for Seeding {
    fn drop(&mut self) {
        // Requests still in flight end on their own; their answers are not waited for.
        self.cancel.store(true, Ordering::Relaxed);
    }
}

impl LlmProposer {
    /// This proposer as the seeds of an `evolve`: its requests run in the background.
    pub fn seeding(mut self) -> LlmProposer {
        let (tx, rx) = mpsc::channel();
        self.seeding = Some(Seeding {
            ask: 0,
            tx,
            rx,
            cancel: Arc::new(AtomicBool::new(false)),
        });
        self
    }

    /// One request for seeds (number `ask`): the cache's programs of that request while the
    /// cache lasts, then the answers that arrived since the last request; then requests are sent
    /// until `concurrency` are in flight.
    pub(super) fn propose_seeds(
        &mut self,
        n: usize,
        report: &mut dyn FnMut(&RequestStats),
    ) -> Result<Vec<Candidate>> {
        let Some(seeding) = self.seeding.as_mut() else {
            return Ok(Vec::new());
        };
        let ask = seeding.ask;
        seeding.ask += 1;
        let mut out = Vec::new();
        if self.next_cached < self.cached.len() {
            let end = group_end(&self.cached, self.next_cached, ask, n);
            for k in self.next_cached..end {
                let c = self.cached[k].clone();
                let frontend = c.frontend.unwrap_or_else(|| self.frontend.clone());
                self.push(&mut out, c.src, frontend, c.init);
            }
            self.next_cached = end;
            return Ok(out);
        }
        self.collect(&mut out, ask)?;
        self.send_more()?;
        report(&self.stats);
        if self.stats.sent >= self.config.max_requests
            && self.stats.in_flight == 0
            && self.answered == 0
        {
            return Err(self.no_answer_error());
        }
        Ok(out)
    }

    /// At the end of the run: no request is retried any more; with `wait`, the requests in
    /// flight are waited for (each within its timeout) and their answers kept in the cache,
    /// marked with the next request for seeds, which this run never makes (a later run on the
    /// same cache takes them there), so the tokens they cost are not lost.
    pub(super) fn finish_seeds(&mut self, wait: bool) -> Result<()> {
        let Some(seeding) = self.seeding.as_ref() else {
            return Ok(());
        };
        seeding.cancel.store(true, Ordering::Relaxed);
        let ask = seeding.ask;
        let patience = Duration::from_secs_f64(self.config.timeout_s + 5.0);
        let mut late = Vec::new();
        while wait && self.stats.in_flight > 0 {
            let Some(seeding) = self.seeding.as_ref() else {
                break;
            };
            match seeding.rx.recv_timeout(patience) {
                Ok(Note::Retry) => self.stats.retried += 1,
                // A fatal failure now ends nothing: the run is over.
                Ok(Note::Done(reply, sent)) => {
                    let _fatal = self.settle(reply, sent, &mut late, Some(ask))?;
                }
                Err(_) => break,
            }
        }
        // Kept in the cache, not handed to this run's search.
        self.handed -= late.len();
        Ok(())
    }

    /// Settles every request that ended since the last call, its answer marked with `ask`.
    fn collect(&mut self, out: &mut Vec<Candidate>, ask: u64) -> Result<()> {
        loop {
            let Some(seeding) = self.seeding.as_ref() else {
                return Ok(());
            };
            let note = match seeding.rx.try_recv() {
                Ok(note) => note,
                Err(_) => return Ok(()),
            };
            let cancel = Arc::clone(&seeding.cancel);
            match note {
                Note::Retry => self.stats.retried += 1,
                Note::Done(reply, sent) => {
                    let settled = self.settle(reply, sent, out, Some(ask));
                    match settled {
                        Ok(None) => {}
                        Ok(Some(e)) | Err(e) => {
                            cancel.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                    }
                }
            }
        }
    }

    /// Sends requests (one thread each, with the prompt as it stands) until `concurrency` are in
    /// flight or the run's `max_requests` are sent.
    fn send_more(&mut self) -> Result<()> {
        let room = self.config.concurrency.saturating_sub(self.stats.in_flight);
        let k = room.min(self.config.max_requests.saturating_sub(self.stats.sent));
        if k == 0 {
            return Ok(());
        }
        let Some(seeding) = self.seeding.as_ref() else {
            return Ok(());
        };
        let (tx, cancel) = (seeding.tx.clone(), Arc::clone(&seeding.cancel));
        let prompt = self.prompt()?;
        let hash = prompt_hash(&prompt);
        let mut bodies = vec![None; self.config.models.len()];
        let policy = Policy {
            retries: self.config.retries,
            backoff_s: self.config.backoff_s,
        };
        for _ in 0..k {
            let model = self.pick();
            let body = match &bodies[model] {
                Some(b) => Arc::clone(b),
                None => {
                    let b = Arc::new(self.request_body(&prompt, model)?);
                    bodies[model] = Some(Arc::clone(&b));
                    b
                }
            };
            let sent = Sent {
                hash: hash.clone(),
                model,
                attempts: 0,
            };
            let (tx, cancel) = (tx.clone(), cancel.clone());
            let endpoint = self.endpoints[model].clone();
            std::thread::Builder::new()
                .name("ndvm-llm-request".into())
                .spawn(move || {
                    let retry = |_: &Failure| {
                        let _ = tx.send(Note::Retry);
                    };
                    let reply = chat::ask(&endpoint, &body, policy, &cancel, &retry);
                    // Dropped with the proposer: an answer after the run is not kept.
                    let _ = tx.send(Note::Done(reply, sent));
                })
                .map_err(|e| proposer_err(format!("cannot start a request thread: {e}")))?;
            self.stats.sent += 1;
            self.stats.in_flight += 1;
        }
        Ok(())
    }
}
