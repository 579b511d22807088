//! The gate self-test: with a wrong derivative planted in the runtime (the `planted-bugs`
//! feature's switch) the fuzzer must catch it within a bounded number of programs. One test, so
//! the process-wide switch never changes under another test.

use ndvm_core::planted::{self, Bug};
use ndvm_fuzz::generate;
use ndvm_fuzz::oracle::{self, Oracle, Pool};

const SEED: u64 = 20_261_203;
/// The bound: every planted bug must be caught within this many programs.
const BOUND: u64 = 200;

/// Index of the first program on which `bug` makes the gradient oracle fail, and its message.
fn first_catch(bug: Option<Bug>, pool: &mut Pool) -> Option<(u64, String)> {
    planted::plant(bug);
    let mut res = None;
    for i in 0..BOUND {
        let case = generate::generate(SEED, i, 4);
        let out = oracle::check(&case, pool, None);
        if let Some(f) = out.failures.iter().find(|f| f.oracle == Oracle::Gradient) {
            res = Some((i, f.detail.clone()));
            break;
        }
    }
    planted::plant(None);
    res
}

#[test]
fn the_fuzzer_catches_every_planted_bug() {
    let mut pool = Pool::new();
    // The control: nothing planted, nothing caught.
    assert_eq!(first_catch(None, &mut pool), None);
    let mut report = Vec::new();
    for bug in [Bug::DetVjp, Bug::SelectMerge, Bug::LoopCarried] {
        let caught = first_catch(Some(bug), &mut pool);
        let Some((at, detail)) = caught else {
            panic!("planted {bug:?} was not caught within {BOUND} programs");
        };
        report.push(format!("{bug:?} caught at program {at}: {detail}"));
    }
    eprintln!("{}", report.join("\n"));
}
