//! Source locations: byte-range `Span`s and the `LineIndex` that maps byte offsets to line and column.

use ndvm_core::SrcSpan;

/// A byte range `[start, end)` in one source text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// A span from byte offsets, saturating at `u32::MAX` for (absurdly) large sources.
    pub fn new(start: usize, end: usize) -> Self {
        Span {
            start: to_u32(start),
            end: to_u32(end.max(start)),
        }
    }

    /// The empty span at `offset`.
    pub fn at(offset: usize) -> Self {
        Span::new(offset, offset)
    }

    /// The smallest span covering both `self` and `other`.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// Length in bytes.
    pub fn len(self) -> u32 {
        self.end.saturating_sub(self.start)
    }

    /// True when the span covers no bytes.
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }
}

fn to_u32(x: usize) -> u32 {
    u32::try_from(x).unwrap_or(u32::MAX)
}

impl From<SrcSpan> for Span {
    fn from(s: SrcSpan) -> Self {
        Span {
            start: s.start,
            end: s.end,
        }
    }
}

impl From<Span> for SrcSpan {
    fn from(s: Span) -> Self {
        SrcSpan {
            start: s.start,
            end: s.end,
        }
    }
}

/// Maps byte offsets in one source text to 1-based line and column (columns count chars).
#[derive(Clone, Debug)]
pub struct LineIndex<'src> {
    src: &'src str,
    /// Byte offset where each line starts; always begins with 0.
    line_starts: Vec<usize>,
}

impl<'src> LineIndex<'src> {
    /// Indexes the line starts of `src` (lines end at `\n`).
    pub fn new(src: &'src str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(src.match_indices('\n').map(|(idx, _)| idx + 1));
        LineIndex { src, line_starts }
    }

    /// The 1-based `(line, col)` of `byte_offset`; offsets past the end clamp to the end, offsets
    /// inside a multi-byte char count as that char.
    pub fn line_col(&self, byte_offset: u32) -> (u32, u32) {
        let offset = self.clamp(byte_offset as usize);
        let line_idx = self
            .line_starts
            .partition_point(|&start| start <= offset)
            .saturating_sub(1);
        let line_start = self.line_starts.get(line_idx).copied().unwrap_or(0);
        let col = self
            .src
            .get(line_start..offset)
            .map_or(0, |text| text.chars().count());
        (to_u32(line_idx + 1), to_u32(col + 1))
    }

    /// The text of 1-based `line` without its line terminator (`\n` or `\r\n`); empty when out of
    /// range.
    pub fn line_text(&self, line: u32) -> &'src str {
        let Some(line_idx) = (line as usize).checked_sub(1) else {
            return "";
        };
        let Some(&start) = self.line_starts.get(line_idx) else {
            return "";
        };
        let end = self
            .line_starts
            .get(line_idx + 1)
            .map_or(self.src.len(), |&next| next - 1);
        let text = self.src.get(start..end).unwrap_or("");
        text.strip_suffix('\r').unwrap_or(text)
    }

    /// Number of lines (a trailing `\n` starts a last, empty line).
    pub fn n_lines(&self) -> usize {
        self.line_starts.len()
    }

    fn clamp(&self, offset: usize) -> usize {
        let mut offset = offset.min(self.src.len());
        while !self.src.is_char_boundary(offset) {
            offset -= 1;
        }
        offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_chars_from_one() {
        let src = "ab\nçd e\n\nx";
        let index = LineIndex::new(src);
        assert_eq!(index.line_col(0), (1, 1));
        assert_eq!(index.line_col(2), (1, 3));
        assert_eq!(index.line_col(3), (2, 1));
        // `ç` is two bytes; `d` is the second char.
        assert_eq!(index.line_col(5), (2, 2));
        assert_eq!(index.line_col(4), (2, 1));
        assert_eq!(index.line_col(9), (3, 1));
        assert_eq!(index.line_col(10), (4, 1));
        assert_eq!(index.line_col(11), (4, 2));
        assert_eq!(index.line_col(1000), (4, 2));
        assert_eq!(index.line_text(2), "çd e");
        assert_eq!(index.line_text(3), "");
        assert_eq!(index.line_text(9), "");
        assert_eq!(index.n_lines(), 4);
    }

    #[test]
    fn crlf_lines_and_empty_source() {
        let index = LineIndex::new("a\r\nb");
        assert_eq!(index.line_text(1), "a");
        assert_eq!(index.line_col(3), (2, 1));
        let empty = LineIndex::new("");
        assert_eq!(empty.line_col(0), (1, 1));
        assert_eq!(empty.line_text(1), "");
    }

    #[test]
    fn span_converts_to_and_from_core() {
        let span = Span::new(3, 7);
        let core: SrcSpan = span.into();
        assert_eq!(Span::from(core), span);
        assert_eq!(span.len(), 4);
        assert_eq!(Span::new(5, 2), Span { start: 5, end: 5 });
        assert_eq!(Span::new(1, 2).to(Span::new(4, 6)), Span::new(1, 6));
    }
}
