//! `ratelab info [PATH...]`: the machine, each filesystem's chain down to its link, and
//! the network interfaces with their links.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use crate::exit::Exit;
use crate::platform::nics::{self, Nic};
use crate::platform::{self, Machine, StorageChain};
use crate::report;
use crate::vocab::Table;
use crate::vocab::units::{format_bits_rate, format_bytes, format_rate};

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
    let nics = crate::platform::nics::nics();
    let bytes = if args.json {
        let mut bytes = serde_json::to_vec_pretty(
            &json!({ "machine": machine, "storage": chains, "network": nics }),
        )?;
        bytes.push(b'\n');
        bytes
    } else {
        let mut text = machine_text(&machine);
        let tables = chains
            .iter()
            .map(chain_table)
            .chain(std::iter::once(nic_table(&nics)));
        for table in tables {
            text.push_str(&report::terminal::table_text(&table));
            text.push('\n');
        }
        text.into_bytes()
    };
    report::emit(&bytes, None)?;
    Ok(Exit::Success)
}

/// The machine in a few lines.
fn machine_text(machine: &Machine) -> String {
    format!(
        "machine: {}\n  cpu: {} · {} logical CPUs\n  memory: {}\n  os: {} · kernel {}\n  virtualization: {}\n",
        machine.hostname,
        machine.cpu_model.as_deref().unwrap_or("unknown"),
        machine.logical_cpus,
        machine.memory_bytes.map_or("unknown".into(), format_bytes),
        machine.os.as_deref().unwrap_or("unknown"),
        machine.kernel,
        machine.virtualization.as_deref().unwrap_or("none detected"),
    )
}

/// A filesystem's chain from its mount down to its link, a row per step.
fn chain_table(chain: &StorageChain) -> Table {
    Table {
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
    }
}

/// The network interfaces with their links and the most TCP payload each carries.
fn nic_table(nics: &[Nic]) -> Table {
    Table {
        title:
            "\nnetwork interfaces (goodput limit: the most TCP payload the link carries at its MTU)"
                .into(),
        header: ["name", "kind", "mtu", "link", "goodput limit", "addresses"]
            .map(String::from)
            .to_vec(),
        rows: nics
            .iter()
            .map(|nic| {
                let limit = nic
                    .speed_bits_per_sec
                    .zip(nic.mtu_bytes)
                    .map(|(bits, mtu)| {
                        // IPv4 and TCP headers with timestamps take 52 bytes of each packet.
                        let mss = mtu.saturating_sub(52);
                        nics::goodput_limit_bytes_per_sec(
                            bits as f64,
                            mtu,
                            mss,
                            nic.framing_bytes(),
                        )
                    });
                vec![
                    nic.name.clone(),
                    nic.kind.clone(),
                    nic.mtu_bytes.map_or("?".into(), |m| m.to_string()),
                    nic.speed_bits_per_sec
                        .map_or("unknown".into(), |b| format_bits_rate(b as f64 / 8.0)),
                    limit.map_or("unknown".into(), format_bits_rate),
                    nic.addresses
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(" "),
                ]
            })
            .collect(),
        numeric: vec![2],
    }
}
