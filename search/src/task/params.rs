//! The task's variables: its name, the inputs and target, and the parameters with their kinds,
//! domains and starts.

use super::*;

/// `name:` checked: letters, digits, `-` and `_`.
pub(super) fn resolve_name(spec: &TaskSpec) -> Result<String> {
    let err = |loc: Location, msg: String| spec_err(Some(loc), msg);
    let name = spec.name.value.clone();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(err(
            spec.name.referenced,
            "`name` must be non-empty and use only letters, digits, `-` and `_`".into(),
        ));
    }
    Ok(name)
}

/// `inputs:` (each once) and `target:` (not one of them).
pub(super) fn resolve_inputs(spec: &TaskSpec) -> Result<Vec<String>> {
    let err = |loc: Location, msg: String| spec_err(Some(loc), msg);
    let inputs: Vec<String> = spec.inputs.iter().map(|s| s.value.clone()).collect();
    for (i, s) in spec.inputs.iter().enumerate() {
        if inputs[..i].contains(&s.value) {
            return Err(err(
                s.referenced,
                format!("input `{}` is listed twice", s.value),
            ));
        }
    }
    if let Some(t) = &spec.target
        && inputs.contains(&t.value)
    {
        return Err(err(
            t.referenced,
            format!(
                "target `{}` is also listed as an input (target leakage)",
                t.value
            ),
        ));
    }
    Ok(inputs)
}

/// `params:`: each parameter's kind, domain and start, none declared twice or named as an input.
pub(super) fn resolve_params(spec: &TaskSpec, inputs: &[String]) -> Result<Vec<ParamSpec>> {
    let err = |loc: Location, msg: String| spec_err(Some(loc), msg);
    let mut params = Vec::new();
    for p in &spec.params {
        let e = &p.value;
        let kind = match e.kind {
            KindName::Free => ParamKind::Free,
            KindName::Positive => ParamKind::Positive,
            KindName::Unit => ParamKind::Unit,
            KindName::Bounded => match (e.lo, e.hi) {
                (Some(lo), Some(hi)) if lo < hi && lo.is_finite() && hi.is_finite() => {
                    ParamKind::Bounded { lo, hi }
                }
                _ => {
                    return Err(err(
                        p.referenced,
                        format!("bounded parameter `{}` needs finite `lo` < `hi`", e.name),
                    ));
                }
            },
        };
        if e.kind != KindName::Bounded && (e.lo.is_some() || e.hi.is_some()) {
            return Err(err(
                p.referenced,
                format!("`lo`/`hi` are only for bounded parameters (`{}`)", e.name),
            ));
        }
        let init = e.init.unwrap_or(match kind {
            ParamKind::Bounded { lo, hi } => 0.5 * (lo + hi),
            _ => 0.5,
        });
        let ok = match kind {
            ParamKind::Free => init.is_finite(),
            ParamKind::Positive => init > 0.0 && init.is_finite(),
            ParamKind::Unit => init > 0.0 && init < 1.0,
            ParamKind::Bounded { lo, hi } => init > lo && init < hi,
        };
        if !ok {
            return Err(err(
                p.referenced,
                format!("`init` of `{}` lies outside its domain", e.name),
            ));
        }
        if params.iter().any(|q: &ParamSpec| q.name == e.name) || inputs.contains(&e.name) {
            return Err(err(
                p.referenced,
                format!(
                    "`{}` is declared twice (as a parameter or an input)",
                    e.name
                ),
            ));
        }
        params.push(ParamSpec::new(&e.name, kind, init));
    }
    Ok(params)
}
