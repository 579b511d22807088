//! Salvaging a candidate from an answer that holds no program in the task's notation: the
//! expressions small models write anyway, as `return` values of Python functions, right-hand
//! sides of `y = …` and `f(x) = …`, inline code and lines of code blocks, in whatever fence.
//! Each becomes infix text (`**` as `^`, `np.exp` as `exp`, comments and trailing punctuation
//! dropped), to be read by the infix front end, its numbers lifted and the result validated.
//! The answer is untrusted: the fragments are bounded in number and length.

/// The most fragments taken from one answer.
pub const MAX_FRAGMENTS: usize = 64;

/// The longest fragment tried, in bytes.
pub const MAX_FRAGMENT_BYTES: usize = 400;

/// The candidate expressions of `answer`, in the order they are tried: `return` values first
/// (the LLM-SR form), then right-hand sides of assignments and definitions, then inline code,
/// then whole lines of code blocks; each normalized to infix, without duplicates.
pub fn fragments(answer: &str) -> Vec<String> {
    let text = without_think(answer);
    let (mut returns, mut sides, mut inline, mut lines) = (vec![], vec![], vec![], vec![]);
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("return ") {
            returns.push(rest);
            continue;
        }
        sides.extend(right_hand_sides(line));
        inline.extend(inline_code(line));
        if !line.starts_with("```") && !line.is_empty() {
            lines.push(line);
        }
    }
    let mut out: Vec<String> = Vec::new();
    for raw in returns.into_iter().chain(sides).chain(inline).chain(lines) {
        if out.len() >= MAX_FRAGMENTS {
            break;
        }
        let f = normalize(raw);
        if !f.is_empty() && f.len() <= MAX_FRAGMENT_BYTES && !out.contains(&f) {
            out.push(f);
        }
    }
    out
}

