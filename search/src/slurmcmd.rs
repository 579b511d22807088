//! The `slurm` command: a co-search as a Slurm job array of `--shard I/N` runs plus a merge job.
//! It writes `DIR/slurm/shards.sbatch` (one array task per *unfinished* shard: a fresh run, or a
//! `--resume` of its own folder) and `DIR/slurm/merge.sbatch`, and with `--submit` submits them
//! (`sbatch --parsable`, the merge with `--dependency=afterok:<array>`), records the job ids in
//! `DIR/slurm/jobs.jsonl` and reports them. The same command after a failure resubmits only the
//! shards whose folder holds no finished summary; finished shards are never run again.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::error::{Result, SearchError};
use crate::events::{Shard, StopKind};
use crate::results;
use crate::task::{self, Task};

/// Arguments of `ndvm-search slurm TASK.yaml --shards N …`.
#[derive(Clone, Debug, Default)]
pub struct SlurmArgs {
    /// The task file.
    pub task: PathBuf,
    /// N, the number of shards (array tasks).
    pub shards: u64,
    /// The folder of the shard folders, the merged folder and the scripts (default
    /// `<output>/<task>-slurm`: a fixed name, so the same command resubmits into it).
    pub out: Option<PathBuf>,
    /// `--partition`, written to an `#SBATCH` line as given.
    pub partition: Option<String>,
    /// `--time`, written to an `#SBATCH` line as given.
    pub time: Option<String>,
    /// `--mem`, written to an `#SBATCH` line as given.
    pub mem: Option<String>,
    /// CPUs per shard (`--cpus-per-task`, and the shard's `--threads`); at least 1.
    pub cpus: u32,
    /// Budget override in seconds, as for `run` (a resumed shard reads it from its `run.json`).
    pub budget_seconds: Option<f64>,
    /// Budget override in calibrations, as for `run`.
    pub budget_calibrations: Option<usize>,
    /// Submit after writing.
    pub submit: bool,
}

/// What a shard folder says about its shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ShardState {
    /// No `run.json`: never started.
    Fresh,
    /// `run.json` and no summary (killed), or a summary with `stop: interrupted` (cancelled):
    /// resumed from its folder.
    Unfinished,
    /// A summary whose `stop` is anything but `interrupted`.
    Finished,
}

/// The resolved plan: absolute paths, the settings of the `#SBATCH` lines and each shard's state.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The task file, absolute.
    pub task_path: PathBuf,
    /// The task's name (the jobs' names).
    pub task_name: String,
    /// The folder of everything, absolute.
    pub dir: PathBuf,
    /// The `ndvm-search` the scripts run: the executable that wrote them.
    pub exe: PathBuf,
    /// N.
    pub shards: u64,
    /// Each shard's state, by index.
    pub states: Vec<ShardState>,
    /// The arguments the plan was made from (resources and budgets).
    pub args: SlurmArgs,
    /// `DIR/merged/summary.json` exists.
    pub merged: bool,
}

impl Plan {
    /// Indices of the shards to (re)submit, ascending.
    pub fn unfinished(&self) -> Vec<u64> {
        (0..self.shards)
            .filter(|&i| self.states[i as usize] != ShardState::Finished)
            .collect()
    }

    /// `DIR/slurm`: the scripts, the job log and Slurm's output files.
    pub fn scripts_dir(&self) -> PathBuf {
        self.dir.join("slurm")
    }
}

/// One `--submit`: one line of `DIR/slurm/jobs.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Submission {
    /// The array job id (absent when every shard had finished and only the merge was submitted).
    pub array: Option<u64>,
    /// The shards in that array.
    pub shards: Vec<u64>,
    /// The merge job id.
    pub merge: u64,
    /// UTC submission time (RFC 3339).
    pub at: String,
}

/// What the command did, for the binary to print.
#[derive(Debug)]
pub struct SlurmReport {
    /// The plan the scripts were written from.
    pub plan: Plan,
    /// `DIR/slurm/shards.sbatch`.
    pub shards_script: PathBuf,
    /// `DIR/slurm/merge.sbatch`.
    pub merge_script: PathBuf,
    /// With `--submit`: what was submitted.
    pub submitted: Option<Submission>,
    /// Merge jobs of earlier submissions cancelled because they could never run.
    pub cancelled: Vec<u64>,
    /// Every shard finished and merged: nothing was submitted.
    pub done: bool,
}

