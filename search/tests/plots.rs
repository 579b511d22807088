//! Plots and progress output of a co-search run through the `ndvm-search` binary: the six plot
//! files (valid SVG, valid PNG with the expected dimensions), plots on resume, merge and a
//! multi-input task, plots that repeat byte for byte, `-q` silence, and plain progress lines when
//! stderr is not a terminal. No pixel is asserted.

mod common;

use common::root;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const STEMS: [&str; 3] = ["plot-fit", "plot-progress", "plot-pareto"];
const SIZE: (u32, u32) = (900, 560);

/// A fresh scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    common::scratch("plots", name)
}

/// Runs the binary (stderr is a pipe, so never a terminal) and asserts success.
fn run_ok(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .current_dir(root())
        .env_remove("SLURM_ARRAY_TASK_ID")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ndvm-search {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A small symreg run into `dir` (16 calibrations, one thread).
fn small_run(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "tasks/symreg.yaml",
        "--budget-calibrations",
        "16",
        "--threads",
        "1",
        "--out",
        dir.to_str().unwrap(),
    ];
    args.extend(extra);
    run_ok(&args)
}

/// Checks that `text` is a well-formed SVG document: one `<svg>` root, balanced tags, and at
/// least one polyline or path.
fn check_svg(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(
        text.trim_start().starts_with("<svg"),
        "{}: no <svg> root",
        path.display()
    );
    assert!(text.contains("xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(
        text.contains("<polyline") || text.contains("<path"),
        "{}: no polyline or path",
        path.display()
    );
    let mut stack: Vec<String> = Vec::new();
    let mut closed_root = false;
    let mut rest = text.as_str();
    while let Some(i) = rest.find('<') {
        assert!(
            !closed_root || rest[..i].trim().is_empty(),
            "content after </svg>"
        );
        let j = rest[i..].find('>').expect("unterminated tag") + i;
        let tag = &rest[i + 1..j];
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack.pop().expect("closing tag without an opening one");
            assert_eq!(open, name.trim(), "{}: mismatched tags", path.display());
            closed_root = stack.is_empty();
        } else if !tag.ends_with('/') && !tag.starts_with('?') && !tag.starts_with('!') {
            assert!(!closed_root, "{}: a second root element", path.display());
            let name = tag.split_whitespace().next().unwrap_or("").to_string();
            stack.push(name);
        }
        rest = &rest[j + 1..];
    }
    assert!(
        stack.is_empty() && closed_root,
        "{}: unbalanced tags",
        path.display()
    );
}

/// Checks the PNG signature and that the first chunk is an IHDR of the expected size.
fn check_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    assert!(bytes.len() > 33, "{}: too short", path.display());
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{}: PNG signature",
        path.display()
    );
    assert_eq!(&bytes[8..12], &13u32.to_be_bytes(), "IHDR length");
    assert_eq!(&bytes[12..16], b"IHDR");
    let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!((w, h), SIZE, "{}: dimensions", path.display());
    assert!(
        bytes.windows(4).any(|c| c == b"IEND"),
        "{}: no IEND",
        path.display()
    );
}

/// All six plot files exist, are non-empty and valid.
fn check_plots(dir: &Path) {
    for stem in STEMS {
        let svg = dir.join(format!("{stem}.svg"));
        let png = dir.join(format!("{stem}.png"));
        for f in [&svg, &png] {
            let len = std::fs::metadata(f)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()))
                .len();
            assert!(len > 0, "{} is empty", f.display());
        }
        check_svg(&svg);
        check_png(&png);
    }
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn small_run_writes_six_plots_and_quiet_prints_nothing() {
    let dir = scratch("small").join("run");
    let out = small_run(&dir, &["-q"]);
    assert!(
        out.stderr.is_empty(),
        "-q printed on stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check_plots(&dir);
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    for stem in STEMS {
        assert!(
            md.contains(&format!("({stem}.svg)")),
            "summary.md links {stem}.svg"
        );
        assert!(
            md.contains(&format!("({stem}.png)")),
            "summary.md links {stem}.png"
        );
    }
    // The fit plot shows the data and the winner's curve; the SVG keeps its labels as text.
    let fit = std::fs::read_to_string(dir.join("plot-fit.svg")).unwrap();
    assert!(fit.contains("best program") && fit.contains("validation"));
}

#[test]
fn non_tty_run_prints_plain_progress_lines() {
    let dir = scratch("lines").join("run");
    let out = small_run(&dir, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains('\x1b'), "escape codes on a pipe:\n{err}");
    let progress: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("/16 calibrations") && l.contains("best"))
        .collect();
    assert!(!progress.is_empty(), "no progress lines:\n{err}");
    assert!(err.lines().any(|l| l.starts_with("stopped: ")), "{err}");
}

#[test]
fn plots_repeat_byte_for_byte_except_wall_time() {
    let base = scratch("repeat");
    let (a, b) = (base.join("a"), base.join("b"));
    small_run(&a, &["-q"]);
    run_ok(&[
        "tasks/symreg.yaml",
        "--budget-calibrations",
        "16",
        "--threads",
        "2",
        "--out",
        b.to_str().unwrap(),
        "-q",
    ]);
    for f in [
        "plot-fit.svg",
        "plot-fit.png",
        "plot-pareto.svg",
        "plot-pareto.png",
    ] {
        assert!(
            read(&a.join(f)) == read(&b.join(f)),
            "{f} differs between runs"
        );
    }
}

#[test]
fn resume_and_merge_write_plots() {
    let base = scratch("resume-merge");
    let run = base.join("run");
    small_run(&run, &["-q"]);
    for stem in STEMS {
        std::fs::remove_file(run.join(format!("{stem}.svg"))).unwrap();
        std::fs::remove_file(run.join(format!("{stem}.png"))).unwrap();
    }
    run_ok(&["run", "--resume", run.to_str().unwrap(), "-q"]);
    check_plots(&run);

    let shards: Vec<PathBuf> = (0..2).map(|i| base.join(format!("shard{i}"))).collect();
    for (i, dir) in shards.iter().enumerate() {
        let shard = format!("{i}/2");
        small_run(dir, &["--shard", &shard, "-q"]);
    }
    let merged = base.join("merged");
    run_ok(&[
        "merge",
        shards[0].to_str().unwrap(),
        shards[1].to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    check_plots(&merged);
    // The merged fit and front equal the unsharded run's.
    for f in ["plot-fit.svg", "plot-pareto.svg"] {
        assert!(
            read(&run.join(f)) == read(&merged.join(f)),
            "{f}: merged differs"
        );
    }
}

#[test]
fn multi_input_task_plots_predicted_against_observed() {
    common::testdata("llmsr-data/oscillator1/train.csv");
    let dir = scratch("multi").join("run");
    let task = root().join("search/tests/data/tasks/oscillator1.yaml");
    run_ok(&[
        task.to_str().unwrap(),
        "--threads",
        "1",
        "--out",
        dir.to_str().unwrap(),
        "-q",
    ]);
    check_plots(&dir);
    let fit = std::fs::read_to_string(dir.join("plot-fit.svg")).unwrap();
    assert!(fit.contains("observed") && fit.contains("predicted"));
    assert!(fit.contains("test_id") && fit.contains("test_ood"));
}
