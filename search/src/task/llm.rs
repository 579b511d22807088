//! The llm endpoint of a task (`proposer.kind: llm`, or an LLM-seeded evolve): URL, model, key,
//! prompt, cache and request limits, the key and URL registered as secrets.

use super::*;

/// Most llm requests in flight at once.
pub const MAX_CONCURRENCY: usize = 256;

/// Longest llm attempt, in seconds (one hour).
pub const MAX_LLM_TIMEOUT_S: f64 = 3600.0;

/// Most llm retries after a retryable failure.
pub const MAX_RETRIES: usize = 100;

/// One model the `llm` proposer may ask (`proposer.models[]`, or the task's `base_url` and
/// `model`). Its `Debug` form redacts the key.
#[derive(Clone, PartialEq)]
pub struct ModelChoice {
    /// Base URL of the API (`…/v1`).
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// Its share of the requests.
    pub weight: f64,
    /// Environment variable holding its own key (else the proposer's).
    pub api_key_env: Option<String>,
    /// Its own key (else the proposer's).
    pub api_key: Option<String>,
}

impl std::fmt::Debug for ModelChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelChoice")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("weight", &self.weight)
            .field("api_key_env", &self.api_key_env)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Settings of the `llm` proposer, resolved from the task (the prompt template already read).
/// Its `Debug` form redacts the API key.
#[derive(Clone, PartialEq)]
pub struct LlmConfig {
    /// Base URL of the API (`…/v1`): the first model's.
    pub base_url: String,
    /// Model name: the first model's.
    pub model: String,
    /// Every model a request may draw (one unless `proposer.models` lists several).
    pub models: Vec<ModelChoice>,
    /// Seeds the draw of each request's model.
    pub seed: u64,
    /// Environment variable holding the key.
    pub api_key_env: String,
    /// A key given in the task itself.
    pub api_key: Option<String>,
    /// Sampling temperature.
    pub temperature: f64,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Most requests this run makes.
    pub max_requests: usize,
    /// The prompt template file.
    pub prompt_path: PathBuf,
    /// The template's text.
    pub prompt: String,
    /// The JSONL cache: replayed first, then every answer is appended to it.
    pub cache: PathBuf,
    /// Seconds one attempt may take.
    pub timeout_s: f64,
    /// Further attempts after a retryable failure.
    pub retries: usize,
    /// First retry delay in seconds (doubled each time).
    pub backoff_s: f64,
    /// Most completion tokens per answer.
    pub max_tokens: Option<u32>,
    /// Previously valid programs shown in the prompt.
    pub examples: usize,
    /// Unary operators named in the prompt.
    pub operators: Vec<String>,
    /// The target column (named in the prompt).
    pub target: String,
    /// The task's description (named in the prompt).
    pub description: String,
    /// Where failed requests are logged (the run folder's `llm-failures.jsonl`, set by the run;
    /// `None`: they are counted and reported, not logged).
    pub failure_log: Option<PathBuf>,
}

impl std::fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("models", &self.models)
            .field("seed", &self.seed)
            .field("api_key_env", &self.api_key_env)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("temperature", &self.temperature)
            .field("concurrency", &self.concurrency)
            .field("max_requests", &self.max_requests)
            .field("prompt_path", &self.prompt_path)
            .field("prompt", &self.prompt)
            .field("cache", &self.cache)
            .field("timeout_s", &self.timeout_s)
            .field("retries", &self.retries)
            .field("backoff_s", &self.backoff_s)
            .field("max_tokens", &self.max_tokens)
            .field("examples", &self.examples)
            .field("operators", &self.operators)
            .field("target", &self.target)
            .field("description", &self.description)
            .field("failure_log", &self.failure_log)
            .finish()
    }
}

/// Resolves `proposer:` for `kind: llm` (reads the prompt template; contacts nothing).
pub(super) fn resolve_llm(base: &Path, spec: &TaskSpec, no_vars: bool) -> Result<LlmConfig> {
    let p = &spec.proposer;
    if let Some(ops) = &p.operators {
        check_operators(ops, "operator", ndvm_core::is_primitive)?;
    }
    let err = |loc: Location, msg: String| spec_err(Some(loc), msg);
    let need = |key: &str| spec_err(None, format!("`proposer.kind: llm` needs `proposer.{key}`"));
    if no_vars {
        return Err(spec_err(
            None,
            "the llm proposer needs `inputs` and `params`",
        ));
    }
    let models = resolve_models(p)?;
    let prompt = p.prompt.as_ref().ok_or_else(|| need("prompt"))?;
    let cache = p.cache.as_ref().ok_or_else(|| need("cache"))?;
    let (prompt_path, prompt_text) = read_prompt(base, prompt)?;
    let positive = |v: &Option<Spanned<f64>>, key: &str, default: f64, max: f64| match v {
        Some(t) if !(t.value.is_finite() && t.value > 0.0 && t.value <= max) => Err(err(
            t.referenced,
            format!("`{key}` must be positive and at most {max}"),
        )),
        Some(t) => Ok(t.value),
        None => Ok(default),
    };
    let at_least_one = |v: &Option<Spanned<usize>>, key: &str, default: usize, max: usize| match v {
        Some(t) if t.value == 0 || t.value > max => Err(err(
            t.referenced,
            format!("`{key}` must be at least 1 and at most {max}"),
        )),
        Some(t) => Ok(t.value),
        None => Ok(default),
    };
    let temperature = match &p.temperature {
        Some(t) if !(t.value.is_finite() && (0.0..=2.0).contains(&t.value)) => {
            return Err(err(t.referenced, "`temperature` must be in [0, 2]".into()));
        }
        Some(t) => t.value,
        None => 0.8,
    };
    let backoff_s = match &p.backoff {
        Some(t) if !(t.value.is_finite() && (0.0..=60.0).contains(&t.value)) => {
            return Err(err(
                t.referenced,
                "`backoff` must be in [0, 60] seconds".into(),
            ));
        }
        Some(t) => t.value,
        None => 1.0,
    };
    register_secrets(p);
    Ok(LlmConfig {
        base_url: models[0].base_url.clone(),
        model: models[0].model.clone(),
        models,
        seed: spec.seed,
        api_key_env: p
            .api_key_env
            .as_ref()
            .map_or_else(|| "OPENAI_API_KEY".to_string(), |v| v.value.clone()),
        api_key: p.api_key.clone(),
        temperature,
        concurrency: at_least_one(&p.concurrency, "concurrency", 4, MAX_CONCURRENCY)?,
        max_requests: at_least_one(&p.max_requests, "max_requests", 64, usize::MAX)?,
        prompt_path,
        prompt: prompt_text,
        cache: base.join(&cache.value),
        timeout_s: positive(&p.timeout, "timeout", 60.0, MAX_LLM_TIMEOUT_S)?,
        retries: match p.retries {
            Some(r) if r > MAX_RETRIES => {
                return Err(spec_err(
                    None,
                    format!("`proposer.retries` must be at most {MAX_RETRIES}"),
                ));
            }
            r => r.unwrap_or(3),
        },
        backoff_s,
        max_tokens: p.max_tokens,
        examples: p.examples.unwrap_or(3),
        operators: p.operators.as_ref().map_or_else(
            || DEFAULT_OPERATORS.iter().map(|s| s.to_string()).collect(),
            |ops| ops.iter().map(|o| o.value.clone()).collect(),
        ),
        target: spec
            .target
            .as_ref()
            .map_or_else(|| "y".to_string(), |t| t.value.clone()),
        description: spec.description.clone().unwrap_or_default(),
        failure_log: None,
    })
}

