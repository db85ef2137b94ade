//! What the server writes to its operator. Every line is escaped, since text from the
//! wire is data; and the lines about connections that never proved themselves are
//! counted per address, a few written and the rest summed up once a spell has passed
//! ("… and 512 more from 10.0.0.7 in 30 s"), so a peer that churns cannot flood the log.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Log;
use crate::workload::net::admission::Prefix;

/// How long one address's spell of refusals lasts before its count is written.
const SPELL: Duration = Duration::from_secs(30);
/// Lines about unproven connections written per address per spell; the rest are counted.
const WRITTEN_PER_SPELL: u32 = 5;
/// Addresses counted apart at most; past that, refusals from new ones share one count.
const MAX_ADDRESSES: usize = 4096;

/// Where an unproven connection came from, as its refusals are counted: the address
/// for IPv4, the /64 for IPv6 (one host holds a /64's worth of addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Source {
    Address(IpAddr),
    Network(Prefix),
    /// Past [`MAX_ADDRESSES`].
    Others,
}

impl Source {
    fn of(peer: IpAddr) -> Source {
        match peer {
            IpAddr::V4(_) => Source::Address(peer),
            IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => Source::Address(peer),
            IpAddr::V6(_) => Source::Network(Prefix::of(peer)),
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Address(address) => write!(f, "{address}"),
            Source::Network(prefix) => write!(f, "{prefix}"),
            Source::Others => f.write_str("other addresses"),
        }
    }
}

struct Spell {
    since: Instant,
    written: u32,
    held: u64,
}

/// The server's log.
pub(in crate::workload::net) struct Journal {
    log: Log,
    spells: Mutex<HashMap<Source, Spell>>,
}

impl Journal {
    /// A journal writing to `log`.
    pub(super) fn new(log: Log) -> Journal {
        Journal {
            log,
            spells: Mutex::new(HashMap::new()),
        }
    }

    /// Writes `line`, escaped.
    pub(in crate::workload::net) fn say(&self, line: &str) {
        (self.log)(&crate::vocab::text::escaped(line));
    }

    /// Writes `line` about a connection from `peer` that never proved itself, unless
    /// that address has had its share of lines this spell: then it is counted.
    pub(super) fn unproven(&self, peer: IpAddr, line: &str) {
        let mut spells = self.spells.lock().unwrap_or_else(|p| p.into_inner());
        let mut source = Source::of(peer);
        if !spells.contains_key(&source) && spells.len() >= MAX_ADDRESSES {
            source = Source::Others;
        }
        let spell = spells.entry(source).or_insert_with(|| Spell {
            since: Instant::now(),
            written: 0,
            held: 0,
        });
        if spell.written < WRITTEN_PER_SPELL {
            spell.written += 1;
            drop(spells);
            self.say(line);
        } else {
            spell.held += 1;
        }
    }

    /// Writes the count of each spell that has ended (every spell with `all`) and
    /// forgets it.
    pub(super) fn settle(&self, all: bool) {
        let mut spells = self.spells.lock().unwrap_or_else(|p| p.into_inner());
        let mut lines = Vec::new();
        spells.retain(|source, spell| {
            let ended = all || spell.since.elapsed() >= SPELL;
            if ended && spell.held > 0 {
                lines.push(format!(
                    "… and {} more from {source} in {:.0} s",
                    spell.held,
                    spell.since.elapsed().as_secs_f64().max(1.0)
                ));
            }
            !ended
        });
        drop(spells);
        for line in lines {
            self.say(&line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn lines_are_escaped_and_an_addresss_refusals_past_its_share_are_summed() {
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink = Arc::clone(&lines);
        let journal = Journal::new(Arc::new(move |line: &str| {
            sink.lock().unwrap().push(line.to_string())
        }));
        journal.say("10.9.9.9:1: refused: bad\n2026-01-01T00:00:00Z forged \x1b[2J");
        let churner: IpAddr = "10.0.0.7".parse().unwrap();
        for i in 0..512 + WRITTEN_PER_SPELL {
            journal.unproven(churner, &format!("10.0.0.7:{i}: closed: first message"));
        }
        journal.unproven("10.0.0.8".parse().unwrap(), "10.0.0.8:1: closed");
        journal.settle(false);
        assert_eq!(lines.lock().unwrap().len(), 1 + 5 + 1);
        journal.settle(true);
        let lines = lines.lock().unwrap();
        assert_eq!(
            lines[0],
            "10.9.9.9:1: refused: bad\\n2026-01-01T00:00:00Z forged \\x1b[2J"
        );
        assert_eq!(lines.len(), 8, "{lines:?}");
        assert!(
            lines[7].starts_with("… and 512 more from 10.0.0.7 in "),
            "{}",
            lines[7]
        );
    }
}
