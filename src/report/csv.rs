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

/// Every workload's rate series, one row per sample, on the group's common clock: the
/// log people keep of a copy's speed, ready for a spreadsheet or gnuplot.
pub fn series(run: &RunDocument) -> anyhow::Result<Vec<u8>> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer.write_record([
        "run_id",
        "workload",
        "target",
        "t_s",
        "bytes",
        "ops",
        "bytes_per_sec",
    ])?;
    for (index, workload) in run.workloads.iter().enumerate() {
        let Some(series) = &workload.series else {
            continue;
        };
        let rates = series.bytes_per_sec();
        for (i, &t) in series.t_s.iter().enumerate() {
            writer.write_record([
                run.run_id.map(|id| id.to_string()).unwrap_or_default(),
                index.to_string(),
                workload.target.clone(),
                format!("{t:.6}"),
                series.bytes[i].to_string(),
                series.ops.get(i).map(|o| o.to_string()).unwrap_or_default(),
                format!("{:.1}", rates[i]),
            ])?;
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
