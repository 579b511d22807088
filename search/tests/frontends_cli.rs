//! Front ends through the `ndvm-search` binary: a replayed co-search whose cache is in infix equals
//! its Scheme twin, `eval` and `calibrate` read infix files (by extension or `--frontend`),
//! `translate` between the notations, and `check` reads a cache's lines with their front ends.
//!
//! Oracle: the Scheme runs (the same heap programs must give the same bytes).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::root;
use ndvm_core::Heap;
use ndvm_frontends::Registry;
use serde_json::Value;

fn ndvm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .current_dir(root())
        .env_remove("SLURM_ARRAY_TASK_ID")
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = ndvm(args);
    assert!(
        out.status.success(),
        "ndvm-search {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `src` (Scheme) printed by the infix front end.
fn to_infix(src: &str) -> String {
    let registry = Registry::default();
    let (scheme, infix) = (
        registry.by_name("scheme").unwrap(),
        registry.by_name("infix").unwrap(),
    );
    let mut heap = Heap::new();
    let program = scheme.parse(&mut heap, src).unwrap();
    infix.print(&heap, &program).unwrap()
}

/// Each line of `events.jsonl` without the fields that name the notation or the clock.
fn events_without_notation(dir: &Path) -> Vec<Value> {
    common::events_without(dir, &["wall_ms", "finished_s", "src", "frontend"])
}

fn summary(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn an_infix_cache_gives_the_same_run_as_its_scheme_twin() {
    let dir = common::scratch("frontends_cli", "twin");
    let stream = common::testdata("seed-data/cosearch_candidates_valid.jsonl");
    let mut cache = String::new();
    for line in std::fs::read_to_string(&stream).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let src = to_infix(v["src"].as_str().unwrap());
        cache.push_str(&serde_json::json!({ "src": src }).to_string());
        cache.push('\n');
    }
    std::fs::write(dir.join("seed.infix.jsonl"), cache).unwrap();
    // The Scheme task with its formula in infix and the translated cache, whose name picks the
    // front end.
    let scheme_task = root().join("search/tests/data/tasks/replay.yaml");
    let text = std::fs::read_to_string(&scheme_task).unwrap();
    let twin = text
        .replace(
            "\"(* (exp (* -0.3 x)) (cos (* 2 x)))\"",
            "\"exp(-0.3 * x) * cos(2 * x)\"",
        )
        .replace(
            "../../../../testdata/seed-data/cosearch_candidates_valid.jsonl",
            "seed.infix.jsonl",
        );
    assert_ne!(twin, text);
    let twin_task = dir.join("replay-infix.yaml");
    std::fs::write(&twin_task, twin).unwrap();

    let (a, b) = (dir.join("scheme"), dir.join("infix"));
    ok(&[
        "run",
        p(&scheme_task),
        "--out",
        p(&a),
        "--threads",
        "2",
        "-q",
    ]);
    ok(&["run", p(&twin_task), "--out", p(&b), "--threads", "2", "-q"]);
    assert_eq!(
        std::fs::read(a.join("data.csv")).unwrap(),
        std::fs::read(b.join("data.csv")).unwrap()
    );
    let (ea, eb) = (events_without_notation(&a), events_without_notation(&b));
    assert!(ea.len() > 100, "{}", ea.len());
    assert_eq!(ea, eb);
    let (sa, sb) = (summary(&a), summary(&b));
    for key in ["skeleton", "params", "validation_r2", "train_loss", "index"] {
        assert_eq!(sa["best"][key], sb["best"][key], "{key}");
    }
    assert_eq!(sb["best"]["frontend"], "infix");
    let best_infix = sb["best"]["src"].as_str().unwrap();
    assert_eq!(best_infix, to_infix(sa["best"]["src"].as_str().unwrap()));
    let md = std::fs::read_to_string(b.join("summary.md")).unwrap();
    assert!(md.contains(&format!("```infix\n{best_infix}\n```")), "{md}");
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn eval_and_calibrate_read_infix_files_as_their_scheme_twins() {
    let dir = common::scratch("frontends_cli", "eval");
    let infix = ok(&["translate", "examples/decay.scm", "--to", "infix"]);
    assert_eq!(infix, "a * exp(-(k * t))\n");
    let by_ext = write(&dir, "decay.infix", &infix);
    let by_flag = write(&dir, "decay.txt", &infix);
    let args = [
        "--bind",
        "a=2",
        "--bind",
        "k=0.5,0.7",
        "--input",
        "t=1.5",
        "--grad",
        "--json",
    ];
    let scheme_out = ok(&[&["eval", "examples/decay.scm"], &args[..]].concat());
    assert_eq!(ok(&[&["eval", p(&by_ext)], &args[..]].concat()), scheme_out);
    assert_eq!(
        ok(&[&["eval", p(&by_flag), "--frontend", "infix"], &args[..]].concat()),
        scheme_out
    );
    let v: Value = serde_json::from_str(&scheme_out).unwrap();
    assert_eq!(v["lanes"], 2, "{v}");

    let fit = |file: &str| {
        let out = ok(&[
            "calibrate",
            file,
            "--data",
            "examples/rates.csv",
            "--target",
            "v",
            "--json",
        ]);
        let mut v: Value = serde_json::from_str(&out).unwrap();
        v.as_object_mut().unwrap().remove("wall_s");
        v
    };
    let mm = fit("examples/mm.scm");
    assert_eq!(fit("examples/mm.infix"), mm);
    assert!(mm["r2"].as_f64().unwrap() > 0.999_999, "{mm}");

    let out = ndvm(&["eval", p(&by_flag), "--frontend", "cobol"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown front end `cobol` (known: scheme, infix"),
        "{err}"
    );
    // A Scheme file read as infix fails where the infix reader stops, named by file:line:col.
    let out = ndvm(&["eval", "examples/decay.scm", "--frontend", "infix"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("examples/decay.scm:1:16: error[P007]: expected a new line"),
        "{err}"
    );
}

#[test]
fn translate_round_trips_and_names_what_infix_cannot_write() {
    let dir = common::scratch("frontends_cli", "translate");
    let kalman = ok(&["translate", "examples/kalman.infix", "--to", "scheme"]);
    let scm = write(&dir, "kalman.scm", &kalman);
    let back = ok(&["translate", p(&scm), "--to", "infix"]);
    let again = write(&dir, "kalman2.infix", &back);
    assert_eq!(ok(&["translate", p(&again), "--to", "scheme"]), kalman);

    let letrec = write(
        &dir,
        "fact.scm",
        "(letrec ((f (lambda (n) (if (< n 1) 1 (* n (f (- n 1))))))) (f 5))\n",
    );
    let out = ndvm(&["translate", p(&letrec), "--to", "infix"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("letrec"), "{err}");
    let out = ndvm(&["translate", p(&letrec), "--to", "cobol"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn check_reads_each_cache_line_with_its_front_end() {
    let dir = common::scratch("frontends_cli", "check");
    let cache = write(
        &dir,
        "mixed.infix.jsonl",
        concat!(
            "{\"src\":\"a * exp(-b * x)  # decay\"}\n",
            "{\"src\":\"(* a x)\",\"frontend\":\"scheme\"}\n",
            "{\"src\":\"a * (x +\"}\n",
        ),
    );
    let out = ok(&["check", p(&cache)]);
    assert!(
        out.starts_with(&format!("{}: 3 candidates, 2 read\n", p(&cache))),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{}:3: the infix program does not read: 1:",
            p(&cache)
        )),
        "{out}"
    );
    // Read as Scheme, the infix lines do not read (`#` starts no Scheme syntax).
    let out = ok(&["check", p(&cache), "--frontend", "scheme"]);
    assert!(
        out.starts_with(&format!("{}: 3 candidates, 1 read\n", p(&cache))),
        "{out}"
    );
    let bad = write(
        &dir,
        "bad.jsonl",
        "{\"src\":\"x\",\"frontend\":\"cobol\"}\n",
    );
    let out = ndvm(&["check", p(&bad)]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.jsonl:1: unknown front end `cobol`"),
        "{err}"
    );
}
