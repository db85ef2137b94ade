//! The HTML report of a stored run: one self-contained page (inline CSS and SVG, no
//! script, nothing fetched) that reads on a phone and prints. It shows what the run's
//! document holds and nothing else, so a report of an old run made from the database
//! is the page that run made when it ended.

mod charts;
mod figures;

use std::fmt::Write;

use super::layout::{self, Detail};
use crate::document::{RunDocument, WorkloadRecord};
use crate::vocab::units::format_bytes;
use crate::vocab::{Chart, Table};
use crate::workload::{self, DecodeError, Decoded};

/// The page's style: narrow screens get one column, print gets no backgrounds.
const STYLE: &str = "
body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:#1b1f24;margin:0;background:#f6f7f9}
main{max-width:960px;margin:0 auto;padding:16px}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.2em;margin:1.4em 0 .4em;border-bottom:1px solid #d0d4da}
h3{font-size:1.05em;margin:1em 0 .3em}
.meta{color:#57606a}
section{background:#fff;border:1px solid #d0d4da;border-radius:8px;padding:8px 14px;margin:12px 0}
figure{margin:8px 0;overflow-x:auto}figure svg{width:100%;min-width:600px;height:auto;display:block}
.table{overflow-x:auto}table{border-collapse:collapse;font-size:.9em;margin:6px 0}
th,td{padding:3px 8px;border-bottom:1px solid #e4e7eb;text-align:left;white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums}caption{text-align:left;font-weight:600;padding:4px 0}
ul.verdicts{list-style:none;padding:0}ul.verdicts code{font-family:ui-monospace,monospace;font-size:.92em;background:#e8ebef;padding:0 .25em;border-radius:3px}ul.verdicts li{padding:6px 10px;margin:6px 0;border-left:4px solid #8c959f;background:#f6f8fa;overflow-wrap:anywhere}
li.warning{border-color:#d4a72c!important}li.error{border-color:#cf222e!important}
li.unmeasured{color:#57606a}
table.summary{font-size:1em;margin:0}table.summary th{padding:4px 12px 4px 0;vertical-align:top;border:none}
table.summary td{white-space:normal;border:none;padding:4px 0}
code{font-size:.9em}
@media print{body{background:#fff;font-size:11px}section{border:none;padding:0}figure{break-inside:avoid}
main{max-width:none}.table,figure{overflow:visible}figure svg{min-width:0}th,td{white-space:normal;padding:2px 4px}}
";

/// The run as a self-contained HTML page.
pub fn render(run: &Decoded) -> Result<String, DecodeError> {
    let doc = run.doc;
    let mut page = String::new();
    let title = format!(
        "ratelab {} · {}",
        doc.verb,
        doc.run_id
            .map_or("not stored".into(), |id| format!("run {id}"))
    );
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head><body><main>",
        escape(&title)
    );
    header(&mut page, doc, &title);
    summary(&mut page, run)?;
    verdicts(&mut page, run)?;
    limits(&mut page, run)?;
    together(&mut page, doc);
    for index in 0..doc.workloads.len() {
        workload_section(&mut page, run, index)?;
    }
    if let Some(table) = super::contention::table(doc) {
        page.push_str("<section><h2>Contention</h2>");
        page.push_str(&html_table(&table));
        page.push_str("</section>");
    }
    page.push_str("</main></body></html>\n");
    Ok(page)
}

fn header(page: &mut String, doc: &RunDocument, title: &str) {
    let m = &doc.machine;
    let _ = write!(
        page,
        "<header><h1>{}</h1><p class=\"meta\">{} · {}{} · started {}{}</p>\
         <p class=\"meta\">{} · {} · {} CPUs · {} memory · Linux {}{}</p></header>",
        escape(title),
        escape(doc.status.as_str()),
        escape(&doc.verb),
        doc.incomplete_reason
            .as_deref()
            .map(|r| format!(" ({})", escape(r)))
            .unwrap_or_default(),
        escape(&doc.started_at),
        doc.label
            .as_deref()
            .map(|l| format!(" · label <b>{}</b>", escape(l)))
            .unwrap_or_default(),
        escape(&m.hostname),
        escape(m.cpu_model.as_deref().unwrap_or("unknown CPU")),
        m.logical_cpus,
        m.memory_bytes.map_or("unknown".into(), format_bytes),
        escape(&m.kernel),
        m.virtualization
            .as_deref()
            .map(|v| format!(" · virtual machine ({})", escape(v)))
            .unwrap_or_default(),
    );
}

/// The answer first: each part's headline figures, the step that limits the task, and
/// what moved since the last profile.
fn summary(page: &mut String, run: &Decoded) -> Result<(), DecodeError> {
    let lines = layout::summary(run)?;
    if lines.is_empty() {
        return Ok(());
    }
    page.push_str("<section class=\"summary\"><h2>Summary</h2><table class=\"summary\">");
    for line in &lines {
        let _ = write!(
            page,
            "<tr><th>{}</th><td>{}</td></tr>",
            escape(&line.part),
            escape(&line.text)
        );
    }
    page.push_str("</table></section>");
    Ok(())
}

fn verdicts(page: &mut String, run: &Decoded) -> Result<(), DecodeError> {
    let doc = run.doc;
    let listing = layout::listing(run, Detail::Full)?;
    if listing.verdicts.is_empty() && listing.unmeasured.is_none() {
        return Ok(());
    }
    page.push_str("<section><h2>Verdicts</h2><ul class=\"verdicts\">");
    for verdict in &listing.verdicts {
        let class = layout::severity_name(verdict.severity);
        let about = verdict
            .workload
            .and_then(|w| doc.workloads.get(w).map(|r| (w, r)))
            .map(|(w, r)| {
                format!(
                    " <span class=\"meta\">({} {})</span>",
                    escape(&r.kind),
                    w + 1
                )
            })
            .unwrap_or_default();
        let _ = write!(
            page,
            "<li class=\"{class}\"><b>{}</b>{about}: {}</li>",
            escape(&verdict.code),
            with_code(&verdict.message)
        );
    }
    if let Some(line) = &listing.unmeasured {
        let _ = write!(page, "<li class=\"unmeasured\">{}</li>", with_code(line));
    }
    page.push_str("</ul></section>");
    Ok(())
}

/// The physical limit of each workload's link, as the platform probes found it.
fn limits(page: &mut String, run: &Decoded) -> Result<(), DecodeError> {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (index, record) in run.doc.workloads.iter().enumerate() {
        let Some(view) = run.view(index)? else {
            continue;
        };
        if let Some(link) = view.link_limit() {
            rows.push(vec![
                format!("{} {}", record.kind, index + 1),
                record.target.clone(),
                link.limit,
                link.from,
            ]);
        }
    }
    if rows.is_empty() {
        return Ok(());
    }
    let table = Table {
        title: "physical limits of the links measured".into(),
        header: ["workload", "target", "limit", "from"]
            .map(String::from)
            .to_vec(),
        rows,
        numeric: vec![2],
    };
    page.push_str("<section><h2>Machine and link limits</h2>");
    page.push_str(&html_table(&table));
    page.push_str("</section>");
    Ok(())
}

/// One chart per group of workloads that ran at once (same clock start).
fn together(page: &mut String, doc: &RunDocument) {
    let mut groups: Vec<(f64, Vec<(usize, &WorkloadRecord)>)> = Vec::new();
    for (index, record) in doc.workloads.iter().enumerate() {
        let Some(series) = &record.series else {
            continue;
        };
        match groups
            .iter_mut()
            .find(|(clock, _)| (clock - series.clock_unix_s).abs() < 1e-6)
        {
            Some((_, members)) => members.push((index, record)),
            None => groups.push((series.clock_unix_s, vec![(index, record)])),
        }
    }
    let shared: Vec<String> = groups
        .iter()
        .filter(|(_, members)| members.len() > 1)
        .filter_map(|(_, members)| figures::series(members).and_then(|c| c.svg()))
        .collect();
    if shared.is_empty() {
        return;
    }
    page.push_str("<section><h2>Workloads that ran together</h2>");
    for svg in shared {
        let _ = write!(page, "<figure>{svg}</figure>");
    }
    page.push_str("</section>");
}

fn workload_section(page: &mut String, run: &Decoded, index: usize) -> Result<(), DecodeError> {
    let record = &run.doc.workloads[index];
    let _ = write!(
        page,
        "<section class=\"workload {}\"><h2>{}</h2>",
        escape(&record.kind),
        escape(&layout::workload_heading(index, record))
    );
    let mut charts: Vec<Chart> = match run.view(index)? {
        Some(view) => view.charts(),
        None => Vec::new(),
    };
    if workload::kind(&record.kind).is_some_and(|k| k.rate_series()) {
        charts.extend(figures::series(&[(index, record)]));
    }
    for svg in charts.iter().filter_map(Chart::svg) {
        let _ = write!(page, "<figure>{svg}</figure>");
    }
    match layout::workload_tables(run, index, Detail::Full)? {
        Some(tables) => {
            for table in &tables {
                page.push_str(&html_table(table));
            }
        }
        None => {
            let _ = write!(page, "<p>{}</p>", escape(&layout::unknown_kind(record)));
        }
    }
    for warning in &record.warnings {
        let _ = write!(page, "<p class=\"meta\">warning: {}</p>", escape(warning));
    }
    page.push_str("</section>");
    Ok(())
}

/// A table as HTML, numbers aligned right, scrolling sideways on narrow screens.
fn html_table(table: &Table) -> String {
    let mut out = String::from("<div class=\"table\"><table>");
    let _ = write!(
        out,
        "<caption>{}</caption><thead><tr>",
        with_code(&table.title)
    );
    for cell in &table.header {
        let _ = write!(out, "<th>{}</th>", escape(cell));
    }
    out.push_str("</tr></thead><tbody>");
    for row in &table.rows {
        out.push_str("<tr>");
        for (column, cell) in row.iter().enumerate() {
            let class = if table.numeric.contains(&column) {
                " class=\"n\""
            } else {
                ""
            };
            let _ = write!(out, "<td{class}>{}</td>", escape(cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>");
    out
}

/// `text` escaped, with each span between two backticks (a command, a flag, a value to
/// type) set as code: `--seconds 60` reads as code, not as quoted marks.
fn with_code(text: &str) -> String {
    let spans: Vec<&str> = text.split('`').collect();
    let mut out = String::with_capacity(text.len() + 16);
    for (index, span) in spans.iter().enumerate() {
        // A span after an odd count of backticks is code where another closes it; the
        // last backtick of an odd count stays as it is.
        let opened = index % 2 == 1;
        if opened && index + 1 < spans.len() {
            let _ = write!(out, "<code>{}</code>", escape(span));
        } else {
            if opened {
                out.push('`');
            }
            out.push_str(&escape(span));
        }
    }
    out
}

/// Text made safe for HTML content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_in_backticks_are_code_and_a_lone_backtick_stays() {
        assert_eq!(
            with_code("give `--seconds 60` or `<x>`, not `this"),
            "give <code>--seconds 60</code> or <code>&lt;x&gt;</code>, not `this"
        );
        assert_eq!(with_code("plain & simple"), "plain &amp; simple");
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
