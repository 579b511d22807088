//! `LlmProposer`: asks an OpenAI-compatible chat endpoint for candidate programs (async-openai on
//! a tokio runtime owned by the proposer, so the rest of the crate stays synchronous). The task's
//! cache is replayed first; then each wave of `concurrency` requests renders the prompt template,
//! and every answer is appended to the cache as it arrives, with its provenance (model, prompt
//! hash, temperature, time, attempts, verdict and reason), in the line format
//! [`replay`](super::replay) reads, so replaying the cache later gives the same stream offline.
//! Only a task with `proposer.kind: llm` ever builds one; nothing else here touches the network.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::ReqwestService;
use async_openai::types::chat::{
    ChatCompletionRequestMessage, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, CreateChatCompletionRequest,
};

use super::replay::{CacheLine, Verdict, read_cache};
use super::{Candidate, Proposer};
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
            "examples" => {
                if vars.examples.is_empty() {
                    out.push_str("(none yet)");
                } else {
                    out.push_str(&vars.examples.join("\n"));
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

/// FNV-1a (64-bit, the `fnv` crate) of the prompt's bytes, as `fnv1a64:` and 16 hex digits:
/// identifies a prompt in the cache's provenance (stable across versions and platforms; not a
/// security hash).
pub fn prompt_hash(prompt: &str) -> String {
    use std::hash::Hasher as _;
    let mut h = fnv::FnvHasher::default();
    h.write(prompt.as_bytes());
    format!("fnv1a64:{:016x}", h.finish())
}

/// Top-level parenthesised spans of `text` (byte ranges), skipping string literals.
fn balanced_spans(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if in_string {
            if c == b'\\' {
                i += 1;
            } else if c == b'"' {
                in_string = false;
            }
        } else if depth > 0 && c == b'"' {
            in_string = true;
        } else if c == b'(' {
            if depth == 0 {
                start = i;
            }
            depth += 1;
        } else if c == b')' && depth > 0 {
            depth -= 1;
            if depth == 0 {
                spans.push((start, i + 1));
            }
        }
        i += 1;
    }
    spans
}

fn parses(src: &str) -> bool {
    let mut heap = ndvm_core::Heap::new();
    ndvm_frontends::scheme::parse(&mut heap, src).is_ok_and(|p| !p.forms().is_empty())
}

/// Code-fenced blocks of `text` (the body of each ```…``` block; an unclosed last fence runs to
/// the end, as in a truncated answer).
fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("```") {
        let after = &rest[i + 3..];
        // Skip the info string (`scheme`, `lisp`, …) up to the end of the line.
        let body_start = after.find('\n').map_or(after.len(), |n| n + 1);
        let body = &after[body_start..];
        match body.find("```") {
            Some(j) => {
                blocks.push(&body[..j]);
                rest = &body[j + 3..];
            }
            None => {
                blocks.push(body);
                break;
            }
        }
    }
    blocks
}

/// Extracts one program from an answer: a code-fenced block holding an s-expression (the first
/// such block, taken whole, so a program of several forms survives), else the whole answer when
/// it is a program, else the largest parenthesised span in the prose that the Scheme reader
/// accepts. `Err` says why there is none.
pub fn extract_program(answer: &str) -> std::result::Result<String, String> {
    let text = answer.trim();
    if text.is_empty() {
        return Err("empty answer".into());
    }
    for block in fenced_blocks(text) {
        let b = block.trim();
        if b.starts_with('(') || b.starts_with(';') {
            return Ok(b.to_string());
        }
    }
    if text.starts_with('(') && text.ends_with(')') && parses(text) {
        return Ok(text.to_string());
    }
    let mut best: Option<&str> = None;
    for (s, e) in balanced_spans(text) {
        let span = &text[s..e];
        // `()` or a bare parenthetical word is prose, not a program.
        let inner = span[1..span.len() - 1].trim();
        if inner.is_empty() || !inner.contains(char::is_whitespace) {
            continue;
        }
        if parses(span) && best.is_none_or(|b| span.len() > b.len()) {
            best = Some(span);
        }
    }
    match best {
        Some(b) => Ok(b.to_string()),
        None if text.contains('(') => Err("no balanced s-expression the reader accepts".into()),
        None => Err("no s-expression in the answer".into()),
    }
}

/// How one request ended.
#[derive(Debug)]
struct Answer {
    /// The answer's text, or why the request failed.
    text: std::result::Result<String, String>,
    attempts: u32,
    model: String,
}

