//! The classification's questions answered from /proc and /sys, with what does not
//! change between samples kept: a descriptor's target while its link stays the same,
//! a device's name, a socket's ends for a second, an address's interface.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::net::IpAddr;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use super::classify::{Lookup, Storage};
use crate::platform::fds::{self, Awaited, FdTarget};
use crate::platform::sockets::{self, TcpSocket};

/// How long a socket's ends are trusted before they are read again.
const SOCKET_FRESH: Duration = Duration::from_secs(1);

/// poll, ppoll, select, pselect6 (x86_64).
const POLL: [u64; 2] = [7, 271];
const SELECT: [u64; 2] = [23, 270];

/// The machine, as the classification asks it.
#[derive(Default)]
pub struct Machine {
    fds: HashMap<(u32, u64), (String, FdTarget)>,
    storage: HashMap<(u32, u32), Storage>,
    sockets: HashMap<(u32, u64), (Instant, Option<TcpSocket>)>,
    interfaces: HashMap<IpAddr, Option<String>>,
    memory: HashMap<u32, Option<File>>,
    /// The threads of the tree at the last sample.
    pub member_threads: HashSet<u32>,
}

impl Machine {
    /// Forgets what was kept of process `pid`, which has ended.
    pub fn forget(&mut self, pid: u32) {
        self.fds.retain(|(p, _), _| *p != pid);
        self.sockets.retain(|(p, _), _| *p != pid);
        self.memory.remove(&pid);
    }
}

impl Lookup for Machine {
    fn fd(&mut self, pid: u32, fd: u64) -> Option<FdTarget> {
        let link = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()?;
        let link = link.to_string_lossy();
        if let Some((kept, target)) = self.fds.get(&(pid, fd))
            && *kept == link
        {
            return Some(target.clone());
        }
        let (link, target) = fds::target(pid, fd)?;
        self.fds.insert((pid, fd), (link, target.clone()));
        Some(target)
    }

    fn storage(&mut self, pid: u32, dev: (u32, u32)) -> Storage {
        self.storage
            .entry(dev)
            .or_insert_with(|| storage_of(pid, dev))
            .clone()
    }

    fn tcp(&mut self, pid: u32, inode: u64) -> Option<TcpSocket> {
        if let Some((at, socket)) = self.sockets.get(&(pid, inode))
            && at.elapsed() < SOCKET_FRESH
        {
            return socket.clone();
        }
        let socket = sockets::tcp_socket(pid, inode);
        self.sockets
            .insert((pid, inode), (Instant::now(), socket.clone()));
        socket
    }

    fn interface(&mut self, ip: IpAddr) -> Option<String> {
        self.interfaces
            .entry(ip)
            .or_insert_with(|| crate::platform::nics::nic_of(ip).map(|n| n.name))
            .clone()
    }

    fn awaited(&mut self, pid: u32, number: u64, args: &[u64; 6]) -> Vec<Awaited> {
        if POLL.contains(&number) {
            match self.memory(pid) {
                Some(mem) => fds::polled(mem, args[0], args[1]),
                None => Vec::new(),
            }
        } else if SELECT.contains(&number) {
            match self.memory(pid) {
                Some(mem) => fds::selected(mem, args[0], args[1], args[2]),
                None => Vec::new(),
            }
        } else {
            fds::epoll_watched(pid, args[0])
        }
    }

    fn word(&mut self, pid: u32, address: u64) -> Option<u32> {
        let mut bytes = [0u8; 4];
        self.memory(pid)?.read_exact_at(&mut bytes, address).ok()?;
        Some(u32::from_ne_bytes(bytes))
    }

    fn is_member_thread(&self, tid: u32) -> bool {
        self.member_threads.contains(&tid)
    }
}

impl Machine {
    fn memory(&mut self, pid: u32) -> Option<&File> {
        self.memory
            .entry(pid)
            .or_insert_with(|| fds::memory(pid))
            .as_ref()
    }
}

/// What a file on device `dev` is stored on: a block device sysfs names, else what
/// the mount table of `pid` says of the filesystem.
fn storage_of(pid: u32, dev: (u32, u32)) -> Storage {
    if let Some(name) = fds::block_device_name(dev) {
        return Storage::Block(name);
    }
    let Some((kind, source)) = fds::mount_of(pid, dev) else {
        return Storage::Unknown("a filesystem with no device".into());
    };
    match kind.as_str() {
        "tmpfs" | "ramfs" | "devtmpfs" => Storage::Memory(kind),
        "nfs" | "nfs4" | "cifs" | "smb3" | "ceph" | "9p" => Storage::Network(source),
        k if k.starts_with("fuse") => Storage::Fuse(source),
        _ => match crate::platform::diskstats::device_name(&source) {
            // btrfs and others name their device as the mount's source.
            Some(name) if source.starts_with("/dev/") => Storage::Block(name),
            _ => Storage::Unknown(kind),
        },
    }
}
