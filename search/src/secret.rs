//! Secrets never leave the process: the one redaction step every path out goes through (stderr,
//! the run folder's files, the cache, the failure log, error texts). It replaces the values of the
//! secrets this process knows (an API key, a password in a URL), any `Authorization` header value
//! or bearer token, and any URL's user-info by [`REDACTED`].
//!
//! Secrets are registered once, where they are read (the task's `api_key:`, `base_url`'s
//! user-info, the key's environment variable), in a process-wide list, so that a message built far
//! from them (a server's error text in a `SearchError`) is still cleaned where it is printed.

use std::borrow::Cow;
use std::sync::{Mutex, OnceLock};

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Registered secrets shorter than this are not searched for in free text (a key `test` would
/// mangle every `test_id`); they are still removed from the task copy, headers and URLs.
pub const MIN_FREE_TEXT: usize = 8;

fn known() -> &'static Mutex<Vec<String>> {
    static KNOWN: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    KNOWN.get_or_init(|| Mutex::new(Vec::new()))
}

/// Remembers `value` as a secret of this process (empty values are ignored).
pub fn register(value: &str) {
    let value = value.trim();
    if value.is_empty() {
        return;
    }
    let mut k = known().lock().unwrap_or_else(|e| e.into_inner());
    if !k.iter().any(|v| v == value) {
        k.push(value.to_string());
        // Longest first, so a secret containing another is replaced whole.
        k.sort_by_key(|v| std::cmp::Reverse(v.len()));
    }
}

/// Registers the user-info of `url` (`user:password@`), whole and its password alone.
pub fn register_url(url: &str) {
    if let Some((start, end)) = userinfo(url, 0) {
        let info = &url[start..end];
        register(info);
        if let Some((_, password)) = info.split_once(':') {
            register(password);
        }
    }
}

/// `text` with every secret removed (see the module docs).
pub fn redact(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    {
        let k = known().lock().unwrap_or_else(|e| e.into_inner());
        for secret in k.iter().filter(|s| s.len() >= MIN_FREE_TEXT) {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), REDACTED));
            }
        }
    }
    if let Some(t) = redact_headers(&out) {
        out = Cow::Owned(t);
    }
    if let Some(t) = redact_urls(&out) {
        out = Cow::Owned(t);
    }
    out
}

/// `text` redacted, owned.
pub fn redacted(text: &str) -> String {
    redact(text).into_owned()
}

/// The byte range of the user-info of the first URL at or after `from` that has one.
fn userinfo(text: &str, from: usize) -> Option<(usize, usize)> {
    let mut at = from;
    while let Some(i) = text[at..].find("://") {
        let start = at + i + 3;
        let authority_end = text[start..]
            .find(|c: char| {
                c == '/' || c == '?' || c == '#' || c.is_whitespace() || "\"'<>`".contains(c)
            })
            .map_or(text.len(), |j| start + j);
        if let Some(j) = text[start..authority_end].rfind('@') {
            return Some((start, start + j));
        }
        at = start;
    }
    None
}

/// Every URL's user-info replaced (`None` when there is none).
fn redact_urls(text: &str) -> Option<String> {
    let mut out = String::new();
    let mut at = 0;
    let mut changed = false;
    while let Some((start, end)) = userinfo(text, at) {
        out.push_str(&text[at..start]);
        out.push_str(REDACTED);
        at = end;
        changed = true;
    }
    changed.then(|| {
        out.push_str(&text[at..]);
        out
    })
}

/// The header words after which a credential follows.
const SCHEMES: [&str; 3] = ["bearer ", "basic ", "authorization:"];

