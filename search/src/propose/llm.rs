//! `LlmProposer`: asks an OpenAI-compatible chat endpoint for candidate programs (a blocking HTTP
//! exchange in [`chat`], one thread per request in flight, so the crate stays synchronous). Built
//! only with the `llm` cargo feature. The task's cache is replayed first; then each wave of `concurrency` requests renders the prompt template,
//! and every answer is appended to the cache as it arrives, with its provenance (model, prompt
//! hash, temperature, time, attempts, verdict and reason), in the line format
//! [`replay`](super::replay) reads, so replaying the cache later gives the same stream offline.
//! Only a task with `proposer.kind: llm` ever builds one; nothing else here touches the network.
//!
//! Failures are loud: a request that fails for good (after the retries of a 429, a 5xx, a timeout
//! or a lost connection) is logged to the run folder's
//! [`LLM_FAILURES_FILE`](super::LLM_FAILURES_FILE) (never to the
//! cache, which keeps answers only), and a bad key (401, 403), a wrong model or URL (404, 3xx), an
//! endpoint that cannot be reached, or [`max_failures_in_a_row`] failed requests in a row end the
//! run with an error naming the endpoint.

mod chat;
mod seeding;

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use chat::{Answered, Bodies, ChatRequest, Endpoint, Failure, Message, Policy, Reply};
pub use chat::{FailureClass, MAX_BODY_BYTES};

use ndvm_frontends::{Frontend, Lexeme, Registry};

use super::replay::{CacheLine, Cached, MoreProgram, TokenUsage, Verdict, read_cache};
use super::{Candidate, Proposer, RequestStats, lift, salvage};
use crate::error::{Result, SearchError};
use crate::task::LlmConfig;
use crate::{textfile, validate};

/// The placeholders a prompt template may use.
pub const PLACEHOLDERS: &[&str] = &[
    "description",
    "inputs",
    "params",
    "target",
    "operators",
    "examples",
    "examples_section",
    "failures",
    "notation",
    "frontend",
];

/// Longest answer judged, in bytes (256 KiB). A model's answer is a few KiB at most; anything
/// longer is recorded as `rejected` without its text, so a runaway answer costs nothing on rerun.
pub const MAX_ANSWER_BYTES: usize = 256 * 1024;

/// Deepest parenthesis nesting of an answer that is parsed at all ([`validate::MAX_DEPTH`]),
/// counted on the raw text before the reader runs.
pub const MAX_ANSWER_DEPTH: usize = validate::MAX_DEPTH;

/// Why an answer is refused before it is parsed (over [`MAX_ANSWER_BYTES`] or
/// [`MAX_ANSWER_DEPTH`]), if it is.
pub fn answer_limits(raw: &str) -> Option<String> {
    if raw.len() > MAX_ANSWER_BYTES {
        return Some(format!(
            "the answer is {} bytes, over the limit of {MAX_ANSWER_BYTES}",
            raw.len()
        ));
    }
    let depth = validate::paren_depth(raw);
    (depth > MAX_ANSWER_DEPTH).then(|| {
        format!("the answer nests parentheses {depth} deep, over the limit of {MAX_ANSWER_DEPTH}")
    })
}

fn proposer_err(message: impl Into<String>) -> SearchError {
    SearchError::Proposer {
        proposer: "llm",
        message: message.into(),
    }
}

/// What the prompt template is filled with.
#[derive(Clone, Debug, Default)]
pub struct PromptVars<'a> {
    /// The task's description.
    pub description: &'a str,
    /// Per-point inputs.
    pub inputs: &'a [String],
    /// Parameter names.
    pub params: &'a [String],
    /// The target's name.
    pub target: &'a str,
    /// Unary operators.
    pub operators: &'a [String],
    /// Programs to show as examples of good candidates.
    pub examples: &'a [String],
    /// Why recent answers could not be used, a line each (`{{failures}}`).
    pub failures: &'a [String],
    /// How programs are written: the front end's prompt guide.
    pub notation: &'a str,
    /// The front end's name (for a code fence's info string).
    pub frontend: &'a str,
}

