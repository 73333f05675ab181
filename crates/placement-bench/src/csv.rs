//! CSV input through the `csv` crate (RFC 4180 quoting, CRLF, blank lines
//! skipped), with columns looked up by header name, extra columns ignored, and
//! errors that name file, line and column.

use crate::error::BenchError;
use csv::{ReaderBuilder, StringRecord, Trim};

/// A parsed CSV file.
#[derive(Debug)]
pub struct Table {
    file: String,
    header: StringRecord,
    /// (1-based line number, fields).
    rows: Vec<(usize, StringRecord)>,
}

/// One row, with what is needed to report errors about it.
#[derive(Clone, Copy, Debug)]
pub struct Row<'a> {
    table: &'a Table,
    line: usize,
    fields: &'a StringRecord,
}

impl Table {
    /// Parses `text`; `file` is used in error messages. Blank lines are
    /// skipped; the first non-blank line is the header; every row must have
    /// as many fields as the header.
    pub fn parse(file: &str, text: &str) -> Result<Self, BenchError> {
        // From the byte offset: the reader's own line count leaves out the
        // blank lines it skips, and a record's offset is before them.
        let bytes = text.as_bytes();
        let line_of = |position: Option<&csv::Position>| {
            let start = position.map_or(0, |p| usize::try_from(p.byte()).unwrap_or(usize::MAX));
            let first = bytes
                .iter()
                .skip(start)
                .position(|b| *b != b'\n' && *b != b'\r')
                .map_or(bytes.len(), |n| start + n);
            1 + bytes.iter().take(first).filter(|b| **b == b'\n').count()
        };
        let syntax = |e: csv::Error| BenchError::Csv {
            file: file.to_string(),
            line: line_of(e.position()),
            column: "-".to_string(),
            message: match e.kind() {
                csv::ErrorKind::UnequalLengths {
                    expected_len, len, ..
                } => format!("{len} fields where the header has {expected_len}"),
                _ => e.to_string(),
            },
        };
        let mut reader = ReaderBuilder::new()
            .trim(Trim::All)
            .from_reader(text.as_bytes());
        let header = reader.headers().map_err(syntax)?.clone();
        let mut rows = Vec::new();
        for record in reader.records() {
            let record = record.map_err(syntax)?;
            rows.push((line_of(record.position()), record));
        }
        Ok(Self {
            file: file.to_string(),
            header,
            rows,
        })
    }

    /// Reads and parses a file.
    pub fn read(path: &str) -> Result<Self, BenchError> {
        let text = std::fs::read_to_string(path).map_err(|source| BenchError::Io {
            file: path.to_string(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Fails unless every column in `required` is in the header.
    pub fn require(&self, required: &[&str]) -> Result<(), BenchError> {
        for column in required {
            if !self.header.iter().any(|h| h == *column) {
                return Err(BenchError::Csv {
                    file: self.file.clone(),
                    line: 1,
                    column: (*column).to_string(),
                    message: "missing column in the header".to_string(),
                });
            }
        }
        Ok(())
    }

    /// The data rows.
    pub fn rows(&self) -> impl Iterator<Item = Row<'_>> {
        self.rows.iter().map(|(line, fields)| Row {
            table: self,
            line: *line,
            fields,
        })
    }

    /// Number of data rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when there is no data row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

impl Row<'_> {
    /// An error about `column` of this row.
    pub fn error(&self, column: &str, message: impl Into<String>) -> BenchError {
        BenchError::Csv {
            file: self.table.file.clone(),
            line: self.line,
            column: column.to_string(),
            message: message.into(),
        }
    }

    /// The text of `column` (trimmed).
    pub fn text(&self, column: &str) -> Result<&str, BenchError> {
        let index = self
            .table
            .header
            .iter()
            .position(|h| h == column)
            .ok_or_else(|| self.error(column, "missing column in the header"))?;
        Ok(self.fields.get(index).unwrap_or(""))
    }

    /// The text of an optional `column`: empty when the header lacks it.
    pub fn optional_text(&self, column: &str) -> &str {
        self.table
            .header
            .iter()
            .position(|h| h == column)
            .and_then(|index| self.fields.get(index))
            .unwrap_or("")
    }

    /// A non-negative quantity. Decimals are rounded (traces sometimes
    /// write `1000.0`).
    pub fn quantity(&self, column: &str) -> Result<u64, BenchError> {
        let text = self.text(column)?;
        if text.is_empty() {
            return Err(self.error(column, "empty value; expected a number"));
        }
        if let Ok(v) = text.parse::<u64>() {
            return Ok(v);
        }
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() && v < 0.0 => {
                Err(self.error(column, format!("negative quantity {text}")))
            }
            Ok(v) if v.is_finite() && v <= u64::MAX as f64 => Ok(v.round() as u64),
            _ => Err(self.error(column, format!("not a number: {text:?}"))),
        }
    }

    /// A non-negative quantity that must fit in 32 bits.
    pub fn quantity_u32(&self, column: &str) -> Result<u32, BenchError> {
        let v = self.quantity(column)?;
        u32::try_from(v).map_err(|_| self.error(column, format!("{v} is too large")))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn quotes_and_extra_columns() {
        let t = Table::parse("f.csv", "a,b,c\n\"x,1\",\"say \"\"hi\"\"\",3\n\n4,5,6\n").unwrap();
        let rows: Vec<_> = t.rows().collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].text("a").unwrap(), "x,1");
        assert_eq!(rows[0].text("b").unwrap(), "say \"hi\"");
        assert_eq!(rows[1].quantity("c").unwrap(), 6);
    }

    #[test]
    fn errors_name_file_line_and_column() {
        let t = Table::parse("f.csv", "a,b\n1,2\n3,-4\n5,x\n").unwrap();
        let rows: Vec<_> = t.rows().collect();
        let e = rows[1].quantity("b").unwrap_err().to_string();
        assert_eq!(e, "f.csv:3: column b: negative quantity -4");
        let e = rows[2].quantity("b").unwrap_err().to_string();
        assert_eq!(e, "f.csv:4: column b: not a number: \"x\"");
        let e = t.require(&["a", "zz"]).unwrap_err().to_string();
        assert_eq!(e, "f.csv:1: column zz: missing column in the header");
        let e = Table::parse("g.csv", "a,b\n1,2\n\n3,4,5\n")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "g.csv:4: column -: 3 fields where the header has 2");
    }

    #[test]
    fn decimals_round_and_crlf_is_accepted() {
        let t = Table::parse("f.csv", "a\r\n1000.0\r\n").unwrap();
        assert_eq!(t.rows().next().unwrap().quantity("a").unwrap(), 1000);
    }
}
