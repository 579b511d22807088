//! The `llm` proposer against a local mock of an OpenAI-compatible chat endpoint (a std-only
//! server on 127.0.0.1, below; nothing else is contacted): good, prose and code-fenced answers, garbage, 429 and
//! 500 with backoff, timeouts, each checked in the cache it writes; failed requests in the
//! failure log, never in the cache; fatal statuses and failures in a row ending the run; then
//! `ndvm-search` end to end with `kind: llm`: a run that finds a good fit and is replayed offline
//! with identical results, retries shown in the progress lines, and 401, 404, a failing server and
//! a closed port ending the run with a non-zero exit, a message naming the endpoint and the cache
//! unchanged. Only in a build with the `llm` feature.
#![cfg(feature = "llm")]

mod common;

use common::root;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ndvm_frontends::Registry;
use ndvm_search::propose::llm::{FailureClass, FailureLine, LlmProposer};
use ndvm_search::propose::replay::{CacheLine, CacheReplay, Verdict};
use ndvm_search::propose::{Candidate, Proposer};
use ndvm_search::task::{LlmConfig, ModelChoice};
use serde_json::{Value, json};

/// A fresh scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    common::scratch("llm", name)
}

/// A canned HTTP response of the mock server: status, JSON or text body, and a delay before it.
#[derive(Clone, Debug)]
struct ResponseTemplate {
    status: u16,
    body: String,
    delay: Duration,
}

impl ResponseTemplate {
    fn new(status: u16) -> ResponseTemplate {
        ResponseTemplate {
            status,
            body: String::new(),
            delay: Duration::ZERO,
        }
    }

    fn set_body_json(mut self, body: Value) -> ResponseTemplate {
        self.body = body.to_string();
        self
    }

    fn set_body_string(mut self, body: &str) -> ResponseTemplate {
        self.body = body.to_string();
        self
    }

    fn set_delay(mut self, delay: Duration) -> ResponseTemplate {
        self.delay = delay;
        self
    }
}

/// What the mock server answers and what it received.
#[derive(Default)]
struct MockState {
    responses: Vec<ResponseTemplate>,
    next: usize,
    bodies: Vec<Vec<u8>>,
    /// The `Authorization` header of each chat request ("" when none), in order.
    auths: Vec<String>,
}

/// A mock of an OpenAI-compatible chat endpoint on loopback: a std `TcpListener`, one thread per
/// connection, one request per connection (`Connection: close`). `POST /v1/chat/completions` gets
/// the next of its responses (the last one repeats); any other request gets a 404.
struct Mocked {
    addr: std::net::SocketAddr,
    state: Arc<Mutex<MockState>>,
}

impl Mocked {
    fn start() -> Mocked {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(MockState::default()));
        let shared = Arc::clone(&state);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = Arc::clone(&shared);
                std::thread::spawn(move || serve(stream, &state));
            }
        });
        Mocked { addr, state }
    }

    /// Answers chat requests with `responses` in turn (the last one repeats).
    fn answer(&self, responses: Vec<ResponseTemplate>) {
        let mut st = self.state.lock().unwrap();
        st.responses = responses;
        st.next = 0;
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The `Authorization` headers of the chat requests received so far, in order.
    fn authorizations(&self) -> Vec<String> {
        self.state.lock().unwrap().auths.clone()
    }

    /// The JSON bodies of the chat requests received so far, in order.
    fn requests(&self) -> Vec<Value> {
        let st = self.state.lock().unwrap();
        st.bodies
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap())
            .collect()
    }
}

/// Reads one request from `stream` and writes its response.
fn serve(mut stream: TcpStream, state: &Mutex<MockState>) {
    let Some((head, body)) = read_request(&mut stream) else {
        return;
    };
    let chat = head.starts_with("POST /v1/chat/completions ");
    let auth = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("authorization"))
        .map_or(String::new(), |(_, v)| v.trim().to_string());
    let reply = if chat {
        let mut st = state.lock().unwrap();
        st.bodies.push(body);
        st.auths.push(auth.clone());
        let i = st.next.min(st.responses.len().saturating_sub(1));
        st.next += 1;
        st.responses.get(i).cloned()
    } else {
        None
    }
    .unwrap_or_else(|| ResponseTemplate::new(404));
    // `{{authorization}}` in a body echoes the request's header value (as some servers do).
    let mut reply = reply;
    reply.body = reply.body.replace("{{authorization}}", &auth);
    std::thread::sleep(reply.delay);
    let text = format!(
        "HTTP/1.1 {} Mock\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        reply.status,
        reply.body.len(),
        reply.body
    );
    // The client may have given up (a timeout test): nothing to do then.
    let _ = stream.write_all(text.as_bytes());
}

/// The request line with its headers, and the body (`Content-Length` bytes).
fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let length = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((head, body))
}

/// A 200 chat completion whose single choice says `content`.
fn ok(content: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000u32,
        "model": "mock-model-2",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    }))
}

fn status(code: u16) -> ResponseTemplate {
    ResponseTemplate::new(code).set_body_json(json!({
        "error": {"message": format!("mock status {code}"), "type": "test", "param": null, "code": null}
    }))
}

fn config(base_url: &str, cache: &Path) -> LlmConfig {
    LlmConfig {
        base_url: base_url.to_string(),
        model: "mock-model".into(),
        models: vec![ModelChoice {
            base_url: base_url.to_string(),
            model: "mock-model".into(),
            weight: 1.0,
            api_key_env: None,
            api_key: None,
        }],
        seed: 7,
        api_key_env: "NDVM_TEST_NO_SUCH_KEY".into(),
        api_key: Some("test-key".into()),
        temperature: 0.7,
        concurrency: 1,
        max_requests: 8,
        prompt_path: root().join("bootstrap/prompts/symreg.md"),
        prompt: std::fs::read_to_string(root().join("bootstrap/prompts/symreg.md")).unwrap(),
        cache: cache.to_path_buf(),
        timeout_s: 5.0,
        retries: 3,
        backoff_s: 0.01,
        max_tokens: Some(200),
        examples: 2,
        operators: vec!["exp".into(), "cos".into()],
        target: "y".into(),
        description: "a test".into(),
        failure_log: Some(failure_log(cache)),
    }
}

/// The failure log the tests' proposers write, beside their cache.
fn failure_log(cache: &Path) -> PathBuf {
    cache.with_extension("failures.jsonl")
}

fn failure_lines(path: &Path) -> Vec<FailureLine> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn proposer(config: LlmConfig) -> LlmProposer {
    LlmProposer::new(
        config,
        vec!["x".into()],
        vec!["a".into(), "b".into()],
        vec!["define".into()],
        Arc::new(Registry::default()),
        "scheme".into(),
    )
    .unwrap()
}

fn cache_lines(path: &Path) -> Vec<CacheLine> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every line carries its provenance.
fn assert_provenance(line: &CacheLine) {
    assert!(line.model.is_some(), "{line:?}");
    assert!(
        line.prompt_hash
            .as_deref()
            .is_some_and(|h| h.starts_with("fnv1a64:") && h.len() == 24),
        "{line:?}"
    );
    assert_eq!(line.temperature, Some(0.7));
    assert!(line.time.is_some_and(|t| t > 1.7e9), "{line:?}");
    assert!(line.attempts.is_some_and(|a| a >= 1), "{line:?}");
    assert!(line.verdict.is_some(), "{line:?}");
    assert_eq!(line.frontend.as_deref(), Some("scheme"), "{line:?}");
}

/// Drains a proposer whose service answers no request: no candidate, and the error that ends
/// the run (a service that failed every request is never silent).
fn drain_unanswered(p: &mut LlmProposer) -> String {
    loop {
        match p.propose(64) {
            Ok(c) if c.is_empty() && !p.exhausted() => continue,
            Ok(c) => panic!("expected the no-answer error, got {c:?}"),
            Err(e) => {
                let e = e.to_string();
                assert!(e.contains("the service answered none of the"), "{e}");
                return e;
            }
        }
    }
}

/// Every candidate of `p`: it answers one wave per ask, empty when the wave gave none, until it
/// is exhausted.
fn drain(p: &mut LlmProposer) -> Vec<Candidate> {
    let mut all = Vec::new();
    loop {
        let more = p.propose(64).unwrap();
        if more.is_empty() && p.exhausted() {
            return all;
        }
        all.extend(more);
    }
}

