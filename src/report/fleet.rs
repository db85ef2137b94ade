//! What `ratelab fleet` prints of the runs it brought home: each host's run at a glance
//! and, for hosts started together, how closely they started.

use std::fmt::Write as _;

use super::terminal;
use crate::document::RunDocument;
use crate::workload::DecodeError;

/// One host's run as the fleet brought it home.
pub struct HostRun<'a> {
    /// The host's name in the inventory.
    pub name: &'a str,
    /// How ssh reaches it, when that is not its name.
    pub ssh: &'a str,
    /// Its run, as stored here.
    pub doc: &'a RunDocument,
}

/// Each host's run at a glance, then how closely they started where they were started
/// together.
pub fn terminal(runs: &[HostRun]) -> Result<String, DecodeError> {
    let mut out = String::new();
    for run in runs {
        match run.name == run.ssh {
            true => writeln!(out, "host {}:", run.name),
            false => writeln!(out, "host {} ({}):", run.name, run.ssh),
        }
        .expect("a String takes any text");
        out.push_str(&terminal::head(
            &crate::workload::Decoded::of(run.doc),
            super::layout::Detail::Brief,
        )?);
        out.push('\n');
    }
    if let Some(fleet) = runs.iter().find_map(|run| run.doc.fleet.as_ref()) {
        let each: Vec<String> = runs
            .iter()
            .filter_map(|run| {
                let f = run.doc.fleet.as_ref()?;
                Some(format!(
                    "{} {:+.1} ms (clock {:+.1} ms)",
                    run.name,
                    f.start_error_s * 1e3,
                    f.clock_offset_s * 1e3
                ))
            })
            .collect();
        let _ = writeln!(
            out,
            "started together: {:.1} ms between the first and the last start; each from the agreed instant: {}\n",
            fleet.skew_s * 1e3,
            each.join(", ")
        );
    }
    Ok(out)
}