/// The models a task's llm proposer asks: `proposer.models`, or its `base_url` and `model`.
fn resolve_models(p: &ProposerSpec) -> Result<Vec<ModelChoice>> {
    let need = |key: &str| {
        spec_err(
            None,
            format!("`proposer.kind: llm` needs `proposer.{key}` (or `proposer.models`)"),
        )
    };
    let url = |value: &str, at: Location| -> Result<String> {
        if !(value.starts_with("http://") || value.starts_with("https://")) {
            return Err(spec_err(
                Some(at),
                "`base_url` must start with http:// or https://",
            ));
        }
        Ok(value.trim_end_matches('/').to_string())
    };
    let Some(list) = &p.models else {
        let base_url = p.base_url.as_ref().ok_or_else(|| need("base_url"))?;
        let model = p.model.as_ref().ok_or_else(|| need("model"))?;
        return Ok(vec![ModelChoice {
            base_url: url(&base_url.value, base_url.referenced)?,
            model: model.value.clone(),
            weight: 1.0,
            api_key_env: None,
            api_key: None,
        }]);
    };
    if let Some(at) = p
        .base_url
        .as_ref()
        .map(|b| b.referenced)
        .or(p.model.as_ref().map(|m| m.referenced))
    {
        return Err(spec_err(
            Some(at),
            "`proposer.models` lists every model: give it or `base_url` and `model`, not both",
        ));
    }
    if list.is_empty() {
        return Err(spec_err(None, "`proposer.models` lists no model"));
    }
    list.iter()
        .map(|e| {
            let weight = e.value.weight.unwrap_or(1.0);
            if !(weight.is_finite() && weight > 0.0) {
                return Err(spec_err(
                    Some(e.referenced),
                    "a model's `weight` must be positive",
                ));
            }
            Ok(ModelChoice {
                base_url: url(&e.value.base_url, e.referenced)?,
                model: e.value.model.clone(),
                weight,
                api_key_env: e.value.api_key_env.clone(),
                api_key: e.value.api_key.clone(),
            })
        })
        .collect()
}

/// The prompt template `prompt` names (relative to `base`): its path and text; an unreadable one
/// is an error at `prompt:` with the OS reason.
fn read_prompt(base: &Path, prompt: &Spanned<String>) -> Result<(PathBuf, String)> {
    let prompt_path = base.join(&prompt.value);
    let text = textfile::read(
        &prompt_path,
        textfile::MAX_PROMPT_BYTES,
        "a prompt template is a few KiB",
    )
    .map_err(|e| {
        let e = match e {
            SearchError::Read { source, .. } => source.to_string(),
            other => other.to_string(),
        };
        spec_err(
            Some(prompt.referenced),
            format!("cannot read prompt {}: {e}", prompt_path.display()),
        )
    })?;
    Ok((prompt_path, text))
}

/// The secrets the task names (`base_url`'s user-info, `api_key`, the key's variable), so that
/// no path out of the process shows them (see [`crate::secret`]).
fn register_secrets(p: &ProposerSpec) {
    if let Some(url) = &p.base_url {
        crate::secret::register_url(&url.value);
    }
    for e in p.models.iter().flatten() {
        crate::secret::register_url(&e.value.base_url);
        if let Some(k) = &e.value.api_key {
            crate::secret::register(k);
        }
        if let Some(k) = e
            .value
            .api_key_env
            .as_ref()
            .and_then(|v| std::env::var(v).ok())
        {
            crate::secret::register(&k);
        }
    }
    if let Some(k) = &p.api_key {
        crate::secret::register(k);
    }
    let key_env = p.api_key_env.as_ref().map(|v| v.value.as_str());
    if let Ok(k) = std::env::var(key_env.unwrap_or("OPENAI_API_KEY")) {
        crate::secret::register(&k);
    }
}
