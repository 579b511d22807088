//! `CacheReplay`: replays a JSONL candidate cache in file order (one JSON object per line with a
//! `src` string; other keys are ignored), so an offline run is reproducible bit for bit. Lines the
//! `llm` proposer wrote carry provenance ([`CacheLine`]); a line with a `verdict` but no `src` (an
//! answer with no program, a failed request) is skipped, and so is every line with the verdict
//! `rejected` (an answer over the size or nesting bounds), even one that holds a `src`. A truncated last line (no final newline,
//! not valid JSON) is reported as a warning, not an error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use ndvm_frontends::Registry;

use super::{Candidate, Proposer};
use crate::error::{Result, SearchError};
use crate::textfile;

/// One cache line. Only `src` matters to replay; the rest is provenance written by the `llm`
/// proposer (absent in hand-written caches).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct CacheLine {
    /// The program (absent when the answer held none or the request failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
    /// The front end that reads `src` (default: the task's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontend: Option<String>,
    /// What the proposer made of the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Why, for anything but `valid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The model that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Hash of the prompt sent (`fnv1a64:` and 16 hex digits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_hash: Option<String>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// When the answer arrived, seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<f64>,
    /// Attempts the request took (retries + 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// Tokens the answering request used, as the endpoint's `usage` reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// Why the model stopped writing (`stop`; `length`: cut at the token limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Milliseconds from sending the answering request to the last byte of its answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
    /// The answer's text as received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// Starting values of parameters that replaced the answer's numbers (`src` is the program
    /// after that rewrite): the first start of its calibration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<BTreeMap<String, f64>>,
    /// True when the answer held no valid program in the task's notation and `src` is an
    /// expression salvaged from it (`propose::salvage`, read as infix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub salvaged: Option<bool>,
    /// Under an LLM-seeded `evolve`, the number of the evolutionary search's request for seeds
    /// (0-based) that received this answer's program: answers arrive while the search runs, and
    /// replaying them at the same requests reproduces the run ([`group_end`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<u64>,
    /// Further valid programs of the same answer (a model that wrote several), in the task's
    /// notation; replayed after `src`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more: Vec<MoreProgram>,
}

/// A further program of an answer (`CacheLine::more`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct MoreProgram {
    /// The program, after its numbers became parameters.
    pub src: String,
    /// Those parameters' starting values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<BTreeMap<String, f64>>,
}

pub use crate::events::TokenUsage;

/// The `verdict` of a cache line, written as `valid`, `invalid-<class>`, `no-program`,
/// `request-failed` or `rejected`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Verdict {
    /// The answer held a program that passed validation.
    Valid,
    /// The program failed validation with this class (`parse`, `free-variable`, …).
    Invalid(String),
    /// The answer held no program.
    NoProgram,
    /// The request failed (after its retries).
    RequestFailed,
    /// Over the answer's size or nesting bounds: never replayed, even with a `src`.
    Rejected,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Valid => f.write_str("valid"),
            Verdict::Invalid(class) => write!(f, "invalid-{class}"),
            Verdict::NoProgram => f.write_str("no-program"),
            Verdict::RequestFailed => f.write_str("request-failed"),
            Verdict::Rejected => f.write_str("rejected"),
        }
    }
}

impl From<Verdict> for String {
    fn from(v: Verdict) -> String {
        v.to_string()
    }
}

impl TryFrom<String> for Verdict {
    type Error = String;

    fn try_from(s: String) -> std::result::Result<Verdict, String> {
        match s.as_str() {
            "valid" => Ok(Verdict::Valid),
            "no-program" => Ok(Verdict::NoProgram),
            "request-failed" => Ok(Verdict::RequestFailed),
            "rejected" => Ok(Verdict::Rejected),
            _ => match s.strip_prefix("invalid-") {
                Some(class) if !class.is_empty() => Ok(Verdict::Invalid(class.to_string())),
                _ => Err(format!(
                    "unknown verdict `{s}` (expected valid, invalid-<class>, no-program, request-failed or rejected)"
                )),
            },
        }
    }
}

/// Replays a cache file.
#[derive(Debug)]
pub struct CacheReplay {
    sources: Vec<Cached>,
    next: usize,
    warnings: Vec<String>,
    /// Seeds of an `evolve`: each call hands out the lines of the next seed request
    /// ([`group_end`]), counted here.
    asks: Option<u64>,
}

