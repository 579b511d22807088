//! Numeric CSV files read into shared matrices (`--data obs=obs.csv`): comma separated, an optional
//! header line, every row the same length, errors with `file:line`.

use std::path::Path;

use crate::error::{Result, SearchError};
use crate::textfile;

/// A row-major matrix read from a CSV file.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    /// Row count (data lines).
    pub rows: usize,
    /// Column count (fields per line).
    pub cols: usize,
    /// `rows * cols` values, row-major.
    pub data: Vec<f64>,
    /// Column names from the header line, if the file had one.
    pub header: Option<Vec<String>>,
    /// One-based line number of each data row, for messages.
    pub lines: Vec<usize>,
}

/// Reads `path` as a numeric CSV matrix of at most [`textfile::MAX_CSV_BYTES`] bytes.
pub fn read(path: &Path) -> Result<Matrix> {
    read_limited(
        path,
        textfile::MAX_CSV_BYTES,
        "split the file or sample it down",
    )
}

/// Reads `path` as a numeric CSV matrix of at most `limit` bytes; `raise` (lowercase) says how to
/// raise the limit in the error. A UTF-8 byte-order mark is dropped; other bytes that are not
/// UTF-8 are an error naming the offset.
pub fn read_limited(path: &Path, limit: u64, raise: &str) -> Result<Matrix> {
    let text = textfile::read(path, limit, raise)?;
    parse(path, &text)
}

/// Parses CSV `text` (read from `path`, which is only used in error messages).
///
/// Rules: fields are separated by commas and trimmed; blank lines are skipped; the first non-blank
/// line is a header when none of its fields is a number; every other line must hold as many numbers
/// as the first row (and the header). Numbers use Rust's `f64` syntax (`1.5`, `-2e-3`, `inf`, `nan`).
pub fn parse(path: &Path, text: &str) -> Result<Matrix> {
    let err = |line: usize, message: String| SearchError::Csv {
        path: path.to_path_buf(),
        line: Some(line),
        message,
    };
    let mut header: Option<Vec<String>> = None;
    let mut cols: Option<usize> = None;
    let mut rows = 0;
    let mut data = Vec::new();
    let mut lines = Vec::new();
    let mut seen_first = false;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (idx, raw) in text.lines().enumerate() {
        let line_no = idx + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if !seen_first {
            seen_first = true;
            if fields.iter().all(|f| f.parse::<f64>().is_err()) {
                header = Some(fields.iter().map(|f| f.to_string()).collect());
                cols = Some(fields.len());
                continue;
            }
        }
        let expected = *cols.get_or_insert(fields.len());
        if fields.len() != expected {
            return Err(err(
                line_no,
                format!("expected {expected} fields, found {}", fields.len()),
            ));
        }
        for (col_idx, field) in fields.iter().enumerate() {
            if field.is_empty() {
                return Err(err(line_no, format!("column {}: empty field", col_idx + 1)));
            }
            let x = field.parse::<f64>().map_err(|_| {
                err(
                    line_no,
                    format!("column {}: `{field}` is not a number", col_idx + 1),
                )
            })?;
            data.push(x);
        }
        rows += 1;
        lines.push(line_no);
    }
    if rows == 0 {
        return Err(SearchError::Csv {
            path: path.to_path_buf(),
            line: None,
            message: "no data rows".to_string(),
        });
    }
    Ok(Matrix {
        rows,
        cols: cols.unwrap_or(0),
        data,
        header,
        lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> std::result::Result<Matrix, String> {
        parse(Path::new("m.csv"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn header_and_rows() {
        let m = check("a, b\n1,2\n\n3 , 4.5\n").unwrap();
        assert_eq!((m.rows, m.cols), (2, 2));
        assert_eq!(m.data, vec![1.0, 2.0, 3.0, 4.5]);
        assert_eq!(m.header, Some(vec!["a".to_string(), "b".to_string()]));
    }

    #[test]
    fn a_byte_order_mark_is_not_part_of_the_header() {
        let m = check("\u{feff}x,y\n1,2\n\n3,4\n").unwrap();
        assert_eq!(m.header, Some(vec!["x".to_string(), "y".to_string()]));
        assert_eq!(m.lines, [2, 4]);
    }

    #[test]
    fn no_header() {
        let m = check("1,2,3\r\n4,5,6\r\n").unwrap();
        assert_eq!((m.rows, m.cols, m.header), (2, 3, None));
    }

    #[test]
    fn errors_name_file_and_line() {
        assert_eq!(
            check("x,y\n1,2\n3,4,5\n").unwrap_err(),
            "m.csv:3: expected 2 fields, found 3"
        );
        assert_eq!(
            check("x,y,z\n1,2\n").unwrap_err(),
            "m.csv:2: expected 3 fields, found 2"
        );
        assert_eq!(
            check("1,2\n3,oops\n").unwrap_err(),
            "m.csv:2: column 2: `oops` is not a number"
        );
        assert_eq!(
            check("1,,2\n").unwrap_err(),
            "m.csv:1: column 2: empty field"
        );
        assert_eq!(check("a,b\n\n").unwrap_err(), "m.csv: no data rows");
    }
}
