//! `(soft-choice (e1 e2 …) logits)`: the walk's side (options evaluated, blended or picked per
//! lane, the tape node), the seeded Gumbel noise, and the read-out of which option each lane took.
//!
//! Soft mode and a recording straight-through evaluate every option and blend them in one
//! `Choice` kernel (a tape node whose replay reads the run's temperature and noise, so annealing
//! and a new noise seed keep the recording replayable). Hard mode, and straight-through without
//! gradients, group the active lanes by their pick and evaluate each option on its own lanes only
//! (a lane that does not pick an option never runs it), then merge as a divergent `if` does.

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

use super::{At, Machine, Result, err, kernels};
use crate::api::{ChoiceMode, ChoiceReadout};
use crate::decode::{CodeId, CodeList};
use crate::error::ErrorKind;
use crate::lanes::PayloadId;
use crate::mask::MaskId;
use crate::real::Real;
use crate::tape::{TapeOp, choice_weights};
use crate::value::Value;

const NOT_REACHED: u32 = ChoiceReadout::NOT_REACHED;

/// Where one visited site's logits, noise and temperature live (for the read-out and for a
/// replay under new settings).
#[derive(Clone, Copy, Debug)]
pub(super) struct ChoiceSite {
    pub(super) site: u32,
    pub(super) logits: PayloadId,
    pub(super) noise: PayloadId,
    pub(super) tau: PayloadId,
}

