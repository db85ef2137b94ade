//! The CSV report: one row per item, with the columns taken from the items' own JSON
//! fields, so CSV and JSON cannot drift apart.

use serde_json::Value;

use crate::document::RunDocument;

/// Every item of `runs` as CSV rows, preceded by the run, workload, kind and target.
pub fn render(runs: &[RunDocument]) -> anyhow::Result<Vec<u8>> {
    let mut columns: Vec<String> = Vec::new();
    for item in runs
        .iter()
        .flat_map(|r| &r.workloads)
        .flat_map(|w| &w.items)
    {
        if let Value::Object(fields) = item {
            for key in fields.keys() {
                if !columns.contains(key) {
                    columns.push(key.clone());
                }
            }
        }
    }
    let mut writer = csv::Writer::from_writer(Vec::new());
    let lead = ["run_id", "workload", "kind", "target"];
    writer.write_record(
        lead.iter()
            .map(|s| s.to_string())
            .chain(columns.iter().cloned()),
    )?;
    for run in runs {
        for (index, workload) in run.workloads.iter().enumerate() {
            for item in &workload.items {
                let mut record = vec![
                    run.run_id.map(|id| id.to_string()).unwrap_or_default(),
                    index.to_string(),
                    workload.kind.clone(),
                    workload.target.clone(),
                ];
                record.extend(columns.iter().map(|key| cell(item.get(key))));
                writer.write_record(record)?;
            }
        }
    }
    Ok(writer.into_inner()?)
}

/// A JSON value as one CSV cell: arrays joined with `;`, null as empty.
fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(values)) => values
            .iter()
            .map(|v| cell(Some(v)))
            .collect::<Vec<_>>()
            .join(";"),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells() {
        assert_eq!(
            cell(Some(&serde_json::json!(["cached", "small"]))),
            "cached;small"
        );
        assert_eq!(cell(Some(&Value::Null)), "");
        assert_eq!(cell(Some(&serde_json::json!(1.5))), "1.5");
        assert_eq!(cell(Some(&serde_json::json!("write"))), "write");
    }
}
