//! The CI pass of the fuzzer: a fixed-seed run (a few seconds in the debug profile) finds no
//! failure and covers the language, and its results do not depend on the thread count.

use ndvm_fuzz::run::{self, Config, Summary};

const SEED: u64 = 20_261_203;

fn pass(programs: u64, threads: usize) -> Summary {
    let config = Config {
        programs,
        start: 0,
        seed: SEED,
        lanes: 4,
        threads,
        shrink: true,
    };
    run::run(&config, &|_, _| {})
}

#[test]
fn fixed_seed_pass_finds_nothing_and_covers_the_language() {
    let s = pass(4000, 2);
    let found: Vec<String> = s
        .found
        .iter()
        .map(|f| {
            format!(
                "program {} [{}] {}\n  shrunk: {}",
                f.index,
                f.failure.oracle,
                f.failure.detail,
                f.shrunk.program.to_text()
            )
        })
        .collect();
    assert!(
        found.is_empty(),
        "the fuzzer found failures:\n{}",
        found.join("\n")
    );
    // Almost every program is inside the reference's domain (skips: near ties, huge values).
    assert!(
        s.checked >= 3950,
        "checked only {} of 4000: {:?}",
        s.checked,
        s.skipped
    );
    assert_eq!(
        s.skipped.get("unsupported"),
        None,
        "the generator wrote programs the reference cannot run"
    );
    for head in [
        "vec",
        "mat",
        "matmul",
        "matvec",
        "inv",
        "det",
        "logdet",
        "outer",
        "dot",
        "norm",
        "transpose",
        "trace",
        "ref",
        "eye",
        "let",
        "let*",
        "letrec",
        "lambda",
        "map",
        "fold",
        "fold-left",
        "cons",
        "car",
        "cdr",
        "list",
        "append",
        "reverse",
        "cond",
        "case",
        "if",
        "and",
        "or",
        "not",
        "loop",
        "recur",
        "eval",
        "quote",
        "exp",
        "log",
        "sqrt",
        "pow",
        "min",
        "max",
        "abs",
        "floor",
    ] {
        assert!(
            s.coverage.get(head).copied().unwrap_or(0) >= 5,
            "{head} is rarely generated: {:?}",
            s.coverage.get(head)
        );
    }
    assert!(
        s.grads_checked >= 25_000,
        "{} gradient entries checked",
        s.grads_checked
    );
    assert!(
        s.grads_at_kink * 50 < s.grads_checked,
        "{} of {} gradients at a kink",
        s.grads_at_kink,
        s.grads_checked
    );
    assert!(s.replayed >= 3800, "only {} runs replayed", s.replayed);
    assert!(
        s.infix_printed >= 1500,
        "only {} programs round-tripped through infix",
        s.infix_printed
    );
}

#[test]
fn one_thread_gives_the_same_pass_as_three() {
    let (a, b) = (pass(300, 1), pass(300, 3));
    assert_eq!(
        a.digest, b.digest,
        "runtime outputs differ between 1 and 3 worker threads"
    );
    assert_eq!(
        (a.checked, a.grads_checked, a.replayed),
        (b.checked, b.grads_checked, b.replayed)
    );
    assert_eq!(a.coverage, b.coverage);
}