/// One program of a cache.
#[derive(Clone, Debug, PartialEq)]
pub struct Cached {
    /// Its line (1-based).
    pub line: usize,
    /// The program text.
    pub src: String,
    /// The front end the line names, if any.
    pub frontend: Option<String>,
    /// The line's starting values (`init`), if any.
    pub init: BTreeMap<String, f64>,
    /// The seed request that received it (`CacheLine::ask`), if any.
    pub ask: Option<u64>,
}

/// The end of the programs handed out at seed request `ask` from `sources[next..]`: the lines
/// marked with that request (none when the next line is marked with a later one); lines with no
/// mark are handed out `n` at a time.
pub fn group_end(sources: &[Cached], next: usize, ask: u64, n: usize) -> usize {
    let rest = sources.get(next..).unwrap_or_default();
    let count = match rest.first().map(|c| c.ask) {
        None => 0,
        Some(Some(a)) if a > ask => 0,
        Some(Some(a)) => rest.iter().take_while(|c| c.ask == Some(a)).count(),
        Some(None) => rest.iter().take(n).take_while(|c| c.ask.is_none()).count(),
    };
    next + count
}

/// Reads every candidate of a cache: the programs in file order and the warnings.
/// The file is read up to [`textfile::MAX_CACHE_BYTES`] and must be UTF-8.
pub fn read_cache(path: &Path) -> Result<(Vec<Cached>, Vec<String>)> {
    let text = textfile::read(path, textfile::MAX_CACHE_BYTES, textfile::RAISE_CACHE_LIMIT)?;
    parse_cache(path, &text)
}

/// Parses cache text (see the module docs); `path` is only used in messages.
pub fn parse_cache(path: &Path, text: &str) -> Result<(Vec<Cached>, Vec<String>)> {
    let mut sources = Vec::new();
    let mut warnings = Vec::new();
    let lines: Vec<&str> = text.split('\n').collect();
    let n = lines.len();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let is_last_unterminated = i + 1 == n;
        // serde reads a struct from a JSON array too (`["src"]` would be the program `src`):
        // a cache line is an object.
        if !line.trim_start().starts_with('{') {
            return Err(SearchError::CacheLine {
                path: PathBuf::from(path),
                line: i + 1,
                message: "not a cache line: a line is a JSON object such as {\"src\": \"(* a x)\"}"
                    .into(),
            });
        }
        match serde_json::from_str::<CacheLine>(line) {
            // A rejected answer is never a candidate, whatever the line holds.
            Ok(CacheLine {
                verdict: Some(Verdict::Rejected),
                ..
            }) => {}
            Ok(CacheLine {
                src: Some(src),
                frontend,
                init,
                ask,
                more,
                ..
            }) => {
                sources.push(Cached {
                    line: i + 1,
                    src,
                    frontend,
                    init: init.unwrap_or_default(),
                    ask,
                });
                // Further programs are in the task's notation (no `frontend` of their own).
                sources.extend(more.into_iter().map(|m| Cached {
                    line: i + 1,
                    src: m.src,
                    frontend: None,
                    init: m.init.unwrap_or_default(),
                    ask,
                }));
            }
            Ok(CacheLine {
                verdict: Some(_), ..
            }) => {}
            Ok(_) if is_last_unterminated => warnings.push(format!(
                "{}:{}: truncated last line ignored (no `src`)",
                path.display(),
                i + 1
            )),
            Ok(_) => {
                return Err(SearchError::CacheLine {
                    path: PathBuf::from(path),
                    line: i + 1,
                    message: "not a cache line: no `src` and no `verdict`".into(),
                });
            }
            Err(e) if is_last_unterminated => warnings.push(format!(
                "{}:{}: truncated last line ignored ({e})",
                path.display(),
                i + 1
            )),
            Err(e) => {
                return Err(SearchError::CacheLine {
                    path: PathBuf::from(path),
                    line: i + 1,
                    message: format!("not a cache line: {e}"),
                });
            }
        }
    }
    Ok((sources, warnings))
}

impl CacheReplay {
    /// Opens a cache file and reads it whole; a line without `frontend` is in `default`'s
    /// notation, and a line naming a front end `frontends` does not know is an error.
    pub fn open(path: &Path, frontends: &Registry, default: &str) -> Result<CacheReplay> {
        let (mut sources, warnings) = read_cache(path)?;
        for c in &mut sources {
            let name = c.frontend.get_or_insert_with(|| default.to_string());
            if frontends.by_name(name).is_none() {
                return Err(SearchError::CacheLine {
                    path: PathBuf::from(path),
                    line: c.line,
                    message: frontends.unknown(name),
                });
            }
        }
        Ok(CacheReplay {
            sources,
            next: 0,
            warnings,
            asks: None,
        })
    }