/// Fills `{{name}}` placeholders (see [`PLACEHOLDERS`]); an unknown or unclosed one is an error.
pub fn render_prompt(template: &str, vars: &PromptVars<'_>) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(template.len() + 256);
    let mut rest = template;
    while let Some(i) = rest.find("{{") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(j) = after.find("}}") else {
            return Err("unclosed `{{` in the prompt template".into());
        };
        let key = after[..j].trim();
        match key {
            "description" => out.push_str(vars.description),
            "inputs" => out.push_str(&vars.inputs.join(", ")),
            "params" => out.push_str(&vars.params.join(", ")),
            "target" => out.push_str(vars.target),
            "operators" => out.push_str(&vars.operators.join(", ")),
            "notation" => out.push_str(vars.notation),
            "frontend" => out.push_str(vars.frontend),
            // Nothing when there are none: a placeholder text in a code block is what small
            // models copy back as their program.
            "examples" => out.push_str(&vars.examples.join("\n")),
            "failures" => {
                if !vars.failures.is_empty() {
                    out.push_str(
                        "Recent answers that could not be used, and why (avoid these mistakes):\n",
                    );
                    for f in vars.failures {
                        out.push_str(&format!("- {f}\n"));
                    }
                }
            }
            "examples_section" => {
                if vars.examples.is_empty() {
                    out.push_str("No candidate has been scored yet: propose a first one.");
                } else {
                    out.push_str(&format!(
                        "Good candidates so far (improve on them, do not repeat them):\n\n\
                         ```{}\n{}\n```",
                        vars.frontend,
                        vars.examples.join("\n")
                    ));
                }
            }
            other => {
                return Err(format!(
                    "unknown placeholder `{{{{{other}}}}}` in the prompt template (known: {})",
                    PLACEHOLDERS.join(", ")
                ));
            }
        }
        rest = &after[j + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// FNV-1a (64-bit) of the prompt, as `fnv1a64:` and 16 hex digits: identifies a prompt in the
/// cache's provenance (not a security hash).
pub fn prompt_hash(prompt: &str) -> String {
    use std::hash::Hasher as _;
    let mut h = fnv::FnvHasher::default();
    h.write(prompt.as_bytes());
    format!("fnv1a64:{:016x}", h.finish())
}

/// Seconds since the Unix epoch, to the millisecond.
fn now() -> f64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_millis() as f64) / 1000.0
}

/// Failed requests in a row that end the run: `max(2, concurrency)`, so about one wave.
pub fn max_failures_in_a_row(concurrency: usize) -> usize {
    concurrency.max(2)
}

/// One line of the run folder's [`LLM_FAILURES_FILE`](super::LLM_FAILURES_FILE): a request that
/// failed for good.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailureLine {
    /// Seconds since the Unix epoch when it was given up.
    pub time: f64,
    /// The URL the request went to.
    pub endpoint: String,
    /// The model asked for.
    pub model: String,
    /// The prompt's hash (see [`prompt_hash`]).
    pub prompt_hash: String,
    /// Attempts made.
    pub attempts: u32,
    /// Why it failed.
    pub class: FailureClass,
    /// The HTTP status of the last attempt, when there was an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// What happened, with the server's message when it sent one.
    pub reason: String,
    /// Whether this failure ended the run.
    pub fatal: bool,
}

/// What a request thread tells the proposer.
enum Note {
    /// An attempt failed and will be repeated.
    Retry,
    /// The request ended.
    Done(Reply, Sent),
}

/// What a request sent: its prompt's hash and the model it asked (an index of
/// `LlmConfig::models`); with its attempts once it ended.
#[derive(Clone, Debug)]
struct Sent {
    hash: String,
    model: usize,
    attempts: u32,
}

/// Asks an OpenAI-compatible chat endpoint for programs; see the module docs.
pub struct LlmProposer {
    config: LlmConfig,
    inputs: Vec<String>,
    params: Vec<String>,
    forbidden: Vec<String>,
    /// One endpoint per model of `config.models`.
    endpoints: Vec<Endpoint>,
    /// Draws each request's model by weight (from the task's seed).
    picker: ChaCha8Rng,
    /// The model whose request failed last.
    last_failed_model: usize,
    /// Programs already in the cache, replayed first (each with its front end's name).
    cached: Vec<Cached>,
    /// The front ends, and the name of the one answers are read with.
    frontends: Arc<Registry>,
    frontend: String,
    next_cached: usize,
    next_id: u64,
    stats: RequestStats,
    /// Requests that failed since the last answer.
    failed_in_a_row: usize,
    /// Requests the service answered.
    answered: usize,
    /// Why the last failed request failed.
    last_failure: Option<String>,
    cache: File,
    /// The failure log, opened at the first failure.
    failures: Option<File>,
    warnings: Vec<String>,
    /// Valid programs in cache order (the fallback examples).
    valid: Vec<String>,
    /// (score, program) from the engine's feedback, best first.
    scored: Vec<(f64, String)>,
    /// Why the latest answers or fits failed, newest last (at most [`FEEDBACK_FAILURES`]).
    recent_failures: std::collections::VecDeque<String>,
    /// Answers that gave a valid candidate.
    usable: usize,
    /// Programs the answers gave (not the cache's).
    handed: usize,
    /// Tokens used, per answering model.
    usage: BTreeMap<String, TokenUsage>,
    /// As the seeds of an `evolve`: requests run in the background (see [`seeding`]).
    seeding: Option<seeding::Seeding>,
}

