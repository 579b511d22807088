//! Numeric CSV tables (task data, `calibrate` tables, `--data obs=obs.csv` matrices), read with
//! the `csv` crate: quoted fields (R's `write.csv` writes `"x","y"`), a chosen delimiter, an
//! optional header line, every row the same length, errors naming the file, line and column.

use std::path::Path;

use crate::error::{CsvProblem, Result, SearchError};
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

impl Matrix {
    /// The header, or [`CsvProblem::NoHeader`] (located at the first line) for `path`.
    pub fn require_header(&self, path: &Path) -> Result<&[String]> {
        let header = self.header.as_deref().ok_or_else(|| SearchError::Csv {
            path: path.to_path_buf(),
            line: Some(1),
            problem: CsvProblem::NoHeader,
        })?;
        for (i, name) in header.iter().enumerate() {
            if header[..i].contains(name) {
                return Err(SearchError::Csv {
                    path: path.to_path_buf(),
                    line: Some(1),
                    problem: CsvProblem::DuplicateColumn { name: name.clone() },
                });
            }
        }
        Ok(header)
    }

    /// The values of column `j`, top to bottom.
    pub fn column(&self, j: usize) -> Vec<f64> {
        self.data
            .chunks(self.cols.max(1))
            .map(|row| row[j])
            .collect()
    }
}

/// The field separator of files whose task does not set `data.delimiter`.
pub const COMMA: u8 = b',';

/// Reads `path` as a comma-separated numeric matrix of at most [`textfile::MAX_CSV_BYTES`] bytes.
pub fn read(path: &Path) -> Result<Matrix> {
    read_limited(
        path,
        textfile::MAX_CSV_BYTES,
        "split the file or sample it down",
        COMMA,
    )
}

/// Reads `path` as a numeric CSV matrix of at most `limit` bytes with fields separated by
/// `delimiter`; `raise` (lowercase) says how to raise the limit in the error. A UTF-8 byte-order
/// mark is dropped; other bytes that are not UTF-8 are an error naming the offset.
pub fn read_limited(path: &Path, limit: u64, raise: &str, delimiter: u8) -> Result<Matrix> {
    let text = textfile::read(path, limit, raise)?;
    parse(path, &text, delimiter)
}

/// Parses CSV `text` (read from `path`, which is only used in error messages).
///
/// Rules: fields are separated by `delimiter`, may be quoted (`"x"`, `"a ""b"""`) and are trimmed;
/// blank lines are skipped; the first non-blank line is a header when none of its fields is a
/// number; every other line must hold as many numbers as the first row (and the header). Numbers
/// use Rust's `f64` syntax (`1.5`, `-2e-3`, `inf`, `nan`).
pub fn parse(path: &Path, text: &str, delimiter: u8) -> Result<Matrix> {
    let err = |line: usize, problem: CsvProblem| SearchError::Csv {
        path: path.to_path_buf(),
        line: Some(line),
        problem,
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .delimiter(delimiter)
        .from_reader(text.as_bytes());
    let mut m = Matrix {
        rows: 0,
        cols: 0,
        data: Vec::new(),
        header: None,
        lines: Vec::new(),
    };
    let mut cols: Option<usize> = None;
    let mut record = csv::StringRecord::new();
    let mut lines = LineCounter::default();
    loop {
        let at = reader.position().byte() as usize;
        match reader.read_record(&mut record) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                let at = e.position().map_or(at, |p| p.byte() as usize);
                let line = lines.line_at(text.as_bytes(), at);
                return Err(err(
                    line,
                    CsvProblem::Malformed {
                        message: e.to_string(),
                    },
                ));
            }
        }
        let at = record.position().map_or(at, |p| p.byte() as usize);
        let line_no = lines.line_at(text.as_bytes(), at);
        if record.iter().all(str::is_empty) {
            continue;
        }
        if cols.is_none() && record.iter().all(|f| f.parse::<f64>().is_err()) {
            m.header = Some(record.iter().map(str::to_string).collect());
            cols = Some(record.len());
            continue;
        }
        let expected = *cols.get_or_insert(record.len());
        if record.len() != expected {
            let found = record.len();
            return Err(err(line_no, CsvProblem::FieldCount { expected, found }));
        }
        for (j, field) in record.iter().enumerate() {
            let column = j + 1;
            if field.is_empty() {
                return Err(err(line_no, CsvProblem::EmptyField { column }));
            }
            let x = field.parse::<f64>().map_err(|_| {
                let field = field.to_string();
                err(line_no, CsvProblem::NotANumber { column, field })
            })?;
            m.data.push(x);
        }
        m.rows += 1;
        m.lines.push(line_no);
    }
    if m.rows == 0 {
        return Err(SearchError::Csv {
            path: path.to_path_buf(),
            line: None,
            problem: CsvProblem::NoRows,
        });
    }
    m.cols = cols.unwrap_or(0);
    Ok(m)
}

