//! Bounded reads of untrusted text files (task YAML, CSV tables, prompt templates): at most a
//! limit of bytes is read (so `/dev/zero` or a huge file costs limit + 1 bytes, never more), a
//! UTF-8 byte-order mark is stripped, and bytes that are not UTF-8 are an error naming the offset.
//! Also the one atomic write of result files ([`write_atomic`]).

use std::io::{Read, Write};
use std::path::Path;

use crate::error::{Result, SearchError};

/// Largest task file read (1 MiB): tasks are a few KiB of YAML.
pub const MAX_TASK_BYTES: u64 = 1024 * 1024;

/// Largest CSV file read by default (64 MiB, about a million rows of a few columns); a task
/// raises it with `data.max_bytes`.
pub const MAX_CSV_BYTES: u64 = 64 * 1024 * 1024;

/// Largest candidate cache read (256 MiB: a million llm answers with their provenance).
pub const MAX_CACHE_BYTES: u64 = 256 * 1024 * 1024;

/// How to get under [`MAX_CACHE_BYTES`] (the end of its error message).
pub const RAISE_CACHE_LIMIT: &str = "split the cache or start a new one";

/// Largest prompt template read (1 MiB).
pub const MAX_PROMPT_BYTES: u64 = 1024 * 1024;

/// Reads `path` as UTF-8 text of at most `limit` bytes; `raise` says how to raise the limit (it
/// ends the error message). A leading byte-order mark is dropped.
pub fn read(path: &Path, limit: u64, raise: &str) -> Result<String> {
    let read_err = |source| SearchError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > limit {
        return Err(SearchError::FileTooLarge {
            path: path.to_path_buf(),
            limit,
            raise: raise.to_string(),
        });
    }
    let start = if bytes.starts_with(b"\xef\xbb\xbf") {
        3
    } else {
        0
    };
    match String::from_utf8(bytes) {
        Ok(mut text) => {
            text.drain(..start);
            Ok(text)
        }
        Err(e) => Err(SearchError::NotUtf8 {
            path: path.to_path_buf(),
            offset: e.utf8_error().valid_up_to(),
        }),
    }
}

/// Writes `bytes` to `path` so that a crash or power loss leaves either the old file or the new
/// one, never a mix or an empty file: a temporary sibling is written and synced to disk, renamed
/// over `path`, and the folder is synced so the rename itself is durable.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let write_err = |source| SearchError::WriteFile {
        path: path.to_path_buf(),
        source,
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(write_err(e));
    }
    sync_parent(path).map_err(write_err)
}

/// Syncs the folder holding `path` (a rename is durable only once its folder is).
#[cfg(unix)]
fn sync_parent(path: &Path) -> std::io::Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::File::open(parent)?.sync_all()
}

/// Folders cannot be opened and synced on this platform; the rename is still atomic.
#[cfg(not(unix))]
fn sync_parent(_path: &Path) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("ndvm-textfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn bom_is_stripped_and_bad_bytes_and_sizes_are_errors() {
        let p = scratch("bom.csv", b"\xef\xbb\xbfx,y\n1,2\n");
        assert_eq!(read(&p, 100, "").unwrap(), "x,y\n1,2\n");
        let p = scratch("latin1.csv", b"x,y\n1,2\n\xe9,3\n");
        let e = read(&p, 100, "").unwrap_err().to_string();
        assert!(
            e.ends_with("latin1.csv: not UTF-8 (invalid byte at offset 8)"),
            "{e}"
        );
        let p = scratch("big.csv", &[b'1'; 101]);
        let e = read(&p, 100, "raise it with `k`").unwrap_err().to_string();
        assert!(
            e.ends_with("big.csv: larger than the limit of 100 bytes; raise it with `k`"),
            "{e}"
        );
        assert_eq!(read(&p, 101, "").unwrap().len(), 101);
        let e = read(Path::new("/dev/zero"), 1000, "x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("larger than the limit of 1000 bytes"), "{e}");
    }

    #[test]
    fn atomic_writes_replace_the_whole_file_and_leave_no_temporary() {
        let p = scratch("summary.json", b"old contents, longer than the new ones\n");
        write_atomic(&p, b"new\n").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new\n");
        let dir = p.parent().unwrap();
        let leftovers: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        let e = write_atomic(&dir.join("missing/summary.json"), b"x")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("cannot write ") && e.ends_with("missing/summary.json"),
            "{e}"
        );
    }
}
