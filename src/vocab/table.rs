//! A table as a kind hands it to the reports: plain strings, already scaled.

/// A table a kind contributes to text reports: plain strings, already scaled.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// What the table shows.
    pub title: String,
    /// Column names, with units (`median MB/s`).
    pub header: Vec<String>,
    /// Rows of cells.
    pub rows: Vec<Vec<String>>,
    /// Indexes of columns holding numbers, aligned right.
    pub numeric: Vec<usize>,
}