/// Retry policy: attempts, per-attempt timeout and the exponential backoff schedule.
#[derive(Clone, Copy, Debug)]
struct Policy {
    timeout: Duration,
    retries: usize,
    backoff_s: f64,
}

impl Policy {
    /// Delay before retry number `k` (0-based): `backoff · 2^k`, capped at 60 s. No jitter, so
    /// the schedule is deterministic.
    fn delay(&self, k: usize) -> Duration {
        let s = self.backoff_s * 2f64.powi(k.min(30) as i32);
        Duration::from_secs_f64(s.min(60.0))
    }
}

/// Sends one chat request, retrying 429, 5xx, timeouts and transport errors.
async fn ask(
    client: Client<OpenAIConfig>,
    request: CreateChatCompletionRequest,
    policy: Policy,
) -> Answer {
    let mut attempts = 0u32;
    let mut model = request.model.clone();
    loop {
        attempts += 1;
        let (retryable, reason) =
            match tokio::time::timeout(policy.timeout, client.chat().create(request.clone())).await
            {
                Err(_) => (
                    true,
                    format!("timeout after {} s", policy.timeout.as_secs_f64()),
                ),
                Ok(Ok(resp)) => {
                    if !resp.model.is_empty() {
                        model = resp.model.clone();
                    }
                    let content = resp
                        .choices
                        .into_iter()
                        .next()
                        .and_then(|c| c.message.content.or(c.message.refusal))
                        .unwrap_or_default();
                    return Answer {
                        text: Ok(content),
                        attempts,
                        model,
                    };
                }
                Ok(Err(OpenAIError::ApiError(e))) => {
                    let s = e.status_code;
                    (
                        s.as_u16() == 429 || s.is_server_error(),
                        format!("http {}: {}", s.as_u16(), e.api_error.message),
                    )
                }
                Ok(Err(OpenAIError::Reqwest(e))) => (true, format!("transport: {e}")),
                Ok(Err(e)) => (false, e.to_string()),
            };
        let k = attempts as usize - 1;
        if !retryable || k >= policy.retries {
            return Answer {
                text: Err(format!("{reason} ({attempts} attempt(s))")),
                attempts,
                model,
            };
        }
        tokio::time::sleep(policy.delay(k)).await;
    }
}

/// Seconds since the Unix epoch, to the millisecond.
fn now() -> f64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_millis() as f64) / 1000.0
}

/// Asks an OpenAI-compatible chat endpoint for programs; see the module docs.
pub struct LlmProposer {
    config: LlmConfig,
    inputs: Vec<String>,
    params: Vec<String>,
    forbidden: Vec<String>,
    runtime: tokio::runtime::Runtime,
    client: Client<OpenAIConfig>,
    /// Programs already in the cache, replayed first.
    cached: Vec<String>,
    next_cached: usize,
    next_id: u64,
    requests: usize,
    cache: File,
    warnings: Vec<String>,
    /// Valid programs in cache order (the fallback examples).
    valid: Vec<String>,
    /// Sources by candidate id, for feedback.
    by_id: HashMap<u64, String>,
    /// (score, program) from the engine's feedback, best first.
    scored: Vec<(f64, String)>,
}

impl std::fmt::Debug for LlmProposer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmProposer")
            .field("base_url", &self.config.base_url)
            .field("model", &self.config.model)
            .field("requests", &self.requests)
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

