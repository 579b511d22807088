//! End-to-end tests of `ndvm-search eval`: the built binary run on files in a scratch folder.
//!
//! Oracles: known answers worked by hand (named `known answer` below) and the seed system's PyTorch
//! oracle file `testdata/seed-data/oracle_refs.json` (Kalman filter).

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

/// What one run of the binary produced.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// A scratch folder under the system temp dir, removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes `files` into a fresh scratch folder, runs `ndvm-search eval ARGS` there with `stdin`,
/// and returns what it printed. Every test goes through here.
fn check_eval(files: &[(&str, &str)], args: &[&str], stdin: Option<&str>) -> Run {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ndvm-cli-eval-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let scratch = Scratch(dir);
    for (name, text) in files {
        std::fs::write(scratch.0.join(name), text).unwrap();
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .arg("eval")
        .args(args)
        .current_dir(&scratch.0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the ndvm-search binary runs");
    {
        use std::io::Write;
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// `check_eval` that must succeed.
fn check_ok(files: &[(&str, &str)], args: &[&str], stdin: Option<&str>) -> String {
    let run = check_eval(files, args, stdin);
    assert_eq!(run.code, 0, "expected success: {run:?}");
    run.stdout
}

fn json(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

/// `|a - b| <= atol + rtol * |b|`, b the reference (as in seed-data/README.md).
fn close(a: f64, b: f64, atol: f64, rtol: f64) -> bool {
    (a - b).abs() <= atol + rtol * b.abs()
}

// Known answer: q^2 + 3r at q = 2, r = 0.5 is 5.5; d/dq = 2q = 4, d/dr = 3.
const QUADRATIC: &str = "(+ (* q q) (* 3 r))\n";

#[test]
fn human_output_prints_value_then_gradients() {
    let out = check_ok(
        &[("prog.scm", QUADRATIC)],
        &["prog.scm", "--bind", "q=2", "--bind", "r=0.5", "--grad"],
        None,
    );
    assert_eq!(out, "value = 5.5\nd/dq = 4.0\nd/dr = 3.0\n");

    let out = check_ok(
        &[("prog.scm", QUADRATIC)],
        &["prog.scm", "--bind", "q=2", "--bind", "r=0.5"],
        None,
    );
    assert_eq!(out, "value = 5.5\n", "no gradients without --grad");
}

#[test]
fn json_output_keeps_binding_order() {
    let out = check_ok(
        &[("prog.scm", QUADRATIC)],
        &[
            "prog.scm", "--bind", "r=0.5", "--bind", "q=2", "--grad", "--json",
        ],
        None,
    );
    assert_eq!(
        out,
        "{\"value\":5.5,\"grads\":{\"r\":3.0,\"q\":4.0},\"fault\":false}\n"
    );
}

#[test]
fn lanes_with_per_lane_bindings() {
    // Known answer: q*r with q = 1, 2, 3 and r = 2 on every lane.
    let out = check_ok(
        &[("prog.scm", "(* q r)")],
        &[
            "prog.scm", "--lanes", "3", "--bind", "q=1,2,3", "--bind", "r=2", "--grad", "--json",
        ],
        None,
    );
    assert_eq!(
        out,
        "{\"lanes\":3,\"value\":[2.0,4.0,6.0],\"grads\":{\"q\":[2.0,2.0,2.0],\"r\":[1.0,2.0,3.0]},\
         \"faults\":[false,false,false]}\n"
    );

    // Known answer, divergent branches: q < 2 takes q^2 (d/dq = 2q), otherwise 10q (d/dq = 10).
    // The lane count comes from the per-lane binding when --lanes is absent.
    let out = check_ok(
        &[("prog.scm", "(if (< q 2) (* q q) (* 10 q))")],
        &["prog.scm", "--bind", "q=1,2,3", "--grad"],
        None,
    );
    assert_eq!(
        out,
        "lane 0: value = 1.0  d/dq = 2.0\nlane 1: value = 20.0  d/dq = 10.0\nlane 2: value = 30.0  d/dq = 10.0\n"
    );

    // --input is bound per lane but not differentiated.
    let out = check_ok(
        &[("prog.scm", "(* q x)")],
        &["prog.scm", "--bind", "q=2", "--input", "x=1,2,3", "--grad"],
        None,
    );
    assert_eq!(
        out,
        "lane 0: value = 2.0  d/dq = 1.0\nlane 1: value = 4.0  d/dq = 2.0\nlane 2: value = 6.0  d/dq = 3.0\n"
    );
}

#[test]
fn faulted_lanes_are_marked_and_isolated() {
    // Known answer: 1/q is +inf at q = 0 (a per-lane fault, not an error) and 1 at q = 1.
    let out = check_ok(
        &[("prog.scm", "(/ 1 q)")],
        &["prog.scm", "--bind", "q=0,1"],
        None,
    );
    assert_eq!(out, "lane 0: value = inf  (fault)\nlane 1: value = 1.0\n");

    let out = check_ok(
        &[("prog.scm", "(/ 1 q)")],
        &["prog.scm", "--bind", "q=0", "--grad", "--json"],
        None,
    );
    let v = json(&out);
    assert_eq!(
        v["value"], "inf",
        "non-finite numbers are written as strings: {out}"
    );
    assert_eq!(v["fault"], true);
    assert!(v["grads"]["q"].is_string(), "{out}");
}

#[test]
fn lane_count_mismatch_is_a_usage_error() {
    let run = check_eval(
        &[("prog.scm", QUADRATIC)],
        &["prog.scm", "--lanes", "2", "--bind", "q=1,2,3"],
        None,
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("`q` has 3 values but there are 2 lanes"),
        "{run:?}"
    );

    let run = check_eval(
        &[("prog.scm", QUADRATIC)],
        &["prog.scm", "--bind", "q=abc"],
        None,
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("`abc` is not a number"), "{run:?}");

    let run = check_eval(&[], &[], None);
    assert_eq!(
        run.code, 2,
        "a program file or --jsonl is required: {run:?}"
    );
}

#[test]
fn data_binds_a_csv_matrix() {
    // Known answer: det [[1, 2], [3, 4]] = -2; d/ds of s * det = det.
    let out = check_ok(
        &[("prog.scm", "(* s (det m))"), ("m.csv", "a,b\n1,2\n3,4\n")],
        &[
            "prog.scm", "--data", "m=m.csv", "--bind", "s=1.5", "--grad", "--json",
        ],
        None,
    );
    let v = json(&out);
    assert!(
        close(v["value"].as_f64().unwrap(), -3.0, 1e-12, 0.0),
        "{out}"
    );
    assert!(
        close(v["grads"]["s"].as_f64().unwrap(), -2.0, 1e-12, 0.0),
        "{out}"
    );
}

#[test]
fn csv_errors_name_file_and_line() {
    let run = check_eval(
        &[("prog.scm", "(det m)"), ("m.csv", "1,2\n3,4,5\n")],
        &["prog.scm", "--data", "m=m.csv"],
        None,
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("m.csv:2: expected 2 fields, found 3"),
        "{run:?}"
    );

    let run = check_eval(
        &[("prog.scm", "(det m)")],
        &["prog.scm", "--data", "m=missing.csv"],
        None,
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("cannot read missing.csv"), "{run:?}");
}

#[test]
fn program_errors_are_located() {
    let run = check_eval(
        &[("prog.scm", "(+ q\n   y)")],
        &["prog.scm", "--bind", "q=1"],
        None,
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("prog.scm:2:4"),
        "unbound `y` at line 2, column 4: {run:?}"
    );
    assert!(run.stderr.contains("E001"), "{run:?}");

    let run = check_eval(
        &[("prog.scm", "(+ q 1")],
        &["prog.scm", "--bind", "q=1"],
        None,
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("prog.scm:1:1"),
        "unclosed `(` at line 1, column 1: {run:?}"
    );

    let run = check_eval(&[], &["missing.scm"], None);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("cannot read missing.scm"), "{run:?}");
}

/// Issue 11: an unbound variable said nothing about what is bound; it now lists the names the
/// command line (or the request) binds.
#[test]
fn issue_11_unbound_variables_list_the_bound_names() {
    let run = check_eval(
        &[
            ("prog.scm", "(* a (exp (- (* k x))))"),
            ("obs.csv", "1,2\n"),
        ],
        &[
            "prog.scm",
            "--bind",
            "a=2",
            "--input",
            "t=1",
            "--data",
            "obs=obs.csv",
        ],
        None,
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        run.stderr.lines().next(),
        Some(
            "prog.scm:1:17: error[E001]: unbound variable: `k` is not bound; the command line \
             binds a, t, obs"
        ),
        "{run:?}"
    );
    let run = check_eval(&[("prog.scm", "(* 2 x)")], &["prog.scm"], None);
    assert_eq!(
        run.stderr.lines().next(),
        Some(
            "prog.scm:1:6: error[E001]: unbound variable: `x` is not bound; the command line \
             binds nothing (bind names with --bind, --input or --data)"
        ),
        "{run:?}"
    );
    let requests = "{\"src\": \"(* a t)\", \"params\": {\"a\": 1}, \"inputs\": {\"x\": 2}}\n\
                    {\"src\": \"(* 2 t)\"}\n";
    let out = check_ok(&[], &["--jsonl", "-"], Some(requests));
    let errors: Vec<String> = out
        .lines()
        .map(|l| json(l)["error"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        errors,
        [
            "src:1:6: error[E001]: unbound variable: `t` is not bound; the request binds a, x",
            "src:1:6: error[E001]: unbound variable: `t` is not bound; the request binds nothing \
             (give names in `params` or `inputs`)"
        ]
    );
}

const BATCH: &str = r#"{"src": "(* p1 (+ p0 x))", "params": {"p1": 3, "p0": 0.5}, "inputs": {"x": 1.5}}
{"src": "(vsum (* a (vec b c)))", "params": {"a": 2, "b": 3, "c": 4}}
{not json
{"src": "(dot v v)", "inputs": {"v": [1, 2, 2]}}
{"src": "(det m)", "inputs": {"m": [[1, 2], [3, 4]]}}
{"src": "(+ p0\n   y)", "params": {"p0": 1}}
{"src": "(+ p0 1", "params": {"p0": 1}}
"#;

#[test]
fn jsonl_batch_answers_every_line_in_order() {
    let out = check_ok(&[("in.jsonl", BATCH)], &["--jsonl", "in.jsonl"], None);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 7, "one output line per input line: {out}");
    // Known answers: p1 (p0 + x) = 3 * 2 = 6, d/dp1 = 2, d/dp0 = 3; keys in the request's order.
    assert_eq!(lines[0], r#"{"value":6.0,"grads":{"p1":2.0,"p0":3.0}}"#);
    // Known answer (scalar broadcast into a vector): a (b + c) = 14, d/da = b + c, d/db = d/dc = a.
    assert_eq!(
        lines[1],
        r#"{"value":14.0,"grads":{"a":7.0,"b":2.0,"c":2.0}}"#
    );
    assert!(
        json(lines[2])["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid request"),
        "{}",
        lines[2]
    );
    assert_eq!(lines[3], r#"{"value":9.0,"grads":{}}"#);
    assert!(
        close(json(lines[4])["value"].as_f64().unwrap(), -2.0, 1e-12, 0.0),
        "{}",
        lines[4]
    );
    let unbound = json(lines[5])["error"].as_str().unwrap().to_string();
    assert!(
        unbound.contains(":2:4") && unbound.contains("E001"),
        "{unbound}"
    );
    let unclosed = json(lines[6])["error"].as_str().unwrap().to_string();
    assert!(unclosed.contains(":1:1"), "{unclosed}");
}

#[test]
fn jsonl_reads_stdin() {
    let out = check_ok(
        &[],
        &["--jsonl", "-"],
        Some("{\"src\": \"(* 2 p)\", \"params\": {\"p\": 0.25}}\n"),
    );
    assert_eq!(out, "{\"value\":0.5,\"grads\":{\"p\":2.0}}\n");
}

#[test]
fn kalman2d_t80_matches_the_pytorch_oracle() {
    // Oracle: testdata/seed-data/oracle_refs.json, `kalman2d_T80`, with the artifact's tolerances
    // (forward atol 1e-2 / rtol 2e-3, gradients atol 5 / rtol 2e-2; see seed-data/README.md).
    let text = std::fs::read_to_string(common::testdata("seed-data/oracle_refs.json")).unwrap();
    // The file has one bare `Infinity` token (for `div_by_zero`), which strict JSON rejects.
    let refs = json(&text.replace("Infinity", "null"));
    let kalman = refs["programs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "kalman2d_T80")
        .expect("kalman2d_T80 is in oracle_refs.json");
    let matrix = &kalman["matrix"];
    let cols = matrix["cols"].as_u64().unwrap() as usize;
    let rows: Vec<Value> = matrix["data"]
        .as_array()
        .unwrap()
        .chunks(cols)
        .map(|r| Value::from(r.to_vec()))
        .collect();
    let mut inputs = serde_json::Map::new();
    inputs.insert(
        matrix["name"].as_str().unwrap().to_string(),
        Value::from(rows),
    );
    let request = serde_json::json!({
        "src": kalman["src"],
        "params": kalman["scalars"],
        "inputs": inputs,
        "dialect": "reference",
    });
    let out = check_ok(
        &[("in.jsonl", &format!("{request}\n"))],
        &["--jsonl", "in.jsonl"],
        None,
    );
    let got = json(out.trim_end());
    let value = got["value"]
        .as_f64()
        .unwrap_or_else(|| panic!("no value: {out}"));
    let expected = kalman["oracle_result"].as_f64().unwrap();
    assert!(
        close(value, expected, 1e-2, 2e-3),
        "value {value} vs oracle {expected}"
    );
    for name in ["q", "r"] {
        let g = got["grads"][name].as_f64().unwrap();
        let expected = kalman["grads"][name].as_f64().unwrap();
        assert!(
            close(g, expected, 5.0, 2e-2),
            "d/d{name} {g} vs oracle {expected}"
        );
    }
}

#[test]
fn precision_f32_rounds_every_operation_to_single_precision() {
    // Known answer worked in f32 here: q = 0.1 and r = 0.7 rounded to f32 once, then each
    // operation of QUADRATIC (q·q + 3r) rounded to f32; d/dq = q + q, d/dr = 3.
    let out = check_ok(
        &[("prog.scm", QUADRATIC)],
        &[
            "prog.scm",
            "--bind",
            "q=0.1",
            "--bind",
            "r=0.7",
            "--grad",
            "--json",
            "--precision",
            "f32",
        ],
        None,
    );
    let (q, r) = (0.1f32, 0.7f32);
    let v = json(&out);
    assert_eq!(
        v["value"].as_f64().unwrap(),
        f64::from(q * q + 3.0 * r),
        "{out}"
    );
    assert_eq!(v["grads"]["q"].as_f64().unwrap(), f64::from(q + q), "{out}");
    assert_eq!(v["grads"]["r"].as_f64().unwrap(), 3.0, "{out}");
    let f64_out = check_ok(
        &[("prog.scm", QUADRATIC)],
        &["prog.scm", "--bind", "q=0.1", "--bind", "r=0.7", "--json"],
        None,
    );
    assert_ne!(json(&f64_out)["value"], v["value"], "f64 is the default");
    let bad = check_eval(
        &[("prog.scm", QUADRATIC)],
        &["prog.scm", "--precision", "f16"],
        None,
    );
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(
        bad.stderr.contains("f16") && bad.stderr.contains("f32"),
        "{bad:?}"
    );
}

#[test]
fn jsonl_batch_in_f32() {
    let out = check_ok(
        &[(
            "in.jsonl",
            "{\"src\": \"(* p0 1.1)\", \"params\": {\"p0\": 3}}\n",
        )],
        &["--jsonl", "in.jsonl", "--precision", "f32"],
        None,
    );
    let v = json(out.trim_end());
    assert_eq!(
        v["value"].as_f64().unwrap(),
        f64::from(3.0f32 * 1.1f32),
        "{out}"
    );
    assert_eq!(
        v["grads"]["p0"].as_f64().unwrap(),
        f64::from(1.1f32),
        "{out}"
    );
}