#[test]
fn good_answers_land_in_the_cache_with_provenance() {
    let m = Mocked::start();
    m.answer(vec![ok("(* a (exp (* b x)))"), ok("(+ (* a x) b)")]);
    let dir = scratch("good");
    let cache = dir.join("sub/cache.jsonl");
    let mut c = config(&m.base_url(), &cache);
    c.max_requests = 2;
    let mut p = proposer(c);
    let cands = drain(&mut p);
    assert_eq!(
        cands,
        [
            Candidate::new(0, "(* a (exp (* b x)))".into(), "scheme".into()),
            Candidate::new(1, "(+ (* a x) b)".into(), "scheme".into()),
        ]
    );
    assert_eq!(p.requests(), 2);
    let lines = cache_lines(&cache);
    assert_eq!(lines.len(), 2);
    for l in &lines {
        assert_provenance(l);
        assert_eq!(l.verdict, Some(Verdict::Valid));
        assert_eq!(l.reason, None);
        assert_eq!(
            l.model.as_deref(),
            Some("mock-model-2"),
            "the model that answered"
        );
        assert_eq!(l.attempts, Some(1));
        assert_eq!(l.raw.as_deref(), l.src.as_deref());
        // What the exchange cost, as the endpoint reported it and as timed here.
        let usage = l.usage.expect("usage recorded");
        assert_eq!(
            (
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.total_tokens
            ),
            (10, 5, 15)
        );
        assert_eq!(l.finish_reason.as_deref(), Some("stop"));
        assert!(
            l.latency_ms.is_some_and(|ms| ms > 0.0 && ms < 60_000.0),
            "{l:?}"
        );
    }
    // The request: the configured model, temperature and token limit; the rendered prompt names
    // the inputs, parameters and operators, and the second shows the first answer as an example.
    let reqs = m.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0]["model"], "mock-model");
    assert!((reqs[0]["temperature"].as_f64().unwrap() - 0.7).abs() < 1e-6);
    // `max_tokens`, which local servers read (llama-cpp-python ignores the newer field).
    assert_eq!(reqs[0]["max_tokens"], 200);
    assert!(
        reqs[0].get("max_completion_tokens").is_none(),
        "{}",
        reqs[0]
    );
    let prompt0 = reqs[0]["messages"][0]["content"].as_str().unwrap();
    assert!(prompt0.contains("free parameters a, b"), "{prompt0}");
    assert!(prompt0.contains("unary functions exp, cos"), "{prompt0}");
    assert!(
        prompt0.contains("No candidate has been scored yet") && !prompt0.contains("none yet)"),
        "no placeholder a model could copy back: {prompt0}"
    );
    assert!(!prompt0.contains("{{"), "{prompt0}");
    let prompt1 = reqs[1]["messages"][0]["content"].as_str().unwrap();
    assert!(prompt1.contains("(* a (exp (* b x)))"), "{prompt1}");
    assert_ne!(lines[0].prompt_hash, lines[1].prompt_hash);
    // The cache replays to the same stream, offline.
    let mut replay = CacheReplay::open(&cache, &Registry::default(), "scheme").unwrap();
    assert_eq!(replay.propose(64).unwrap(), cands);
}

/// Asks a mock that gives `answers`, one request at a time, until they are used up: the mock,
/// the cache and the candidates proposed.
fn ask_one_at_a_time(name: &str, answers: &[&str]) -> (Mocked, PathBuf, Vec<Candidate>) {
    let m = Mocked::start();
    m.answer(answers.iter().map(|a| ok(a)).collect());
    let cache = scratch(name).join("cache.jsonl");
    let mut c = config(&m.base_url(), &cache);
    c.max_requests = answers.len();
    c.concurrency = 1;
    let cands = drain(&mut proposer(c));
    (m, cache, cands)
}

/// A completion cut at the token limit (`finish_reason: length`).
fn cut(content: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "model": "mock-model-2",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "length"
        }],
        "usage": {"prompt_tokens": 10, "completion_tokens": 200, "total_tokens": 210}
    }))
}

#[test]
fn an_answer_with_several_programs_gives_each_once_and_a_cut_answer_says_so() {
    let m = Mocked::start();
    m.answer(vec![
        ok("Three ideas.\n```scheme\n(* a (exp (* b x)))\n```\nA line:\n```scheme\n(+ (* a x) b)\n```\n\
            Again the first:\n```scheme\n(* a (exp (* b x)))\n```\nA guess:\n```scheme\n(+ a (cos x) (undefined))\n```\n\
            With a number:\n```scheme\n(* a (cos (* 2.5 x)))\n```\n```scheme\n(* a (sin x))\n```"),
        cut("Here is my model, with a long derivation first. ```scheme\n(* a (exp (* b"),
    ]);
    let cache = scratch("several").join("cache.jsonl");
    let mut c = config(&m.base_url(), &cache);
    c.max_requests = 2;
    let cands = drain(&mut proposer(c));
    let srcs: Vec<&str> = cands.iter().map(|c| c.src.as_str()).collect();
    // The first program, then the others that validate, none twice, at most four in all; then
    // the cut answer's unfinished program (rejected by the engine's validation).
    assert_eq!(
        srcs,
        [
            "(* a (exp (* b x)))",
            "(+ (* a x) b)",
            "(* a (cos (* b x)))",
            "(* a (sin x))",
            "(* a (exp (* b"
        ]
    );
    assert_eq!(
        cands[2].init,
        [("b".to_string(), 2.5)].into_iter().collect()
    );
    let lines = cache_lines(&cache);
    assert_eq!(lines.len(), 2, "one line per answer");
    assert_eq!(lines[0].more.len(), 3);
    assert_eq!(lines[0].usage.unwrap().total_tokens, 15);
    // The cut answer: no valid program, and the reason says it was cut and what to raise.
    assert!(
        matches!(lines[1].verdict, Some(Verdict::Invalid(_))),
        "{:?}",
        lines[1]
    );
    assert_eq!(lines[1].finish_reason.as_deref(), Some("length"));
    let reason = lines[1].reason.as_deref().unwrap();
    assert!(
        reason.contains("cut at the token limit") && reason.contains("proposer.max_tokens"),
        "{reason}"
    );
    // The cache replays the four candidates, starting values included.
    let mut replay = CacheReplay::open(&cache, &Registry::default(), "scheme").unwrap();
    assert_eq!(replay.propose(64).unwrap(), cands);
}

#[test]
fn a_server_that_refuses_max_tokens_gets_max_completion_tokens_at_once() {
    let m = Mocked::start();
    m.answer(vec![
        ResponseTemplate::new(400).set_body_json(json!({"error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this model. \
                        Use 'max_completion_tokens' instead.",
            "type": "invalid_request_error"
        }})),
        ok("(* a (exp (* b x)))"),
        ok("(+ (* a x) b)"),
    ]);
    let cache = scratch("newer-cap").join("cache.jsonl");
    let mut c = config(&m.base_url(), &cache);
    c.max_requests = 2;
    let cands = drain(&mut proposer(c));
    assert_eq!(cands.len(), 2);
    let reqs = m.requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0]["max_tokens"], 200);
    // The refused request again, then the next one, with the newer field only.
    for r in &reqs[1..] {
        assert_eq!(r["max_completion_tokens"], 200, "{r}");
        assert!(r.get("max_tokens").is_none(), "{r}");
    }
    let lines = cache_lines(&cache);
    assert_eq!(lines[0].attempts, Some(2));
    assert!(!failure_log(&cache).exists(), "not a failure");
}

/// A mock answering as `model` (the ensemble test tells them apart by it).
fn ok_from(model: &str, content: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    }))
}

/// Runs an ensemble of a "big-model" (weight 3, the proposer's key) and a "small-model"
/// (weight 1, its own key) for 40 requests, `concurrency` at a time: the requests each server saw
/// and the answering models in cache order.
fn ensemble(name: &str, concurrency: usize) -> (Vec<Value>, Vec<Value>, Vec<String>) {
    let (big, small) = (Mocked::start(), Mocked::start());
    big.answer(vec![ok_from("big", "(* a (exp (* b x)))")]);
    small.answer(vec![ok_from("small", "(+ (* a x) b)")]);
    let cache = scratch(name).join("cache.jsonl");
    let mut c = config(&big.base_url(), &cache);
    let choice = |base_url: String, model: &str, weight: f64, key: Option<&str>| ModelChoice {
        base_url,
        model: model.into(),
        weight,
        api_key_env: None,
        api_key: key.map(str::to_string),
    };
    c.models = vec![
        choice(big.base_url(), "big-model", 3.0, None),
        choice(small.base_url(), "small-model", 1.0, Some("another-key")),
    ];
    c.max_requests = 40;
    c.concurrency = concurrency;
    assert_eq!(drain(&mut proposer(c)).len(), 40);
    // Each model's requests carry its key.
    assert!(big.authorizations().iter().all(|a| a == "Bearer test-key"));
    assert!(
        small
            .authorizations()
            .iter()
            .all(|a| a == "Bearer another-key")
    );
    let answered = cache_lines(&cache)
        .into_iter()
        .map(|l| l.model.unwrap())
        .collect();
    (big.requests(), small.requests(), answered)
}

#[test]
fn an_ensemble_draws_each_requests_model_by_weight_from_the_seed_and_names_who_answered() {
    let (to_big, to_small, answered) = ensemble("ensemble", 4);
    assert_eq!(to_big.len() + to_small.len(), 40);
    // About three in four to the heavier model (binomial, 40 draws: 30 ± 2.7).
    assert!((22..=38).contains(&to_big.len()), "{} of 40", to_big.len());
    assert!(to_big.iter().all(|r| r["model"] == "big-model"));
    assert!(to_small.iter().all(|r| r["model"] == "small-model"));
    // Provenance names the model that answered.
    assert_eq!(
        answered.iter().filter(|m| *m == "big").count(),
        to_big.len()
    );
    // One request at a time, the cache's order is the draw's: the same seed, the same order.
    let (_, _, first) = ensemble("ensemble-1", 1);
    let (_, _, second) = ensemble("ensemble-2", 1);
    assert_eq!(first, second);
    assert_eq!(first.iter().filter(|m| *m == "big").count(), to_big.len());
}

