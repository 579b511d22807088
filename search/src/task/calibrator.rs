//! The calibrator section: `calibrator:`, `loss`, `dialect`, `precision` and `limits:` resolved
//! into the calibrator's settings and the per-calibration limits.

use super::*;

/// Most calibrator starts (and polished starts) per candidate.
pub const MAX_STARTS: usize = 10_000;

/// Most Adam steps or L-BFGS iterations (and screen steps) per start.
pub const MAX_ITERS: usize = 1_000_000;

/// The resolved per-calibration limits. Work, memory and depth live in
/// [`Task::calibrate`](Task) (`max_work`, `max_memory`, `max_depth`); this holds the rest.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// Wall-clock seconds one calibration (and each prediction) may take.
    pub seconds: f64,
}

impl Limits {
    /// Default seconds per calibration: generous for real models (the Kalman task calibrates in
    /// well under a second per candidate), short enough that an endless candidate costs little.
    pub const DEFAULT_SECONDS: f64 = 60.0;
    /// The largest work budget a task may set (about an hour of walking).
    pub const MAX_WORK: u64 = 100_000_000_000;
    /// The largest memory a task may give one evaluation, in MiB (64 GiB).
    pub const MAX_MEMORY_MB: u64 = 65_536;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            seconds: Self::DEFAULT_SECONDS,
        }
    }
}

/// Checks `limits:` and applies work, memory and depth to the calibrator's settings.
pub(super) fn resolve_limits(spec: &LimitsSpec, cfg: &mut CalibrateConfig) -> Result<Limits> {
    let err = |loc: Location, msg: String| spec_err(Some(loc), msg);
    if let Some(w) = &spec.work {
        if w.value == 0 || w.value > Limits::MAX_WORK {
            let max = Limits::MAX_WORK;
            return Err(err(
                w.referenced,
                format!("`limits.work` must be at least 1 and at most {max}"),
            ));
        }
        cfg.max_work = w.value;
    }
    if let Some(m) = &spec.memory_mb {
        if m.value == 0 || m.value > Limits::MAX_MEMORY_MB {
            let max = Limits::MAX_MEMORY_MB;
            return Err(err(
                m.referenced,
                format!("`limits.memory_mb` must be at least 1 and at most {max}"),
            ));
        }
        cfg.max_memory = m.value * 1024 * 1024;
    }
    if let Some(d) = &spec.depth {
        if d.value == 0 {
            return Err(err(
                d.referenced,
                "`limits.depth` must be at least 1".into(),
            ));
        }
        cfg.max_depth = d.value;
    }
    let mut limits = Limits::default();
    if let Some(s) = &spec.seconds {
        if check_budget_seconds(s.value).is_err() {
            return Err(err(
                s.referenced,
                format!(
                    "`limits.seconds` must be a positive number of at most {MAX_BUDGET_SECONDS} (one year)"
                ),
            ));
        }
        limits.seconds = s.value;
    }
    Ok(limits)
}

/// `calibrator.soft_choice:` resolved; a temperature that is not a positive finite number is an
/// error at its line.
pub(super) fn soft_choice_config(sc: &SoftChoiceSpec) -> Result<SoftChoiceConfig> {
    let mut out = SoftChoiceConfig::default();
    if let Some(m) = sc.mode {
        out.mode = match m {
            ChoiceModeName::Soft => ChoiceMode::Soft,
            ChoiceModeName::StraightThrough => ChoiceMode::StraightThrough,
            ChoiceModeName::Hard => ChoiceMode::Hard,
        };
    }
    for (key, t) in [
        ("temperature", &sc.temperature),
        ("final_temperature", &sc.final_temperature),
    ] {
        if let Some(t) = t
            && !(t.value > 0.0 && t.value.is_finite())
        {
            return Err(spec_err(
                Some(t.referenced),
                format!("`calibrator.soft_choice.{key}` must be a positive number"),
            ));
        }
    }
    out.temperature = sc.temperature.as_ref().map_or(1.0, |t| t.value);
    out.final_temperature = sc
        .final_temperature
        .as_ref()
        .map_or(out.temperature, |t| t.value);
    out.gumbel = sc.gumbel.unwrap_or(false);
    Ok(out)
}

