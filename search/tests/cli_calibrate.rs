//! End-to-end tests of `ndvm-search calibrate`: the built binary fitting programs to CSV tables in a
//! scratch folder.
//!
//! Oracle: known answers (the tables are generated here from known constants).

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

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

/// Writes `files` into a fresh scratch folder and runs `ndvm-search calibrate ARGS` there. Every
/// test goes through here.
fn check_calibrate(files: &[(&str, &str)], args: &[&str]) -> Run {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ndvm-cli-calibrate-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let scratch = Scratch(dir);
    for (name, text) in files {
        std::fs::write(scratch.0.join(name), text).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .arg("calibrate")
        .args(args)
        .current_dir(&scratch.0)
        .output()
        .expect("the ndvm-search binary runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// Michaelis–Menten rates v = 10 S / (2.5 + S) at 20 substrate levels S in 0.1–10.
fn mm_table() -> String {
    let mut csv = String::from("S,v\n");
    for i in 0..20 {
        let s = 0.1 + 9.9 * i as f64 / 19.0;
        csv += &format!("{s},{}\n", 10.0 * s / (2.5 + s));
    }
    csv
}

/// The value printed on the line `name = value`.
fn field(stdout: &str, name: &str) -> f64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("{name} = ")))
        .unwrap_or_else(|| panic!("no `{name} = ` line in:\n{stdout}"));
    line[name.len() + 3..].parse().unwrap()
}

