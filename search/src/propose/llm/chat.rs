//! The chat-completion exchange of the `llm` proposer: the request and response bodies of an
//! OpenAI-compatible `POST {base_url}/chat/completions`, one blocking exchange (ureq; TLS by rustls
//! on ring), the bounded deterministic retry schedule, and the classes of failure that tell a
//! fatal one (a bad key, a wrong model or URL, an endpoint that cannot be reached) from a
//! transient one (429, 5xx, a timeout).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::propose::replay::TokenUsage;

/// Longest response body read, in bytes (16 MiB): far above any chat answer; it bounds memory.
pub const MAX_BODY_BYTES: u64 = 16 * 1024 * 1024;

/// The request body: one user message.
#[derive(Debug, Serialize)]
pub(super) struct ChatRequest<'a> {
    pub(super) model: &'a str,
    pub(super) messages: [Message<'a>; 1],
    pub(super) temperature: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) max_completion_tokens: Option<u32>,
}

/// A request's body twice: capped with `max_tokens`, which most OpenAI-compatible servers read
/// (llama.cpp's Python server, Ollama, vLLM), and with `max_completion_tokens`, which OpenAI's
/// newer models require instead (they refuse `max_tokens` with a 400 naming it).
#[derive(Debug)]
pub(super) struct Bodies {
    pub(super) max_tokens: Vec<u8>,
    pub(super) max_completion_tokens: Vec<u8>,
}

impl Bodies {
    /// The two bodies of `request` (its cap, if any, moved to each field in turn).
    pub(super) fn of(request: &ChatRequest<'_>) -> serde_json::Result<Bodies> {
        let cap = request.max_tokens.or(request.max_completion_tokens);
        let with = |plain: bool| {
            serde_json::to_vec(&ChatRequest {
                max_tokens: cap.filter(|_| plain),
                max_completion_tokens: cap.filter(|_| !plain),
                model: request.model,
                messages: [Message {
                    role: request.messages[0].role,
                    content: request.messages[0].content,
                }],
                temperature: request.temperature,
            })
        };
        Ok(Bodies {
            max_tokens: with(true)?,
            max_completion_tokens: with(false)?,
        })
    }
}

/// A chat message of the request.
#[derive(Debug, Serialize)]
pub(super) struct Message<'a> {
    pub(super) role: &'static str,
    pub(super) content: &'a str,
}

/// The part of a chat completion we read.
#[derive(Debug, Deserialize)]
struct ChatResponse {
    #[serde(default)]
    model: String,
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<TokenUsage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    message: AnswerMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct AnswerMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
}

/// `{"error": {"message": …}}`, the body of an OpenAI-style error.
#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Debug, Deserialize)]
struct ErrorDetail {
    #[serde(default)]
    message: String,
}

/// Why a request failed; decides whether it is retried and whether the run stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureClass {
    /// HTTP 401: the key is missing or wrong. Fatal at once.
    Unauthorized,
    /// HTTP 403: the key may not use this endpoint or model. Fatal at once.
    Forbidden,
    /// HTTP 404: no such model, or `base_url` does not point at the API. Fatal at once.
    NotFound,
    /// HTTP 3xx: `base_url` points elsewhere (often http:// for https://). Fatal at once.
    Redirected,
    /// HTTP 408 or 429: retried with backoff.
    RateLimited,
    /// HTTP 5xx: retried with backoff.
    ServerError,
    /// Another HTTP 4xx (a request the server refuses, such as a prompt over its context): not
    /// retried.
    Refused,
    /// No complete answer within `timeout`: retried with backoff.
    Timeout,
    /// No connection (refused, unknown host, TLS failure, reset): retried with backoff, then fatal.
    Unreachable,
    /// The request cannot be built (a key or URL that is not valid in HTTP, a bad proxy
    /// setting). Fatal at once.
    BadRequest,
    /// A 2xx whose body is not a chat completion, or one over [`MAX_BODY_BYTES`]: not retried.
    BadResponse,
}