#[test]
fn a_models_numbers_become_fitted_parameters_started_at_them() {
    let (_m, cache, cands) = ask_one_at_a_time(
        "lift",
        &[
            "```scheme\n(* 2.5 (exp (* -0.7 x)))\n```",
            // Before lifting, "the program uses no parameter".
            "(* -1.3025 (+ 1 x) 68479)",
            // Every parameter already named: the number stays.
            "(* a (exp (* b x)) 0.5)",
        ],
    );
    let init = |pairs: &[(&str, f64)]| -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    };
    let got: Vec<(&str, BTreeMap<String, f64>)> = cands
        .iter()
        .map(|c| (c.src.as_str(), c.init.clone()))
        .collect();
    assert_eq!(
        got,
        [
            ("(* a (exp (* b x)))", init(&[("a", 2.5), ("b", -0.7)])),
            ("(* a (+ 1 x) b)", init(&[("a", -1.3025), ("b", 68479.0)])),
            ("(* a (exp (* b x)) 0.5)", init(&[])),
        ]
    );
    let lines = cache_lines(&cache);
    assert!(lines.iter().all(|l| l.verdict == Some(Verdict::Valid)));
    assert_eq!(lines[0].init, Some(init(&[("a", 2.5), ("b", -0.7)])));
    assert_eq!(lines[2].init, None);
    // The cache replays the same candidates, starting values included.
    let mut replay = CacheReplay::open(&cache, &Registry::default(), "scheme").unwrap();
    assert_eq!(replay.propose(64).unwrap(), cands);
}

#[test]
fn expressions_small_models_write_are_salvaged_as_infix_candidates() {
    // Forms SmolLM2-135M wrote to the Scheme prompt: Python in a scheme fence, formulas in prose.
    let (_m, cache, cands) = ask_one_at_a_time(
        "salvage",
        &[
            "```scheme\ndef f(x: float):\n    return np.exp(-0.3 * x) * cos(2 * x) # decay\n```",
            "The formula is given by f(x) = exp(-0.3 * x). That is all.",
            "I cannot help with that.",
        ],
    );
    let got: Vec<(&str, &str)> = cands
        .iter()
        .map(|c| (c.src.as_str(), c.frontend.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("exp(-a * x) * cos(2 * x)", "infix"),
            ("exp(-a * x)", "infix")
        ]
    );
    assert_eq!(cands[0].init["a"], 0.3);
    let lines = cache_lines(&cache);
    let verdicts: Vec<_> = lines
        .iter()
        .map(|l| (l.verdict.clone(), l.salvaged))
        .collect();
    assert_eq!(
        verdicts,
        [
            (Some(Verdict::Valid), Some(true)),
            (Some(Verdict::Valid), Some(true)),
            (Some(Verdict::NoProgram), None),
        ]
    );
    // The first program's failure in the task's notation stays on the line.
    assert!(lines[0].reason.is_some(), "{:?}", lines[0]);
    let mut replay = CacheReplay::open(&cache, &Registry::default(), "scheme").unwrap();
    assert_eq!(replay.propose(64).unwrap(), cands);
}

#[test]
fn think_sections_are_skipped_and_the_llm_sr_form_reads_with_the_tasks_parameters() {
    let (_m, cache, cands) = ask_one_at_a_time(
        "think-llmsr",
        &[
            "<think>Maybe ```scheme\n(* a x)\n``` is too simple.</think>\nSo:\n```scheme\n\
             (* a (exp (* b x)))\n```",
            "```python\ndef equation(x: np.ndarray, params: np.ndarray) -> np.ndarray:\n    \
             return params[0] * np.exp(-params[1] * x)\n```",
        ],
    );
    let got: Vec<(&str, &str)> = cands
        .iter()
        .map(|c| (c.src.as_str(), c.frontend.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("(* a (exp (* b x)))", "scheme"),
            ("a * exp(-b * x)", "infix")
        ]
    );
    let lines = cache_lines(&cache);
    assert_eq!(lines[1].salvaged, Some(true));
    assert!(lines.iter().all(|l| l.verdict == Some(Verdict::Valid)));
}

#[test]
fn the_next_prompt_says_why_recent_answers_could_not_be_used() {
    let (m, _, _) = ask_one_at_a_time(
        "failure-feedback",
        &[
            "```scheme\n(defn a x)\n```",
            "Sorry, I cannot answer.",
            "```scheme\n(* a x)\n```",
        ],
    );
    let prompts: Vec<String> = m
        .requests()
        .iter()
        .map(|r| r["messages"][0]["content"].as_str().unwrap().to_string())
        .collect();
    assert!(!prompts[0].contains("could not be used"), "{}", prompts[0]);
    assert!(
        prompts[1].contains("Recent answers that could not be used")
            && prompts[1].contains("`(defn a x)`: unknown operator `defn`"),
        "{}",
        prompts[1]
    );
    // An answer with no program is not quoted back (a small model copies what it is shown).
    assert!(
        prompts[2].contains("- an answer: no s-expression in the answer")
            && !prompts[2].contains("Sorry, I cannot answer."),
        "{}",
        prompts[2]
    );
}

#[test]
fn prose_and_code_fenced_answers_are_extracted() {
    let m = Mocked::start();
    let prose = "Sure! A damped oscillation fits (it decays) well: (* (exp (* a x)) (cos (* b x))) \
                 should do.";
    let fenced = "Here is my proposal:\n\n```scheme\n(* a (cos (* b x)))\n```\n\nThe cosine (with \
                  a frequency b) models the oscillation.";
    m.answer(vec![ok(prose), ok(fenced)]);
    let dir = scratch("prose");
    let cache = dir.join("cache.jsonl");
    let mut c = config(&m.base_url(), &cache);
    c.max_requests = 2;
    let srcs: Vec<String> = drain(&mut proposer(c)).into_iter().map(|c| c.src).collect();
    assert_eq!(
        srcs,
        ["(* (exp (* a x)) (cos (* b x)))", "(* a (cos (* b x)))"]
    );
    let lines = cache_lines(&cache);
    assert_eq!(lines[0].raw.as_deref(), Some(prose));
    assert_eq!(lines[1].raw.as_deref(), Some(fenced));
    for l in &lines {
        assert_provenance(l);
        assert_eq!(l.verdict, Some(Verdict::Valid));
    }
}

#[test]
fn garbage_is_recorded_with_a_reason_and_never_proposed_unless_it_holds_a_program() {
    let m = Mocked::start();
    m.answer(vec![
        ok("I'm sorry, I can't help with that."),
        ok(""),
        ok("```scheme\n(+ (* a x)\n```"),
        ok("(* z (exp a))"),
        ok("(define (f) (* a x))"),
        ok("(* a x)"),
    ]);
    let dir = scratch("garbage");
    let cache = dir.join("cache.jsonl");
    let mut c = config(&m.base_url(), &cache);
    c.max_requests = 6;
    let mut p = proposer(c);
    // One request per ask (concurrency 1): the first two answers hold no program, so the first
    // two asks give nothing (and the stream goes on), the third gives the unclosed program.
    for asked in 1..=2 {
        assert!(p.propose(64).unwrap().is_empty());
        assert!(!p.exhausted());
        assert_eq!(p.requests(), asked);
    }
    let first = p.propose(64).unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].id, 0);
    assert_eq!(p.requests(), 3);
    let rest = drain(&mut p);
    let lines = cache_lines(&cache);
    let verdicts: Vec<String> = lines
        .iter()
        .map(|l| l.verdict.clone().unwrap().to_string())
        .collect();
    assert_eq!(
        verdicts,
        [
            "no-program",
            "no-program",
            "invalid-parse",
            "invalid-free-variable",
            "invalid-forbidden-form",
            "valid"
        ]
    );
    for l in &lines {
        assert_provenance(l);
        assert_eq!(
            l.reason.is_some(),
            l.verdict != Some(Verdict::Valid),
            "{l:?}"
        );
    }
    assert!(
        lines[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("no s-expression")
    );
    assert!(lines[1].reason.as_deref().unwrap().contains("empty"));
    assert_eq!(lines[0].src, None);
    assert_eq!(lines[1].src, None);
    // Invalid programs stay in the stream (the engine rejects them and counts why), so the live
    // stream and the replayed cache agree.
    let live: Vec<Candidate> = first.into_iter().chain(rest).collect();
    assert_eq!(live.len(), 4);
    assert_eq!(live[3].src, "(* a x)");
    let mut replay = CacheReplay::open(&cache, &Registry::default(), "scheme").unwrap();
    assert_eq!(replay.propose(64).unwrap(), live);
}