/// The most candidates taken from one answer.
pub const MAX_PROGRAMS_PER_ANSWER: usize = 4;

/// How many recent failures `{{failures}}` shows.
pub const FEEDBACK_FAILURES: usize = 3;

/// One line of `{{failures}}`: the program (or the answer's start) and the reason, each short.
fn failure_line(what: &str, reason: &str) -> String {
    format!("`{}`: {}", one_line(what, 80), failure_reason(reason))
}

/// A failure's reason for `{{failures}}`: one line, at most 160 characters.
fn failure_reason(reason: &str) -> String {
    one_line(reason, 160)
}

/// `s` on one line, cut to `n` characters (with `…`).
fn one_line(s: &str, n: usize) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > n {
        format!("{}…", one.chars().take(n).collect::<String>())
    } else {
        one
    }
}

impl std::fmt::Debug for LlmProposer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmProposer")
            .field(
                "endpoints",
                &self.endpoints.iter().map(Endpoint::url).collect::<Vec<_>>(),
            )
            .field("model", &self.config.model)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// Opens the cache for appending, creating it and its folder; a truncated last line (an append
/// cut short) is cut off first, so that the next line starts on a line of its own.
fn open_cache(path: &Path, warnings: &mut Vec<String>) -> Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| SearchError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let file = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)
        .map_err(|source| SearchError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    let text = textfile::read(path, textfile::MAX_CACHE_BYTES, textfile::RAISE_CACHE_LIMIT)?;
    if !text.is_empty() && !text.ends_with('\n') {
        let keep = text.rfind('\n').map_or(0, |i| i + 1);
        file.set_len(keep as u64)
            .map_err(|source| SearchError::Write { source })?;
        warnings.push(format!(
            "{}: removed a truncated last line before appending",
            path.display()
        ));
    }
    Ok(file)
}

/// Programs of the cache in file order (a line without a front end is in `frontend`'s
/// notation), and its valid ones in that notation (the first examples).
fn read_cached(
    path: &Path,
    frontends: &Registry,
    frontend: &str,
    warnings: &mut Vec<String>,
) -> Result<(Vec<Cached>, Vec<String>)> {
    if !path.is_file() {
        return Ok((Vec::new(), Vec::new()));
    }
    let (mut sources, w) = read_cache(path)?;
    warnings.extend(w);
    for c in &mut sources {
        let name = c.frontend.get_or_insert_with(|| frontend.to_string());
        if frontends.by_name(name).is_none() {
            return Err(SearchError::CacheLine {
                path: path.to_path_buf(),
                line: c.line,
                message: frontends.unknown(name),
            });
        }
    }
    let valid = textfile::read(path, textfile::MAX_CACHE_BYTES, textfile::RAISE_CACHE_LIMIT)?
        .lines()
        .filter_map(|l| serde_json::from_str::<CacheLine>(l).ok())
        .filter(|l| l.verdict == Some(Verdict::Valid))
        .filter(|l| l.frontend.as_deref().is_none_or(|f| f == frontend))
        .filter_map(|l| l.src)
        .filter(|src| validate::precheck_source(src).is_ok())
        .collect();
    Ok((sources, valid))
}

/// An endpoint per model of `config`, each with its own key, else the proposer's
/// (`api_key`, else `$api_key_env`).
fn endpoints(config: &LlmConfig) -> Result<Vec<Endpoint>> {
    let timeout = Duration::from_secs_f64(config.timeout_s);
    let shared = || {
        match &config.api_key {
        Some(k) => Ok(k.clone()),
        None => std::env::var(&config.api_key_env).map_err(|_| {
            proposer_err(format!(
                "no API key: set ${} or `proposer.api_key` (an empty key for servers that need none)",
                config.api_key_env
            ))
        }),
    }
    };
    let mut out = Vec::with_capacity(config.models.len());
    for m in &config.models {
        let key = match (&m.api_key, &m.api_key_env) {
            (Some(k), _) => k.clone(),
            (None, Some(var)) => std::env::var(var).map_err(|_| {
                proposer_err(format!("no API key for model {}: set ${var}", m.model))
            })?,
            (None, None) => shared()?,
        };
        crate::secret::register(&key);
        out.push(Endpoint::new(&m.base_url, key, timeout));
    }
    Ok(out)
}

