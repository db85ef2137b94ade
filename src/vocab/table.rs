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

impl Table {
    /// The same table without column `column`.
    pub fn without_column(mut self, column: usize) -> Table {
        self.header.remove(column);
        for row in &mut self.rows {
            row.remove(column);
        }
        self.numeric = self
            .numeric
            .iter()
            .filter(|&&c| c != column)
            .map(|&c| if c > column { c - 1 } else { c })
            .collect();
        self
    }

    /// The same table with only the columns named in `keep`, in their order here.
    pub fn keep_columns(self, keep: &[&str]) -> Table {
        let kept: Vec<usize> = (0..self.header.len())
            .filter(|&c| keep.contains(&self.header[c].as_str()))
            .collect();
        let pick = |row: &[String]| kept.iter().map(|&c| row[c].clone()).collect();
        Table {
            header: pick(&self.header),
            rows: self.rows.iter().map(|row| pick(row)).collect(),
            numeric: (0..kept.len())
                .filter(|&n| self.numeric.contains(&kept[n]))
                .collect(),
            title: self.title,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_columns_keep_their_cells_and_alignment() {
        let table = Table {
            title: "t".into(),
            header: ["a", "b", "c"].map(String::from).to_vec(),
            rows: vec![["1", "2", "3"].map(String::from).to_vec()],
            numeric: vec![1, 2],
        };
        let kept = table.keep_columns(&["a", "c"]);
        assert_eq!(kept.header, ["a", "c"]);
        assert_eq!(kept.rows, [["1", "3"]]);
        assert_eq!(kept.numeric, [1]);
        let without = kept.without_column(0);
        assert_eq!(without.header, ["c"]);
        assert_eq!(without.rows, [["3"]]);
        assert_eq!(without.numeric, [0]);
    }
}