#[test]
fn rate_limit_then_success_backs_off_and_records_the_attempts() {
    let m = Mocked::start();
    m.answer(vec![status(429), status(429), ok("(* a x)")]);
    let dir = scratch("429");
    let cache = dir.join("cache.jsonl");
    let mut c = config(&m.base_url(), &cache);
    c.max_requests = 1;
    c.backoff_s = 0.02;
    let t0 = Instant::now();
    let cands = drain(&mut proposer(c));
    // Two retries: 0.02 s then 0.04 s.
    assert!(
        t0.elapsed() >= Duration::from_millis(60),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(cands.len(), 1);
    let lines = cache_lines(&cache);
    assert_eq!(lines.len(), 1, "retried attempts are not separate lines");
    assert_provenance(&lines[0]);
    assert_eq!(lines[0].verdict, Some(Verdict::Valid));
    assert_eq!(lines[0].attempts, Some(3));
    assert_eq!(m.requests().len(), 3);
}

#[test]
fn server_error_then_success_and_persistent_errors_are_bounded() {
    let m = Mocked::start();
    m.answer(vec![status(500), ok("(* b x)")]);
    let dir = scratch("500");
    let cache = dir.join("cache.jsonl");
    let mut c = config(&m.base_url(), &cache);
    c.max_requests = 1;
    assert_eq!(drain(&mut proposer(c)).len(), 1);
    let lines = cache_lines(&cache);
    assert_eq!(lines[0].verdict, Some(Verdict::Valid));
    assert_eq!(lines[0].attempts, Some(2));

    // Always 503: retries run out and the request is logged as failed, not cached.
    let m = Mocked::start();
    m.answer(vec![status(503)]);
    let cache = dir.join("cache-503.jsonl");
    let mut c = config(&m.base_url(), &cache);
    c.max_requests = 1;
    c.retries = 2;
    let mut p = proposer(c);
    drain_unanswered(&mut p);
    assert_eq!(cache_lines(&cache).len(), 0, "the cache keeps answers only");
    let failed = failure_lines(&failure_log(&cache));
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].class, FailureClass::ServerError);
    assert_eq!(failed[0].status, Some(503));
    assert_eq!(failed[0].attempts, 3);
    assert!(!failed[0].fatal);
    assert!(
        failed[0].reason.contains("http 503: mock status 503"),
        "{failed:?}"
    );
    assert_eq!(
        failed[0].endpoint,
        format!("{}/chat/completions", m.base_url())
    );
    assert_eq!(failed[0].model, "mock-model");
    assert!(failed[0].prompt_hash.starts_with("fnv1a64:"));
    assert_eq!(m.requests().len(), 3);
    let stats = p.stats();
    assert_eq!(
        (stats.sent, stats.in_flight, stats.failed, stats.retried),
        (1, 0, 1, 2)
    );
    let w = p.warnings();
    assert!(
        w.iter()
            .any(|w| w == "1 of 1 llm requests failed (listed in cache-503.failures.jsonl)"),
        "{w:?}"
    );

    // A 200 that is not a chat completion is logged and not retried.
    let m = Mocked::start();
    m.answer(vec![
        ResponseTemplate::new(200).set_body_string("<html>proxy</html>"),
    ]);
    let cache = dir.join("cache-html.jsonl");
    let mut c = config(&m.base_url(), &cache);
    c.max_requests = 1;
    drain_unanswered(&mut proposer(c));
    assert_eq!(cache_lines(&cache).len(), 0);
    let failed = failure_lines(&failure_log(&cache));
    assert_eq!(failed[0].class, FailureClass::BadResponse);
    assert_eq!(failed[0].attempts, 1);
    assert!(failed[0].reason.contains("deserialize"), "{failed:?}");

    // A 400 is not retried.
    let m = Mocked::start();
    m.answer(vec![status(400), ok("(* a x)")]);
    let cache = dir.join("cache-400.jsonl");
    let mut c = config(&m.base_url(), &cache);
    c.max_requests = 1;
    drain_unanswered(&mut proposer(c));
    assert_eq!(cache_lines(&cache).len(), 0);
    let failed = failure_lines(&failure_log(&cache));
    assert_eq!(failed[0].class, FailureClass::Refused);
    assert_eq!(failed[0].attempts, 1);
    assert!(failed[0].reason.contains("http 400"));
}

#[test]
fn a_bad_key_a_forbidden_key_or_a_wrong_model_ends_the_proposer_at_once() {
    for (code, class, hint) in [
        (
            401,
            FailureClass::Unauthorized,
            "check the API key ($NDVM_TEST_NO_SUCH_KEY",
        ),
        (403, FailureClass::Forbidden, "check the API key"),
        (404, FailureClass::NotFound, "check `base_url`"),
    ] {
        let m = Mocked::start();
        m.answer(vec![status(code), ok("(* a x)")]);
        let dir = scratch(&format!("fatal-{code}"));
        let cache = dir.join("cache.jsonl");
        let mut c = config(&m.base_url(), &cache);
        c.concurrency = 1;
        let mut p = proposer(c);
        let e = p.propose(64).unwrap_err().to_string();
        let url = format!("{}/chat/completions", m.base_url());
        assert!(
            e.contains(&format!(
                "POST {url} failed: http {code}: mock status {code}"
            )),
            "{e}"
        );
        assert!(e.contains("(1 attempt)") && e.contains(hint), "{e}");
        assert!(
            e.contains(&failure_log(&cache).display().to_string()),
            "{e}"
        );
        assert_eq!(m.requests().len(), 1, "a fatal status is not retried");
        assert_eq!(cache_lines(&cache).len(), 0);
        let failed = failure_lines(&failure_log(&cache));
        assert_eq!(failed.len(), 1);
        assert_eq!(
            (failed[0].class, failed[0].status, failed[0].fatal),
            (class, Some(code), true)
        );
    }
}

#[test]
fn failures_in_a_row_end_the_proposer_and_failures_between_answers_do_not() {
    // Every request of a wave of two fails: the run ends after that wave.
    let m = Mocked::start();
    m.answer(vec![status(500)]);
    let dir = scratch("in-a-row");
    let cache = dir.join("cache.jsonl");
    let mut c = config(&m.base_url(), &cache);
    c.concurrency = 2;
    c.retries = 1;
    let mut p = proposer(c);
    let e = p.propose(64).unwrap_err().to_string();
    assert!(
        e.contains("http 500") && e.contains("2 requests in a row failed"),
        "{e}"
    );
    assert_eq!(p.requests(), 2);
    assert_eq!(m.requests().len(), 4, "two requests, each retried once");
    let failed = failure_lines(&failure_log(&cache));
    assert_eq!(failed.iter().filter(|f| f.fatal).count(), 1, "{failed:?}");

    // Failures with answers between them are logged, and the run goes on.
    let m = Mocked::start();
    m.answer(vec![status(400), ok("(* a x)"), status(400), ok("(* b x)")]);
    let cache = dir.join("cache-between.jsonl");
    let mut c = config(&m.base_url(), &cache);
    c.concurrency = 1;
    c.max_requests = 4;
    let mut p = proposer(c);
    let srcs: Vec<String> = drain(&mut p).into_iter().map(|c| c.src).collect();
    assert_eq!(srcs, ["(* a x)", "(* b x)"]);
    assert_eq!(cache_lines(&cache).len(), 2);
    assert_eq!(failure_lines(&failure_log(&cache)).len(), 2);
    assert_eq!(p.stats().failed, 2);
}

#[test]
fn a_slow_answer_times_out_is_retried_and_then_recorded() {
    let m = Mocked::start();
    let slow = ok("(* a x)").set_delay(Duration::from_secs(3));
    m.answer(vec![slow.clone(), ok("(* a (sin x))")]);
    let dir = scratch("timeout");
    let cache = dir.join("cache.jsonl");
    let mut c = config(&m.base_url(), &cache);
    c.max_requests = 1;
    c.timeout_s = 0.2;
    let t0 = Instant::now();
    let cands = drain(&mut proposer(c.clone()));
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert_eq!(cands.len(), 1);
    assert_eq!(cands[0].src, "(* a (sin x))");
    let lines = cache_lines(&cache);
    assert_eq!(lines[0].attempts, Some(2));
    assert_eq!(lines[0].verdict, Some(Verdict::Valid));

    // Always slow: bounded by retries, then a failure naming the timeout (in the log only).
    let m = Mocked::start();
    m.answer(vec![slow]);
    let cache = dir.join("cache-slow.jsonl");
    let mut c = config(&m.base_url(), &cache);
    c.max_requests = 1;
    c.timeout_s = 0.2;
    c.retries = 1;
    let t0 = Instant::now();
    drain_unanswered(&mut proposer(c));
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert_eq!(cache_lines(&cache).len(), 0);
    let failed = failure_lines(&failure_log(&cache));
    assert_eq!(failed[0].class, FailureClass::Timeout);
    assert_eq!(failed[0].attempts, 2);
    assert!(failed[0].reason.contains("timeout"), "{failed:?}");
}

