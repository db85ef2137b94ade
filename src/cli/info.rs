//! `ratelab info [PATH...]`: the machine, and each filesystem's chain down to its link.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use crate::exit::Exit;
use crate::platform::{self, StorageChain};
use crate::report::units::{format_bytes, format_rate};
use crate::report::{self, Table};

/// Options of `ratelab info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Paths to probe [default: every mounted filesystem that stores data].
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// One JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs `ratelab info`.
pub fn run(args: InfoArgs) -> anyhow::Result<Exit> {
    let machine = platform::probe_machine();
    let chains: Vec<StorageChain> = if args.paths.is_empty() {
        platform::probe_mounts()
    } else {
        args.paths
            .iter()
            .map(|p| platform::probe_path(p))
            .collect::<Result<_, _>>()?
    };
    let bytes = if args.json {
        let mut bytes =
            serde_json::to_vec_pretty(&json!({ "machine": machine, "storage": chains }))?;
        bytes.push(b'\n');
        bytes
    } else {
        let mut text = format!(
            "machine: {}\n  cpu: {} · {} logical CPUs\n  memory: {}\n  os: {} · kernel {}\n  virtualization: {}\n",
            machine.hostname,
            machine.cpu_model.as_deref().unwrap_or("unknown"),
            machine.logical_cpus,
            machine.memory_bytes.map_or("unknown".into(), format_bytes),
            machine.os.as_deref().unwrap_or("unknown"),
            machine.kernel,
            machine.virtualization.as_deref().unwrap_or("none detected"),
        );
        for chain in &chains {
            let table = Table {
                title: format!(
                    "\n{} ({} on {}, mounted at {}) · link limit {}",
                    chain.path.display(),
                    chain.fs_type,
                    chain.source,
                    chain.mount_point.display(),
                    match (chain.max_bytes_per_sec, &chain.limit_via) {
                        (Some(rate), Some(via)) => format!("{} via {via}", format_rate(rate)),
                        (Some(rate), None) => format_rate(rate),
                        (None, _) => "unknown".into(),
                    }
                ),
                header: ["step", "name", "detail", "limit"]
                    .map(String::from)
                    .to_vec(),
                rows: chain
                    .steps
                    .iter()
                    .map(|s| {
                        vec![
                            serde_json::to_value(s.kind)
                                .ok()
                                .and_then(|v| v.as_str().map(str::to_string))
                                .unwrap_or_default(),
                            s.name.clone(),
                            s.detail.clone(),
                            s.max_bytes_per_sec.map_or("unknown".into(), format_rate),
                        ]
                    })
                    .collect(),
                numeric: vec![],
            };
            text.push_str(&report::terminal::table_text(&table));
            text.push('\n');
        }
        text.into_bytes()
    };
    report::emit(&bytes, None)?;
    Ok(Exit::Success)
}