impl LlmProposer {
    /// Builds the proposer: checks the template and the key, reads the cache, starts a runtime.
    /// Contacts nothing yet.
    pub fn new(
        config: LlmConfig,
        inputs: Vec<String>,
        params: Vec<String>,
        forbidden: Vec<String>,
    ) -> Result<LlmProposer> {
        render_prompt(
            &config.prompt,
            &PromptVars {
                inputs: &inputs,
                params: &params,
                ..Default::default()
            },
        )
        .map_err(|m| proposer_err(format!("{}: {m}", config.prompt_path.display())))?;
        let key = match &config.api_key {
            Some(k) => k.clone(),
            None => std::env::var(&config.api_key_env).map_err(|_| {
                proposer_err(format!(
                    "no API key: set ${} or `proposer.api_key` (an empty key for servers that need none)",
                    config.api_key_env
                ))
            })?,
        };
        let mut warnings = Vec::new();
        let (cached, valid) = if config.cache.is_file() {
            let (sources, w) = read_cache(&config.cache)?;
            warnings.extend(w);
            let valid = textfile::read(
                &config.cache,
                textfile::MAX_CACHE_BYTES,
                textfile::RAISE_CACHE_LIMIT,
            )?
            .lines()
            .filter_map(|l| serde_json::from_str::<CacheLine>(l).ok())
            .filter(|l| l.verdict == Some(Verdict::Valid))
            .filter_map(|l| l.src)
            .filter(|src| validate::precheck_source(src).is_ok())
            .collect();
            (sources, valid)
        } else {
            (Vec::new(), Vec::new())
        };
        let cache = open_cache(&config.cache, &mut warnings)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| proposer_err(format!("cannot start the async runtime: {e}")))?;
        // The plain transport, without async-openai's default retry layer: retries, their
        // schedule and the per-attempt timeout are ours (bounded and deterministic, see `ask`).
        let client = Client::with_config(
            OpenAIConfig::new()
                .with_api_base(config.base_url.clone())
                .with_api_key(key),
        )
        .with_http_service(ReqwestService::default());
        Ok(LlmProposer {
            config,
            inputs,
            params,
            forbidden,
            runtime,
            client,
            cached,
            next_cached: 0,
            next_id: 0,
            requests: 0,
            cache,
            warnings,
            valid,
            by_id: HashMap::new(),
            scored: Vec::new(),
        })
    }

    /// Requests sent so far by this proposer.
    pub fn requests(&self) -> usize {
        self.requests
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
        render_prompt(
            &self.config.prompt,
            &PromptVars {
                description: &self.config.description,
                inputs: &self.inputs,
                params: &self.params,
                target: &self.config.target,
                operators: &self.config.operators,
                examples: &examples,
            },
        )
        .map_err(proposer_err)
    }

    /// Turns an answer into a cache line (and the program, if any).
    fn judge(&self, answer: Answer, hash: &str) -> CacheLine {
        let mut line = CacheLine {
            model: Some(answer.model),
            prompt_hash: Some(hash.to_string()),
            temperature: Some(self.config.temperature),
            time: Some(now()),
            attempts: Some(answer.attempts),
            ..CacheLine::default()
        };
        match answer.text {
            Err(reason) => {
                line.verdict = Some(Verdict::RequestFailed);
                line.reason = Some(reason);
            }
            Ok(raw) => {
                if let Some(reason) = answer_limits(&raw) {
                    // Never parsed, never replayed: no `src`, and the text only when it is small.
                    line.verdict = Some(Verdict::Rejected);
                    line.reason = Some(reason);
                    if raw.len() <= MAX_ANSWER_BYTES {
                        line.raw = Some(raw);
                    }
                    return line;
                }
                match extract_program(&raw) {
                    Err(reason) => {
                        line.verdict = Some(Verdict::NoProgram);
                        line.reason = Some(reason);
                    }
                    Ok(src) => {
                        match validate::check_source(
                            &src,
                            &self.inputs,
                            &self.params,
                            &self.forbidden,
                        ) {
                            Ok(_) => {
                                line.verdict = Some(Verdict::Valid);
                                line.src = Some(src);
                            }
                            // Over the size or nesting bounds: recorded, never replayed.
                            Err(r) if matches!(r.class, "too-large" | "too-deep") => {
                                line.verdict = Some(Verdict::Rejected);
                                line.reason = Some(r.message);
                            }
                            Err(r) => {
                                line.verdict = Some(Verdict::Invalid(r.class.to_string()));
                                line.reason = Some(r.message);
                                line.src = Some(src);
                            }
                        }
                    }
                }
                line.raw = Some(raw);
            }
        }
        line
    }

    fn append(&mut self, line: &CacheLine) -> Result<()> {
        let mut text = serde_json::to_string(line).map_err(|e| proposer_err(e.to_string()))?;
        text.push('\n');
        self.cache
            .write_all(text.as_bytes())
            .and_then(|()| self.cache.flush())
            .map_err(|source| SearchError::Write { source })
    }

    fn push(&mut self, out: &mut Vec<Candidate>, src: String) {
        self.by_id.insert(self.next_id, src.clone());
        out.push(Candidate {
            id: self.next_id,
            src,
        });
        self.next_id += 1;
    }

    /// One wave of up to `concurrency` requests; answers are judged, appended to the cache and
    /// returned as candidates in arrival order.
    fn wave(&mut self, out: &mut Vec<Candidate>) -> Result<()> {
        let k = self
            .config
            .concurrency
            .min(self.config.max_requests - self.requests);
        let prompt = self.prompt()?;
        let hash = prompt_hash(&prompt);
        let request = CreateChatCompletionRequest {
            model: self.config.model.clone(),
            messages: vec![ChatCompletionRequestMessage::User(
                ChatCompletionRequestUserMessage {
                    content: ChatCompletionRequestUserMessageContent::Text(prompt),
                    name: None,
                },
            )],
            temperature: Some(self.config.temperature as f32),
            max_completion_tokens: self.config.max_tokens,
            ..Default::default()
        };
        let policy = Policy {
            timeout: Duration::from_secs_f64(self.config.timeout_s),
            retries: self.config.retries,
            backoff_s: self.config.backoff_s,
        };
        self.requests += k;
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..k {
            set.spawn_on(
                ask(self.client.clone(), request.clone(), policy),
                self.runtime.handle(),
            );
        }
        while let Some(joined) = self.runtime.block_on(set.join_next()) {
            let answer = joined.unwrap_or_else(|e| Answer {
                text: Err(format!("request task failed: {e}")),
                attempts: 0,
                model: self.config.model.clone(),
            });
            let line = self.judge(answer, &hash);
            self.append(&line)?;
            if let Some(src) = line.src {
                if line.verdict == Some(Verdict::Valid) {
                    self.valid.push(src.clone());
                }
                self.push(out, src);
            }
        }
        Ok(())
    }
}