/// Line numbers from byte offsets. The reader's own line count is off by the blank lines before
/// a record (rust-csv issue 208), so lines are counted here, moving forward through the text.
#[derive(Debug)]
struct LineCounter {
    /// Bytes counted so far.
    byte: usize,
    /// The one-based line at `byte`.
    line: usize,
}

impl Default for LineCounter {
    fn default() -> Self {
        LineCounter { byte: 0, line: 1 }
    }
}

impl LineCounter {
    /// The line of the record the reader placed at byte `at` (line breaks it placed before the
    /// record's first byte are skipped: a record never starts with one).
    fn line_at(&mut self, text: &[u8], at: usize) -> usize {
        let mut start = at.min(text.len());
        while start < text.len() && matches!(text[start], b'\r' | b'\n') {
            start += 1;
        }
        if start > self.byte {
            self.line += text[self.byte..start]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            self.byte = start;
        }
        self.line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> std::result::Result<Matrix, String> {
        parse(Path::new("m.csv"), text, COMMA).map_err(|e| e.to_string())
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
        let m = check("\n\r\n1,2\n  \n\n\"3\n\",4\n5,6\n").unwrap();
        assert_eq!(m.lines, [3, 6, 8]);
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
        assert_eq!(
            check("x,y\n1,2\n\"3,4\n").unwrap_err(),
            "m.csv:3: expected 2 fields, found 1"
        );
    }

    #[test]
    fn quoted_headers_and_fields_as_r_writes_them() {
        // `write.csv(data.frame(x = 1:2, y = c(0.5, 2)), row.names = FALSE)` in R.
        let m = check("\"x\",\"y\"\n1,0.5\n2,2\n").unwrap();
        assert_eq!(m.header, Some(vec!["x".to_string(), "y".to_string()]));
        assert_eq!(m.data, vec![1.0, 0.5, 2.0, 2.0]);
        let m = check("\"a, b\",\"say \"\"hi\"\"\"\n\"1\", 2\n").unwrap();
        assert_eq!(
            m.header,
            Some(vec!["a, b".to_string(), "say \"hi\"".to_string()])
        );
        assert_eq!(m.data, vec![1.0, 2.0]);
    }

    #[test]
    fn other_delimiters() {
        let m = parse(Path::new("m.tsv"), "x\ty\n1\t2\n", b'\t').unwrap();
        assert_eq!(
            (m.header.unwrap(), m.data),
            (vec!["x".into(), "y".into()], vec![1.0, 2.0])
        );
        let m = parse(Path::new("m.csv"), "x;y\n1,5;2\n", b';');
        assert_eq!(
            m.unwrap_err().to_string(),
            "m.csv:2: column 1: `1,5` is not a number"
        );
    }

    #[test]
    fn headers_must_be_distinct() {
        let m = check("x,x\n1,2\n").unwrap();
        assert_eq!(
            m.require_header(Path::new("m.csv"))
                .unwrap_err()
                .to_string(),
            "m.csv:1: column `x` appears twice"
        );
        let m = check("1,2\n").unwrap();
        assert_eq!(
            m.require_header(Path::new("m.csv"))
                .unwrap_err()
                .to_string(),
            "m.csv:1: the first line must name the columns"
        );
    }
}