/// `calibrator:` (and the task's `loss`, `dialect`, `precision`) over the defaults: an evolving
/// search fitting residuals (`loss: mse`) starts from [`CalibrateConfig::for_search`], any other
/// task from [`CalibrateConfig::recommended`]; each key written replaces its default.
pub(super) fn resolve_calibrator(spec: &TaskSpec) -> Result<CalibrateConfig> {
    let err = |loc: Location, msg: String| spec_err(Some(loc), msg);
    let evolving = proposer::evolves(&spec.proposer);
    let mut calibrate = match evolving && spec.loss == LossName::Mse {
        true => CalibrateConfig::for_search(),
        false => CalibrateConfig::recommended(),
    };
    let c = &spec.calibrator;
    calibrate.seed = c.seed.unwrap_or(spec.seed);
    calibrate.loss = match spec.loss {
        LossName::Mse => Loss::Mse,
        LossName::GaussianNll => Loss::GaussianNll,
        LossName::Program => Loss::ProgramLoss,
    };
    calibrate.dialect = match spec.dialect {
        DialectName::Default => Dialect::Default,
        DialectName::Reference => Dialect::Reference,
    };
    calibrate.precision = match spec.precision {
        PrecisionName::F64 => Precision::F64,
        PrecisionName::F32 => Precision::F32,
    };
    if let Some(o) = c.optimizer {
        calibrate.optimizer = match o {
            OptimizerName::Portfolio => Optimizer::Portfolio,
            OptimizerName::Adam => Optimizer::Adam,
            OptimizerName::Lbfgs => Optimizer::Lbfgs,
            OptimizerName::Lm => Optimizer::Lm,
        };
    }
    if let Some(m) = c.polish_method {
        calibrate.polish = match m {
            PolishName::Lbfgs => Polish::Lbfgs,
            PolishName::Lm => Polish::Lm,
        };
    }
    if let Some(k) = &c.starts {
        if k.value == 0 || k.value > MAX_STARTS {
            return Err(err(
                k.referenced,
                format!("`starts` must be at least 1 and at most {MAX_STARTS}"),
            ));
        }
        calibrate.n_starts = k.value;
    }
    if let Some(k) = &c.polish {
        if k.value == 0 || k.value > MAX_STARTS {
            return Err(err(
                k.referenced,
                format!("`polish` must be at least 1 and at most {MAX_STARTS}"),
            ));
        }
        calibrate.n_polish = k.value;
    }
    for (key, v) in [
        ("max_iters", &c.max_iters),
        ("screen_iters", &c.screen_iters),
    ] {
        if let Some(m) = v
            && m.value > MAX_ITERS
        {
            return Err(err(
                m.referenced,
                format!("`calibrator.{key}` must be at most {MAX_ITERS}"),
            ));
        }
    }
    if let Some(lr) = &c.learning_rate {
        if !(lr.value > 0.0 && lr.value.is_finite()) {
            return Err(err(
                lr.referenced,
                "`learning_rate` must be positive".into(),
            ));
        }
        calibrate.learning_rate = lr.value;
    }
    if let Some(sc) = &c.soft_choice {
        calibrate.soft_choice = soft_choice_config(sc)?;
    }
    if let Some(m) = &c.max_iters {
        calibrate.max_iters = m.value;
    }
    if let Some(m) = &c.screen_iters {
        calibrate.screen_iters = m.value;
    }
    if let Some(race) = &c.race {
        calibrate.race = race
            .iter()
            .map(|c| RaceCut::new(c.value.at, c.value.keep))
            .collect();
        if let Some((i, message)) = race_problem(&calibrate.race) {
            return Err(err(
                race[i].referenced,
                format!("`calibrator.race`: {message}"),
            ));
        }
    }
    Ok(calibrate)
}
