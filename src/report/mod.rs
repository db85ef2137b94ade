//! Reports: views of a stored run. Each format turns a [`RunDocument`] into bytes;
//! [`emit`] alone decides whether they go to a file or to stdout.

pub mod compare;
mod contention;
pub mod csv;
pub mod fleet;
pub mod html;
pub mod json;
pub mod layout;
pub mod markdown;
mod series;
pub mod terminal;

use std::io::Write;
use std::path::Path;

use crate::document::RunDocument;
use crate::workload::Decoded;

/// Formats a run can be exported in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The summary, verdicts and tables for people, at a level of detail.
    Table(layout::Detail),
    /// The run document as JSON (docs/json.md).
    Json,
    /// One row per item.
    Csv,
    /// One row per sample of every workload's rate series.
    SeriesCsv,
}

/// Renders a run in `format`.
pub fn render(doc: &RunDocument, format: Format) -> anyhow::Result<Vec<u8>> {
    Ok(match format {
        Format::Table(_) => render_run(&Decoded::of(doc), format)?,
        Format::Json => json::render(doc),
        Format::Csv => csv::render(std::slice::from_ref(doc))?,
        Format::SeriesCsv => csv::series(doc)?,
    })
}

/// Renders a run whose workloads are already decoded in `format`.
pub fn render_run(run: &Decoded, format: Format) -> anyhow::Result<Vec<u8>> {
    match format {
        Format::Table(detail) => Ok(terminal::render(run, detail)?.into_bytes()),
        _ => render(run.doc, format),
    }
}

/// Writes report bytes to `out` (`-` is stdout), or to stdout when `out` is `None`.
pub fn emit(bytes: &[u8], out: Option<&Path>) -> anyhow::Result<()> {
    emit_to(bytes, out, false)
}

/// Writes rendered output to `out` (`-` is stdout, as for `results report --out -`),
/// or else to stderr where `stderr` says (a verb whose stdout belongs to a command it
/// runs), or else to stdout.
pub fn emit_to(bytes: &[u8], out: Option<&Path>, stderr: bool) -> anyhow::Result<()> {
    use anyhow::Context as _;
    match out {
        Some(path) if path.as_os_str() != "-" => {
            std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
        }
        None if stderr => {
            let mut stderr = std::io::stderr().lock();
            stderr
                .write_all(bytes)
                .and_then(|()| stderr.flush())
                .context("cannot write to stderr")
        }
        _ => {
            let mut stdout = std::io::stdout().lock();
            match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
                // A closed pipe (`| head`) is the reader's choice, not an error.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                other => other.context("cannot write to stdout"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload;

    /// Each report of a stored run decodes each of its workloads once, whatever it
    /// asks of them.
    #[test]
    fn a_report_decodes_each_stored_workload_once() {
        let (_dir, store) = crate::db::fixture();
        for listed in store.list_runs().unwrap() {
            let doc = store.load_run(listed.run_id).unwrap();
            let known = doc
                .workloads
                .iter()
                .filter(|w| workload::kind(&w.kind).is_some())
                .count();
            assert!(known > 0, "run {}", listed.run_id);
            let counted = |what: &str, make: &dyn Fn()| {
                let before = workload::decodes();
                make();
                assert_eq!(
                    workload::decodes() - before,
                    known,
                    "run {}: {what} decoded its {known} workloads that many times",
                    listed.run_id
                );
            };
            counted("the terminal report", &|| {
                render(&doc, Format::Table(layout::Detail::Full)).unwrap();
            });
            counted("the brief report", &|| {
                render(&doc, Format::Table(layout::Detail::Brief)).unwrap();
            });
            counted("the Markdown report", &|| {
                markdown::render(&doc).unwrap();
            });
            counted("the HTML report", &|| {
                html::render(&Decoded::of(&doc)).unwrap();
            });
        }
    }
}