impl LlmProposer {
    /// Builds the proposer: checks the template and the key, reads the cache. Contacts nothing
    /// yet.
    pub fn new(
        config: LlmConfig,
        inputs: Vec<String>,
        params: Vec<String>,
        forbidden: Vec<String>,
        frontends: Arc<Registry>,
        frontend: String,
    ) -> Result<LlmProposer> {
        if frontends.by_name(&frontend).is_none() {
            return Err(proposer_err(frontends.unknown(&frontend)));
        }
        render_prompt(
            &config.prompt,
            &PromptVars {
                inputs: &inputs,
                params: &params,
                ..Default::default()
            },
        )
        .map_err(|m| proposer_err(format!("{}: {m}", config.prompt_path.display())))?;
        let endpoints = endpoints(&config)?;
        let mut warnings = Vec::new();
        let (cached, valid) = read_cached(&config.cache, &frontends, &frontend, &mut warnings)?;
        let cache = open_cache(&config.cache, &mut warnings)?;
        Ok(LlmProposer {
            picker: ChaCha8Rng::seed_from_u64(config.seed),
            last_failed_model: 0,
            config,
            inputs,
            params,
            forbidden,
            endpoints,
            cached,
            next_cached: 0,
            next_id: 0,
            stats: RequestStats::default(),
            failed_in_a_row: 0,
            answered: 0,
            last_failure: None,
            cache,
            failures: None,
            warnings,
            valid,
            scored: Vec::new(),
            recent_failures: std::collections::VecDeque::new(),
            usable: 0,
            handed: 0,
            usage: BTreeMap::new(),
            seeding: None,
            frontends,
            frontend,
        })
    }

    /// Requests sent so far by this proposer.
    pub fn requests(&self) -> usize {
        self.stats.sent
    }

    /// How its requests stand: sent, in flight, failed for good, retried.
    pub fn stats(&self) -> RequestStats {
        self.stats
    }

    /// The front end answers are read with (checked to exist when the proposer was built).
    fn reader(&self) -> Result<&dyn Frontend> {
        self.frontends
            .by_name(&self.frontend)
            .ok_or_else(|| proposer_err(self.frontends.unknown(&self.frontend)))
    }

    fn examples(&self) -> Vec<String> {
        let k = self.config.examples;
        if !self.scored.is_empty() {
            return self.scored.iter().take(k).map(|(_, s)| s.clone()).collect();
        }
        let n = self.valid.len();
        self.valid[n.saturating_sub(k)..].to_vec()
    }

    fn prompt(&self) -> Result<String> {
        let examples = self.examples();
        let failures: Vec<String> = self.recent_failures.iter().cloned().collect();
        let reader = self.reader()?;
        render_prompt(
            &self.config.prompt,
            &PromptVars {
                description: &self.config.description,
                inputs: &self.inputs,
                params: &self.params,
                target: &self.config.target,
                operators: &self.config.operators,
                examples: &examples,
                failures: &failures,
                notation: reader.prompt_guide(),
                frontend: reader.name(),
            },
        )
        .map_err(proposer_err)
    }

    /// Turns an answer into a cache line (and the program, if any).
    fn judge(&self, answer: Answered, sent: &Sent, ask: Option<u64>) -> CacheLine {
        let (attempts, hash) = (sent.attempts, sent.hash.as_str());
        let mut line = CacheLine {
            ask,
            model: Some(if answer.model.is_empty() {
                self.config.models[sent.model].model.clone()
            } else {
                answer.model
            }),
            prompt_hash: Some(hash.to_string()),
            temperature: Some(self.config.temperature),
            time: Some(now()),
            attempts: Some(attempts),
            usage: answer.usage,
            finish_reason: answer.finish_reason,
            latency_ms: Some((answer.latency_ms * 1e3).round() / 1e3),
            frontend: Some(self.frontend.clone()),
            ..CacheLine::default()
        };
        let raw = answer.text;
        if let Some(reason) = answer_limits(&raw) {
            // Never parsed, never replayed: no `src`, and the text only when it is small.
            line.verdict = Some(Verdict::Rejected);
            line.reason = Some(reason);
            if raw.len() <= MAX_ANSWER_BYTES {
                line.raw = Some(raw);
            }
            return line;
        }
        let reader = match self.reader() {
            Ok(reader) => reader,
            Err(e) => {
                line.verdict = Some(Verdict::NoProgram);
                line.reason = Some(e.to_string());
                return line;
            }
        };
        // A reasoning model's `<think>` sections are scratch work, not the answer.
        let answer = salvage::without_think(&raw);
        match reader.extract_program(&answer) {
            Err(reason) => {
                line.verdict = Some(Verdict::NoProgram);
                line.reason = Some(reason);
            }
            Ok(src) => {
                let check = |src: &str| {
                    validate::check_source(reader, src, &self.inputs, &self.params, &self.forbidden)
                };
                // The answer's numbers as fitted parameters, unless that breaks what was valid.
                let (src, checked) = match lift::lift_literals(reader, &src, &self.params) {
                    Some(l) => match (check(&l.src), check(&src)) {
                        (Err(_), Ok(c)) => (src, Ok(c)),
                        (lifted, _) => {
                            line.init = Some(l.init);
                            (l.src, lifted)
                        }
                    },
                    None => {
                        let c = check(&src);
                        (src, c)
                    }
                };
                match checked {
                    Ok(_) => {
                        line.verdict = Some(Verdict::Valid);
                        line.src = Some(src);
                    }
                    // Over the size or nesting bounds: recorded, never replayed.
                    Err(r) if matches!(r.class, "too-large" | "too-deep") => {
                        line.verdict = Some(Verdict::Rejected);
                        line.reason = Some(r.message);
                        line.init = None;
                    }
                    Err(r) => {
                        line.verdict = Some(Verdict::Invalid(r.class.to_string()));
                        line.reason = Some(r.message);
                        line.src = Some(src);
                    }
                }
            }
        }
        if matches!(line.verdict, Some(Verdict::NoProgram | Verdict::Invalid(_))) {
            self.salvage(&raw, &mut line);
        }
        let cut = line.finish_reason.as_deref() == Some("length");
        if let Some(reason) = line.reason.as_mut().filter(|_| cut) {
            reason.push_str(
                " (the answer was cut at the token limit, finish_reason `length`: \
                 raise `proposer.max_tokens`, or the server's own limit)",
            );
        }
        if line.verdict == Some(Verdict::Valid) {
            line.more = self.more_programs(&answer, line.src.as_deref().unwrap_or_default());
        }
        line.raw = Some(raw);
        line
    }

