//! `Interrupt::cancel_in_flight` (the Python binding's Ctrl-C): a calibration in flight is cut at
//! its next evaluation, the run returns at once with `interrupted`, what finished before is kept,
//! and the cut candidate has no event (it is left unfinished, as a resume expects).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ndvm_search::engine::{self, RunOptions};
use ndvm_search::events::{Event, StopKind};
use ndvm_search::interrupt::Interrupt;
use ndvm_search::observe::Observer;
use ndvm_search::task::{self, Columns, TaskSpec, at};

/// Records that the first event arrived.
struct FirstEvent(Arc<AtomicBool>);

impl Observer for FirstEvent {
    fn on_event(&mut self, _event: &Event) -> ndvm_search::Result<()> {
        self.0.store(true, Ordering::SeqCst);
        Ok(())
    }
}

#[test]
fn a_cancel_cuts_the_calibration_in_flight_and_keeps_what_finished() {
    let dir = common::scratch("cancel", "in-flight");
    // Candidate 0 fits at once; candidate 1 walks 400 000 loop steps through its parameter, so
    // its first evaluation alone takes seconds (one start, to stay within the memory limit);
    // candidate 2 is never reached.
    let slow =
        "(loop ((i 0) (s 0.0)) (if (= i 400000) (+ s (* a x)) (recur (+ i 1) (+ s (* a 1e-9)))))";
    std::fs::write(
        dir.join("cache.jsonl"),
        format!("{{\"src\": \"(* a x)\"}}\n{{\"src\": \"{slow}\"}}\n{{\"src\": \"(+ a x)\"}}\n"),
    )
    .unwrap();
    let x: Vec<f64> = (0..8).map(|i| 0.5 * f64::from(i)).collect();
    let y: Vec<f64> = x.iter().map(|x| 3.0 * x).collect();
    let mut spec = TaskSpec::new("cancel")
        .with_variables(&["x"], "y")
        .with_param("a", None);
    spec.data.columns = Some(Columns::new([("x", x), ("y", y)]));
    spec.proposer.cache = Some(at(dir.join("cache.jsonl").display().to_string()));
    spec.proposer.batch = Some(at(1));
    spec.calibrator.starts = Some(at(1));
    let task = task::build(spec).unwrap();

    let interrupt = Interrupt::new();
    let mut opts = RunOptions::new(1);
    opts.interrupt = Some(interrupt.clone());
    let seen = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (seen, interrupt) = (seen.clone(), interrupt.clone());
        std::thread::spawn(move || {
            while !seen.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
            // Candidate 1 is calibrating now.
            std::thread::sleep(Duration::from_millis(300));
            interrupt.cancel_in_flight();
            Instant::now()
        })
    };
    let outcome = engine::run(&task, &opts, &mut FirstEvent(seen)).unwrap();
    let returned = Instant::now();
    let raised = watcher.join().unwrap();
    assert_eq!(outcome.stop, StopKind::Interrupted);
    let indices: Vec<u64> = outcome.events.iter().map(|e| e.index).collect();
    assert_eq!(
        indices,
        [0],
        "only the calibration finished before the cancel is kept"
    );
    assert!((outcome.events[0].params["a"] - 3.0).abs() < 1e-6);
    // The cut calibration ended within its next evaluations, not after its many seconds.
    let late = returned.saturating_duration_since(raised);
    assert!(
        late < Duration::from_secs(3),
        "returned {late:?} after the cancel"
    );
}
