//! `ndvm-search bench ARGS` forwards to the `ndvm-bench` binary beside it: the arguments pass
//! through unchanged and its exit status comes back; without that binary it fails naming the
//! folder and the command that builds it. The suites themselves are tested in bench/tests/.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::scratch;

/// A copy of the built `ndvm-search` in `dir` (so that what lies beside it is up to the test).
fn copy_of_binary(dir: &Path) -> PathBuf {
    let name = Path::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .file_name()
        .expect("the binary has a name");
    let copy = dir.join(name);
    std::fs::copy(env!("CARGO_BIN_EXE_ndvm-search"), &copy).unwrap();
    copy
}

/// Runs `exe ARGS`. A file just written may be briefly "busy" (ETXTBSY) while another test's
/// child, forked in between, still holds it open: such a start is retried.
fn output_of(exe: &Path, args: &[&str]) -> Output {
    for _ in 0..100 {
        match Command::new(exe).args(args).output() {
            Err(e) if e.raw_os_error() == Some(26) => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            res => return res.unwrap(),
        }
    }
    panic!("{} stayed busy", exe.display())
}

#[test]
fn without_ndvm_bench_beside_it_the_error_says_how_to_build_it() {
    let dir = scratch("bench-forward", "missing");
    let exe = copy_of_binary(&dir);
    let out = output_of(&exe, &["bench", "kalman", "--quick"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let folder = exe.parent().unwrap().canonicalize().unwrap();
    assert!(
        stderr.contains("`ndvm-search bench` runs `ndvm-bench`, which is not next to this binary")
            && stderr.contains(&folder.display().to_string())
            && stderr.contains("build it with `cargo build --release -p ndvm-bench`"),
        "{stderr}"
    );
}

/// A stand-in `ndvm-bench` (a shell script) records its arguments and exits with status 3.
#[cfg(unix)]
#[test]
fn the_arguments_pass_through_and_the_status_comes_back() {
    use std::os::unix::fs::PermissionsExt;

    let dir = scratch("bench-forward", "stand-in");
    let exe = copy_of_binary(&dir);
    let args_file = dir.join("args.txt");
    let script = dir.join("ndvm-bench");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\necho from-ndvm-bench\nexit 3\n",
            args_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = output_of(
        &exe,
        &[
            "bench", "search", "--quick", "--out", "a dir", "-h", "--help",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from-ndvm-bench\n");
    let args = std::fs::read_to_string(&args_file).unwrap();
    assert_eq!(args, "search\n--quick\n--out\na dir\n-h\n--help\n");
}