    /// The answer's further valid programs in the task's notation (code-fenced blocks after the
    /// one taken, each lifted and validated as the first), at most
    /// [`MAX_PROGRAMS_PER_ANSWER`] − 1 and none twice: a model asked for a model often writes
    /// several.
    fn more_programs(&self, raw: &str, first: &str) -> Vec<MoreProgram> {
        let Ok(reader) = self.reader() else {
            return Vec::new();
        };
        let mut seen = vec![first.to_string()];
        let mut more = Vec::new();
        for block in ndvm_frontends::extract::fenced_blocks(raw) {
            if more.len() + 1 >= MAX_PROGRAMS_PER_ANSWER {
                break;
            }
            let block = block.trim();
            if block.is_empty() || !ndvm_frontends::extract::parses(reader, block) {
                continue;
            }
            let (src, init) = match lift::lift_literals(reader, block, &self.params) {
                Some(l) => (l.src, Some(l.init)),
                None => (block.to_string(), None),
            };
            let valid =
                validate::check_source(reader, &src, &self.inputs, &self.params, &self.forbidden)
                    .is_ok();
            let already = seen.contains(&src) || seen.iter().any(|s| s == block);
            if valid && !already {
                seen.push(src.clone());
                more.push(MoreProgram { src, init });
            }
        }
        more
    }

    /// The first expression of the answer ([`salvage::fragments`], those naming an input first)
    /// that the infix front end reads into a valid program once its numbers are lifted: it
    /// replaces the answer's failed program (the line keeps the failure's reason).
    fn salvage(&self, raw: &str, line: &mut CacheLine) {
        let Some(infix) = self.frontends.by_name("infix") else {
            return;
        };
        // Expressions of an input first: a model's stray constant is valid but fits nothing.
        let names_an_input = |f: &String| {
            infix.lexemes(f).is_some_and(|ls| {
                ls.iter().any(|l| match l {
                    Lexeme::Name(s) => self
                        .inputs
                        .iter()
                        .any(|i| f.get(s.start as usize..s.end as usize) == Some(i.as_str())),
                    Lexeme::Number(..) => false,
                })
            })
        };
        let (mut fragments, rest): (Vec<String>, Vec<String>) = salvage::fragments(raw)
            .into_iter()
            .partition(names_an_input);
        fragments.extend(rest);
        for fragment in fragments {
            let fragment = salvage::named_params(&fragment, &self.params);
            let (src, init) = match lift::lift_literals(infix, &fragment, &self.params) {
                Some(l) => (l.src, Some(l.init)),
                None => (fragment, None),
            };
            let checked =
                validate::check_source(infix, &src, &self.inputs, &self.params, &self.forbidden);
            if checked.is_ok() {
                line.verdict = Some(Verdict::Valid);
                line.src = Some(src);
                line.frontend = Some(infix.name().to_string());
                line.init = init;
                line.salvaged = Some(true);
                return;
            }
        }
    }

    fn append(&mut self, line: &CacheLine) -> Result<()> {
        let mut text = serde_json::to_string(line).map_err(|e| proposer_err(e.to_string()))?;
        text.push('\n');
        let text = crate::secret::redacted(&text);
        self.cache
            .write_all(text.as_bytes())
            .and_then(|()| self.cache.flush())
            .map_err(|source| SearchError::Write { source })
    }