/// The Gumbel noise of `site` under `seed`: −ln(−ln U) for k uniforms U in (0, 1) from ChaCha8.
pub(super) fn gumbel<R: Real>(seed: u64, site: u32, k: usize, out: &mut Vec<R>) {
    let mix = seed ^ (u64::from(site) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut rng = ChaCha8Rng::seed_from_u64(mix);
    out.clear();
    for _ in 0..k {
        let u = ((rng.next_u64() >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64);
        out.push(R::of(-(-u.ln()).ln()));
    }
}

impl<R: Real> Machine<R> {
    /// Evaluates `(soft-choice options logits)` at `at` under the run's `soft_choice` settings.
    pub(super) fn eval_soft_choice(
        &mut self,
        options: CodeList,
        logits: CodeId,
        site: u32,
        env: u32,
        at: CodeId,
    ) -> Result<Value> {
        let node = self.codes.node(at);
        let k = options.len as usize;
        let lp = match self.eval_value(logits, env)? {
            Value::Vector(p, n) if n as usize == k => p,
            Value::Vector(_, n) => {
                return Err(err(
                    ErrorKind::Shape,
                    format!("soft-choice: {k} options but {n} logits"),
                )
                .at(node));
            }
            other => {
                return Err(err(
                    ErrorKind::Type,
                    format!(
                        "soft-choice: the logits must be a vector, as in (vector w1 w2 …), got a {}",
                        other.type_name()
                    ),
                )
                .at(node));
            }
        };
        let sc = self.opts.soft_choice;
        let noise = self.lanes.alloc(k, false, false);
        let mut g = std::mem::take(&mut self.fbuf[0]);
        match sc.gumbel {
            Some(seed) => gumbel(seed, site, k, &mut g),
            None => {
                g.clear();
                g.resize(k, R::ZERO);
            }
        }
        for (i, &x) in g.iter().enumerate() {
            self.lanes.put(noise, i, 0, x);
        }
        self.fbuf[0] = g;
        let tau = self.lanes.scalar(sc.temperature);
        let here = ChoiceSite {
            site,
            logits: lp,
            noise,
            tau,
        };
        self.trace.choice_site(here);
        self.note_picks(here, at);
        let split = match sc.mode {
            ChoiceMode::Hard => true,
            ChoiceMode::StraightThrough => !self.recording,
            ChoiceMode::Soft => false,
        };
        if split {
            return self.choice_split(options, here, env, at);
        }
        self.choice_blend(
            options,
            here,
            sc.mode == ChoiceMode::StraightThrough,
            env,
            at,
        )
    }

    /// Every option on every active lane, blended (or, `hard`, picked) by one `Choice` kernel.
    fn choice_blend(
        &mut self,
        options: CodeList,
        here: ChoiceSite,
        hard: bool,
        env: u32,
        at: CodeId,
    ) -> Result<Value> {
        let base = self.argstack.len();
        self.eval_args(options, env)?;
        let mut parts = std::mem::take(&mut self.payload_buf);
        parts.clear();
        for &v in &self.argstack[base..] {
            match v {
                Value::Num(p) => parts.push(p),
                other => {
                    self.payload_buf = parts;
                    return Err(err(
                        ErrorKind::Type,
                        format!(
                            "soft-choice: every option must be a number, got a {}",
                            other.type_name()
                        ),
                    )
                    .at(self.codes.node(at)));
                }
            }
        }
        self.argstack.truncate(base);
        let varying =
            self.lanes.is_varying(here.logits) || parts.iter().any(|&p| self.lanes.is_varying(p));
        let grad = self.recording
            && (self.lanes.meta(here.logits).grad
                || parts.iter().any(|&p| self.lanes.meta(p).grad));
        let k = parts.len();
        let wts = self
            .lanes
            .alloc(k + 1, self.lanes.is_varying(here.logits), false);
        let out = self.lanes.alloc(1, varying, grad);
        let mut w = std::mem::take(&mut self.fbuf[0]);
        let ins = (here.logits, here.noise, here.tau);
        kernels::choice(
            &mut self.lanes,
            &self.masks,
            self.mask,
            out,
            wts,
            ins,
            &parts,
            hard,
            &mut w,
        );
        self.fbuf[0] = w;
        if grad {
            let start = self.tape.extra.len() as u32;
            self.tape.extra.push(here.noise);
            self.tape.extra.push(wts);
            self.tape.extra.extend_from_slice(&parts);
            let op = TapeOp::Choice {
                start,
                len: parts.len() as u32,
                hard,
            };
            self.tape.push(op, out, here.logits, here.tau, self.mask);
        } else {
            // A value no tape node recomputes: other settings need a new walk.
            self.trace.choice_fixed();
        }
        self.payload_buf = parts;
        Ok(Value::Num(out))
    }

    /// Each option on the lanes that pick it, merged like the arms of a divergent `if`.
    fn choice_split(
        &mut self,
        options: CodeList,
        here: ChoiceSite,
        env: u32,
        at: CodeId,
    ) -> Result<Value> {
        // The picks are read for structure, and they move with the noise.
        self.taint_if_grad(here.logits);
        self.trace.choice_fixed();
        let option = |ev: &Self, i: usize| ev.codes.lists[options.start as usize + i];
        if !self.lanes.is_varying(here.logits) {
            let mut w = std::mem::take(&mut self.fbuf[0]);
            let t = self.lanes.at(here.tau, 0, 0);
            let j = choice_weights(&self.lanes, here.logits, here.noise, t, 0, &mut w);
            self.fbuf[0] = w;
            return self.eval_value(option(self, j), env);
        }
        let picks = self.picks_now(here);
        let mut acc: Option<(Value, MaskId)> = None;
        let saved = self.mask;
        for i in 0..options.len as usize {
            let lanes: Vec<u32> = picks
                .iter()
                .filter(|&&(_, j)| j == i)
                .map(|&(l, _)| l)
                .collect();
            if lanes.is_empty() {
                continue;
            }
            let m = self.masks.intern(&lanes);
            self.mask = m;
            let v = self.eval_value(option(self, i), env);
            self.mask = saved;
            let v = v?;
            acc = Some(match acc {
                None => (v, m),
                Some((a, am)) => {
                    let merged = self.select(a, am, v, m, at)?;
                    let mut s = std::mem::take(&mut self.scratch_a);
                    let u = self.masks.union(am, m, &mut s);
                    self.scratch_a = s;
                    (merged, u)
                }
            });
        }
        Ok(acc.map_or(Value::Nil, |a| a.0))
    }

    /// (lane, pick) for every active lane of the current mask.
    fn picks_now(&mut self, here: ChoiceSite) -> Vec<(u32, usize)> {
        let mut w = std::mem::take(&mut self.fbuf[0]);
        let t = self.lanes.at(here.tau, 0, 0);
        let out = self
            .masks
            .lanes(self.mask)
            .iter()
            .map(|&l| {
                let j = choice_weights(&self.lanes, here.logits, here.noise, t, l as usize, &mut w);
                (l, j)
            })
            .collect();
        self.fbuf[0] = w;
        out
    }

    /// Records the active lanes' picks of a site in the read-out.
    fn note_picks(&mut self, here: ChoiceSite, at: CodeId) {
        let b = self.lanes.n_lanes();
        let ix = match self.choices.iter().position(|c| c.site == here.site) {
            Some(ix) => ix,
            None => {
                let crate::decode::Code::SoftChoice { options, .. } = self.codes.get(at) else {
                    return;
                };
                let opts = (0..options.len)
                    .map(|i| {
                        self.codes
                            .node(self.codes.lists[(options.start + i) as usize])
                    })
                    .collect();
                self.choices.push(ChoiceReadout {
                    site: here.site,
                    node: self.codes.node(at),
                    options: opts,
                    picks: vec![NOT_REACHED; b],
                    weights: vec![f64::NAN; b * options.len as usize],
                });
                self.choice_sites.push(here);
                self.choices.len() - 1
            }
        };
        self.choice_sites[ix] = here;
        let lanes: Vec<u32> = self.masks.lanes(self.mask).to_vec();
        self.refresh_picks(ix, &lanes);
    }

    /// Recomputes the picks and weights of read-out `ix` on `lanes`.
    fn refresh_picks(&mut self, ix: usize, lanes: &[u32]) {
        let here = self.choice_sites[ix];
        let t = self.lanes.at(here.tau, 0, 0);
        let mut w = std::mem::take(&mut self.fbuf[0]);
        for &l in lanes {
            let l = l as usize;
            let j = choice_weights(&self.lanes, here.logits, here.noise, t, l, &mut w);
            let c = &mut self.choices[ix];
            c.picks[l] = j as u32;
            let dst = &mut c.weights[l * w.len()..(l + 1) * w.len()];
            dst.iter_mut().zip(&w).for_each(|(d, x)| *d = x.f64());
        }
        self.fbuf[0] = w;
    }

    /// After a replay: the read-out's picks from the replayed logits, when asked for.
    pub(super) fn refresh_choices(&mut self) {
        self.choices_stale = true;
    }

    fn refresh_now(&mut self) {
        self.choices_stale = false;
        for ix in 0..self.choices.len() {
            let lanes: Vec<u32> = (0..self.choices[ix].picks.len() as u32)
                .filter(|&l| self.choices[ix].picks[l as usize] != NOT_REACHED)
                .collect();
            self.refresh_picks(ix, &lanes);
        }
    }

    /// The `soft-choice` sites the last run (walk or replay) reached, in the order first reached:
    /// which option each lane took (the largest z = (logits + noise) / τ).
    pub(crate) fn last_choices(&mut self) -> &[ChoiceReadout] {
        if self.choices_stale {
            self.refresh_now();
        }
        &self.choices
    }

    /// Sets the `soft-choice` settings of the next runs (a calibration anneals the temperature or
    /// draws new Gumbel noise per step). A recording stays replayable when only the temperature
    /// or the noise seed changed and every soft-choice value is on its tape.
    pub(crate) fn set_soft_choice(&mut self, soft_choice: crate::api::SoftChoice) {
        self.opts.soft_choice = soft_choice;
    }
}