#[test]
fn fits_declared_parameters() {
    // Known answer: Vmax 10, Km 2.5.
    let model = "(params (Vmax positive 1.0) (Km positive 1.0))\n(/ (* Vmax S) (+ Km S))\n";
    let run = check_calibrate(
        &[("mm.scm", model), ("rates.csv", &mm_table())],
        &["mm.scm", "--data", "rates.csv", "--target", "v"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        (field(&run.stdout, "Vmax") - 10.0).abs() < 1e-6,
        "{}",
        run.stdout
    );
    assert!(
        (field(&run.stdout, "Km") - 2.5).abs() < 1e-6,
        "{}",
        run.stdout
    );
    assert!(field(&run.stdout, "loss") < 1e-12, "{}", run.stdout);
    assert!(
        (field(&run.stdout, "r2") - 1.0).abs() < 1e-12,
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("stop = converged\n"), "{}", run.stdout);
    assert!(run.stdout.contains("evaluations = "), "{}", run.stdout);
}

#[test]
fn params_from_the_command_line_and_json() {
    // Known answer: Vmax 10, Km 2.5; the program declares nothing.
    let model = "(/ (* Vmax S) (+ Km S))";
    let run = check_calibrate(
        &[("mm.scm", model), ("rates.csv", &mm_table())],
        &[
            "mm.scm",
            "--data",
            "rates.csv",
            "--target",
            "v",
            "--params",
            "Vmax:positive=5,Km:positive",
            "--starts",
            "8",
            "--optimizer",
            "lbfgs",
            "--seed",
            "3",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let v: serde_json::Value = serde_json::from_str(run.stdout.trim_end()).unwrap();
    assert!(
        (v["params"]["Vmax"].as_f64().unwrap() - 10.0).abs() < 1e-6,
        "{v}"
    );
    assert!(
        (v["params"]["Km"].as_f64().unwrap() - 2.5).abs() < 1e-6,
        "{v}"
    );
    assert_eq!(v["stop"], "converged");
    assert_eq!(v["starts"], 8);
    assert_eq!(v["n_points"], 20);
    assert!(v["n_evals"].as_u64().unwrap() > 0);
}

#[test]
fn errors_are_located() {
    let model = "(params (Vmax positive 1.0) (Km positive 1.0))\n(/ (* Vmax S) (+ Km Q))\n";
    let run = check_calibrate(
        &[("mm.scm", model), ("rates.csv", &mm_table())],
        &["mm.scm", "--data", "rates.csv", "--target", "v"],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.starts_with("mm.scm:2:21: error[E001]"),
        "{}",
        run.stderr
    );

    let run = check_calibrate(
        &[("mm.scm", model), ("rates.csv", &mm_table())],
        &["mm.scm", "--data", "rates.csv", "--target", "rate"],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        run.stderr,
        "error: rates.csv:1: no target column `rate` (the columns are S, v)\n"
    );

    let run = check_calibrate(
        &[("mm.scm", model), ("rates.csv", "1,2\n3,4\n")],
        &["mm.scm", "--data", "rates.csv", "--target", "v"],
    );
    assert_eq!(
        run.stderr,
        "error: rates.csv:1: the first line must name the columns\n"
    );

    let run = check_calibrate(
        &[("mm.scm", model), ("rates.csv", "S,v\n1,2\n3,x\n")],
        &["mm.scm", "--data", "rates.csv", "--target", "v"],
    );
    assert_eq!(
        run.stderr,
        "error: rates.csv:3: column 2: `x` is not a number\n"
    );

    let run = check_calibrate(
        &[("mm.scm", model), ("rates.csv", &mm_table())],
        &[
            "mm.scm",
            "--data",
            "rates.csv",
            "--target",
            "v",
            "--params",
            "a:big",
        ],
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("unknown kind `big`"), "{}", run.stderr);
}

/// Issue 11: the calibrator's errors named its configuration (`list them in the configuration`,
/// `n_starts`) instead of the flags that set it.
#[test]
fn issue_11_errors_name_the_flags() {
    let model = "(params (Vmax positive 1.0) (Km positive 1.0))\n(/ (* Vmax S) (+ Km S))\n";
    let run = check_calibrate(
        &[("m.scm", "(* a S)"), ("rates.csv", &mm_table())],
        &["m.scm", "--data", "rates.csv", "--target", "v"],
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(
        run.stderr,
        "error: m.scm: no parameters to fit: declare them in the program with \
         `(params (name kind init) …)` or name them with `--params NAME[,NAME…]`\n"
    );

    let starts = |k: &'static str| {
        check_calibrate(
            &[("mm.scm", model), ("rates.csv", &mm_table())],
            &[
                "mm.scm",
                "--data",
                "rates.csv",
                "--target",
                "v",
                "--starts",
                k,
            ],
        )
    };
    let run = starts("0");
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(
        run.stderr,
        "error: bad argument `--starts 0`: there must be at least one start\n"
    );
    assert_eq!(starts("1").code, 0);

    let run = check_calibrate(
        &[("mm.scm", model), ("rates.csv", &mm_table())],
        &[
            "mm.scm",
            "--data",
            "rates.csv",
            "--target",
            "v",
            "--params",
            "Km=1,Km=2",
        ],
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(
        run.stderr,
        "error: bad argument `--params`: `Km` is listed twice\n"
    );
}

/// Issue 11: an unbound variable said nothing about the data; it now lists the table's columns
/// (which of them is the target) and the parameters.
#[test]
fn issue_11_unbound_variables_list_the_columns() {
    let model = "(params (Vmax positive 1.0))\n(/ (* Vmax x) (+ Km x))\n";
    let run = check_calibrate(
        &[("mm.scm", model), ("rates.csv", &mm_table())],
        &[
            "mm.scm",
            "--data",
            "rates.csv",
            "--target",
            "v",
            "--params",
            "Km",
        ],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        run.stderr.lines().next(),
        Some(
            "mm.scm:2:12: error[E001]: unbound variable: `x` is not bound; the data has columns: \
             S, v (target v); the parameters are Vmax, Km"
        ),
        "{run:?}"
    );
}

#[test]
fn fits_in_f32_lanes_to_single_precision() {
    // Known answer: Vmax 10, Km 2.5, fitted through f32 lanes: the loss floor is f32 rounding
    // (relative 6e-8 per operation), so the constants come out within ~1e-4 of the truth.
    let model = "(params (Vmax positive 1.0) (Km positive 1.0))\n(/ (* Vmax S) (+ Km S))\n";
    let run = check_calibrate(
        &[("mm.scm", model), ("rates.csv", &mm_table())],
        &[
            "mm.scm",
            "--data",
            "rates.csv",
            "--target",
            "v",
            "--precision",
            "f32",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let (vmax, km) = (field(&run.stdout, "Vmax"), field(&run.stdout, "Km"));
    assert!((vmax - 10.0).abs() < 1e-3, "{}", run.stdout);
    assert!((km - 2.5).abs() < 1e-3, "{}", run.stdout);
    assert!(field(&run.stdout, "loss") < 1e-9, "{}", run.stdout);
    // Not the f64 fit's bits: the lanes really were f32.
    let f64_run = check_calibrate(
        &[("mm.scm", model), ("rates.csv", &mm_table())],
        &["mm.scm", "--data", "rates.csv", "--target", "v"],
    );
    assert_ne!(field(&f64_run.stdout, "Vmax"), vmax);
}

/// `--race`: the racing screen recovers the same constants with fewer evaluations, `--race off`
/// equals the default (no racing), and a bad schedule is named with its flag.
#[test]
fn race_flag_fits_with_fewer_evaluations_and_bad_schedules_are_named() {
    let model = "(params (Vmax positive 1.0) (Km positive 1.0))\n(/ (* Vmax S) (+ Km S))\n";
    let run = |extra: &[&'static str]| {
        let mut args = vec!["mm.scm", "--data", "rates.csv", "--target", "v", "--json"];
        args.extend_from_slice(extra);
        let run = check_calibrate(&[("mm.scm", model), ("rates.csv", &mm_table())], &args);
        assert_eq!(run.code, 0, "{run:?}");
        serde_json::from_str::<serde_json::Value>(run.stdout.trim_end()).unwrap()
    };
    let full = run(&[]);
    let off = run(&["--race", "off"]);
    let raced = run(&["--race", "10:8,30:4"]);
    for v in [&full, &off, &raced] {
        // Known answer: Vmax 10, Km 2.5.
        assert!(
            (v["params"]["Vmax"].as_f64().unwrap() - 10.0).abs() < 1e-6,
            "{v}"
        );
        assert!(
            (v["params"]["Km"].as_f64().unwrap() - 2.5).abs() < 1e-6,
            "{v}"
        );
    }
    assert_eq!(off["params"], full["params"]);
    assert_eq!(off["n_evals"], full["n_evals"]);
    // 32×10 + 8×20 + 4×70 screen evaluations instead of 32×100 (the polish differs little).
    let (n_full, n_raced) = (
        full["n_evals"].as_u64().unwrap(),
        raced["n_evals"].as_u64().unwrap(),
    );
    assert!(
        n_full >= 3200 && n_raced < 760 + (n_full - 3200) + 200,
        "{n_full} {n_raced}"
    );

    let check = check_calibrate(
        &[("mm.scm", model), ("rates.csv", &mm_table())],
        &[
            "mm.scm",
            "--data",
            "rates.csv",
            "--target",
            "v",
            "--race",
            "10:8,10:4",
        ],
    );
    assert_eq!(check.code, 2, "{check:?}");
    assert_eq!(
        check.stderr,
        "error: bad argument `--race 10:8,10:4`: cut 2 (step 10) must come after cut 1 (step 10)\n"
    );
}
