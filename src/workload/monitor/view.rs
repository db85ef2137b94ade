//! How ratelab summarises, judges and shows a stored monitor run: residency and
//! frequency per core, power, thread placement, and frequency against active cores;
//! every figure a source could not give is said to be unavailable, with its reason.

use super::context::Ended;
use super::kind::MonitorKind;
use super::summary::{cores, placements};
use super::{brief, charts, tables};
use crate::document::{Severity, Verdict};
use crate::sensors::Sources;
use crate::vocab::Exposure;
use crate::vocab::{Chart, Table, Unmeasured};
use crate::workload::{DecodeError, Decoded, Stored, View};

impl View for Stored<'_, MonitorKind> {
    fn exposure(&self) -> Exposure {
        // It watches the machine: other work is what it shows, not what disturbs it.
        Exposure::NONE
    }

    fn verdicts(&self, _run: &Decoded) -> Result<Vec<Verdict>, DecodeError> {
        let workload = self.index();
        let mut out: Vec<Verdict> = self
            .context
            .sources
            .iter()
            .flat_map(Sources::named)
            .filter_map(|(name, source)| {
                Some(Verdict {
                    code: format!("{name}_unavailable"),
                    severity: Severity::Info,
                    message: format!(
                        "{name} is not measured on this machine (null in every sample): {}",
                        source.unavailable.as_ref()?
                    ),
                    workload: Some(workload),
                })
            })
            .collect();
        let context = &self.context;
        let (code, signal) = (context.command_exit_code, context.command_signal);
        let stopped_by_monitor = context.ended_by != Some(Ended::CommandExited);
        if code.is_some_and(|c| c != 0) || (signal.is_some() && !stopped_by_monitor) {
            out.push(Verdict {
                code: "monitored_command_failed".into(),
                severity: Severity::Warning,
                message: format!(
                    "the watched command {} {}",
                    self.record.target,
                    match code {
                        Some(code) => format!("exited with status {code}"),
                        None => format!("was killed by signal {}", signal.unwrap_or(0)),
                    }
                ),
                workload: Some(workload),
            });
        }
        Ok(out)
    }

    fn charts(&self) -> Vec<Chart> {
        charts::charts(&self.items)
    }

    fn tables(&self) -> Vec<Table> {
        let items = &self.items;
        let sources = self.context.sources.as_ref();
        let per_core = cores(items);
        let has_freq = per_core.iter().any(|c| c.freq_hz.is_some());
        let mut tables = vec![tables::per_core(
            &per_core,
            self.context.samples,
            sources.and_then(|s| s.freq_hz.unavailable.as_ref()),
        )];
        tables.extend(tables::power_table(items, sources));
        tables.extend(tables::frequency_fit(items, has_freq));
        // A row per thread reads for a few; many (a cpu test on 16 cores) read by group.
        let placements = placements(items);
        tables.extend(if placements.len() > MAX_THREAD_ROWS {
            brief::grouped(&placements, false)
        } else {
            tables::threads(&placements)
        });
        tables
    }

    fn unmeasured(&self) -> Vec<Unmeasured> {
        brief::unmeasured(self)
    }

    fn brief_tables(&self) -> Vec<Table> {
        brief::brief_tables(self)
    }
}

/// Watched threads listed one by one, at most; more are grouped by what they do.
const MAX_THREAD_ROWS: usize = 16;