/// `answer` without its `<think>…</think>` sections (a reasoning model's scratch work).
pub fn without_think(answer: &str) -> String {
    let mut out = String::with_capacity(answer.len());
    let mut rest = answer;
    while let Some(i) = rest.find("<think>") {
        out.push_str(&rest[..i]);
        match rest[i..].find("</think>") {
            Some(j) => rest = &rest[i + j + "</think>".len()..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

/// The expressions after each lone `=` of `line` (not `==`, `<=`, `>=`, `!=`) whose left side
/// ends in a name or a call such as `f(x)`: each up to the end of its clause (`. `, `, `, `; `)
/// and, when longer, to the end of the line.
fn right_hand_sides(line: &str) -> Vec<&str> {
    let bytes = line.as_bytes();
    let mut out = Vec::new();
    for i in 0..bytes.len() {
        let lone = bytes[i] == b'='
            && bytes.get(i + 1) != Some(&b'=')
            && !matches!(
                i.checked_sub(1).map(|k| bytes[k]),
                Some(b'=' | b'<' | b'>' | b'!')
            );
        if !lone {
            continue;
        }
        let lhs = line[..i].trim_end();
        let last = lhs
            .rsplit(|c: char| c.is_whitespace() || c == '`')
            .next()
            .unwrap_or("");
        let name_like = !last.is_empty()
            && last
                .chars()
                .all(|c| c.is_alphanumeric() || "_()[],".contains(c));
        if !name_like {
            continue;
        }
        let rhs = line[i + 1..].trim();
        let clause = [". ", ", ", "; "]
            .iter()
            .filter_map(|stop| rhs.find(stop))
            .min()
            .map_or(rhs, |j| &rhs[..j]);
        out.push(clause.trim());
        if clause.len() < rhs.len() {
            out.push(rhs);
        }
    }
    out
}

/// The `` `…` `` spans of a line (not fences).
fn inline_code(line: &str) -> Vec<&str> {
    if line.starts_with("```") {
        return Vec::new();
    }
    line.split('`')
        .enumerate()
        .filter(|(k, s)| k % 2 == 1 && !s.trim().is_empty())
        .map(|(_, s)| s.trim())
        .collect()
}

/// Python and math habits as infix: `**` → `^`, module prefixes dropped, a trailing comment and
/// trailing punctuation dropped, `e^(…)` → `exp(…)`.
fn normalize(fragment: &str) -> String {
    let mut s = fragment.split(" #").next().unwrap_or("").trim().to_string();
    for prefix in MODULES {
        s = library_constants(&s, prefix);
        s = s.replace(prefix, "");
    }
    s = s.replace("**", "^").replace("e^(", "exp(");
    s.trim_end_matches(['.', ',', ';', ':'])
        .trim_matches('`')
        .trim()
        .to_string()
}

/// `fragment` with the LLM-SR form's parameter vector (`params[0]`, `params[1]`, …) written as
/// the task's parameters of those positions; an index past them is left (and fails validation).
pub fn named_params(fragment: &str, params: &[String]) -> String {
    let mut out = String::with_capacity(fragment.len());
    let mut rest = fragment;
    while let Some(i) = rest.find("params[") {
        let after = &rest[i + "params[".len()..];
        let digits = after
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(after.len());
        let name = after[..digits]
            .parse::<usize>()
            .ok()
            .filter(|_| after[digits..].starts_with(']'))
            .and_then(|k| params.get(k));
        let starts_word = rest[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'));
        out.push_str(&rest[..i]);
        match name.filter(|_| starts_word) {
            Some(name) => {
                out.push_str(name);
                rest = &after[digits + 1..];
            }
            None => {
                out.push_str("params[");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The module prefixes of Python's numeric libraries, dropped from names (`np.exp` is `exp`).
const MODULES: [&str; 6] = ["np.", "numpy.", "math.", "torch.", "sp.", "sympy."];

/// `s` with the constants `pi` and `e` of module `prefix` (`np.pi`, `math.e`) written as numbers
/// (dropping the prefix would leave a free name); `np.exp` and the like are left alone.
fn library_constants(s: &str, prefix: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(prefix) {
        let after = &rest[i + prefix.len()..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let value = match &after[..name_len] {
            "pi" => Some("3.141592653589793"),
            "e" => Some("2.718281828459045"),
            _ => None,
        };
        let at_word_start = rest[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'));
        out.push_str(&rest[..i]);
        match value.filter(|_| at_word_start) {
            Some(v) => out.push_str(v),
            None => out.push_str(&rest[i..i + prefix.len() + name_len]),
        }
        rest = &after[name_len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_llm_sr_parameter_vector_becomes_the_tasks_parameters() {
        let answer = "```python\ndef equation(x: np.ndarray, v: np.ndarray, params: np.ndarray) \
                      -> np.ndarray:\n    return params[0] * x + params[1] * np.exp(-v) + params[9]\n```";
        let f = fragments(answer);
        let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        assert_eq!(
            named_params(&f[0], &names),
            "a * x + b * exp(-v) + params[9]"
        );
        assert_eq!(
            named_params("myparams[0] + params[x]", &names),
            "myparams[0] + params[x]"
        );
    }

    #[test]
    fn library_constants_become_numbers_and_functions_lose_their_module() {
        let f = fragments("return a * np.exp(-b * x) * math.e ** 2 + np.pi * c");
        assert_eq!(
            f[0],
            "a * exp(-b * x) * 2.718281828459045 ^ 2 + 3.141592653589793 * c"
        );
        // Not a constant: `np.exp`, `np.epsilon`, `mynp.pi`.
        assert_eq!(
            library_constants("np.exp(x) + np.epsilon", "np."),
            "np.exp(x) + np.epsilon"
        );
        assert_eq!(library_constants("mynp.pi", "np."), "mynp.pi");
    }

    /// Answers SmolLM2-135M-Instruct gave (llama-cpp-python server, temperature 0.8) to the
    /// symreg prompt, verbatim or in part.
    const PYTHON_IN_SCHEME_FENCE: &str = "```scheme\ndef f(x: float) -> (float, float):\n    \
                                          return exp(-0.3 * 2 * x), 1e-4f\n```";
    const PROSE: &str = "The formula is given by f(x) = exp(-0.3 * x). Given the equation y = \
                         cos(2 * x), where the coefficient of the exponential term is -3.";

    #[test]
    fn real_answers_give_their_expressions() {
        let f = fragments(PYTHON_IN_SCHEME_FENCE);
        assert_eq!(f[0], "exp(-0.3 * 2 * x), 1e-4f");
        let f = fragments(PROSE);
        assert_eq!(
            f[..2],
            [
                "exp(-0.3 * x)",
                "exp(-0.3 * x). Given the equation y = cos(2 * x), where the coefficient of the exponential term is -3"
            ]
        );
        assert!(f.contains(&"cos(2 * x)".to_string()), "{f:?}");
        let f = fragments("y = a * np.exp(-b * x) ** 2 # decay\n");
        assert_eq!(f[0], "a * exp(-b * x) ^ 2");
        let f = fragments("Use `a*x + b`, or better `e^(-x)`.");
        assert!(
            f.contains(&"a*x + b".to_string()) && f.contains(&"exp(-x)".to_string()),
            "{f:?}"
        );
    }

    #[test]
    fn think_sections_and_comparisons_are_skipped_and_work_is_bounded() {
        let f = fragments("<think>y = x</think>\ny = a * x");
        assert_eq!(f, ["a * x", "y = a * x"]);
        assert!(right_hand_sides("if a <= b").is_empty());
        assert!(right_hand_sides("x == 2 and 3 != y").is_empty());
        let long = format!("y = {}", "x + ".repeat(500));
        let many: String = (0..500).map(|i| format!("y = a * x + {i}\n")).collect();
        assert!(
            fragments(&long)
                .iter()
                .all(|f| f.len() <= MAX_FRAGMENT_BYTES)
        );
        assert_eq!(fragments(&many).len(), MAX_FRAGMENTS);
    }
}
