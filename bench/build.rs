//! Builds the compiled C++ ceiling (`cpp/kalman_lanes.cpp`) with the system's C++ compiler, when
//! there is one, into a static library the bench links; sets `cfg(ndvm_cpp_ceiling)` then.
//!
//! The source is compiled twice at `-O3 -march=native` (the bench runs where it is built): once
//! with the compiler's default floating-point contraction (FMA where the processor has it: the
//! fastest) and once with `-ffp-contract=off` (the Rust lane ceiling's bits). No compiler, no
//! `ar`, or a cross build: the bench is built without it and says so in its report.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCE: &str = "cpp/kalman_lanes.cpp";
/// Lanes per block: the Rust lane ceiling's (`ceiling_lanes::LANES_F64`, `LANES_F32`).
const LANES_F64: u32 = 8;
const LANES_F32: u32 = 16;

fn main() {
    println!("cargo:rustc-check-cfg=cfg(ndvm_cpp_ceiling)");
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-changed=build.rs");
    for var in ["CXX", "AR", "NDVM_NO_CPP_CEILING"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    match build() {
        Ok(compiler) => {
            println!("cargo:rustc-cfg=ndvm_cpp_ceiling");
            println!("cargo:rustc-env=NDVM_CPP_CEILING_COMPILER={compiler}");
        }
        Err(why) => {
            println!("cargo:rustc-env=NDVM_CPP_CEILING_MISSING={why}");
        }
    }
}

/// Compiles both variants and archives them; the compiler's `--version` line, or why not.
fn build() -> Result<String, String> {
    if env::var_os("NDVM_NO_CPP_CEILING").is_some() {
        return Err("NDVM_NO_CPP_CEILING was set when the bench was built".into());
    }
    let (host, target) = (env::var("HOST"), env::var("TARGET"));
    if host != target {
        return Err("a cross build (-march=native is the build machine's)".into());
    }
    let out = PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let cxx = env::var("CXX").unwrap_or_else(|_| "c++".into());
    let version = Command::new(&cxx)
        .arg("--version")
        .output()
        .map_err(|e| format!("no C++ compiler ({cxx}: {e})"))?;
    let compiler = String::from_utf8_lossy(&version.stdout)
        .lines()
        .next()
        .unwrap_or(&cxx)
        .trim()
        .to_string();
    let fast = compile(&cxx, &out, "fast", &[])?;
    let exact = compile(&cxx, &out, "exact", &["-ffp-contract=off"])?;
    let ar = env::var("AR").unwrap_or_else(|_| "ar".into());
    let lib = out.join("libndvm_kalman_cpp.a");
    let _ = std::fs::remove_file(&lib);
    run(Command::new(&ar)
        .arg("crs")
        .arg(&lib)
        .arg(&fast)
        .arg(&exact))?;
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=ndvm_kalman_cpp");
    Ok(format!(
        "{compiler}, -O3 -march=native, {LANES_F64} f64 / {LANES_F32} f32 lanes per block"
    ))
}

fn compile(cxx: &str, out: &Path, suffix: &str, extra: &[&str]) -> Result<PathBuf, String> {
    let object = out.join(format!("kalman_lanes_{suffix}.o"));
    run(Command::new(cxx)
        .args([
            "-O3",
            "-march=native",
            "-fno-exceptions",
            "-fno-rtti",
            "-fPIC",
        ])
        .args(extra)
        .arg(format!("-DNDVM_CPP_SUFFIX={suffix}"))
        .arg(format!("-DNDVM_CPP_LANES_F64={LANES_F64}"))
        .arg(format!("-DNDVM_CPP_LANES_F32={LANES_F32}"))
        .args(["-c", SOURCE, "-o"])
        .arg(&object))?;
    Ok(object)
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    let output = cmd.output().map_err(|e| format!("{shown}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&output.stderr);
        println!("cargo:warning=the C++ ceiling was not built: {shown} failed");
        Err(format!(
            "{shown} failed: {}",
            err.lines().next().unwrap_or("").trim()
        ))
    }
}
