//! Finding a program in a language model's answer: code-fenced blocks, and the default extraction
//! every front end gets.

use ndvm_core::Heap;

use crate::Frontend;

/// Code-fenced blocks of `text` (the body of each ```…``` block; an unclosed last fence runs to
/// the end, as in a truncated answer).
pub fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("```") {
        let after = &rest[i + 3..];
        // Skip the info string (`scheme`, `python`, …) up to the end of the line.
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

/// Whether `frontend` reads `src` as a program of at least one form (on a scratch heap).
pub fn parses<F: Frontend + ?Sized>(frontend: &F, src: &str) -> bool {
    let mut heap = Heap::new();
    frontend
        .parse(&mut heap, src)
        .is_ok_and(|p| !p.forms().is_empty())
}

/// The default extraction: the first code-fenced block the front end reads, else the whole answer
/// when it reads; `Err` says why there is none.
pub fn fenced_or_whole<F: Frontend + ?Sized>(frontend: &F, answer: &str) -> Result<String, String> {
    let text = answer.trim();
    if text.is_empty() {
        return Err("empty answer".into());
    }
    for block in fenced_blocks(text) {
        let b = block.trim();
        if parses(frontend, b) {
            return Ok(b.to_string());
        }
    }
    if parses(frontend, text) {
        return Ok(text.to_string());
    }
    Err(format!(
        "no {} program in the answer (neither a code-fenced block nor the whole answer reads)",
        frontend.name()
    ))
}