impl FailureClass {
    /// The class of an HTTP status that is not a success.
    pub fn of_status(status: u16) -> FailureClass {
        match status {
            401 => FailureClass::Unauthorized,
            403 => FailureClass::Forbidden,
            404 => FailureClass::NotFound,
            408 | 429 => FailureClass::RateLimited,
            300..=399 => FailureClass::Redirected,
            500..=599 => FailureClass::ServerError,
            _ => FailureClass::Refused,
        }
    }

    /// Whether another attempt may succeed.
    pub fn is_retried(self) -> bool {
        matches!(
            self,
            FailureClass::RateLimited
                | FailureClass::ServerError
                | FailureClass::Timeout
                | FailureClass::Unreachable
        )
    }

    /// Whether the run stops on this failure (after the retries, for a retried class).
    pub fn is_fatal(self) -> bool {
        matches!(
            self,
            FailureClass::Unauthorized
                | FailureClass::Forbidden
                | FailureClass::NotFound
                | FailureClass::Redirected
                | FailureClass::Unreachable
                | FailureClass::BadRequest
        )
    }
}

/// A failed attempt: its class, the HTTP status when there was one, and what happened.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Failure {
    pub(super) class: FailureClass,
    pub(super) status: Option<u16>,
    pub(super) reason: String,
}

/// A chat completion's text, the model that answered, and what the exchange cost.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Answered {
    pub(super) text: String,
    pub(super) model: String,
    /// The endpoint's `usage`, when it sent one.
    pub(super) usage: Option<TokenUsage>,
    /// The first choice's `finish_reason` (`stop`, `length`, …).
    pub(super) finish_reason: Option<String>,
    /// Milliseconds from sending the request to the answer's last byte.
    pub(super) latency_ms: f64,
}

/// How one request ended, after its retries.
#[derive(Debug)]
pub(super) struct Reply {
    pub(super) result: Result<Answered, Failure>,
    pub(super) attempts: u32,
}

/// Retry policy: further attempts and the exponential backoff schedule (the per-attempt timeout
/// is the [`Endpoint`]'s).
#[derive(Clone, Copy, Debug)]
pub(super) struct Policy {
    pub(super) retries: usize,
    pub(super) backoff_s: f64,
}

impl Policy {
    /// Delay before retry number `k` (0-based): `backoff · 2^k`, capped at 60 s. No jitter, so
    /// the schedule is deterministic.
    pub(super) fn delay(&self, k: usize) -> Duration {
        let s = self.backoff_s * 2f64.powi(k.min(30) as i32);
        Duration::from_secs_f64(s.min(60.0))
    }
}

