//! ndvm-search: the outer layer and the only crate that touches files; today it holds the `eval`
//! command (one program file, or a JSONL batch) and the `calibrate` command (fit a program to a
//! CSV table) behind the `ndvm-search` binary.
//!
//! The co-search (`task`, `propose`, `validate`, `engine`, `observe`, `results`, `plots`,
//! `runcmd`) runs a YAML task end to end; the LLM proposer is not built yet.
//!
//! ```
//! use ndvm_core::Dialect;
//! use ndvm_search::batch;
//!
//! // One JSONL request in, one result line out: the value and its gradient for every parameter.
//! let line = batch::eval_line(r#"{"src": "(* p p 3)", "params": {"p": 2}}"#, Dialect::Default);
//! assert_eq!(line, r#"{"value":12.0,"grads":{"p":12.0}}"#);
//!
//! // Errors are lines too, located inside the source text.
//! let line = batch::eval_line(r#"{"src": "(+ p\n   y)", "params": {"p": 2}}"#, Dialect::Default);
//! assert!(line.starts_with(r#"{"error":"src:2:4: "#), "{line}");
//! ```
#![forbid(unsafe_code)]

pub mod batch;
pub mod begun;
pub mod calibratecmd;
pub mod engine;
pub mod error;
pub mod evalcmd;
pub mod events;
pub mod interrupt;
pub mod matrix_csv;
pub mod observe;
pub mod plots;
pub mod propose;
pub mod report;
pub mod results;
pub mod runcmd;
pub mod secret;
pub mod select;
pub mod selfhost;
pub mod slurmcmd;
pub mod source;
pub mod summary;
pub mod task;
pub mod textfile;
pub mod translatecmd;
pub mod validate;
pub use engine::worker;

pub use error::{Result, SearchError};
