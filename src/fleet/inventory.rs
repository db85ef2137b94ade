//! The hosts of a fleet: an inventory file (TOML, a `[[host]]` table per host with its
//! `name` and its `ssh` destination exactly as the user would type it, so that
//! ~/.ssh/config, keys and jump hosts apply) or destinations given with `--host`.

use std::path::Path;

use serde::Deserialize;

use crate::exit::UsageError;

pub use crate::platform::remote::Host;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Inventory {
    host: Vec<Host>,
}

/// The hosts of the inventory at `path`, then those of `--host`, each named.
pub fn hosts(path: Option<&Path>, given: &[String]) -> Result<Vec<Host>, UsageError> {
    let mut hosts = match path {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                UsageError(format!(
                    "cannot read the inventory {}: {}",
                    path.display(),
                    e.to_string().to_lowercase()
                ))
            })?;
            parse(&text).map_err(|e| UsageError(format!("{}: {e}", path.display())))?
        }
        None => Vec::new(),
    };
    hosts.extend(given.iter().map(|ssh| Host {
        name: String::new(),
        ssh: ssh.clone(),
    }));
    for host in &mut hosts {
        if host.ssh.trim().is_empty() {
            return Err(UsageError(format!(
                "host {:?} has an empty ssh destination",
                host.name
            )));
        }
        if host.name.is_empty() {
            host.name = host.ssh.clone();
        }
    }
    if hosts.is_empty() {
        return Err(UsageError(
            "no hosts: give an inventory file or --host DEST".into(),
        ));
    }
    let mut names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
    names.sort_unstable();
    if let Some(twice) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(UsageError(format!("host {:?} is named twice", twice[0])));
    }
    Ok(hosts)
}

/// The hosts of an inventory's text.
fn parse(text: &str) -> Result<Vec<Host>, String> {
    let inventory: Inventory = toml::from_str(text).map_err(|e| {
        // toml's message names the line and the field.
        e.to_string().trim().replace('\n', " ")
    })?;
    Ok(inventory.host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inventory_names_its_hosts_and_refuses_what_it_does_not_know() {
        let hosts =
            parse("[[host]]\nname = \"nas\"\nssh = \"admin@nas\"\n[[host]]\nssh = \"pc\"\n")
                .unwrap();
        assert_eq!(hosts[0].name, "nas");
        assert_eq!(hosts[1].ssh, "pc");
        let error = parse("[[host]]\nsssh = \"x\"\n").unwrap_err();
        assert!(error.contains("sssh"), "{error}");
    }
}