#[test]
fn concurrent_requests_append_every_answer_and_the_cache_is_replayed_first_next_time() {
    let m = Mocked::start();
    m.answer(vec![
        ok("(* a x)"),
        ok("(* a (exp x))"),
        ok("(* a (cos x))"),
        ok("(* a (sin x))"),
        ok("(* b (exp x))"),
    ]);
    let dir = scratch("concurrent");
    let cache = dir.join("cache.jsonl");
    let mut c = config(&m.base_url(), &cache);
    c.concurrency = 4;
    c.max_requests = 5;
    let mut p = proposer(c.clone());
    let first = p.propose(64).unwrap();
    assert_eq!(first.len(), 4, "one wave of `concurrency` requests");
    let all: Vec<Candidate> = first.into_iter().chain(drain(&mut p)).collect();
    assert_eq!(all.len(), 5);
    assert_eq!(m.requests().len(), 5);
    let lines = cache_lines(&cache);
    let cached: Vec<&str> = lines.iter().map(|l| l.src.as_deref().unwrap()).collect();
    let live: Vec<&str> = all.iter().map(|c| c.src.as_str()).collect();
    assert_eq!(cached, live, "candidates come in cache (arrival) order");

    // A second proposer on the same cache replays it before asking for more.
    drop(p);
    c.max_requests = 1;
    let mut again = proposer(c);
    let replayed = again.propose(3).unwrap();
    assert_eq!(replayed, all[..3]);
    assert_eq!(again.requests(), 0);
    let rest = drain(&mut again);
    assert_eq!(rest.len(), 3, "two cached, then one new request");
    assert_eq!(rest[2].id, 5);
    assert_eq!(m.requests().len(), 6);
}

#[test]
fn a_truncated_last_cache_line_is_cut_before_appending() {
    let m = Mocked::start();
    m.answer(vec![ok("(* a x)")]);
    let dir = scratch("truncated");
    let cache = dir.join("cache.jsonl");
    std::fs::write(&cache, "{\"src\": \"(* b x)\"}\n{\"src\": \"(+ a").unwrap();
    let mut c = config(&m.base_url(), &cache);
    c.max_requests = 1;
    let mut p = proposer(c);
    assert_eq!(p.warnings().len(), 2, "{:?}", p.warnings());
    let srcs: Vec<String> = drain(&mut p).into_iter().map(|c| c.src).collect();
    assert_eq!(srcs, ["(* b x)", "(* a x)"]);
    let (sources, warnings) = ndvm_search::propose::replay::read_cache(&cache).unwrap();
    let sources: Vec<String> = sources.into_iter().map(|c| c.src).collect();
    assert_eq!(sources, srcs);
    assert!(warnings.is_empty());
}

#[test]
fn deep_and_huge_answers_are_cached_as_rejected_and_never_replayed() {
    let m = Mocked::start();
    let deep = format!("{}a{}", "(+ x ".repeat(20_000), ")".repeat(20_000));
    let huge = format!("(+ a {})", "x ".repeat(2_500_000));
    assert!(huge.len() > 5_000_000);
    // Within the byte bound but its program is not: extracted, then refused by the validator.
    let wide = format!("(+ a {})", "x ".repeat(40_000));
    m.answer(vec![ok(&deep), ok(&huge), ok(&wide), ok("(* a x)")]);
    let dir = scratch("deep-huge");
    let cache = dir.join("cache.jsonl");
    let mut c = config(&m.base_url(), &cache);
    c.max_requests = 4;
    let mut p = proposer(c.clone());
    let live = drain(&mut p);
    assert_eq!(
        p.requests(),
        4,
        "the run goes on after each rejected answer"
    );
    let srcs: Vec<&str> = live.iter().map(|c| c.src.as_str()).collect();
    assert_eq!(srcs, ["(* a x)"]);
    let lines = cache_lines(&cache);
    let verdicts: Vec<String> = lines
        .iter()
        .map(|l| l.verdict.clone().unwrap().to_string())
        .collect();
    assert_eq!(verdicts, ["rejected", "rejected", "rejected", "valid"]);
    let reason = |i: usize| lines[i].reason.clone().unwrap();
    assert!(
        reason(0).contains("20000 deep, over the limit of 256"),
        "{}",
        reason(0)
    );
    assert!(
        reason(1).contains("over the limit of 262144"),
        "{}",
        reason(1)
    );
    assert!(
        reason(2).contains("over the limit of 65536"),
        "{}",
        reason(2)
    );
    for l in &lines[..3] {
        assert_provenance(l);
        assert_eq!(l.src, None, "a rejected answer is never a candidate");
    }
    assert_eq!(lines[0].raw.as_deref(), Some(deep.as_str()));
    assert_eq!(lines[1].raw, None, "a huge answer is not stored");
    let size = std::fs::metadata(&cache).unwrap().len();
    assert!(size < 1_000_000, "cache is {size} bytes");

    // A rejected line that somehow holds a `src` is still never replayed.
    let mut text = std::fs::read_to_string(&cache).unwrap();
    text.push_str(
        "{\"src\": \"(* b x)\", \"verdict\": \"rejected\", \"reason\": \"hand-edited\"}\n",
    );
    std::fs::write(&cache, text).unwrap();
    let mut replay = CacheReplay::open(&cache, &Registry::default(), "scheme").unwrap();
    let replayed: Vec<String> = replay
        .propose(64)
        .unwrap()
        .into_iter()
        .map(|c| c.src)
        .collect();
    assert_eq!(replayed, ["(* a x)"]);
    c.max_requests = 0;
    let mut again = proposer(c);
    let replayed: Vec<String> = drain(&mut again).into_iter().map(|c| c.src).collect();
    assert_eq!(replayed, ["(* a x)"]);
    assert_eq!(m.requests().len(), 4);
}

