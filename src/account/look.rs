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
use crate::platform::sock_diag;
use crate::platform::sockets::{self, TcpSocket};
use crate::platform::tcp_info::TcpStats;

/// How long a socket's ends are trusted before they are read again.
const SOCKET_FRESH: Duration = Duration::from_secs(1);

/// How long a connection's TCP account is kept before it is read again: a few times a
/// second, so its last reading is near its end.
const DIAG_FRESH: Duration = Duration::from_millis(200);

/// poll, ppoll, select, pselect6 (x86_64).
const POLL: [u64; 2] = [7, 271];
const SELECT: [u64; 2] = [23, 270];

/// The machine, as the classification asks it.
#[derive(Default)]
pub struct Machine {
    fds: HashMap<(u32, u64), (String, FdTarget)>,
    storage: HashMap<(u32, u32), Storage>,
    sockets: HashMap<(u32, u64), (Instant, Option<TcpSocket>)>,
    /// TCP's own account of every connection the tree was seen waiting on.
    pub tcp: TcpWatch,
    interfaces: HashMap<IpAddr, Option<String>>,
    memory: HashMap<u32, Option<File>>,
    /// The threads of the tree at the last sample.
    pub member_threads: HashSet<u32>,
    /// The files (by path) a thread of the tree was seen waiting on.
    pub files: std::collections::BTreeSet<String>,
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
        let Ok(link) = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")) else {
            // Closed since its call was read (a journal opened and closed for each
            // commit): what it led to when last seen open stands for it.
            return self.fds.get(&(pid, fd)).map(|(_, target)| target.clone());
        };
        let link = link.to_string_lossy();
        if let Some((kept, target)) = self.fds.get(&(pid, fd))
            && *kept == link
        {
            return Some(target.clone());
        }
        let (link, target) = fds::target(pid, fd)?;
        if let FdTarget::File { path, .. } = &target
            && path.starts_with('/')
        {
            self.files.insert(path.clone());
        }
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
        let socket = match self.sockets.get(&(pid, inode)) {
            Some((at, socket)) if at.elapsed() < SOCKET_FRESH => socket.clone(),
            _ => {
                let socket = sockets::tcp_socket(pid, inode);
                self.sockets
                    .insert((pid, inode), (Instant::now(), socket.clone()));
                socket
            }
        };
        if let Some(connection) = socket.as_ref().filter(|s| !s.listening) {
            self.tcp.look(pid, inode, connection);
        }
        socket
    }

    fn interface(&mut self, ip: IpAddr) -> Option<String> {
        self.interfaces
            .entry(ip)
            .or_insert_with(|| crate::platform::nics::nic_of(ip).map(|n| n.name))
            .clone()
    }

    fn awaited(&mut self, pid: u32, number: u64, args: &[u64; 6]) -> Option<Vec<Awaited>> {
        if !POLL.contains(&number) && !SELECT.contains(&number) {
            return fds::epoll_watched(pid, args[0]);
        }
        self.in_memory(pid, |mem| {
            if POLL.contains(&number) {
                fds::polled(mem, args[0], args[1])
            } else {
                fds::selected(mem, args[0], args[1], args[2])
            }
        })
    }

    fn path_device(&mut self, pid: u32, dirfd: Option<u64>, address: u64) -> Option<(u32, u32)> {
        let path = self.in_memory(pid, |mem| fds::string_at(mem, address))?;
        fds::device_of_path(pid, dirfd, &path)
    }

    fn word(&mut self, pid: u32, address: u64) -> Option<u32> {
        self.in_memory(pid, |mem| {
            let mut bytes = [0u8; 4];
            mem.read_exact_at(&mut bytes, address).ok()?;
            Some(u32::from_ne_bytes(bytes))
        })
    }

    fn is_member_thread(&self, tid: u32) -> bool {
        self.member_threads.contains(&tid)
    }
}