/// Plans, writes the scripts, and submits when asked.
pub fn run(args: &SlurmArgs, tools: &Tools) -> Result<SlurmReport> {
    let plan = plan(args)?;
    let (shards_script, merge_script) = write_scripts(&plan)?;
    let done = plan.unfinished().is_empty() && plan.merged;
    let mut report = SlurmReport {
        plan,
        shards_script,
        merge_script,
        submitted: None,
        cancelled: Vec::new(),
        done,
    };
    if args.submit && !done {
        report.cancelled = clear_earlier(&report.plan, tools)?;
        let sub = submit(&report, tools)?;
        append_submission(&report.plan, &sub)?;
        report.submitted = Some(sub);
    }
    Ok(report)
}

/// Loads the task (refusing the evolve proposer with more than one shard, as `run --shard`
/// does), checks what goes into `#SBATCH` lines and reads every shard folder's state.
pub fn plan(args: &SlurmArgs) -> Result<Plan> {
    let task = task::load(&args.task)?;
    if args.shards == 0 {
        return Err(bad("--shards", "need at least 1 shard"));
    }
    if args.shards > 1 && matches!(task.proposer, task::ProposerConfig::Evolve { .. }) {
        return Err(bad(
            "--shards",
            "the evolve proposer cannot be split into shards (each shard would evolve its own \
             population); give the task a cache to replay or `proposer: {kind: grammar}`",
        ));
    }
    let dir = args
        .out
        .clone()
        .unwrap_or_else(|| task.output.join(format!("{}-slurm", task.name)));
    let dir = absolute(&dir, "--out")?;
    let task_path = absolute(&args.task, "TASK")?;
    let exe = std::env::current_exe().map_err(|e| bad("ndvm-search", &e.to_string()))?;
    for (what, path) in [
        ("--out", &dir),
        ("TASK", &task_path),
        ("the ndvm-search executable", &exe),
    ] {
        check_path(path, what)?;
    }
    for (flag, value) in [
        ("--partition", &args.partition),
        ("--time", &args.time),
        ("--mem", &args.mem),
    ] {
        if let Some(v) = value {
            check_value(flag, v)?;
        }
    }
    let states = (0..args.shards)
        .map(|index| {
            let shard = Shard {
                index,
                count: args.shards,
            };
            shard_state(&dir.join(format!("shard-{index}")), &task, shard, args)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Plan {
        task_path,
        task_name: task.name.clone(),
        merged: dir.join("merged").join("summary.json").is_file(),
        dir,
        exe,
        shards: args.shards,
        states,
        args: SlurmArgs {
            cpus: args.cpus.max(1),
            ..args.clone()
        },
    })
}

fn absolute(path: &Path, what: &str) -> Result<PathBuf> {
    std::path::absolute(path).map_err(|e| bad(what, &e.to_string()))
}

/// Reads one shard folder. A folder of another task, shard or budget is an error naming it; it
/// is never overwritten.
pub fn shard_state(dir: &Path, task: &Task, shard: Shard, args: &SlurmArgs) -> Result<ShardState> {
    if !dir.join("run.json").exists() {
        return Ok(ShardState::Fresh);
    }
    let meta = results::load_meta(dir)?;
    let folder = |message: String| SearchError::RunFolder {
        path: dir.to_path_buf(),
        message,
    };
    if meta.shard != shard {
        return Err(folder(format!(
            "holds shard {}/{}, not {}/{}: give the --shards it was started with, or a new --out",
            meta.shard.index, meta.shard.count, shard.index, shard.count
        )));
    }
    if meta.task_text != crate::secret::task_text(&task.text) && meta.task_text != task.text {
        return Err(folder(
            "ran another version of the task file; give a new --out".into(),
        ));
    }
    if meta.budget_calibrations != args.budget_calibrations
        || meta.budget_seconds != args.budget_seconds
    {
        return Err(folder(
            "ran with other --budget-* overrides; give the same ones".into(),
        ));
    }
    if !dir.join("summary.json").exists() {
        return Ok(ShardState::Unfinished);
    }
    Ok(match results::read_summary(dir)?.stop {
        StopKind::Interrupted => ShardState::Unfinished,
        _ => ShardState::Finished,
    })
}

/// Writes `DIR/slurm/shards.sbatch` (its `--array` is the unfinished set, so it is rewritten each
/// time) and `DIR/slurm/merge.sbatch`, each atomically.
pub fn write_scripts(plan: &Plan) -> Result<(PathBuf, PathBuf)> {
    let scripts = plan.scripts_dir();
    std::fs::create_dir_all(&scripts).map_err(|source| SearchError::WriteFile {
        path: scripts.clone(),
        source,
    })?;
    let shards = scripts.join("shards.sbatch");
    let merge = scripts.join("merge.sbatch");
    crate::textfile::write_atomic(&shards, render_shards(plan).as_bytes())?;
    crate::textfile::write_atomic(&merge, render_merge(plan).as_bytes())?;
    Ok((shards, merge))
}

/// The `#SBATCH` lines both scripts share: the resources given, and no requeue (a requeued task
/// and its resubmission would share a folder; resubmission is the recovery).
fn resource_lines(plan: &Plan, out: &mut String) {
    let a = &plan.args;
    for (flag, value) in [
        ("partition", &a.partition),
        ("time", &a.time),
        ("mem", &a.mem),
    ] {
        if let Some(v) = value {
            out.push_str(&format!("#SBATCH --{flag}={v}\n"));
        }
    }
    out.push_str("#SBATCH --no-requeue\n");
}

/// The array script. With every shard finished it still renders every index (so that
/// `sbatch --test-only` can check it); `--submit` then submits the merge alone.
pub fn render_shards(plan: &Plan) -> String {
    let mut todo = plan.unfinished();
    if todo.is_empty() {
        todo = (0..plan.shards).collect();
    }
    let d = plan.dir.display();
    let mut s = format!(
        "#!/bin/bash\n\
         # Written by `ndvm-search slurm` (ndvm-search {version}): one array task per unfinished\n\
         # shard of the task\n\
         #   {task}\n\
         # After a failure, run the same `ndvm-search slurm … --submit` again: finished shards\n\
         # are not rerun, an interrupted or killed one resumes its own folder.\n\
         #SBATCH --job-name=ndvm-{name}\n\
         #SBATCH --array={array}\n\
         #SBATCH --output={d}/slurm/shard-%a-%A.out\n\
         #SBATCH --chdir={d}\n\
         #SBATCH --cpus-per-task={cpus}\n",
        version = env!("CARGO_PKG_VERSION"),
        task = plan.task_path.display(),
        name = plan.task_name,
        array = array_spec(&todo),
        cpus = plan.args.cpus,
    );
    resource_lines(plan, &mut s);
    s.push_str(&format!(
        "set -euo pipefail\n\
         ndvm={exe}\n\
         task={task}\n\
         n={n}\n\
         i=\"${{SLURM_ARRAY_TASK_ID:?run this script with sbatch}}\"\n\
         out={dir}/shard-$i\n\
         threads=\"${{SLURM_CPUS_PER_TASK:-1}}\"\n\
         # The shard is named here: SLURM_ARRAY_TASK_COUNT counts this submission's tasks only.\n\
         if [ -f \"$out/run.json\" ]; then\n    \
         exec env -u SLURM_ARRAY_TASK_COUNT -u SLURM_ARRAY_TASK_ID \\\n        \
         \"$ndvm\" run --resume \"$out\" --threads \"$threads\" --quiet\n\
         fi\n\
         exec env -u SLURM_ARRAY_TASK_COUNT -u SLURM_ARRAY_TASK_ID \\\n    \
         \"$ndvm\" run \"$task\" --shard \"$i/$n\" --out \"$out\" --threads \"$threads\" --quiet",
        exe = shell_quote(&plan.exe.display().to_string()),
        task = shell_quote(&plan.task_path.display().to_string()),
        n = plan.shards,
        dir = shell_quote(&d.to_string()),
    ));
    if let Some(b) = plan.args.budget_calibrations {
        s.push_str(&format!(" --budget-calibrations {b}"));
    }
    if let Some(b) = plan.args.budget_seconds {
        s.push_str(&format!(" --budget-seconds {b}"));
    }
    s.push('\n');
    s
}

/// The merge script: into a temporary sibling, then renamed, so `DIR/merged` is whole or absent.
pub fn render_merge(plan: &Plan) -> String {
    let d = plan.dir.display();
    let mut s = format!(
        "#!/bin/bash\n\
         # Written by `ndvm-search slurm`: merges the {n} shard folders once every shard task \
         succeeded.\n\
         #SBATCH --job-name=ndvm-{name}-merge\n\
         #SBATCH --output={d}/slurm/merge-%j.out\n\
         #SBATCH --chdir={d}\n\
         #SBATCH --cpus-per-task=1\n",
        n = plan.shards,
        name = plan.task_name,
    );
    resource_lines(plan, &mut s);
    let shards: Vec<String> = (0..plan.shards)
        .map(|i| format!("\"$dir/shard-{i}\""))
        .collect();
    s.push_str(&format!(
        "set -euo pipefail\n\
         ndvm={exe}\n\
         dir={dir}\n\
         if [ -f \"$dir/merged/summary.json\" ]; then echo \"already merged: $dir/merged\"; exit 0; fi\n\
         tmp=\"$dir/merged.${{SLURM_JOB_ID:-$$}}\"\n\
         \"$ndvm\" merge {shards} --out \"$tmp\"\n\
         mv -T \"$tmp\" \"$dir/merged\"\n",
        exe = shell_quote(&plan.exe.display().to_string()),
        dir = shell_quote(&d.to_string()),
        shards = shards.join(" "),
    ));
    s
}

/// `[0, 2, 3, 4, 7]` → `0,2-4,7`: Slurm's array syntax, runs as ranges.
pub fn array_spec(indices: &[u64]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut k = 0;
    while k < indices.len() {
        let start = indices[k];
        while k + 1 < indices.len() && indices[k + 1] == indices[k] + 1 {
            k += 1;
        }
        let end = indices[k];
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        k += 1;
    }
    parts.join(",")
}

/// `'…'`, with `'` written `'\''`.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `#SBATCH` lines are read by sbatch, not a shell, and `%` is an output-pattern character: a
/// path that would need quoting there is refused.
fn check_path(path: &Path, what: &str) -> Result<()> {
    let s = path
        .to_str()
        .ok_or_else(|| bad(what, "the path is not UTF-8"))?;
    let odd = |c: char| c.is_whitespace() || matches!(c, '%' | '\'' | '"' | '\\' | '$' | '`');
    if s.chars().any(odd) {
        return Err(bad(
            what,
            &format!(
                "{s}: Slurm scripts need a path without spaces, quotes, `%`, `$`, `` ` `` or `\\`"
            ),
        ));
    }
    Ok(())
}

/// A value for an `#SBATCH` line: letters, digits and `-_:.,` only.
fn check_value(flag: &str, v: &str) -> Result<()> {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.' | ',');
    if v.is_empty() || !v.chars().all(ok) {
        return Err(bad(
            flag,
            &format!("{v:?} is not a Slurm value (letters, digits and -_:., only)"),
        ));
    }
    Ok(())
}

fn bad(arg: &str, message: &str) -> SearchError {
    SearchError::BadArgument {
        arg: arg.to_string(),
        message: message.to_string(),
    }
}

// ---- submission --------------------------------------------------------------------------------

/// The Slurm client programs (`sbatch`, `squeue`, `scancel` on PATH unless set otherwise).
#[derive(Clone, Debug)]
pub struct Tools {
    /// `sbatch`.
    pub sbatch: PathBuf,
    /// `squeue`.
    pub squeue: PathBuf,
    /// `scancel`.
    pub scancel: PathBuf,
}

impl Default for Tools {
    fn default() -> Self {
        Tools {
            sbatch: "sbatch".into(),
            squeue: "squeue".into(),
            scancel: "scancel".into(),
        }
    }
}

/// Runs a Slurm client and returns its stdout; an error carries its stderr.
fn slurm(program: &Path, args: &[&str]) -> Result<String> {
    let command = format!("{} {}", program.display(), args.join(" "));
    let out = Command::new(program).args(args).output().map_err(|e| {
        let message = if e.kind() == std::io::ErrorKind::NotFound {
            "not found: run this on a Slurm login node (sbatch on PATH)".to_string()
        } else {
            e.to_string()
        };
        SearchError::Scheduler {
            command: command.clone(),
            message,
        }
    })?;
    if !out.status.success() {
        return Err(SearchError::Scheduler {
            command,
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `sbatch --parsable` prints `jobid` or `jobid;cluster`.
pub fn parse_parsable(stdout: &str) -> Option<u64> {
    stdout.trim().split(';').next()?.trim().parse().ok()
}

/// `sbatch --parsable ARGS…`: the new job's id.
fn sbatch(tools: &Tools, args: &[&str]) -> Result<u64> {
    let out = slurm(&tools.sbatch, args)?;
    parse_parsable(&out).ok_or_else(|| SearchError::Scheduler {
        command: format!("{} {}", tools.sbatch.display(), args.join(" ")),
        message: format!("unexpected output {out:?}"),
    })
}

/// Submits the unfinished shards as one array, then the merge with `afterok` on it (or the merge
/// alone when every shard has finished).
fn submit(report: &SlurmReport, tools: &Tools) -> Result<Submission> {
    let todo = report.plan.unfinished();
    let shards = report.shards_script.display().to_string();
    let merge = report.merge_script.display().to_string();
    let array = if todo.is_empty() {
        None
    } else {
        Some(sbatch(tools, &["--parsable", &shards])?)
    };
    let merge = match array {
        Some(a) => sbatch(
            tools,
            &["--parsable", &format!("--dependency=afterok:{a}"), &merge],
        )?,
        None => sbatch(tools, &["--parsable", &merge])?,
    };
    Ok(Submission {
        array,
        shards: todo,
        merge,
        at: jiff::Timestamp::now().to_string(),
    })
}

/// Before a resubmission, the earlier jobs of this folder still in the queue: a merge job that
/// waits on a failed or cancelled array (`DependencyNeverSatisfied`) is cancelled, since it can
/// never run; any other is a refusal, since two processes must never share a shard folder.
fn clear_earlier(plan: &Plan, tools: &Tools) -> Result<Vec<u64>> {
    let earlier = read_submissions(plan)?;
    if earlier.is_empty() {
        return Ok(Vec::new());
    }
    // `--me`, not `-j`: squeue fails on a job id it has already purged.
    let queue = slurm(&tools.squeue, &["-h", "-r", "--me", "-o", "%F|%i|%T|%r"])?;
    let mut cancel = Vec::new();
    for line in queue.lines() {
        let fields: Vec<&str> = line.trim().split('|').collect();
        let [base, id, state, reason] = fields[..] else {
            continue;
        };
        let Ok(base) = base.parse::<u64>() else {
            continue;
        };
        let is_merge = earlier.iter().any(|s| s.merge == base);
        let is_array = earlier.iter().any(|s| s.array == Some(base));
        if is_merge && state == "PENDING" && reason == "DependencyNeverSatisfied" {
            cancel.push(base);
        } else if is_merge || is_array {
            return Err(SearchError::RunFolder {
                path: plan.dir.clone(),
                message: format!(
                    "job {id} of an earlier submission is {state}; wait for it or scancel it"
                ),
            });
        }
    }
    for id in &cancel {
        slurm(&tools.scancel, &[&id.to_string()])?;
    }
    Ok(cancel)
}

/// The submissions recorded in `DIR/slurm/jobs.jsonl`, oldest first.
pub fn read_submissions(plan: &Plan) -> Result<Vec<Submission>> {
    let path = plan.scripts_dir().join("jobs.jsonl");
    if !path.exists() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(&path).map_err(|source| SearchError::Read {
        path: path.clone(),
        source,
    })?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l).map_err(|e| SearchError::RunFolder {
                path: path.clone(),
                message: format!("not a submission line: {e}"),
            })
        })
        .collect()
}

/// Appends one line to `DIR/slurm/jobs.jsonl` (the whole small file rewritten atomically, so a
/// crash never leaves half a line).
fn append_submission(plan: &Plan, sub: &Submission) -> Result<()> {
    let path = plan.scripts_dir().join("jobs.jsonl");
    let mut text = if path.exists() {
        std::fs::read_to_string(&path).map_err(|source| SearchError::Read {
            path: path.clone(),
            source,
        })?
    } else {
        String::new()
    };
    text.push_str(&serde_json::to_string(sub).expect("a submission serializes"));
    text.push('\n');
    crate::textfile::write_atomic(&path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_specs_use_ranges() {
        assert_eq!(array_spec(&[0, 1, 2, 3]), "0-3");
        assert_eq!(array_spec(&[1, 3]), "1,3");
        assert_eq!(array_spec(&[0, 2, 3, 4, 7]), "0,2-4,7");
        assert_eq!(array_spec(&[5]), "5");
        assert_eq!(array_spec(&[]), "");
    }

    #[test]
    fn parsable_output_gives_the_job_id() {
        assert_eq!(parse_parsable("17\n"), Some(17));
        assert_eq!(parse_parsable("17;cluster\n"), Some(17));
        assert_eq!(parse_parsable("sbatch: error: nope"), None);
    }

    #[test]
    fn quoting_and_checks() {
        assert_eq!(shell_quote("/a b/c'd"), "'/a b/c'\\''d'");
        assert!(check_path(Path::new("/r/out-1"), "--out").is_ok());
        for p in ["/r/a b", "/r/50%", "/r/$x", "/r/a'b"] {
            let e = check_path(Path::new(p), "--out").unwrap_err().to_string();
            assert!(e.contains("Slurm scripts need a path"), "{e}");
        }
        assert!(check_value("--time", "1-02:00:00").is_ok());
        assert!(check_value("--mem", "4G").is_ok());
        assert!(check_value("--partition", "a b").is_err());
        assert!(check_value("--partition", "").is_err());
    }
}
