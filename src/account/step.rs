//! The steps a thread's time is put in, and the places that name where: a process for
//! time on a CPU, a block device for a disk wait, a socket's peer and interface for a
//! network wait.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What a thread's time went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// On a CPU.
    Cpu,
    /// Runnable, waiting for a CPU.
    CpuWait,
    /// Waiting for a block device to read (a read, a page of a file).
    DiskRead,
    /// Waiting for a block device to write (a direct write, writeback, fsync, a journal).
    DiskWrite,
    /// Waiting for a socket to receive.
    NetReceive,
    /// Waiting for a socket to take more to send.
    NetSend,
    /// Major page faults, swap-in and reclaim.
    Memory,
    /// Timers: the command chose to wait.
    Sleep,
    /// Anything else: a signal, a terminal, a lock held outside, or a wait for nothing
    /// the command needs (an idle server, a pool with no work).
    Other,
}

impl Step {
    /// Every step, in the order tables show them.
    pub const ALL: [Step; 9] = [
        Step::Cpu,
        Step::CpuWait,
        Step::DiskRead,
        Step::DiskWrite,
        Step::NetReceive,
        Step::NetSend,
        Step::Memory,
        Step::Sleep,
        Step::Other,
    ];

    /// Its name as stored (`disk_read`).
    pub fn name(self) -> &'static str {
        match self {
            Step::Cpu => "cpu",
            Step::CpuWait => "cpu_wait",
            Step::DiskRead => "disk_read",
            Step::DiskWrite => "disk_write",
            Step::NetReceive => "net_receive",
            Step::NetSend => "net_send",
            Step::Memory => "memory",
            Step::Sleep => "sleep",
            Step::Other => "other",
        }
    }

    /// Its name in words, as the answer's line begins (`disk read`).
    pub fn words(self) -> &'static str {
        match self {
            Step::Cpu => "CPU",
            Step::CpuWait => "waiting for a CPU",
            Step::DiskRead => "disk read",
            Step::DiskWrite => "disk write",
            Step::NetReceive => "network receive",
            Step::NetSend => "network send",
            Step::Memory => "memory",
            Step::Sleep => "sleep",
            Step::Other => "other waits",
        }
    }

    /// Its index in [`Step::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether it is work the command does or waits on (a CPU, a device, a link,
    /// memory) rather than a wait it chose (a timer) or a wait for nothing in it.
    pub fn active(self) -> bool {
        !matches!(self, Step::Sleep | Step::Other)
    }

    /// Whether the place is a block device whose rate is read (disk steps).
    pub fn on_device(self) -> bool {
        matches!(self, Step::DiskRead | Step::DiskWrite)
    }

    /// Whether the place is a socket on an interface (network steps).
    pub fn on_link(self) -> bool {
        matches!(self, Step::NetReceive | Step::NetSend)
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Text shared between the many copies of a place a sample makes: a clone is a count.
pub type Text = std::sync::Arc<str>;

/// Where a step's time went.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Place {
    /// A process, by name (time on or waiting for a CPU).
    Process(Text),
    /// A block device, by name (`loop3`, `nvme0n1p2`).
    Device(Text),
    /// A TCP connection: its peer and, where known, the interface that carries it.
    Link {
        /// The peer's address and port.
        peer: Text,
        /// The interface (`veth-a`, `lo`).
        interface: Option<Text>,
    },
    /// Anything else, in words (`timer`, `page faults`, `terminal`).
    Named(Text),
}

impl Place {
    /// The place in words, as tables show it.
    pub fn words(&self) -> String {
        match self {
            Place::Process(name) | Place::Device(name) | Place::Named(name) => name.to_string(),
            Place::Link {
                peer,
                interface: Some(interface),
            } => format!("{peer} via {interface}"),
            Place::Link {
                peer,
                interface: None,
            } => peer.to_string(),
        }
    }

    /// The block device, for a disk wait.
    pub fn device(&self) -> Option<&str> {
        match self {
            Place::Device(name) => Some(name),
            _ => None,
        }
    }

    /// The interface, for a network wait where it is known.
    pub fn interface(&self) -> Option<&str> {
        match self {
            Place::Link { interface, .. } => interface.as_deref(),
            _ => None,
        }
    }

    /// The peer, for a network wait.
    pub fn peer(&self) -> Option<&str> {
        match self {
            Place::Link { peer, .. } => Some(peer),
            _ => None,
        }
    }
}

/// A step at a place: what a command's wall time is charged to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StepKey {
    /// The step.
    pub step: Step,
    /// Where.
    pub place: Place,
}

impl StepKey {
    /// `step` at `place`.
    pub fn new(step: Step, place: Place) -> StepKey {
        StepKey { step, place }
    }

    /// `step` at a place named in words.
    pub fn named(step: Step, words: &str) -> StepKey {
        StepKey::new(step, Place::Named(words.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_indexed_in_table_order_and_named_as_stored() {
        for (index, step) in Step::ALL.iter().enumerate() {
            assert_eq!(step.index(), index);
            let stored = serde_json::to_value(step).unwrap();
            assert_eq!(stored, step.name());
        }
        assert!(Step::DiskRead.active() && !Step::Sleep.active());
        let link = Place::Link {
            peer: "10.0.0.1:5201".into(),
            interface: Some("veth-a".into()),
        };
        assert_eq!(link.words(), "10.0.0.1:5201 via veth-a");
    }
}
