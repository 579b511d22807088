//! A task built in code (no file) resolves as the task file with the same keys does: the symreg
//! task built with `TaskSpec` gives `tasks/symreg.yaml`'s summary (less `run`); a table held in
//! memory gives what the same table read from CSV gives; errors of a task built in code name the
//! field, not a line.

mod common;

use ndvm_search::engine::{self, RunOptions};
use ndvm_search::observe::Nothing;
use ndvm_search::summary::{RunSection, Summary};
use ndvm_search::task::{self, Columns, GenerateSpec, ProposerName, SplitSpec, Task, TaskSpec, at};
use serde_json::Value;

/// The summary of a run of `task` on two threads, without its wall-clock `run` section.
fn summary_core(task: &Task) -> Value {
    let outcome = engine::run(task, &RunOptions::new(2), &mut Nothing).unwrap();
    let summary = Summary::new(
        task,
        &outcome,
        RunSection::new(&outcome, 2, engine::Shard::ALL),
    );
    let mut v = serde_json::to_value(&summary).unwrap();
    v.as_object_mut().unwrap().remove("run");
    v
}

/// `tasks/symreg.yaml`, key for key.
fn symreg_in_code() -> TaskSpec {
    let mut spec = TaskSpec::new("symreg").with_variables(&["x"], "y");
    spec.seed = 7;
    spec.data.generate = Some(at(GenerateSpec {
        formula: "(* (exp (* -0.3 x)) (cos (* 2 x)))".to_string(),
        input: "x".to_string(),
        from: 0.1,
        to: 6.0,
        n: 64,
        noise: 0.02,
    }));
    spec.split = Some(SplitSpec {
        train: at(44.0),
        validation: at(10.0),
        seed: None,
    });
    for name in ["a", "b", "c", "d", "e", "f"] {
        spec = spec.with_param(name, Some(0.5));
    }
    spec.proposer.kind = Some(at(ProposerName::Grammar));
    spec.proposer.operators = Some(
        ["exp", "sin", "cos", "log", "sqrt"]
            .iter()
            .map(|s| at(s.to_string()))
            .collect(),
    );
    spec.proposer.max_terms = Some(at(2));
    spec.proposer.batch = Some(at(8));
    spec.calibrator.starts = Some(at(32));
    spec.budget.seconds = Some(at(300.0));
    spec.budget.calibrations = Some(2000);
    spec.success.metric = Some(task::MetricName::R2);
    spec.success.threshold = Some(at(0.99));
    spec.success.stop = true;
    spec
}

#[test]
fn the_symreg_task_built_in_code_gives_the_task_files_summary() {
    let from_file = task::load(&common::root().join("tasks/symreg.yaml")).unwrap();
    let in_code = task::build(symreg_in_code()).unwrap();
    assert_eq!(in_code.train, from_file.train);
    assert_eq!(in_code.validation, from_file.validation);
    let (a, b) = (summary_core(&in_code), summary_core(&from_file));
    assert!(a["calibrations"].as_u64().unwrap() > 0, "{a}");
    assert_eq!(a, b);
}

#[test]
fn a_table_in_memory_equals_the_same_table_read_from_csv() {
    let dir = common::scratch("task-in-code", "columns");
    let x: Vec<f64> = (0..40).map(|i| 0.1 * f64::from(i)).collect();
    let y: Vec<f64> = x
        .iter()
        .map(|x| 2.0 * (-0.5 * x).exp() + 0.01 * (7.0 * x).sin())
        .collect();
    let mut csv = String::from("y,x\n");
    for (x, y) in x.iter().zip(&y) {
        csv.push_str(&format!("{y:?},{x:?}\n"));
    }
    std::fs::write(dir.join("data.csv"), csv).unwrap();
    std::fs::write(
        dir.join("cache.jsonl"),
        "{\"src\": \"(* a (exp (* b x)))\"}\n{\"src\": \"(+ a (* b x))\"}\n",
    )
    .unwrap();
    let cache = dir.join("cache.jsonl").display().to_string();
    let yaml = format!(
        "name: mem\nseed: 3\ndata: {{csv: data.csv}}\ninputs: [x]\ntarget: y\n\
         params: [{{name: a}}, {{name: b}}]\nproposer: {{cache: {cache}}}\n"
    );
    std::fs::write(dir.join("mem.yaml"), yaml).unwrap();
    let from_file = task::load(&dir.join("mem.yaml")).unwrap();
    let mut spec = TaskSpec::new("mem")
        .with_variables(&["x"], "y")
        .with_param("a", None)
        .with_param("b", None);
    spec.seed = 3;
    spec.data.columns = Some(Columns::new([("x", x.clone()), ("y", y.clone())]));
    spec.proposer.cache = Some(at(cache));
    let in_code = task::build(spec).unwrap();
    assert_eq!(in_code.train, from_file.train);
    assert_eq!(in_code.validation, from_file.validation);
    assert_eq!(summary_core(&in_code), summary_core(&from_file));
}

#[test]
fn errors_of_a_task_built_in_code_name_the_field() {
    let err = |spec: TaskSpec| task::build(spec).unwrap_err().to_string();
    let base = || {
        TaskSpec::new("bad")
            .with_variables(&["x"], "y")
            .with_param("a", None)
    };
    let mut s = base();
    s.data.columns = Some(Columns::new([("x", vec![1.0, 2.0, 3.0])]));
    assert_eq!(
        err(s),
        "task `bad` (built in code): data.columns: no column `y` (the columns are x)"
    );
    let mut s = base();
    s.data.columns = Some(Columns::new([
        ("x", vec![1.0, 2.0]),
        ("y", vec![1.0, 2.0, 3.0]),
    ]));
    assert_eq!(
        err(s),
        "task `bad` (built in code): data.columns: column `x` has 2 values but `y` has 3"
    );
    let mut s = base();
    s.data.columns = Some(Columns::new([
        ("x", vec![1.0, 2.0, 3.0]),
        ("y", vec![1.0, f64::NAN, 3.0]),
    ]));
    assert!(err(s).contains("data.columns: row 1 holds a value that is not finite"));
    let mut s = base();
    s.calibrator.starts = Some(at(0));
    s.data.columns = Some(Columns::new([
        ("x", vec![1.0, 2.0, 3.0, 4.0]),
        ("y", vec![1.0, 2.0, 4.0, 3.0]),
    ]));
    assert_eq!(
        err(s),
        "task `bad` (built in code): `starts` must be at least 1 and at most 10000"
    );
    let mut s = base();
    s.isolation = task::Isolation::Process;
    let e = err(s);
    assert!(e.contains("`isolation: process` needs a task file"), "{e}");
    // No place in a file: no `:0:0` either.
    assert!(!e.contains(":0:0"), "{e}");
}