impl Machine {
    /// `read` of the memory of `pid`, through the file kept open for it; where that
    /// fails, through one opened again: a file opened before the process exec'd (a
    /// child read between its fork and its exec) reads the memory it had then, which
    /// is gone.
    fn in_memory<T>(&mut self, pid: u32, read: impl Fn(&File) -> Option<T>) -> Option<T> {
        if let Some(Some(mem)) = self.memory.get(&pid)
            && let Some(found) = read(mem)
        {
            return Some(found);
        }
        let mem = fds::memory(pid);
        let found = mem.as_ref().and_then(&read);
        self.memory.insert(pid, mem);
        found
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

/// TCP's account (sock_diag) of the connections a tree waits on: the first and the
/// latest reading of each, each read a few times a second at most.
#[derive(Default)]
pub struct TcpWatch {
    /// Per socket inode: its peer, and its first and latest readings.
    seen: HashMap<u64, Seen>,
    /// Whether each process shares this one's network namespace (sock_diag answers
    /// for this one's alone).
    here: HashMap<u32, bool>,
}

/// A connection's readings.
struct Seen {
    peer: std::net::SocketAddr,
    first: (Instant, TcpStats),
    last: (Instant, TcpStats),
}

impl TcpWatch {
    /// Reads the account of socket `inode` of process `pid`, whose peer is `peer`.
    fn look(&mut self, pid: u32, inode: u64, socket: &TcpSocket) {
        let here = *self.here.entry(pid).or_insert_with(|| same_namespace(pid));
        let fresh = self
            .seen
            .get(&inode)
            .is_some_and(|seen| seen.last.0.elapsed() < DIAG_FRESH);
        if !here || fresh {
            return;
        }
        let Some(info) = sock_diag::tcp_connection(socket.local, socket.remote) else {
            return;
        };
        let peer = socket.remote;
        let reading = (Instant::now(), info.tcp);
        self.seen
            .entry(inode)
            .and_modify(|seen| seen.last = reading)
            .or_insert(Seen {
                peer,
                first: reading,
                last: reading,
            });
    }

    /// What each connection's account grew by between its first and latest readings,
    /// and where it stood at the latest; connections read once are left out.
    pub fn totals(&self) -> Vec<TcpTotal> {
        let mut out: Vec<TcpTotal> = self
            .seen
            .values()
            .filter(|seen| seen.last.0 > seen.first.0)
            .map(|seen| {
                let (first, last) = (&seen.first.1, &seen.last.1);
                let grew = |f: fn(&TcpStats) -> Option<u64>| {
                    Some(f(last)?.saturating_sub(f(first)?) as f64 / 1e6)
                };
                let bytes =
                    |f: fn(&TcpStats) -> Option<u64>| Some(f(last)?.saturating_sub(f(first)?));
                TcpTotal {
                    peer: seen.peer.to_string(),
                    seconds: seen.last.0.duration_since(seen.first.0).as_secs_f64(),
                    busy_s: grew(|t| t.busy_us),
                    rwnd_limited_s: grew(|t| t.rwnd_limited_us),
                    sndbuf_limited_s: grew(|t| t.sndbuf_limited_us),
                    bytes_acked: bytes(|t| t.bytes_acked),
                    bytes_retrans: bytes(|t| t.bytes_retrans),
                    rtt_us: last.rtt_us,
                    min_rtt_us: last.min_rtt_us,
                    snd_wnd_bytes: last.snd_wnd_bytes,
                    rcv_wnd_bytes: last.rcv_wnd_bytes,
                    delivery_rate_bytes_per_sec: last.delivery_rate_bytes_per_sec,
                    receive_queue_bytes: last.receive_queue_bytes,
                    send_queue_bytes: last.send_queue_bytes,
                }
            })
            .collect();
        out.sort_by(|a, b| a.peer.cmp(&b.peer));
        out
    }
}

/// Whether process `pid` is in this process's network namespace.
fn same_namespace(pid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let namespace = |path: String| std::fs::metadata(path).map(|m| (m.dev(), m.ino())).ok();
    let theirs = namespace(format!("/proc/{pid}/ns/net"));
    theirs.is_some() && theirs == namespace("/proc/self/ns/net".into())
}

/// TCP's own account of one connection the tree waited on, over the time between its
/// first and latest readings.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TcpTotal {
    /// The peer's address and port.
    pub peer: String,
    /// Seconds between the readings.
    pub seconds: f64,
    /// Seconds this end had data in flight (its sender busy), within which those held
    /// by the peer's window and by this end's send buffer; null where the kernel does
    /// not keep them.
    pub busy_s: Option<f64>,
    /// See `busy_s`.
    pub rwnd_limited_s: Option<f64>,
    /// See `busy_s`.
    pub sndbuf_limited_s: Option<f64>,
    /// Bytes the peer acknowledged between the readings.
    pub bytes_acked: Option<u64>,
    /// Bytes sent again between them.
    pub bytes_retrans: Option<u64>,
    /// The smoothed round trip at the latest reading, microseconds.
    pub rtt_us: u64,
    /// The least round trip seen.
    pub min_rtt_us: Option<u64>,
    /// The peer's window, this end's advertised window, the delivery rate and the
    /// queues, at the latest reading.
    pub snd_wnd_bytes: Option<u64>,
    /// See `snd_wnd_bytes`.
    pub rcv_wnd_bytes: Option<u64>,
    /// See `snd_wnd_bytes`.
    pub delivery_rate_bytes_per_sec: Option<u64>,
    /// See `snd_wnd_bytes`.
    pub receive_queue_bytes: Option<u64>,
    /// See `snd_wnd_bytes`.
    pub send_queue_bytes: Option<u64>,
}