impl Proposer for LlmProposer {
    fn propose(&mut self, n: usize) -> Result<Vec<Candidate>> {
        let mut out = Vec::new();
        while out.len() < n && self.next_cached < self.cached.len() {
            let src = self.cached[self.next_cached].clone();
            self.next_cached += 1;
            self.push(&mut out, src);
        }
        if !out.is_empty() || n == 0 {
            return Ok(out);
        }
        while out.is_empty() && self.requests < self.config.max_requests {
            self.wave(&mut out)?;
        }
        Ok(out)
    }

    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    fn name(&self) -> &'static str {
        "llm"
    }

    fn feedback(&mut self, id: u64, score: f64) {
        if !score.is_finite() {
            return;
        }
        if let Some(src) = self.by_id.get(&id) {
            if self.scored.iter().any(|(_, s)| s == src) {
                return;
            }
            self.scored.push((score, src.clone()));
            self.scored.sort_by(|a, b| b.0.total_cmp(&a.0));
            self.scored.truncate(self.config.examples.max(1) * 4);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_plain_fenced_and_prose_programs() {
        assert_eq!(extract_program("  (* a x)\n").unwrap(), "(* a x)");
        let fenced = "Here you go:\n```scheme\n(* (exp (* a x)) (cos (* b x)))\n```\nEnjoy.";
        assert_eq!(
            extract_program(fenced).unwrap(),
            "(* (exp (* a x)) (cos (* b x)))"
        );
        let prose = "The model (a damped wave) is (* a (exp (* b x))) which fits well.";
        assert_eq!(extract_program(prose).unwrap(), "(* a (exp (* b x)))");
        let truncated = "```lisp\n(+ (* a x) b)";
        assert_eq!(extract_program(truncated).unwrap(), "(+ (* a x) b)");
        let e = extract_program("I cannot help with that.").unwrap_err();
        assert!(e.contains("no s-expression"), "{e}");
        assert!(extract_program("   ").unwrap_err().contains("empty"));
        assert!(extract_program("(((").is_err());
    }

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
            ..Default::default()
        };
        let p = render_prompt(
            "{{target}} of {{ inputs }} with {{params}}:\n{{examples}}",
            &v,
        );
        assert_eq!(p.unwrap(), "y of x with a, b:\n(* a x)");
        assert!(render_prompt("{{nope}}", &v).unwrap_err().contains("nope"));
        assert!(render_prompt("{{inputs", &v).is_err());
        assert_eq!(prompt_hash("abc"), prompt_hash("abc"));
        assert_ne!(prompt_hash("abc"), prompt_hash("abd"));
        assert!(prompt_hash("").starts_with("fnv1a64:"));
        // The published FNV-1a 64 test vectors: the hashes in existing caches stay valid.
        assert_eq!(prompt_hash(""), "fnv1a64:cbf29ce484222325");
        assert_eq!(prompt_hash("a"), "fnv1a64:af63dc4c8601ec8c");
        assert_eq!(prompt_hash("foobar"), "fnv1a64:85944171f73967e8");
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let p = Policy {
            timeout: Duration::from_secs(1),
            retries: 3,
            backoff_s: 0.5,
        };
        assert_eq!(p.delay(0), Duration::from_millis(500));
        assert_eq!(p.delay(2), Duration::from_secs(2));
        assert_eq!(p.delay(40), Duration::from_secs(60));
    }
}