/// The endpoint: an HTTP agent (proxies from the environment, no redirects followed), the URL
/// and the key. Cloning shares the agent's connection pool. Its `Debug` form redacts the key.
#[derive(Clone)]
pub(super) struct Endpoint {
    agent: ureq::Agent,
    url: String,
    key: String,
    /// The server refused `max_tokens` and asked for `max_completion_tokens` (shared by clones).
    newer_cap: Arc<AtomicBool>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("key", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// `{base_url}/chat/completions` with `key` (none sent when empty); each attempt may take
    /// `timeout` from connecting to the last byte of the answer.
    pub(super) fn new(base_url: &str, key: String, timeout: Duration) -> Endpoint {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .max_redirects_will_error(false)
            .user_agent(concat!("ndvm-search/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Endpoint {
            agent,
            url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            key,
            newer_cap: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The URL requests go to.
    pub(super) fn url(&self) -> &str {
        &self.url
    }

    /// One exchange: `body` is a serialized [`ChatRequest`].
    fn attempt(&self, body: &[u8]) -> Result<Answered, Failure> {
        let sent = Instant::now();
        let mut request = self.agent.post(&self.url).content_type("application/json");
        if !self.key.is_empty() {
            request = request.header("Authorization", format!("Bearer {}", self.key));
        }
        let mut response = request.send(body).map_err(transport_failure)?;
        let status = response.status().as_u16();
        let bytes = response
            .body_mut()
            .with_config()
            .limit(MAX_BODY_BYTES)
            .read_to_vec()
            .map_err(transport_failure)?;
        let text = String::from_utf8_lossy(&bytes);
        if !(200..300).contains(&status) {
            return Err(Failure {
                class: FailureClass::of_status(status),
                status: Some(status),
                reason: crate::secret::redacted(&format!(
                    "http {status}: {}",
                    error_message(&text)
                )),
            });
        }
        let parsed: ChatResponse = serde_json::from_str(&text).map_err(|e| Failure {
            class: FailureClass::BadResponse,
            status: Some(status),
            reason: crate::secret::redacted(&format!(
                "http {status} but not a chat completion (failed to deserialize: {e})"
            )),
        })?;
        let latency_ms = sent.elapsed().as_secs_f64() * 1e3;
        let (text, finish_reason) = match parsed.choices.into_iter().next() {
            Some(c) => (
                c.message.content.or(c.message.refusal).unwrap_or_default(),
                c.finish_reason,
            ),
            None => (String::new(), None),
        };
        // An echoed key in the answer or the model's name is removed before anything stores it.
        Ok(Answered {
            text: crate::secret::redacted(&text),
            model: crate::secret::redacted(&parsed.model),
            usage: parsed.usage,
            finish_reason: finish_reason.map(|r| crate::secret::redacted(&r)),
            latency_ms,
        })
    }
}

/// The server's error message: `error.message` of a JSON error body, else the body's first
/// 200 characters.
fn error_message(body: &str) -> String {
    match serde_json::from_str::<ErrorBody>(body) {
        Ok(e) if !e.error.message.is_empty() => e.error.message,
        _ if body.trim().is_empty() => "(empty body)".to_string(),
        _ => body.trim().chars().take(200).collect(),
    }
}

/// A failure before or while reading the answer, by the client's error.
fn transport_failure(e: ureq::Error) -> Failure {
    let class = match &e {
        ureq::Error::Timeout(_) => FailureClass::Timeout,
        ureq::Error::BodyExceedsLimit(_) => FailureClass::BadResponse,
        ureq::Error::Http(_) | ureq::Error::BadUri(_) | ureq::Error::InvalidProxyUrl => {
            FailureClass::BadRequest
        }
        _ => FailureClass::Unreachable,
    };
    let reason = match class {
        FailureClass::Timeout => format!("no answer in time ({e})"),
        FailureClass::BadResponse => format!("answer over {MAX_BODY_BYTES} bytes"),
        FailureClass::BadRequest => format!("cannot send the request: {e}"),
        _ => format!("cannot reach the endpoint: {e}"),
    };
    Failure {
        class,
        status: None,
        reason: crate::secret::redacted(&reason),
    }
}

/// Sleeps for `d` unless `cancel` is raised meanwhile; true when it slept the whole time.
fn sleep_unless(d: Duration, cancel: &AtomicBool) -> bool {
    let end = Instant::now() + d;
    loop {
        if cancel.load(Ordering::Relaxed) {
            return false;
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
}

/// Sends one request, retrying the retried classes (see [`FailureClass::is_retried`]) on
/// `policy`'s schedule; `on_retry` hears of each retry before its delay. A raised `cancel` (another
/// request failed fatally) stops the retries.
pub(super) fn ask(
    endpoint: &Endpoint,
    bodies: &Bodies,
    policy: Policy,
    cancel: &AtomicBool,
    on_retry: &dyn Fn(&Failure),
) -> Reply {
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let newer = endpoint.newer_cap.load(Ordering::Relaxed);
        let body = match newer {
            true => &bodies.max_completion_tokens,
            false => &bodies.max_tokens,
        };
        let failure = match endpoint.attempt(body) {
            Ok(answered) => {
                return Reply {
                    result: Ok(answered),
                    attempts,
                };
            }
            Err(f) => f,
        };
        // A server that wants the newer cap says so in a 400: sent again at once with it.
        let capped = bodies.max_tokens != bodies.max_completion_tokens;
        if capped
            && !newer
            && failure.class == FailureClass::Refused
            && failure.reason.contains("max_completion_tokens")
        {
            endpoint.newer_cap.store(true, Ordering::Relaxed);
            continue;
        }
        let k = attempts as usize - 1;
        let retry = failure.class.is_retried() && k < policy.retries;
        if !retry || cancel.load(Ordering::Relaxed) {
            return Reply {
                result: Err(failure),
                attempts,
            };
        }
        on_retry(&failure);
        if !sleep_unless(policy.delay(k), cancel) {
            return Reply {
                result: Err(failure),
                attempts,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let p = Policy {
            retries: 3,
            backoff_s: 0.5,
        };
        assert_eq!(p.delay(0), Duration::from_millis(500));
        assert_eq!(p.delay(2), Duration::from_secs(2));
        assert_eq!(p.delay(40), Duration::from_secs(60));
    }

    #[test]
    fn statuses_are_classed_retried_or_fatal() {
        let class = FailureClass::of_status;
        assert_eq!(class(401), FailureClass::Unauthorized);
        assert_eq!(class(403), FailureClass::Forbidden);
        assert_eq!(class(404), FailureClass::NotFound);
        assert_eq!(class(301), FailureClass::Redirected);
        assert_eq!(class(429), FailureClass::RateLimited);
        assert_eq!(class(408), FailureClass::RateLimited);
        assert_eq!(class(503), FailureClass::ServerError);
        assert_eq!(class(400), FailureClass::Refused);
        for c in [401, 403, 404, 301] {
            assert!(class(c).is_fatal() && !class(c).is_retried(), "{c}");
        }
        for c in [408, 429, 500, 502, 503] {
            assert!(class(c).is_retried() && !class(c).is_fatal(), "{c}");
        }
        assert!(!class(400).is_retried() && !class(400).is_fatal());
        assert!(FailureClass::Unreachable.is_retried() && FailureClass::Unreachable.is_fatal());
        assert!(FailureClass::Timeout.is_retried() && !FailureClass::Timeout.is_fatal());
        assert!(!FailureClass::BadResponse.is_retried() && !FailureClass::BadResponse.is_fatal());
    }

    #[test]
    fn error_bodies_give_the_server_message() {
        assert_eq!(
            error_message(r#"{"error": {"message": "Invalid API key", "type": "x"}}"#),
            "Invalid API key"
        );
        assert_eq!(error_message("  "), "(empty body)");
        assert_eq!(error_message(&"x".repeat(500)).len(), 200);
    }

    #[test]
    fn a_closed_port_is_unreachable_and_retried_until_the_retries_run_out() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let endpoint = Endpoint::new(
            &format!("http://127.0.0.1:{port}/v1"),
            String::new(),
            Duration::from_secs(5),
        );
        assert_eq!(
            endpoint.url(),
            format!("http://127.0.0.1:{port}/v1/chat/completions")
        );
        let keyed = Endpoint::new("http://h/v1", "sk-secret-1".into(), Duration::from_secs(1));
        assert!(!format!("{keyed:?}").contains("sk-secret-1"), "{keyed:?}");
        let policy = Policy {
            retries: 2,
            backoff_s: 0.01,
        };
        let retries = std::sync::atomic::AtomicUsize::new(0);
        let bodies = Bodies {
            max_tokens: b"{}".to_vec(),
            max_completion_tokens: b"{}".to_vec(),
        };
        let reply = ask(&endpoint, &bodies, policy, &AtomicBool::new(false), &|f| {
            assert_eq!(f.class, FailureClass::Unreachable);
            retries.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(reply.attempts, 3);
        assert_eq!(retries.into_inner(), 2);
        let failure = reply.result.unwrap_err();
        assert_eq!(failure.class, FailureClass::Unreachable);
        assert!(
            failure.reason.contains("cannot reach"),
            "{}",
            failure.reason
        );
        // A raised cancel flag stops the retries after the first attempt.
        let reply = ask(&endpoint, &bodies, policy, &AtomicBool::new(true), &|_| {});
        assert_eq!(reply.attempts, 1);
    }
}