    /// As the seeds of an `evolve`: lines an LLM-seeded run marked with its seed requests
    /// (`ask`) are handed out at the same requests, which reproduces that run.
    pub fn as_seeds(mut self) -> CacheReplay {
        self.asks = Some(0);
        self
    }
}

impl Proposer for CacheReplay {
    fn propose(&mut self, n: usize) -> Result<Vec<Candidate>> {
        let end = match self.asks.as_mut() {
            Some(ask) => {
                *ask += 1;
                group_end(&self.sources, self.next, *ask - 1, n)
            }
            None => (self.next + n).min(self.sources.len()),
        };
        let out = (self.next..end)
            .map(|i| {
                let c = &self.sources[i];
                let mut candidate = Candidate::new(
                    i as u64,
                    c.src.clone(),
                    c.frontend.clone().unwrap_or_default(),
                );
                candidate.init = c.init.clone();
                candidate
            })
            .collect();
        self.next = end;
        Ok(out)
    }

    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    fn name(&self) -> &'static str {
        "replay"
    }

    fn exhausted(&self) -> bool {
        self.next >= self.sources.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn srcs(cached: &[Cached]) -> Vec<&str> {
        cached.iter().map(|c| c.src.as_str()).collect()
    }

    #[test]
    fn a_line_may_name_its_front_end_and_an_unknown_one_is_an_error() {
        let text = concat!(
            "{\"src\":\"(* a x)\"}\n",
            "{\"src\":\"(+ a x)\",\"frontend\":\"scheme\"}\n",
        );
        let (s, _) = parse_cache(Path::new("c.jsonl"), text).unwrap();
        assert_eq!(s[0].frontend, None);
        assert_eq!(s[1].frontend.as_deref(), Some("scheme"));
        assert_eq!(s[1].line, 2);
        let dir = std::env::temp_dir().join(format!("ndvm-replay-fe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.jsonl");
        std::fs::write(
            &path,
            "{\"src\":\"x\"}\n{\"src\":\"x\",\"frontend\":\"cobol\"}\n",
        )
        .unwrap();
        let e = CacheReplay::open(&path, &Registry::default(), "scheme")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("c.jsonl:2: ") && e.contains("unknown front end `cobol`"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn truncated_last_line_is_a_warning_and_a_bad_middle_line_an_error() {
        let p = Path::new("c.jsonl");
        let (s, w) = parse_cache(p, "{\"src\": \"(* a x)\"}\n{\"src\": \"(+ a").unwrap();
        assert_eq!(srcs(&s), ["(* a x)"]);
        assert_eq!(w.len(), 1);
        assert!(w[0].starts_with("c.jsonl:2: truncated"), "{w:?}");
        let e = parse_cache(p, "{\"src\": 1}\n{\"src\": \"a\"}\n").unwrap_err();
        assert!(e.to_string().starts_with("c.jsonl:1: "), "{e}");
        let e = parse_cache(p, "{\"srx\": \"a\"}\n").unwrap_err();
        assert!(e.to_string().contains("no `src`"), "{e}");
    }

    #[test]
    fn provenance_lines_replay_their_src_and_skip_failures() {
        let text = concat!(
            "{\"src\":\"(* a x)\",\"verdict\":\"valid\",\"model\":\"m\",\"temperature\":0.5}\n",
            "{\"verdict\":\"no-program\",\"reason\":\"no s-expression\",\"raw\":\"hi\"}\n",
            "{\"src\":\"(+ a\",\"verdict\":\"invalid-parse\"}\n",
        );
        let (s, w) = parse_cache(Path::new("c.jsonl"), text).unwrap();
        assert_eq!(srcs(&s), ["(* a x)", "(+ a"]);
        assert!(w.is_empty());
    }

    #[test]
    fn verdicts_read_and_write_as_their_names() {
        for (text, verdict) in [
            ("valid", Verdict::Valid),
            (
                "invalid-free-variable",
                Verdict::Invalid("free-variable".into()),
            ),
            ("no-program", Verdict::NoProgram),
            ("request-failed", Verdict::RequestFailed),
            ("rejected", Verdict::Rejected),
        ] {
            let json = format!("\"{text}\"");
            assert_eq!(serde_json::from_str::<Verdict>(&json).unwrap(), verdict);
            assert_eq!(serde_json::to_string(&verdict).unwrap(), json);
        }
        let e = parse_cache(
            Path::new("c.jsonl"),
            "{\"src\":\"x\",\"verdict\":\"great\"}\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("c.jsonl:1: not a cache line: unknown verdict `great`"),
            "{e}"
        );
        assert!(serde_json::from_str::<Verdict>("\"invalid-\"").is_err());
    }
}