#[test]
fn a_missing_key_or_a_bad_template_is_an_error_before_any_request() {
    let dir = scratch("nokey");
    let mut c = config("http://127.0.0.1:9/v1", &dir.join("cache.jsonl"));
    c.api_key = None;
    let e = LlmProposer::new(
        c.clone(),
        vec!["x".into()],
        vec!["a".into()],
        vec![],
        Arc::new(Registry::default()),
        "scheme".into(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("$NDVM_TEST_NO_SUCH_KEY"), "{e}");
    c.api_key = Some(String::new());
    c.prompt = "{{inputs}} {{oops}}".into();
    let e = LlmProposer::new(
        c,
        vec!["x".into()],
        vec!["a".into()],
        vec![],
        Arc::new(Registry::default()),
        "scheme".into(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("oops"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// End to end through the binary.

fn ndvm(args: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .current_dir(root())
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("SLURM_ARRAY_TASK_COUNT")
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

/// `summary.json` without the wall-clock `run` section and the proposer's name.
fn summary_core(dir: &Path) -> Value {
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("run");
    o.remove("proposer");
    v
}

fn events_core(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            let o = v.as_object_mut().unwrap();
            o.remove("wall_ms");
            o.remove("finished_s");
            v
        })
        .collect()
}

fn task_yaml(proposer: &str) -> String {
    format!(
        r#"name: llm-e2e
seed: 7
data:
  generate:
    formula: "(* (exp (* -0.3 x)) (cos (* 2 x)))"
    from: 0.1
    to: 6.0
    n: 64
    noise: 0.02
inputs: [x]
target: y
split: {{train: 44, validation: 10}}
params:
  - {{name: a, init: -0.5}}
  - {{name: b, init: 2.2}}
  - {{name: c, init: 0.5}}
proposer:
{proposer}
  batch: 2
calibrator: {{starts: 16}}
budget: {{seconds: 120, calibrations: 20}}
success: {{metric: r2, threshold: 0.99, stop: true}}
"#
    )
}

#[test]
fn ndvm_search_with_kind_llm_finds_a_fit_and_its_cache_replays_identically_offline() {
    let m = Mocked::start();
    m.answer(vec![
        ok("Let me think. A line first: (+ (* a x) b)"),
        ok("no idea"),
        ok("```scheme\n(* c (exp (* a x)))\n```"),
        ok("```scheme\n(* (exp (* a x)) (cos (* b x)))\n```"),
        ok("(* (exp (* a x)) (sin (* b x)))"),
    ]);
    let dir = scratch("e2e");
    let cache = dir.join("cache.jsonl");
    let prompt = root().join("bootstrap/prompts/symreg.md");
    let live_task = dir.join("live.yaml");
    std::fs::write(
        &live_task,
        task_yaml(&format!(
            "  kind: llm\n  evolve: false\n  base_url: {}\n  model: mock-model\n  api_key: test\n  \
             temperature: 0.5\n  concurrency: 1\n  max_requests: 5\n  timeout: 5\n  \
             backoff: 0.01\n  prompt: {}\n  cache: cache.jsonl",
            m.base_url(),
            prompt.display()
        )),
    )
    .unwrap();
    let check = ndvm(&["check", live_task.to_str().unwrap()]);
    assert_eq!(m.requests().len(), 0, "check contacts nothing");
    assert!(String::from_utf8_lossy(&check.stdout).contains("llm-e2e"));
    let live = dir.join("live");
    ndvm(&[
        "run",
        live_task.to_str().unwrap(),
        "--out",
        live.to_str().unwrap(),
        "-q",
    ]);
    let asked = m.requests().len();
    assert!((4..=5).contains(&asked), "{asked} requests");
    let s = summary_core(&live);
    let best = &s["best"];
    assert!(best["validation_r2"].as_f64().unwrap() > 0.99, "{best}");
    assert_eq!(best["src"], "(* (exp (* a x)) (cos (* b x)))");
    let lines = cache_lines(&cache);
    assert_eq!(lines.len(), asked);
    assert_eq!(lines[1].verdict, Some(Verdict::NoProgram));
    lines.iter().for_each(|l| {
        assert!(l.prompt_hash.is_some() && l.time.is_some() && l.model.is_some());
    });

    // Replay the written cache offline: same events and summary, no request.
    let replay_task = dir.join("replay.yaml");
    std::fs::write(
        &replay_task,
        task_yaml("  kind: replay\n  cache: cache.jsonl"),
    )
    .unwrap();
    let replayed = dir.join("replay");
    ndvm(&[
        "run",
        replay_task.to_str().unwrap(),
        "--out",
        replayed.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(m.requests().len(), asked, "replay contacts nothing");
    assert_eq!(events_core(&replayed), events_core(&live));
    assert_eq!(summary_core(&replayed), summary_core(&live));
    // A second replay is identical too (bit-reproducible offline).
    let again = dir.join("replay2");
    ndvm(&[
        "run",
        replay_task.to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(summary_core(&again), summary_core(&replayed));
    assert_eq!(events_core(&again), events_core(&replayed));
}

#[test]
fn kind_llm_seeds_evolution_by_default_and_its_cache_replays_the_run_under_kind_evolve() {
    let m = Mocked::start();
    let answers = [
        "(* a (exp (* b x)))",
        "(+ (* a x) b)",
        "(* a (cos (* b x)))",
    ];
    m.answer(
        answers
            .iter()
            .map(|a| ok(&format!("```scheme\n{a}\n```")))
            .chain([ok("no program here")])
            .collect(),
    );
    let dir = scratch("evolve-llm");
    let prompt = root().join("bootstrap/prompts/symreg.md");
    let task = dir.join("task.yaml");
    let text = task_yaml(&format!(
        "  kind: llm\n  base_url: {}\n  model: mock-model\n  api_key: test\n  \
         concurrency: 2\n  max_requests: 8\n  timeout: 5\n  backoff: 0.01\n  prompt: {}\n  \
         cache: cache.jsonl",
        m.base_url(),
        prompt.display()
    ))
    .replace("stop: true", "stop: false")
    .replace("calibrations: 20", "calibrations: 60");
    std::fs::write(&task, text).unwrap();
    let out = dir.join("run");
    let run = ndvm_raw(&["run", p(&task), "--out", p(&out), "-q"], &[]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{err}");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["proposer"], "evolve");
    let events = events_core(&out);
    assert_eq!(events.len(), 60);
    let srcs: Vec<&str> = events.iter().map(|e| e["src"].as_str().unwrap()).collect();
    // Evolution does not wait for the model: the first candidates are its own.
    assert!(!answers.contains(&srcs[0]), "{srcs:?}");
    let evolved: Vec<&&str> = srcs.iter().filter(|s| !answers.contains(s)).collect();
    assert!(evolved.len() >= 40, "{srcs:?}");

    // Every answer taken is in the cache, marked with the request for seeds that took it, in
    // order; the ones the run took are among its candidates.
    let lines = cache_lines(&dir.join("cache.jsonl"));
    let taken = lines.len();
    assert!((1..=8).contains(&taken), "{taken} answers");
    let asks: Vec<u64> = lines.iter().map(|l| l.ask.expect("an ask")).collect();
    assert!(asks.windows(2).all(|w| w[0] <= w[1]), "{asks:?}");
    // (Answers still in flight when the run ended are waited for and kept, marked with a
    // request for seeds the run never made: the last mark, if any are.)
    let last = *asks.last().unwrap();
    for l in lines
        .iter()
        .filter(|l| l.verdict == Some(Verdict::Valid) && l.ask != Some(last))
    {
        let src = l.src.as_deref().unwrap();
        assert!(srcs.contains(&src), "{src} not calibrated: {srcs:?}");
    }
    let no_program = lines
        .iter()
        .filter(|l| l.verdict == Some(Verdict::NoProgram))
        .count();

    // `run.llm`: the model's part; the calibrator's idle time.
    let llm = &summary["run"]["llm"];
    assert_eq!(llm["answered"].as_u64(), Some(taken as u64), "{llm}");
    assert_eq!(
        llm["usable"].as_u64(),
        Some((taken - no_program) as u64),
        "{llm}"
    );
    assert_eq!(
        llm["usage"]["mock-model-2"]["total_tokens"].as_u64(),
        Some(15 * taken as u64)
    );
    assert!(summary["run"]["calibrator_idle_s"].as_f64().unwrap() >= 0.0);
    if no_program > 0 {
        assert!(
            err.contains("answers of the model gave a valid candidate"),
            "{err}"
        );
    }

    // Requests after the first answers show the population's programs as examples.
    let requests = m.requests();
    let shown = requests.iter().skip(2).any(|r| {
        let text = r.to_string();
        evolved
            .iter()
            .any(|e| text.contains(&e.replace('"', "\\\"")))
    });
    assert!(
        requests.len() <= 2 || shown,
        "no evolved program shown to the LLM"
    );

    // Offline, `kind: evolve` on the cache hands each answer out at the same request for seeds:
    // the same run, bit for bit, with no request.
    let replay_task = dir.join("replay.yaml");
    let replay_text = task_yaml("  kind: evolve\n  cache: cache.jsonl")
        .replace("stop: true", "stop: false")
        .replace("calibrations: 20", "calibrations: 60");
    std::fs::write(&replay_task, replay_text).unwrap();
    let asked = m.requests().len();
    let replayed = dir.join("replay");
    ndvm(&["run", p(&replay_task), "--out", p(&replayed), "-q"]);
    assert_eq!(m.requests().len(), asked, "replay contacts nothing");
    assert_eq!(events_core(&replayed), events_core(&out));
    assert_eq!(summary_core(&replayed), summary_core(&out));
}

/// Runs `ndvm-search` in the repository root with `env` set, whatever its exit.
fn ndvm_raw(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .current_dir(root())
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("SLURM_ARRAY_TASK_COUNT")
        .envs(env.iter().copied())
        .args(args)
        .output()
        .unwrap()
}

/// An `llm-e2e` task in `dir` asking `base_url` (a key in the task; `extra` adds proposer keys),
/// with a cache holding one program, which is replayed before any request.
fn llm_task(dir: &Path, base_url: &str, concurrency: usize, extra: &str) -> (PathBuf, PathBuf) {
    let cache = dir.join("cache.jsonl");
    std::fs::write(&cache, "{\"src\": \"(+ (* a x) b)\"}\n").unwrap();
    let task = dir.join("task.yaml");
    let prompt = root().join("bootstrap/prompts/symreg.md");
    std::fs::write(
        &task,
        task_yaml(&format!(
            "  kind: llm\n  evolve: false\n  base_url: {base_url}\n  model: mock-model\n  api_key: test\n  \
             concurrency: {concurrency}\n  max_requests: 4\n  timeout: 5\n  backoff: 0.01\n  prompt: {}\n  \
             cache: cache.jsonl{extra}",
            prompt.display()
        )),
    )
    .unwrap();
    (task, cache)
}

#[test]
fn ndvm_search_ends_on_401_and_404_with_an_error_naming_the_endpoint_and_the_cache_unchanged() {
    for (code, class, hint) in [
        (
            401,
            FailureClass::Unauthorized,
            "check the API key ($OPENAI_API_KEY",
        ),
        (404, FailureClass::NotFound, "check `base_url`"),
    ] {
        let m = Mocked::start();
        m.answer(vec![status(code)]);
        let dir = scratch(&format!("e2e-{code}"));
        let (task, cache) = llm_task(&dir, &m.base_url(), 1, "");
        let before = std::fs::read(&cache).unwrap();
        let run = dir.join("run");
        let out = ndvm_raw(&["run", p(&task), "--out", p(&run), "-q"], &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        let url = format!("{}/chat/completions", m.base_url());
        assert!(
            err.contains(&format!(
                "error: llm proposer: POST {url} failed: http {code}"
            )),
            "{err}"
        );
        assert!(err.contains(hint), "{err}");
        assert_eq!(m.requests().len(), 1);
        assert_eq!(
            std::fs::read(&cache).unwrap(),
            before,
            "the cache is unchanged"
        );
        let failed = failure_lines(&run.join("llm-failures.jsonl"));
        assert_eq!(failed.len(), 1);
        assert_eq!((failed[0].class, failed[0].fatal), (class, true));
        assert!(
            err.contains(&run.join("llm-failures.jsonl").display().to_string()),
            "{err}"
        );
    }
}

#[test]
fn ndvm_search_ends_after_failures_in_a_row_with_them_in_the_run_folder_not_the_cache() {
    let m = Mocked::start();
    m.answer(vec![status(503)]);
    let dir = scratch("e2e-503");
    let (task, cache) = llm_task(&dir, &m.base_url(), 2, "\n  retries: 1");
    let before = std::fs::read(&cache).unwrap();
    let run = dir.join("run");
    let out = ndvm_raw(&["run", p(&task), "--out", p(&run), "-q"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("http 503") && err.contains("2 requests in a row failed"),
        "{err}"
    );
    assert_eq!(m.requests().len(), 4, "two requests, each retried once");
    assert_eq!(std::fs::read(&cache).unwrap(), before);
    let failed = failure_lines(&run.join("llm-failures.jsonl"));
    assert_eq!(failed.len(), 2);
    assert!(
        failed
            .iter()
            .all(|f| f.class == FailureClass::ServerError && f.attempts == 2)
    );
}

#[test]
fn ndvm_search_retries_500_and_429_then_succeeds_and_shows_the_requests_in_its_progress_lines() {
    let m = Mocked::start();
    m.answer(vec![
        status(500),
        status(429),
        ok("```scheme\n(* (exp (* a x)) (cos (* b x)))\n```"),
    ]);
    let dir = scratch("e2e-retried");
    let (task, cache) = llm_task(&dir, &m.base_url(), 1, "");
    let run = dir.join("run");
    // No `-q`, stderr a pipe: plain progress lines.
    let out = ndvm_raw(&["run", p(&task), "--out", p(&run)], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("llm requests: 1 sent, 1 in flight, 0 failed, 0 retried"),
        "{err}"
    );
    // After the retries (the streaming engine may have sent the next requests by the time it
    // prints a progress line).
    assert!(err.contains("0 in flight, 0 failed, 2 retried"), "{err}");
    // The program given, then the answer; the streaming engine asks ahead of the success check
    // (at most `threads + batch` candidates), so further answers may follow, each cached.
    let lines = cache_lines(&cache);
    assert!((2..=2 + 4).contains(&lines.len()), "{} lines", lines.len());
    assert_eq!(lines[1].attempts, Some(3));
    assert_eq!(lines[1].verdict, Some(Verdict::Valid));
    assert!(lines[2..].iter().all(|l| l.attempts == Some(1)));
    assert!(
        !run.join("llm-failures.jsonl").exists(),
        "no request failed"
    );
    let s = summary_core(&run);
    assert_eq!(s["best"]["src"], "(* (exp (* a x)) (cos (* b x)))");
}

#[test]
fn ndvm_search_on_a_closed_port_exits_non_zero_within_30_s_naming_the_endpoint() {
    // A copy of the shipped task, its prompt and a cache, with `base_url` on a port nobody
    // listens on.
    let dir = scratch("closed-port");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let shipped = std::fs::read_to_string(root().join("tasks/symreg-llm.yaml")).unwrap();
    assert!(
        shipped.contains("base_url: http://127.0.0.1:8000/v1"),
        "{shipped}"
    );
    let base_url = format!("http://127.0.0.1:{port}/v1");
    for sub in ["tasks", "caches", "bootstrap/prompts"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let task = dir.join("tasks/symreg-llm.yaml");
    // The evolutionary search the model seeds runs on until the endpoint's failure ends it
    // (no success stop; ten minutes at most).
    let budget = "budget: {seconds: 60}";
    assert!(shipped.contains(budget), "{shipped}");
    std::fs::write(
        &task,
        shipped
            .replace("http://127.0.0.1:8000/v1", &base_url)
            .replace(budget, "budget: {seconds: 600}"),
    )
    .unwrap();
    std::fs::copy(
        root().join("bootstrap/prompts/symreg.md"),
        dir.join("bootstrap/prompts/symreg.md"),
    )
    .unwrap();
    let cache = dir.join("caches/symreg-llm.jsonl");
    let text = "{\"src\": \"(* a (exp (* b x)))\"}\n{\"src\": \"(+ (* a x) b)\"}\n";
    std::fs::write(&cache, text).unwrap();
    let run = dir.join("run");
    let t0 = Instant::now();
    let out = ndvm_raw(
        &["run", p(&task), "--out", p(&run), "-q"],
        &[("OPENAI_API_KEY", "x")],
    );
    let took = t0.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert!(
        err.contains(&format!(
            "POST {base_url}/chat/completions failed: cannot reach the endpoint"
        )),
        "{err}"
    );
    assert!(
        err.contains("(4 attempts)") && err.contains("check that a server answers at `base_url`"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&cache).unwrap(),
        text,
        "the cache is unchanged"
    );
    let failed = failure_lines(&run.join("llm-failures.jsonl"));
    assert!(!failed.is_empty());
    assert!(
        failed
            .iter()
            .all(|f| f.class == FailureClass::Unreachable && f.status.is_none())
    );
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

// ---------------------------------------------------------------------------------------------
// The task spec.

const LLM_TASK: &str = "name: t
data:
  generate: {formula: \"(* 2 x)\", from: 0, to: 1, n: 8}
inputs: [x]
target: y
params: [{name: a}]
proposer:
  kind: llm
  base_url: http://127.0.0.1:1/v1/
  model: m
  prompt: PROMPT
  cache: c.jsonl
";

fn write_task(dir: &Path, text: &str) -> PathBuf {
    let file = dir.join("task.yaml");
    let prompt = root().join("bootstrap/prompts/symreg.md");
    std::fs::write(&file, text.replace("PROMPT", prompt.to_str().unwrap())).unwrap();
    file
}

fn load_err(dir: &Path, text: &str) -> String {
    let file = write_task(dir, text);
    let e = ndvm_search::task::load(&file).unwrap_err().to_string();
    let prefix = format!("{}:", file.display());
    assert!(e.starts_with(&prefix), "{e}");
    e[prefix.len()..].to_string()
}

#[test]
fn kind_llm_resolves_its_keys_with_defaults_and_contacts_nothing() {
    let dir = scratch("spec");
    let t = ndvm_search::task::load(&write_task(&dir, LLM_TASK)).unwrap();
    let c = t.llm().expect("an llm task");
    assert_eq!(c.base_url, "http://127.0.0.1:1/v1");
    assert_eq!(c.model, "m");
    assert_eq!(c.api_key_env, "OPENAI_API_KEY");
    assert_eq!(c.api_key, None);
    assert_eq!(
        (
            c.temperature,
            c.concurrency,
            c.max_requests,
            c.retries,
            c.examples
        ),
        (0.8, 4, 64, 3, 3)
    );
    assert_eq!((c.timeout_s, c.backoff_s, c.max_tokens), (60.0, 1.0, None));
    assert_eq!(c.cache, dir.join("c.jsonl"));
    assert!(c.prompt.contains("{{examples_section}}"));
    assert!(!c.cache.exists(), "loading a task writes nothing");
    // A key given in the task never shows in debug output (logs, panics).
    let mut keyed = c.clone();
    keyed.api_key = Some("sk-secret-123".to_string());
    let shown = format!("{keyed:?}");
    assert!(
        !shown.contains("sk-secret-123") && shown.contains("<redacted>"),
        "{shown}"
    );
    // Every other kind is offline.
    let grammar = LLM_TASK.lines().take(6).collect::<Vec<_>>().join("\n");
    let t = ndvm_search::task::load(&write_task(&dir, &grammar)).unwrap();
    assert!(t.llm().is_none());
}

#[test]
fn llm_keys_are_checked_with_line_and_column() {
    let dir = scratch("spec-errors");
    let e = load_err(&dir, &format!("{LLM_TASK}  temprature: 0.5\n"));
    assert!(e.starts_with("13:3: unknown field `temprature`"), "{e}");
    let e = load_err(&dir, &format!("{LLM_TASK}  temperature: 3\n"));
    assert!(
        e.starts_with("13:16: `temperature` must be in [0, 2]"),
        "{e}"
    );
    let e = load_err(&dir, &format!("{LLM_TASK}  concurrency: 0\n"));
    assert!(
        e.starts_with("13:16: `concurrency` must be at least 1"),
        "{e}"
    );
    let e = load_err(&dir, &format!("{LLM_TASK}  timeout: -1\n"));
    assert!(e.starts_with("13:12: `timeout` must be positive"), "{e}");
    let e = load_err(&dir, &LLM_TASK.replace("http://127.0.0.1:1/v1/", "ftp://x"));
    assert!(
        e.starts_with("9:13: `base_url` must start with http"),
        "{e}"
    );
    let e = load_err(&dir, &LLM_TASK.replace("  model: m\n", ""));
    assert!(
        e.contains("`proposer.kind: llm` needs `proposer.model`"),
        "{e}"
    );
    let e = load_err(&dir, &LLM_TASK.replace("PROMPT", "missing.md"));
    assert!(e.starts_with("11:11: cannot read prompt"), "{e}");
    let e = load_err(&dir, &LLM_TASK.replace("kind: llm", "kind: grammar"));
    assert!(
        e.starts_with("9:13: `proposer.base_url` only applies to `kind: llm`"),
        "{e}"
    );
    let e = load_err(&dir, &format!("{LLM_TASK}  evolve: sometimes\n"));
    assert!(e.starts_with("13:11:"), "{e}");
}

#[test]
fn an_ensemble_is_listed_under_models_with_positive_weights() {
    let dir = scratch("spec-models");
    let listed = LLM_TASK.replace(
        "  base_url: http://127.0.0.1:1/v1/\n  model: m\n",
        "  models:\n    - {base_url: http://127.0.0.1:1/v1/, model: big, weight: 3}\n    \
         - {base_url: http://127.0.0.1:2/v1, model: small, api_key_env: SMALL_KEY}\n",
    );
    let t = ndvm_search::task::load(&write_task(&dir, &listed)).unwrap();
    let c = t.llm().unwrap();
    let got: Vec<(&str, &str, f64, Option<&str>)> = c
        .models
        .iter()
        .map(|m| {
            (
                m.base_url.as_str(),
                m.model.as_str(),
                m.weight,
                m.api_key_env.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("http://127.0.0.1:1/v1", "big", 3.0, None),
            ("http://127.0.0.1:2/v1", "small", 1.0, Some("SMALL_KEY"))
        ]
    );
    assert_eq!(
        (c.base_url.as_str(), c.model.as_str()),
        ("http://127.0.0.1:1/v1", "big")
    );
    // The default evolves, seeded by the ensemble.
    assert!(matches!(
        t.proposer,
        ndvm_search::task::ProposerConfig::Evolve { .. }
    ));
    let e = load_err(&dir, &listed.replace("weight: 3", "weight: 0"));
    assert!(
        e.starts_with("10:7: a model's `weight` must be positive"),
        "{e}"
    );
    let e = load_err(
        &dir,
        &listed.replace("http://127.0.0.1:2/v1", "127.0.0.1:2"),
    );
    assert!(
        e.starts_with("11:7: `base_url` must start with http"),
        "{e}"
    );
    let e = load_err(&dir, &listed.replace("  models:", "  model: m\n  models:"));
    assert!(
        e.starts_with("9:10: `proposer.models` lists every model"),
        "{e}"
    );
    let e = load_err(&dir, &listed.replace("kind: llm", "kind: grammar"));
    assert!(
        e.contains("`proposer.models` only applies to `kind: llm`"),
        "{e}"
    );
}

/// Every file under `dir` (recursively), as (path, text).
fn files_under(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).to_string();
                out.push((path, text));
            }
        }
    }
    out
}

/// No `secret` in either output stream, the cache or any file of the run folder; returns how
/// many run-folder files were checked.
fn assert_no_secret(out: &std::process::Output, cache: &Path, run: &Path, secret: &str) -> usize {
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        !stdout.contains(secret),
        "stdout shows the secret:\n{stdout}"
    );
    assert!(
        !stderr.contains(secret),
        "stderr shows the secret:\n{stderr}"
    );
    let cached = std::fs::read_to_string(cache).unwrap();
    assert!(
        !cached.contains(secret),
        "the cache holds the secret:\n{cached}"
    );
    let files = files_under(run);
    for (path, text) in &files {
        assert!(
            !text.contains(secret),
            "{} holds the secret:\n{text}",
            path.display()
        );
    }
    files.len()
}

/// A task asking `base_url` with the proposer keys `keys` (a cache with one program).
fn secret_task(dir: &Path, base_url: &str, keys: &str) -> (PathBuf, PathBuf) {
    let cache = dir.join("cache.jsonl");
    std::fs::write(&cache, "{\"src\": \"(+ (* a x) b)\"}\n").unwrap();
    let task = dir.join("task.yaml");
    let prompt = root().join("bootstrap/prompts/symreg.md");
    std::fs::write(
        &task,
        task_yaml(&format!(
            "  kind: llm\n  evolve: false\n  base_url: {base_url}\n  model: mock-model\n{keys}  concurrency: 1\n  \
             max_requests: 2\n  timeout: 5\n  retries: 0\n  backoff: 0.01\n  prompt: {}\n  cache: cache.jsonl",
            prompt.display()
        )),
    )
    .unwrap();
    (task, cache)
}

const CANARY: &str = "sk-canary-7f3a9c2e51d84b60";

#[test]
fn a_key_echoed_in_a_401_message_is_redacted_on_every_path() {
    let m = Mocked::start();
    m.answer(vec![ResponseTemplate::new(401).set_body_json(json!({
        "error": {"message": "invalid key, you sent: {{authorization}}", "type": "auth"}
    }))]);
    let dir = scratch("secret-401");
    let (task, cache) = secret_task(&dir, &m.base_url(), "  api_key_env: NDVM_TEST_CANARY_KEY\n");
    let run = dir.join("run");
    let out = ndvm_raw(
        &["run", p(&task), "--out", p(&run)],
        &[("NDVM_TEST_CANARY_KEY", CANARY)],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    // The server did receive the key, and its echo was seen and replaced.
    assert!(err.contains("you sent: Bearer [redacted]"), "{err}");
    let failed = std::fs::read_to_string(run.join("llm-failures.jsonl")).unwrap();
    assert!(failed.contains("Bearer [redacted]"), "{failed}");
    let n = assert_no_secret(&out, &cache, &run, CANARY);
    assert!(
        n >= 3,
        "task.yaml, run.json and llm-failures.jsonl at least: {n}"
    );
}

#[test]
fn a_key_echoed_in_an_answer_or_its_model_name_is_redacted_before_it_is_stored() {
    let m = Mocked::start();
    let mut answer = ok("(+ (* a x) (* b (exp (* c x)))) ; authorized with {{authorization}}");
    answer.body = answer
        .body
        .replace("mock-model-2", "echo {{authorization}}");
    m.answer(vec![answer]);
    let dir = scratch("secret-answer");
    let (task, cache) = secret_task(&dir, &m.base_url(), &format!("  api_key: {CANARY}\n"));
    let run = dir.join("run");
    let out = ndvm_raw(&["run", p(&task), "--out", p(&run)], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(m.requests().len(), 2);
    let lines = cache_lines(&cache);
    assert_eq!(lines.len(), 3, "the seed line and two answers");
    for line in &lines[1..] {
        assert_eq!(line.model.as_deref(), Some("echo Bearer [redacted]"));
        assert!(line.raw.as_deref().unwrap().contains("Bearer [redacted]"));
    }
    // The task copy keeps no inline key.
    let copy = std::fs::read_to_string(run.join("task.yaml")).unwrap();
    assert!(copy.contains("api_key: \"[redacted]\""), "{copy}");
    let n = assert_no_secret(&out, &cache, &run, CANARY);
    assert!(n >= 5, "{n} files");
}

#[test]
fn a_password_in_base_url_is_redacted_on_every_path() {
    let m = Mocked::start();
    m.answer(vec![status(503)]);
    let dir = scratch("secret-url");
    let password = "pw-canary-51e0b7";
    let url = m
        .base_url()
        .replace("http://", &format!("http://user:{password}@"));
    let (task, cache) = secret_task(&dir, &url, "  api_key: \"\"\n");
    let run = dir.join("run");
    let out = ndvm_raw(&["run", p(&task), "--out", p(&run)], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("http://[redacted]@127.0.0.1"), "{err}");
    let copy = std::fs::read_to_string(run.join("task.yaml")).unwrap();
    assert!(
        copy.contains("base_url: http://[redacted]@127.0.0.1"),
        "{copy}"
    );
    assert_no_secret(&out, &cache, &run, password);
    // The run folder still resumes: its redacted copy matches the task file.
    let again = ndvm_raw(&["run", "--resume", p(&run)], &[]);
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(!err.contains("changed since this run started"), "{err}");
    assert!(!err.contains(password), "{err}");
}

#[test]
fn a_service_that_answers_no_request_ends_the_run_with_an_error_naming_it() {
    let m = Mocked::start();
    m.answer(vec![status(429)]);
    let dir = scratch("no-answer");
    // Two requests, each failing once (no retries), below the in-a-row limit of 4.
    let (task, _cache) = secret_task(&dir, &m.base_url(), "  api_key: \"\"\n");
    let text = std::fs::read_to_string(&task)
        .unwrap()
        .replace("concurrency: 1", "concurrency: 4");
    std::fs::write(&task, text).unwrap();
    let run = dir.join("run");
    let out = ndvm_raw(&["run", p(&task), "--out", p(&run), "-q"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let url = format!("{}/chat/completions", m.base_url());
    assert!(
        err.contains(&format!(
            "error: llm proposer: POST {url} failed: the service answered none of the 2 requests"
        )) && err.contains("http 429"),
        "{err}"
    );
    assert_eq!(m.requests().len(), 2);
    assert_eq!(failure_lines(&run.join("llm-failures.jsonl")).len(), 2);
}

#[test]
fn every_shipped_prompt_renders_with_no_placeholder_left() {
    use ndvm_search::propose::llm::{PromptVars, render_prompt};
    let dir = root().join("bootstrap/prompts");
    let (inputs, params) = (
        vec!["x".to_string()],
        vec!["a".to_string(), "b".to_string()],
    );
    let operators = vec!["exp".to_string()];
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        let rendered = render_prompt(
            &text,
            &PromptVars {
                description: "a test",
                inputs: &inputs,
                params: &params,
                target: "y",
                operators: &operators,
                notation: "NOTATION",
                frontend: "infix",
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{}: {e}", entry.path().display()));
        assert!(!rendered.contains("{{"), "{rendered}");
        assert!(rendered.contains("NOTATION") && rendered.contains("```infix"));
        seen += 1;
    }
    assert!(seen >= 2, "{seen} prompts in {}", dir.display());
}