    /// Appends a failed request to the failure log (opened, and created, at the first one).
    fn log_failure(&mut self, line: &FailureLine) -> Result<()> {
        let Some(path) = self.config.failure_log.clone() else {
            return Ok(());
        };
        if self.failures.is_none() {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|source| SearchError::Read { path, source })?;
            self.failures = Some(file);
        }
        let mut text = serde_json::to_string(line).map_err(|e| proposer_err(e.to_string()))?;
        text.push('\n');
        let text = crate::secret::redacted(&text);
        let file = self
            .failures
            .as_mut()
            .unwrap_or_else(|| unreachable!("opened above"));
        file.write_all(text.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|source| SearchError::Write { source })
    }

    /// Where the failed requests are listed, for messages.
    fn failure_log_note(&self) -> String {
        match &self.config.failure_log {
            Some(p) => format!("; failed requests are listed in {}", p.display()),
            None => String::new(),
        }
    }

    /// The error that ends a run whose every request failed (below the in-a-row limit).
    fn no_answer_error(&self) -> SearchError {
        proposer_err(crate::secret::redacted(&format!(
            "POST {} failed: the service answered none of the {} requests (`max_requests`); the \
             last failed with {}; is the server healthy?{}",
            self.endpoints[self.last_failed_model].url(),
            self.stats.sent,
            self.last_failure.as_deref().unwrap_or("no reason given"),
            self.failure_log_note()
        )))
    }

    /// The error that ends the run after `failure` (fatal, or the last of too many in a row).
    fn fatal_error(&self, failure: &Failure, sent: &Sent) -> SearchError {
        let c = &self.config.models[sent.model];
        let attempts = sent.attempts;
        let key_env = c.api_key_env.as_ref().unwrap_or(&self.config.api_key_env);
        let hint = match failure.class {
            FailureClass::Unauthorized | FailureClass::Forbidden => {
                format!("check the API key (${key_env} or `proposer.api_key`)")
            }
            FailureClass::NotFound | FailureClass::Redirected => format!(
                "check `base_url` ({}) and `model` ({})",
                c.base_url, c.model
            ),
            FailureClass::Unreachable => {
                format!("check that a server answers at `base_url` ({})", c.base_url)
            }
            _ => format!(
                "{} requests in a row failed; is the server healthy?",
                self.failed_in_a_row
            ),
        };
        proposer_err(crate::secret::redacted(&format!(
            "POST {} failed: {} ({attempts} attempt{}); {hint}{}",
            self.endpoints[sent.model].url(),
            failure.reason,
            if attempts == 1 { "" } else { "s" },
            self.failure_log_note()
        )))
    }

    fn remember_failure(&mut self, line: String) {
        if self.recent_failures.len() == FEEDBACK_FAILURES {
            self.recent_failures.pop_front();
        }
        self.recent_failures.push_back(line);
    }

    fn push(
        &mut self,
        out: &mut Vec<Candidate>,
        src: String,
        frontend: String,
        init: BTreeMap<String, f64>,
    ) {
        let mut candidate = Candidate::new(self.next_id, src, frontend);
        candidate.init = init;
        out.push(candidate);
        self.next_id += 1;
    }

    /// The serialized request for `prompt`.
    /// The bodies of a request for `prompt` to model `model` (an index of `config.models`).
    fn request_body(&self, prompt: &str, model: usize) -> Result<Bodies> {
        Bodies::of(&ChatRequest {
            model: &self.config.models[model].model,
            messages: [Message {
                role: "user",
                content: prompt,
            }],
            temperature: self.config.temperature,
            max_tokens: self.config.max_tokens,
            max_completion_tokens: None,
        })
        .map_err(|e| proposer_err(e.to_string()))
    }

    /// The model the next request asks: drawn by weight when there are several.
    fn pick(&mut self) -> usize {
        let models = &self.config.models;
        if models.len() < 2 {
            return 0;
        }
        let total: f64 = models.iter().map(|m| m.weight).sum();
        let mut x = self.picker.random::<f64>() * total;
        for (i, m) in models.iter().enumerate() {
            if x < m.weight {
                return i;
            }
            x -= m.weight;
        }
        models.len() - 1
    }

    /// Handles one finished request: an answer is judged and appended to the cache; a failure
    /// is logged. Returns the error that ends the run, if this one does.
    fn settle(
        &mut self,
        reply: Reply,
        mut sent: Sent,
        out: &mut Vec<Candidate>,
        ask: Option<u64>,
    ) -> Result<Option<SearchError>> {
        sent.attempts = reply.attempts;
        self.stats.in_flight = self.stats.in_flight.saturating_sub(1);
        let failure = match reply.result {
            Ok(answered) => {
                self.failed_in_a_row = 0;
                self.answered += 1;
                let line = self.judge(answered, &sent, ask);
                self.append(&line)?;
                if let (Some(model), Some(u)) = (&line.model, line.usage) {
                    let sum = self.usage.entry(model.clone()).or_default();
                    sum.prompt_tokens += u.prompt_tokens;
                    sum.completion_tokens += u.completion_tokens;
                    sum.total_tokens += u.total_tokens;
                }
                self.handed += usize::from(line.src.is_some());
                if line.verdict == Some(Verdict::Valid) {
                    self.usable += 1;
                } else {
                    let why = line.reason.as_deref().unwrap_or("no program");
                    // An answer's text is not shown back when it held no program: a small model
                    // copies what the prompt shows, and that text is what failed.
                    self.remember_failure(match line.src.as_deref() {
                        Some(src) => failure_line(src, why),
                        None => format!("an answer: {}", failure_reason(why)),
                    });
                }
                if let Some(src) = line.src {
                    let frontend = line.frontend.unwrap_or_else(|| self.frontend.clone());
                    if line.verdict == Some(Verdict::Valid) && frontend == self.frontend {
                        self.valid.push(src.clone());
                    }
                    self.push(out, src, frontend, line.init.unwrap_or_default());
                }
                for m in line.more {
                    self.handed += 1;
                    self.push(
                        out,
                        m.src,
                        self.frontend.clone(),
                        m.init.unwrap_or_default(),
                    );
                }
                return Ok(None);
            }
            Err(f) => f,
        };
        self.stats.failed += 1;
        self.failed_in_a_row += 1;
        self.last_failure = Some(failure.reason.clone());
        self.last_failed_model = sent.model;
        let fatal = failure.class.is_fatal()
            || self.failed_in_a_row >= max_failures_in_a_row(self.config.concurrency);
        self.log_failure(&FailureLine {
            time: now(),
            endpoint: self.endpoints[sent.model].url().to_string(),
            model: self.config.models[sent.model].model.clone(),
            prompt_hash: sent.hash.clone(),
            attempts: reply.attempts,
            class: failure.class,
            status: failure.status,
            reason: failure.reason.clone(),
            fatal,
        })?;
        Ok(fatal.then(|| self.fatal_error(&failure, &sent)))
    }

    /// One wave of up to `concurrency` requests, one thread each; answers are judged, appended
    /// to the cache and returned as candidates in arrival order. A fatal failure stops the
    /// other requests' retries and ends the run once they are back.
    fn wave(
        &mut self,
        out: &mut Vec<Candidate>,
        report: &mut dyn FnMut(&RequestStats),
    ) -> Result<()> {
        let k = self
            .config
            .concurrency
            .min(self.config.max_requests - self.stats.sent);
        let prompt = self.prompt()?;
        let hash = prompt_hash(&prompt);
        let picks: Vec<usize> = (0..k).map(|_| self.pick()).collect();
        let bodies = (0..self.config.models.len())
            .map(|m| self.request_body(&prompt, m))
            .collect::<Result<Vec<_>>>()?;
        let policy = Policy {
            retries: self.config.retries,
            backoff_s: self.config.backoff_s,
        };
        self.stats.sent += k;
        self.stats.in_flight = k;
        report(&self.stats);
        let endpoints = self.endpoints.clone();
        let cancel = AtomicBool::new(false);
        let mut ended: Option<SearchError> = None;
        let mut broken: Option<SearchError> = None;
        std::thread::scope(|scope| {
            let (tx, rx) = mpsc::channel::<Note>();
            for model in picks {
                let tx = tx.clone();
                let (endpoint, body, cancel) = (&endpoints[model], &bodies[model], &cancel);
                let sent = Sent {
                    hash: hash.clone(),
                    model,
                    attempts: 0,
                };
                scope.spawn(move || {
                    let retry = |_: &Failure| {
                        let _ = tx.send(Note::Retry);
                    };
                    let reply = chat::ask(endpoint, body, policy, cancel, &retry);
                    // The receiver outlives every sender (it is drained below).
                    let _ = tx.send(Note::Done(reply, sent));
                });
            }
            drop(tx);
            loop {
                match rx.recv_timeout(Duration::from_secs(1)) {
                    Ok(Note::Retry) => self.stats.retried += 1,
                    Ok(Note::Done(reply, sent)) => match self.settle(reply, sent, out, None) {
                        Ok(None) => {}
                        Ok(Some(e)) => {
                            cancel.store(true, Ordering::Relaxed);
                            ended.get_or_insert(e);
                        }
                        Err(e) => {
                            cancel.store(true, Ordering::Relaxed);
                            broken.get_or_insert(e);
                        }
                    },
                    // A heartbeat, so that a throttled progress line catches up.
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
                report(&self.stats);
            }
        });
        match broken.or(ended) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Proposer for LlmProposer {
    fn propose(&mut self, n: usize) -> Result<Vec<Candidate>> {
        self.propose_reporting(n, &mut |_| {})
    }

    fn propose_reporting(
        &mut self,
        n: usize,
        report: &mut dyn FnMut(&RequestStats),
    ) -> Result<Vec<Candidate>> {
        if self.seeding.is_some() {
            return self.propose_seeds(n, report);
        }
        let mut out = Vec::new();
        while out.len() < n && self.next_cached < self.cached.len() {
            let c = self.cached[self.next_cached].clone();
            self.next_cached += 1;
            let frontend = c.frontend.unwrap_or_else(|| self.frontend.clone());
            self.push(&mut out, c.src, frontend, c.init);
        }
        if !out.is_empty() || n == 0 {
            return Ok(out);
        }
        // One wave per ask: the engine asks again (checking its deadline first) while
        // `exhausted` is false.
        if self.stats.sent < self.config.max_requests {
            self.wave(&mut out, report)?;
        }
        if self.stats.sent > 0 && self.stats.sent >= self.config.max_requests && self.answered == 0
        {
            return Err(self.no_answer_error());
        }
        Ok(out)
    }

    fn warnings(&self) -> Vec<String> {
        let mut w = self.warnings.clone();
        if self.stats.failed > 0 {
            // The file's name only: the summary names no run folder.
            let listed = match self.config.failure_log.as_ref().and_then(|p| p.file_name()) {
                Some(name) => format!(" (listed in {})", name.to_string_lossy()),
                None => String::new(),
            };
            w.push(format!(
                "{} of {} llm requests failed{listed}",
                self.stats.failed, self.stats.sent
            ));
        }
        w
    }

    fn finish(&mut self, wait: bool) {
        if let Err(e) = self.finish_seeds(wait) {
            self.warnings.push(format!(
                "an answer that arrived after the run could not be kept: {e}"
            ));
        }
    }

    fn llm_report(&self) -> Option<crate::events::LlmReport> {
        Some(crate::events::LlmReport {
            requests: self.stats.sent,
            answered: self.answered,
            usable: self.usable,
            failed: self.stats.failed,
            candidates: self.handed,
            usage: self.usage.clone(),
            verdicts: self.config.cache.display().to_string(),
        })
    }

    fn exhausted(&self) -> bool {
        self.next_cached >= self.cached.len()
            && self.stats.sent >= self.config.max_requests
            && self.stats.in_flight == 0
    }

    fn name(&self) -> &'static str {
        "llm"
    }

    fn feedback(&mut self, event: &crate::events::Event, score: Option<f64>) {
        let Some(score) = score.filter(|s| s.is_finite()) else {
            if let Some(error) = &event.error {
                self.remember_failure(failure_line(
                    &event.src,
                    &format!("the fit failed: {error}"),
                ));
            }
            return;
        };
        // Any scored program in the prompt's notation may become an example: the LLM's own, or
        // (under `evolve`) the population's best.
        if event.frontend != self.frontend || self.scored.iter().any(|(_, s)| *s == event.src) {
            return;
        }
        self.scored.push((score, event.src.clone()));
        self.scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        self.scored.truncate(self.config.examples.max(1) * 4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_placeholders_are_filled_and_unknown_ones_rejected() {
        let inputs = vec!["x".to_string()];
        let params = vec!["a".to_string(), "b".to_string()];
        let examples = vec!["(* a x)".to_string()];
        let v = PromptVars {
            inputs: &inputs,
            params: &params,
            examples: &examples,
            target: "y",
            notation: "Write prefix s-expressions.",
            frontend: "scheme",
            ..Default::default()
        };
        let p = render_prompt(
            "{{target}} of {{ inputs }} with {{params}}:\n{{examples}}",
            &v,
        );
        assert_eq!(p.unwrap(), "y of x with a, b:\n(* a x)");
        let p = render_prompt("{{notation}}\n```{{frontend}}\n{{examples}}\n```", &v);
        assert_eq!(
            p.unwrap(),
            "Write prefix s-expressions.\n```scheme\n(* a x)\n```"
        );
        let p = render_prompt("{{examples_section}}", &v).unwrap();
        assert_eq!(
            p,
            "Good candidates so far (improve on them, do not repeat them):\n\n```scheme\n(* a x)\n```"
        );
        let none = PromptVars {
            examples: &[],
            ..v.clone()
        };
        let p = render_prompt("{{examples_section}}|{{examples}}|", &none).unwrap();
        assert_eq!(
            p,
            "No candidate has been scored yet: propose a first one.||"
        );
        assert!(render_prompt("{{nope}}", &v).unwrap_err().contains("nope"));
        assert!(render_prompt("{{inputs", &v).is_err());
        assert_eq!(prompt_hash("abc"), prompt_hash("abc"));
        assert_ne!(prompt_hash("abc"), prompt_hash("abd"));
        assert!(prompt_hash("").starts_with("fnv1a64:"));
    }
}
