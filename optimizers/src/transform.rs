//! Parameter transforms: each declared kind maps an unconstrained optimizer coordinate `u` onto the
//! parameter's domain (free: identity, positive: softplus, unit: sigmoid, bounded: scaled sigmoid).

use ndvm_core::ParamKind;

/// The logistic function, evaluated without overflow for any `u`.
pub(crate) fn sigmoid(u: f64) -> f64 {
    if u >= 0.0 {
        1.0 / (1.0 + (-u).exp())
    } else {
        let e = u.exp();
        e / (1.0 + e)
    }
}

/// The inverse of [`sigmoid`] on (0, 1).
pub(crate) fn logit(s: f64) -> f64 {
    s.ln() - (-s).ln_1p()
}

/// `ln(1 + e^u)`, evaluated without overflow for any `u`.
fn softplus(u: f64) -> f64 {
    u.max(0.0) + (-u.abs()).exp().ln_1p()
}

/// The inverse of [`softplus`] on (0, ∞): `ln(e^x - 1)`.
fn softplus_inv(x: f64) -> f64 {
    x + (-(-x).exp_m1()).ln()
}

/// The parameter value for optimizer coordinate `u`.
pub(crate) fn to_user(kind: ParamKind, u: f64) -> f64 {
    match kind {
        ParamKind::Free => u,
        ParamKind::Positive => softplus(u),
        ParamKind::Unit => sigmoid(u),
        ParamKind::Bounded { lo, hi } => lo + (hi - lo) * sigmoid(u),
    }
}

/// The optimizer coordinate of parameter value `x` (which must lie in the kind's domain).
pub(crate) fn to_free(kind: ParamKind, x: f64) -> f64 {
    match kind {
        ParamKind::Free => x,
        ParamKind::Positive => softplus_inv(x),
        ParamKind::Unit => logit(x),
        ParamKind::Bounded { lo, hi } => logit((x - lo) / (hi - lo)),
    }
}

/// `d to_user(u) / du`.
pub(crate) fn slope(kind: ParamKind, u: f64) -> f64 {
    match kind {
        ParamKind::Free => 1.0,
        ParamKind::Positive => sigmoid(u),
        ParamKind::Unit => {
            let s = sigmoid(u);
            s * (1.0 - s)
        }
        ParamKind::Bounded { lo, hi } => {
            let s = sigmoid(u);
            (hi - lo) * s * (1.0 - s)
        }
    }
}

/// Whether `x` lies in the kind's (open) domain.
pub(crate) fn in_domain(kind: ParamKind, x: f64) -> bool {
    match kind {
        ParamKind::Free => x.is_finite(),
        ParamKind::Positive => x > 0.0 && x.is_finite(),
        ParamKind::Unit => x > 0.0 && x < 1.0,
        ParamKind::Bounded { lo, hi } => x > lo && x < hi,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINDS: [ParamKind; 4] = [
        ParamKind::Free,
        ParamKind::Positive,
        ParamKind::Unit,
        ParamKind::Bounded { lo: -2.0, hi: 3.0 },
    ];

    #[test]
    fn round_trips() {
        // Known answers: to_free inverts to_user to a few ulps across each domain.
        for kind in KINDS {
            for u in [-20.0, -3.0, -0.5, 0.0, 0.7, 4.0, 15.0] {
                let x = to_user(kind, u);
                assert!(in_domain(kind, x), "{kind:?} {u} -> {x}");
                let back = to_free(kind, x);
                assert!(
                    (back - u).abs() <= 1e-9 * (1.0 + u.abs()),
                    "{kind:?} {u} -> {back}"
                );
            }
        }
        assert_eq!(to_user(ParamKind::Positive, 800.0), 800.0);
        assert!(to_user(ParamKind::Positive, -800.0) >= 0.0);
    }

    #[test]
    fn slopes_match_central_differences() {
        // Oracle: central finite differences, h = 1e-6.
        for kind in KINDS {
            for u in [-3.0, -0.5, 0.0, 0.7, 4.0] {
                let h = 1e-6;
                let fd = (to_user(kind, u + h) - to_user(kind, u - h)) / (2.0 * h);
                let d = slope(kind, u);
                assert!(
                    (fd - d).abs() <= 1e-7 * (1.0 + d.abs()),
                    "{kind:?} {u}: {fd} vs {d}"
                );
            }
        }
    }
}