/// Every credential after `Bearer `, `Basic ` or `Authorization:` replaced (case-insensitive;
/// `None` when there is none). A credential runs to the next space, quote, comma or line end.
fn redact_headers(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let mut out = String::new();
    let mut at = 0;
    let mut changed = false;
    loop {
        let next = SCHEMES
            .iter()
            .filter_map(|s| lower[at..].find(s).map(|i| (at + i, s.len())))
            .min();
        let Some((i, len)) = next else { break };
        let mut start = i + len;
        // `Authorization: Bearer xyz`: the scheme word is kept, the credential goes.
        while text[start..].starts_with(' ') {
            start += 1;
        }
        for s in ["bearer ", "basic "] {
            if lower[start..].starts_with(s) {
                start += s.len();
            }
        }
        let end = text[start..]
            .find(|c: char| c.is_whitespace() || "\"',;\\".contains(c))
            .map_or(text.len(), |j| start + j);
        out.push_str(&text[at..start]);
        if end > start && &text[start..end] != REDACTED {
            out.push_str(REDACTED);
            changed = true;
        } else {
            out.push_str(&text[start..end]);
        }
        at = end;
    }
    changed.then(|| {
        out.push_str(&text[at..]);
        out
    })
}

/// A task file's text for its copies (`task.yaml` and `run.json` of a run folder): every
/// `api_key:` value replaced, then [`redact`].
pub fn task_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        out.push_str(&api_key_line(line).unwrap_or_else(|| line.to_string()));
    }
    redacted(&out)
}

/// `line` with the value of an `api_key:` key (block or flow style) replaced, if it has one.
fn api_key_line(line: &str) -> Option<String> {
    let i = line.find("api_key:")?;
    // Not `api_key_env:`, and the key starts a word.
    if i > 0 && !line[..i].ends_with([' ', '{', ',', '\t']) {
        return None;
    }
    let start = i + "api_key:".len();
    let rest = &line[start..];
    let value_start = start + (rest.len() - rest.trim_start().len());
    let tail = &line[value_start..];
    let end = if let Some(q) = tail.strip_prefix('"') {
        q.find('"').map_or(line.len(), |j| value_start + j + 2)
    } else if let Some(q) = tail.strip_prefix('\'') {
        q.find('\'').map_or(line.len(), |j| value_start + j + 2)
    } else {
        tail.find([',', '}', '#', '\n', '\r'])
            .map_or(line.len(), |j| value_start + j)
    };
    let value = line[value_start..end].trim_end();
    if value.is_empty() || value == "\"\"" || value == "''" {
        return None;
    }
    let end = value_start + value.len();
    Some(format!(
        "{}\"{REDACTED}\"{}",
        &line[..value_start],
        &line[end..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_keys_headers_and_url_passwords_are_removed() {
        register("sk-canary-0123456789");
        let t = redact("echo: sk-canary-0123456789 and more");
        assert_eq!(t, "echo: [redacted] and more");
        assert_eq!(
            redact("Authorization: Bearer abc.def-123, next"),
            "Authorization: Bearer [redacted], next"
        );
        assert_eq!(redact("header bearer XYZ"), "header bearer [redacted]");
        assert_eq!(
            redact("POST http://user:pw@host:8/v1/chat failed"),
            "POST http://[redacted]@host:8/v1/chat failed"
        );
        assert_eq!(redact("plain text, no secret"), "plain text, no secret");
        assert!(matches!(redact("plain"), Cow::Borrowed(_)));
        // Short registered keys are not hunted in free text.
        register("test");
        assert_eq!(redact("test_id"), "test_id");
        register("");
        assert_eq!(
            redact("an empty key redacts nothing"),
            "an empty key redacts nothing"
        );
    }

    #[test]
    fn the_task_copy_keeps_no_api_key_value() {
        let text = "proposer:\n  kind: llm\n  api_key: sk-inline-value\n  api_key_env: MY_KEY\n  \
                    base_url: http://me:hunter2hunter2@127.0.0.1:9/v1\n";
        let copy = task_text(text);
        assert!(!copy.contains("sk-inline-value"), "{copy}");
        assert!(!copy.contains("hunter2"), "{copy}");
        assert!(copy.contains("api_key: \"[redacted]\"\n"), "{copy}");
        assert!(copy.contains("api_key_env: MY_KEY"), "{copy}");
        assert!(copy.contains("http://[redacted]@127.0.0.1:9/v1"), "{copy}");
        let flow = task_text("proposer: {kind: llm, api_key: 'k k', model: m}\n");
        assert_eq!(
            flow,
            "proposer: {kind: llm, api_key: \"[redacted]\", model: m}\n"
        );
        assert_eq!(task_text("  api_key: \"\"\n"), "  api_key: \"\"\n");
    }
}
