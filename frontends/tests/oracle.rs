//! Oracle parity: the 33 forward values and 82 gradients of `seed-data/oracle_refs.json` (PyTorch
//! DMCI oracle, float32) in the reference dialect, with the tolerances of `seed-data/README.md`,
//! in `f64` lanes and in `f32` lanes. The README's tolerances were set for a float32 oracle
//! against an f64 runtime and hold unchanged for f32 lanes (both round every operation to f32; the
//! orders of operations differ).

mod common;

use common::{OracleProgram, is_close, lane_bits, number, opts, run};
use ndvm_core::{Dialect, Precision};

/// README tolerances: (forward atol, forward rtol, gradient atol, gradient rtol).
fn tolerances(name: &str) -> (f64, f64, f64, f64) {
    match name {
        "logistic_map_loop" => (1e-4, 1e-4, 1e-3, 1e-3),
        "kalman2d_T80" => (1e-2, 2e-3, 5.0, 2e-2),
        "logdet_grad" => (1e-5, 1e-5, 1e-3, 1e-3),
        _ => (1e-5, 1e-5, 1e-4, 1e-4),
    }
}

/// Checks one program against the oracle; returns (forward values, gradients) compared, and pushes
/// one line per mismatch to `failures`.
fn check_oracle(
    p: &OracleProgram,
    precision: Precision,
    failures: &mut Vec<String>,
) -> (usize, usize) {
    let Some(expected) = p.result else {
        return (0, 0);
    };
    let (fa, fr, ga, gr) = tolerances(&p.name);
    let inputs = p.inputs();
    let opts = opts(Dialect::Reference, 1).with_precision(precision);
    let eval = match run(&p.src, opts.clone(), &inputs, true) {
        Ok(e) => e,
        Err(e) => {
            failures.push(format!("{}: eval_grad failed: {e}", p.name));
            return (0, 0);
        }
    };
    match number(&eval, 0) {
        Ok(v) if is_close(v, expected, fa, fr) => {}
        Ok(v) => failures.push(format!("{}: value {v:e}, oracle {expected:e}", p.name)),
        Err(e) => failures.push(format!("{}: {e}", p.name)),
    }
    let mut n_grads = 0;
    for (name, g_ref) in &p.grads {
        n_grads += 1;
        match eval.grad(name) {
            Some(g) if is_close(g[0], *g_ref, ga, gr) => {}
            Some(g) => failures.push(format!(
                "{}: d/d{name} = {:e}, oracle {g_ref:e}",
                p.name, g[0]
            )),
            None => failures.push(format!("{}: no gradient reported for {name}", p.name)),
        }
    }
    // Every bound scalar is a parameter, so every one must have a gradient (the oracle lists them all).
    if eval.grads.len() != p.scalars.len() {
        failures.push(format!(
            "{}: {} gradients reported for {} parameters",
            p.name,
            eval.grads.len(),
            p.scalars.len()
        ));
    }
    // The forward-only walk must give the same value as the taped walk, bit for bit.
    match run(&p.src, opts, &inputs, false) {
        Ok(fwd) if lane_bits(&fwd, 0).value == lane_bits(&eval, 0).value => {}
        Ok(fwd) => failures.push(format!(
            "{}: forward-only {:?} != taped {:?}",
            p.name, fwd.value, eval.value
        )),
        Err(e) => failures.push(format!("{}: forward-only eval failed: {e}", p.name)),
    }
    (1, n_grads)
}

#[test]
fn oracle_values_and_gradients_match_in_reference_dialect() {
    oracle_values_and_gradients_match(Precision::F64);
}

#[test]
fn oracle_values_and_gradients_match_in_f32() {
    oracle_values_and_gradients_match(Precision::F32);
}

fn oracle_values_and_gradients_match(precision: Precision) {
    let programs = common::oracle_programs();
    assert_eq!(programs.len(), 34, "oracle_refs.json holds 34 programs");
    let mut failures = Vec::new();
    let (mut n_values, mut n_grads) = (0, 0);
    for p in &programs {
        let (v, g) = check_oracle(p, precision, &mut failures);
        n_values += v;
        n_grads += g;
    }
    assert!(
        failures.is_empty(),
        "{} oracle mismatches ({precision:?}):\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(n_values, 33, "forward values compared");
    assert_eq!(n_grads, 82, "gradients compared");
}

/// The oracle failed on `recursive_define` (its top-level define did not see the bound `alpha`);
/// we must evaluate it: (poly x 3) = 3·alpha·x = 9 with d/dalpha = 3x = 4.5 and d/dx = 3·alpha = 6
/// (known answer, by hand).
#[test]
fn recursive_define_evaluates_where_the_oracle_failed() {
    let p = common::oracle_programs()
        .into_iter()
        .find(|p| p.name == "recursive_define")
        .expect("recursive_define");
    assert!(
        p.result.is_none() && p.error.is_some(),
        "recursive_define carries an error, not a value"
    );
    let eval = run(&p.src, opts(Dialect::Reference, 1), &p.inputs(), true)
        .unwrap_or_else(|e| panic!("recursive_define must evaluate: {e}"));
    common::assert_close(
        number(&eval, 0).unwrap(),
        9.0,
        1e-12,
        1e-12,
        "recursive_define value",
    );
    common::assert_close(
        eval.grad("alpha").expect("d/dalpha")[0],
        4.5,
        1e-12,
        1e-12,
        "recursive_define d/dalpha",
    );
    common::assert_close(
        eval.grad("x").expect("d/dx")[0],
        6.0,
        1e-12,
        1e-12,
        "recursive_define d/dx",
    );
}
