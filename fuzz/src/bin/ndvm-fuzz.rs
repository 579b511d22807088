//! The `ndvm-fuzz` command: `ndvm-fuzz --programs N --seed S [--lanes B] [--threads T]
//! [--start I] [--out DIR] [--no-shrink]`. Prints progress, the coverage table and one closing line
//! `N programs, F failures`; exits 1 when F > 0 and writes each shrunk failure to the regression
//! folder (default `fuzz/regressions`).
#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use ndvm_fuzz::run::{self, Config};

const USAGE: &str = "usage: ndvm-fuzz --programs N --seed S [--lanes B] [--threads T] [--start I] [--out DIR] [--no-shrink]";

fn parse_args() -> Result<(Config, PathBuf), String> {
    let mut config = Config {
        programs: 1000,
        start: 0,
        seed: 1,
        lanes: 4,
        threads: 1,
        shrink: true,
    };
    let mut out = PathBuf::from("fuzz/regressions");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
        };
        let num = |name: &str, v: String| {
            v.parse::<u64>()
                .map_err(|e| format!("{name} {v}: {e}\n{USAGE}"))
        };
        match arg.as_str() {
            "--programs" => config.programs = num("--programs", value("--programs")?)?,
            "--seed" => config.seed = num("--seed", value("--seed")?)?,
            "--start" => config.start = num("--start", value("--start")?)?,
            "--lanes" => config.lanes = num("--lanes", value("--lanes")?)?.clamp(1, 64) as usize,
            "--threads" => {
                config.threads = num("--threads", value("--threads")?)?.clamp(1, 256) as usize
            }
            "--out" => out = PathBuf::from(value("--out")?),
            "--no-shrink" => config.shrink = false,
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    Ok((config, out))
}

fn main() -> ExitCode {
    let (config, out) = match parse_args() {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };
    println!(
        "ndvm-fuzz: {} programs from {} of seed {}, {} lanes, {} threads",
        config.programs, config.start, config.seed, config.lanes, config.threads
    );
    let t0 = Instant::now();
    let summary = run::run(&config, &|done, failed| {
        println!(
            "  {done} programs, {failed} failing, {:.0} s",
            t0.elapsed().as_secs_f64()
        );
    });
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "checked {} (skipped: {:?}); {} gradient entries checked, {} at a kink; {} replayed; {} round-tripped through infix; {} compared in f32; digest {:016x}; {secs:.1} s",
        summary.checked,
        summary.skipped,
        summary.grads_checked,
        summary.grads_at_kink,
        summary.replayed,
        summary.infix_printed,
        summary.f32_compared,
        summary.digest
    );
    println!("coverage (forms and primitives, occurrences):");
    let mut rows: Vec<(&String, &u64)> = summary.coverage.iter().collect();
    rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for chunk in rows.chunks(6) {
        let line: Vec<String> = chunk
            .iter()
            .map(|(k, v)| format!("{k:>10} {v:<8}"))
            .collect();
        println!("  {}", line.join(" "));
    }
    for f in &summary.found {
        println!(
            "FAIL program {} [{}]: {}",
            f.index,
            f.failure.oracle,
            f.failure.detail.lines().next().unwrap_or("")
        );
        println!("  shrunk: {}", f.shrunk.program.to_text());
    }
    if !summary.found.is_empty() {
        println!("failures per oracle: {:?}", summary.by_oracle);
        match run::write_regressions(&out, &summary, config.seed) {
            Ok(paths) => {
                for p in paths {
                    println!("  wrote {}", p.display());
                }
            }
            Err(e) => eprintln!("error: {e}"),
        }
    }
    println!(
        "{} programs, {} failures",
        summary.programs,
        summary.found.len()
    );
    if summary.found.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
