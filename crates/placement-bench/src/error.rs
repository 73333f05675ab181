//! Errors of the benchmark: each names what to fix.

use thiserror::Error;

use tessera_core::placement::FleetError;

/// Anything that stops a benchmark run.
#[derive(Debug, Error)]
pub enum BenchError {
    /// A CSV value or header is wrong.
    #[error("{file}:{line}: column {column}: {message}")]
    Csv {
        /// File name as given.
        file: String,
        /// 1-based line number.
        line: usize,
        /// Column name (as in the header).
        column: String,
        /// What is wrong.
        message: String,
    },
    /// The file could not be read.
    #[error("{file}: {source}")]
    Io {
        /// File name as given.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The input folder does not hold what the mode needs.
    #[error("{0}")]
    Usage(String),
    /// The fleet could not be indexed.
    #[error("invalid fleet: {0}")]
    Fleet(#[from] FleetError),
}
