//! What a thread that is not on a CPU waits for, from its system call and the
//! descriptor it names (or, in poll, select and epoll, the descriptors it waits on),
//! refined by the kernel function it sleeps in (wchan). A wait is a step at a place
//! (a read on a block device, a send on a socket), a wait on another member of the
//! process tree (a pipe's other end, a child, a lock's owner), or a wait for nothing the
//! command needs. System call numbers are x86_64's; the wchan names are Linux 6.x's
//! (shared/WHY.md lists what was checked).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::step::{Place, Step, StepKey};
use crate::platform::fds::{Awaited, FdTarget};
use crate::platform::sockets::TcpSocket;
use crate::platform::threads::Syscall;

/// What a thread off its CPU waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wait {
    /// A step at a place.
    Step(StepKey),
    /// Another member of the tree, whose own time says what it was doing.
    On(On),
    /// Nothing the command needs: an idle server, a pool with no work, a signal.
    Idle(String),
}

/// The members a wait is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum On {
    /// One thread: a mutex's owner, a thread being joined.
    Thread(u32),
    /// The other threads of process `pid` than `tid` (a condition variable, a
    /// semaphore: whoever will signal it).
    Siblings {
        /// The process.
        pid: u32,
        /// The waiting thread.
        tid: u32,
    },
    /// The children of process `pid`, or only `child`.
    Children {
        /// The parent.
        pid: u32,
        /// One child, where the wait names it.
        child: Option<u32>,
    },
    /// The processes holding the other end of a pipe: its writers for a reader.
    Pipe {
        /// The pipe (both ends share it).
        key: (u64, u64),
        /// Waiting on its writers (a read); else on its readers (a write).
        writers: bool,
        /// The waiting process.
        pid: u32,
    },
}

/// The place of a wait on a descriptor that was closed before it could be looked at:
/// the thread has moved on since its call was read.
const CLOSED: &str = "a descriptor closed before it could be read";

/// The place of a wait in poll, select or epoll whose descriptors could not be read
/// (the call's memory changed under the read).
const UNREAD_POLL: &str = "a poll whose descriptors could not be read";

impl Wait {
    /// Whether the thread moved on while its wait was read (its call names a
    /// descriptor since closed, or memory no longer there): its call is worth reading
    /// again.
    pub fn raced(&self) -> bool {
        matches!(self, Wait::Step(key)
            if key.place == Place::Named(CLOSED.into())
                || key.place == Place::Named(UNREAD_POLL.into()))
    }
}

/// What the kernel has a blocked thread sleep in, as its own record would name it (the
/// kernel stack of a switch), from the call and wchan: a device, a pipe, a futex, a
/// child, a socket, a timer, poll or select, a signal, or something else. It says how
/// a thread waits, where the [`Wait`] says on what: a poll on a pipe sleeps in `poll`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sleep {
    /// The block layer or a filesystem's wait for its device (reads, writeback, fsync,
    /// a journal, a page of a file).
    Disk,
    /// A pipe's read or write.
    Pipe,
    /// A futex (a lock, a condition variable, a join).
    Futex,
    /// wait4 or waitid.
    Child,
    /// A socket's send, receive, connect or accept.
    Socket,
    /// nanosleep and clock_nanosleep.
    Timer,
    /// poll, select or epoll.
    Poll,
    /// pause, sigsuspend, sigtimedwait.
    Signal,
    /// Anything else.
    #[default]
    Other,
}

/// How thread blocked in `syscall`, sleeping in kernel function `wchan`, sleeps.
pub fn sleep_of(wchan: Option<&str>, syscall: Option<Syscall>) -> Sleep {
    let by_wchan = |w: &str| {
        if w.contains("pipe") {
            Sleep::Pipe
        } else if w.contains("futex") {
            Sleep::Futex
        } else if w.starts_with("sk_")
            || w.starts_with("tcp_")
            || w.starts_with("inet_")
            || w.starts_with("unix_")
            || w == "wait_woken"
        {
            Sleep::Socket
        } else if waits_on_device(w) || WRITE_THROTTLE.contains(&w) || w.starts_with("jbd2") {
            Sleep::Disk
        } else {
            Sleep::Other
        }
    };
    let Some(Syscall::Call { number, .. }) = syscall else {
        return wchan.map_or(Sleep::Other, by_wchan);
    };
    match number {
        n if nr::POLLS.contains(&n) => Sleep::Poll,
        nr::WAIT4 | nr::WAITID => Sleep::Child,
        nr::FUTEX => Sleep::Futex,
        n if nr::SLEEPS.contains(&n) => Sleep::Timer,
        n if nr::SIGNALS.contains(&n) => Sleep::Signal,
        n if nr::ACCEPTS.contains(&n) || n == nr::CONNECT => Sleep::Socket,
        n if nr::SYNCS.contains(&n) || n == nr::SYNC => Sleep::Disk,
        _ => wchan.map_or(Sleep::Other, by_wchan),
    }
}

impl Sleep {
    /// Its name as stored (`disk`, `pipe`).
    pub fn name(self) -> &'static str {
        match self {
            Sleep::Disk => "disk",
            Sleep::Pipe => "pipe",
            Sleep::Futex => "futex",
            Sleep::Child => "child",
            Sleep::Socket => "socket",
            Sleep::Timer => "timer",
            Sleep::Poll => "poll",
            Sleep::Signal => "signal",
            Sleep::Other => "other",
        }
    }
}

/// What a file's device is, for a wait on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Storage {
    /// A block device, by name.
    Block(String),
    /// Memory (tmpfs, ramfs): a wait there is a wait for memory.
    Memory(String),
    /// A network filesystem (NFS, CIFS) and its source.
    Network(String),
    /// A FUSE filesystem, served by a process.
    Fuse(String),
    /// A filesystem of this type with no device ratelab can name.
    Unknown(String),
}

/// What the classification asks of the machine; a fake in the tests.
pub trait Lookup {
    /// Where descriptor `fd` of `pid` leads.
    fn fd(&mut self, pid: u32, fd: u64) -> Option<FdTarget>;
    /// What a file on device `dev` is stored on.
    fn storage(&mut self, pid: u32, dev: (u32, u32)) -> Storage;
    /// The TCP socket with this inode in the namespace of `pid`.
    fn tcp(&mut self, pid: u32, inode: u64) -> Option<TcpSocket>;
    /// The interface that holds local address `ip`.
    fn interface(&mut self, ip: IpAddr) -> Option<String>;
    /// The descriptors a thread in poll, select or epoll waits on.
    /// `None` where they cannot be read.
    fn awaited(&mut self, pid: u32, number: u64, args: &[u64; 6]) -> Option<Vec<Awaited>>;
    /// The device of the filesystem holding the path at `address` in the memory of
    /// `pid`, relative to its descriptor `dirfd` or its working folder.
    fn path_device(&mut self, pid: u32, dirfd: Option<u64>, address: u64) -> Option<(u32, u32)>;
    /// A 32-bit word of the memory of `pid` (a futex and what lies beside it).
    fn word(&mut self, pid: u32, address: u64) -> Option<u32>;
    /// Whether `tid` is a thread of the tree.
    fn is_member_thread(&self, tid: u32) -> bool;
}

/// x86_64 system call numbers (arch/x86/entry/syscalls/syscall_64.tbl).
mod nr {
    pub const READS: [u64; 5] = [0, 17, 19, 295, 327];
    pub const WRITES: [u64; 5] = [1, 18, 20, 296, 328];
    pub const SYNCS: [u64; 4] = [74, 75, 277, 306];
    pub const SYNC: u64 = 162;
    pub const SENDS: [u64; 3] = [44, 46, 307];
    pub const RECEIVES: [u64; 3] = [45, 47, 299];
    pub const SENDFILE: u64 = 40;
    pub const SPLICE: [u64; 2] = [275, 326];
    pub const CONNECT: u64 = 42;
    pub const ACCEPTS: [u64; 2] = [43, 288];
    pub const POLLS: [u64; 7] = [7, 271, 23, 270, 232, 281, 441];
    pub const WAIT4: u64 = 61;
    pub const WAITID: u64 = 247;
    pub const FUTEX: u64 = 202;
    pub const SLEEPS: [u64; 2] = [35, 230];
    pub const SIGNALS: [u64; 3] = [34, 130, 128];
    pub const LOCKS: [u64; 2] = [72, 73];
    pub const RINGS: [u64; 3] = [426, 208, 333];
    /// Calls that look a path up and leave what they find as it was: open, stat,
    /// lstat, access, readlink, execve, statx, newfstatat, faccessat, faccessat2,
    /// readlinkat, openat, openat2; `*AT` where the path is the second argument.
    pub const PATH_READS: [u64; 7] = [2, 4, 6, 21, 89, 59, 332];
    pub const PATH_READS_AT: [u64; 5] = [262, 269, 439, 267, 257];
    /// Calls that change what a path names: creat, unlink, rename, mkdir, rmdir, link,
    /// symlink, truncate, chmod, chown, lchown; and unlinkat, renameat, renameat2,
    /// mkdirat, linkat, fchmodat, fchownat, utimensat, mknodat.
    pub const PATH_WRITES: [u64; 11] = [85, 87, 82, 83, 84, 86, 88, 76, 90, 92, 94];
    pub const PATH_WRITES_AT: [u64; 9] = [263, 264, 316, 258, 265, 268, 260, 280, 259];
    /// Calls on a descriptor's file or folder that are neither reads nor writes of its
    /// data: getdents, getdents64, fstat, close; and ftruncate, fchmod, fchown, fallocate.
    pub const FD_READS: [u64; 4] = [78, 217, 5, 3];
    pub const FD_WRITES: [u64; 4] = [77, 91, 93, 285];
}

/// Whether a kernel function a thread sleeps in is a filesystem's or the block layer's
/// wait for its device (a metadata block read, a journal commit, a bio): the scheduler's
/// own functions (`io_schedule`, `bit_wait_io`) are skipped in wchan, so the caller
/// shows (`__ext4_find_entry`, `ext4_read_bh`, `jbd2_log_wait_commit`).
fn waits_on_device(wchan: &str) -> bool {
    const FILESYSTEMS: [&str; 9] = [
        "ext4_", "__ext4_", "jbd2", "__jbd2", "xfs_", "xlog_", "btrfs_", "f2fs_", "fat_",
    ];
    const BLOCK: [&str; 9] = [
        "folio_wait",
        "__folio_lock",
        "wait_on_page",
        "__lock_page",
        "_bh",
        "buffer",
        "bread",
        "bio",
        "blk_",
    ];
    FILESYSTEMS.iter().any(|p| wchan.starts_with(p)) || BLOCK.iter().any(|p| wchan.contains(p))
}

/// A wait on the device under a path or a descriptor outside a read or write of its
/// data: the filesystem reading its metadata (a folder, an inode) or committing a
/// change to it. `None` where the call is none of those or the wait is not the device's.
fn metadata(
    pid: u32,
    number: u64,
    args: &[u64; 6],
    wchan: &str,
    look: &mut dyn Lookup,
) -> Option<Wait> {
    if !waits_on_device(wchan) {
        return None;
    }
    let changes = nr::PATH_WRITES.contains(&number)
        || nr::PATH_WRITES_AT.contains(&number)
        || nr::FD_WRITES.contains(&number)
        || wchan.starts_with("jbd2")
        || wchan.contains("commit");
    let step = if changes {
        Step::DiskWrite
    } else {
        Step::DiskRead
    };
    let at = |fd: u64| Some(fd).filter(|&fd| fd as u32 as i32 != libc::AT_FDCWD);
    let device = if nr::PATH_READS.contains(&number) || nr::PATH_WRITES.contains(&number) {
        look.path_device(pid, None, args[0])
    } else if nr::PATH_READS_AT.contains(&number) || nr::PATH_WRITES_AT.contains(&number) {
        look.path_device(pid, at(args[0]), args[1])
    } else if nr::FD_READS.contains(&number) || nr::FD_WRITES.contains(&number) {
        match look.fd(pid, args[0]) {
            Some(FdTarget::File { device, .. }) => Some(device),
            _ => None,
        }
    } else {
        return None;
    };
    Some(match device {
        Some(device) => on_storage(look.storage(pid, device), step, Step::NetReceive),
        None => Wait::Step(StepKey::named(step, "a file's metadata")),
    })
}

/// The kernel functions that hold a writer back for its device: writeback throttling
/// (rq_qos, wbt, iocost) and dirty-page throttling.
const WRITE_THROTTLE: [&str; 4] = [
    "rq_qos_wait",
    "wbt_wait",
    "ioc_rqos_throttle",
    "balance_dirty_pages",
];

/// The kernel functions that say a thread waits for memory to be reclaimed.
const RECLAIM: [&str; 2] = ["reclaim_throttle", "throttle_direct_reclaim"];

/// What thread `tid` of `pid`, not running, waits for: from its system call where it
/// may be read, else from its wchan alone.
pub fn classify(
    pid: u32,
    tid: u32,
    wchan: Option<&str>,
    syscall: Option<Syscall>,
    look: &mut dyn Lookup,
) -> Wait {
    if let Some(w) = wchan {
        if RECLAIM.contains(&w) {
            return step(Step::Memory, "reclaim");
        }
        // Writes held back for the device's sake outside a write of a named file (an
        // exit's or a close's flush): the device cannot be told from here.
        let throttled = WRITE_THROTTLE.contains(&w);
        let writing =
            matches!(syscall, Some(Syscall::Call { number, .. }) if nr::WRITES.contains(&number));
        if throttled && !writing {
            return step(Step::DiskWrite, "writes held back (queue throttling)");
        }
        if w == "request_wait_answer" {
            return step(Step::Other, "a FUSE daemon");
        }
    }
    match syscall {
        // Read between two files: on its CPU again by now.
        Some(Syscall::Running) => Wait::Step(StepKey::named(Step::Cpu, "")),
        Some(Syscall::Fault) => step(Step::Memory, "page faults"),
        Some(Syscall::Call { number, args }) => in_call(pid, tid, number, &args, wchan, look),
        None => match wchan {
            Some(w) => step(Step::Other, w),
            None => step(Step::Other, "waits not readable"),
        },
    }
}

fn step(step: Step, words: &str) -> Wait {
    Wait::Step(StepKey::named(step, words))
}

/// A thread blocked in system call `number`.
fn in_call(
    pid: u32,
    tid: u32,
    number: u64,
    args: &[u64; 6],
    wchan: Option<&str>,
    look: &mut dyn Lookup,
) -> Wait {
    let fd = args[0];
    if nr::READS.contains(&number) || nr::RECEIVES.contains(&number) || number == nr::CONNECT {
        return on_fd(pid, fd, false, look);
    }
    if nr::WRITES.contains(&number) || nr::SENDS.contains(&number) {
        return on_fd(pid, fd, true, look);
    }
    if nr::SYNCS.contains(&number) {
        return synced(pid, fd, look);
    }
    if number == nr::SYNC {
        return step(Step::DiskWrite, "every device (sync)");
    }
    if number == nr::SENDFILE {
        // sendfile(out, in, …): a wait in a page of the file is its read.
        return match wchan {
            Some(w) if w.starts_with("folio_wait") => on_fd(pid, args[1], false, look),
            _ => on_fd(pid, fd, true, look),
        };
    }
    if nr::SPLICE.contains(&number) {
        // splice and copy_file_range (in, off, out, …): a wait in a pipe is on the
        // pipe written to, else on what is read.
        return match wchan {
            Some(w) if w.contains("pipe") => on_fd(pid, args[2], true, look),
            _ => on_fd(pid, fd, false, look),
        };
    }
    if nr::ACCEPTS.contains(&number) {
        return Wait::Idle("waiting for a connection".into());
    }
    if nr::POLLS.contains(&number) {
        return polled(pid, number, args, look);
    }
    if number == nr::WAIT4 || number == nr::WAITID {
        return Wait::On(On::Children {
            pid,
            child: waited_child(number, args),
        });
    }
    if number == nr::FUTEX {
        return futex(pid, tid, args, look);
    }
    if nr::SLEEPS.contains(&number) {
        return step(Step::Sleep, "timer");
    }
    if nr::SIGNALS.contains(&number) {
        return Wait::Idle("waiting for a signal".into());
    }
    if nr::LOCKS.contains(&number) {
        return step(Step::Other, "a file lock");
    }
    if nr::RINGS.contains(&number) {
        return step(Step::Other, "asynchronous I/O completions");
    }
    if let Some(wait) = wchan.and_then(|w| metadata(pid, number, args, w, look)) {
        return wait;
    }
    step(Step::Other, wchan.unwrap_or("a system call"))
}

/// The child a wait4 or waitid names: wait4(pid > 0), waitid(P_PID, id).
fn waited_child(number: u64, args: &[u64; 6]) -> Option<u32> {
    const P_PID: u64 = 1;
    // pid_t is a 32-bit int: -1 reads as 0xffffffff in its 64-bit register.
    let id = match number {
        nr::WAIT4 => args[0] as u32 as i32,
        _ if args[0] == P_PID => args[1] as u32 as i32,
        _ => return None,
    };
    u32::try_from(id).ok().filter(|&id| id > 0)
}

/// A wait to read (`writing` false) or write descriptor `fd`.
fn on_fd(pid: u32, fd: u64, writing: bool, look: &mut dyn Lookup) -> Wait {
    let (disk, net) = if writing {
        (Step::DiskWrite, Step::NetSend)
    } else {
        (Step::DiskRead, Step::NetReceive)
    };
    match look.fd(pid, fd) {
        Some(FdTarget::File { device, .. }) => on_storage(look.storage(pid, device), disk, net),
        Some(FdTarget::BlockDevice(device)) => {
            match crate::platform::fds::block_device_name(device) {
                Some(name) => Wait::Step(StepKey::new(disk, Place::Device(name.into()))),
                None => step(disk, "a block device"),
            }
        }
        Some(FdTarget::Pipe(key)) => Wait::On(On::Pipe {
            key,
            writers: !writing,
            pid,
        }),
        Some(FdTarget::Socket(inode)) => match look.tcp(pid, inode) {
            Some(socket) if socket.listening => Wait::Idle("waiting for a connection".into()),
            Some(socket) => {
                let interface = look.interface(socket.local.ip());
                Wait::Step(StepKey::new(
                    net,
                    Place::Link {
                        peer: socket.remote.to_string().into(),
                        interface: interface.map(Into::into),
                    },
                ))
            }
            None => step(Step::Other, "a local (UNIX) socket"),
        },
        Some(FdTarget::Terminal(path)) => step(Step::Other, &format!("terminal {path}")),
        Some(FdTarget::Other(link)) => Wait::Idle(format!("waiting on {link}")),
        None => step(Step::Other, CLOSED),
    }
}

/// A wait on a file stored on `storage`.
fn on_storage(storage: Storage, disk: Step, net: Step) -> Wait {
    match storage {
        Storage::Block(name) => Wait::Step(StepKey::new(disk, Place::Device(name.into()))),
        Storage::Memory(kind) => step(Step::Memory, &kind),
        Storage::Network(source) => step(net, &source),
        Storage::Fuse(source) => step(Step::Other, &format!("FUSE filesystem {source}")),
        Storage::Unknown(kind) => step(disk, &kind),
    }
}

/// An fsync, fdatasync, sync_file_range or syncfs of `fd`: a write to its device.
fn synced(pid: u32, fd: u64, look: &mut dyn Lookup) -> Wait {
    match look.fd(pid, fd) {
        Some(FdTarget::File { device, .. }) => {
            on_storage(look.storage(pid, device), Step::DiskWrite, Step::NetSend)
        }
        // Closed before it could be looked at, never seen open: still a sync.
        None => step(Step::DiskWrite, CLOSED),
        _ => on_fd(pid, fd, true, look),
    }
}

/// A wait in poll, select or epoll: on the descriptors it waits for, the ones it
/// waits to write first (a sender blocked on a full socket also waits to read its
/// control connection), then those whose step is a device or a link, then members.
fn polled(pid: u32, number: u64, args: &[u64; 6], look: &mut dyn Lookup) -> Wait {
    let Some(awaited) = look.awaited(pid, number, args) else {
        return step(Step::Other, UNREAD_POLL);
    };
    if awaited.is_empty() {
        return step(Step::Sleep, "timer");
    }
    let mut waits: Vec<(bool, Wait)> = awaited
        .iter()
        .map(|a| (a.writing, on_fd(pid, a.fd, a.writing, look)))
        .collect();
    let rank = |(writing, wait): &(bool, Wait)| -> u8 {
        let kind = match wait {
            Wait::Step(key) if key.step.active() => 0,
            Wait::On(_) => 1,
            Wait::Step(_) => 2,
            Wait::Idle(_) => 3,
        };
        kind * 2 + u8::from(!writing)
    };
    waits.sort_by_key(rank);
    waits.swap_remove(0).1
}

/// A futex wait: on the owner of a glibc mutex (its tid at +8 of the futex word, where
/// that is a thread of the tree), on a thread being joined (the word is its tid), else
/// on the process's other threads (a condition variable or semaphore).
fn futex(pid: u32, tid: u32, args: &[u64; 6], look: &mut dyn Lookup) -> Wait {
    const FUTEX_PRIVATE_AND_CLOCK: u64 = 128 | 256;
    const FUTEX_WAIT_BITSET: u64 = 9;
    const FUTEX_WAIT: u64 = 0;
    const FUTEX_LOCK_PI: u64 = 6;
    const FUTEX_TID_MASK: u32 = 0x3fff_ffff;
    let address = args[0];
    let op = args[1] & !FUTEX_PRIVATE_AND_CLOCK;
    let owner = |look: &mut dyn Lookup, word: Option<u32>| {
        word.filter(|&t| t != 0 && t != tid && look.is_member_thread(t))
    };
    if op == FUTEX_LOCK_PI {
        // A PI mutex holds its owner's tid in the word itself.
        let word = look.word(pid, address).map(|w| w & FUTEX_TID_MASK);
        if let Some(t) = owner(look, word) {
            return Wait::On(On::Thread(t));
        }
    } else if op == FUTEX_WAIT || op == FUTEX_WAIT_BITSET {
        for at in [address.wrapping_add(8), address] {
            let word = look.word(pid, at);
            if let Some(t) = owner(look, word) {
                return Wait::On(On::Thread(t));
            }
        }
    }
    Wait::On(On::Siblings { pid, tid })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A made-up machine: descriptors, devices, sockets and memory words.
    #[derive(Default)]
    struct Fake {
        fds: HashMap<u64, FdTarget>,
        storage: HashMap<(u32, u32), Storage>,
        sockets: HashMap<u64, TcpSocket>,
        awaited: Vec<Awaited>,
        words: HashMap<u64, u32>,
        paths: HashMap<u64, (u32, u32)>,
        threads: Vec<u32>,
    }

    impl Lookup for Fake {
        fn fd(&mut self, _pid: u32, fd: u64) -> Option<FdTarget> {
            self.fds.get(&fd).cloned()
        }
        fn storage(&mut self, _pid: u32, dev: (u32, u32)) -> Storage {
            self.storage
                .get(&dev)
                .cloned()
                .unwrap_or(Storage::Unknown("?".into()))
        }
        fn tcp(&mut self, _pid: u32, inode: u64) -> Option<TcpSocket> {
            self.sockets.get(&inode).cloned()
        }
        fn interface(&mut self, _ip: IpAddr) -> Option<String> {
            Some("veth-a".into())
        }
        fn awaited(&mut self, _pid: u32, _number: u64, _args: &[u64; 6]) -> Option<Vec<Awaited>> {
            Some(self.awaited.clone())
        }
        fn path_device(
            &mut self,
            _pid: u32,
            _dirfd: Option<u64>,
            address: u64,
        ) -> Option<(u32, u32)> {
            self.paths.get(&address).copied()
        }
        fn word(&mut self, _pid: u32, address: u64) -> Option<u32> {
            self.words.get(&address).copied()
        }
        fn is_member_thread(&self, tid: u32) -> bool {
            self.threads.contains(&tid)
        }
    }

    fn call(number: u64, args: [u64; 6]) -> Option<Syscall> {
        Some(Syscall::Call { number, args })
    }

    fn fake() -> Fake {
        let mut fake = Fake::default();
        fake.fds.insert(
            3,
            FdTarget::File {
                device: (7, 3),
                path: "/mnt/f".into(),
            },
        );
        fake.storage.insert((7, 3), Storage::Block("loop3".into()));
        fake.fds.insert(4, FdTarget::Pipe((12, 99)));
        fake.fds.insert(5, FdTarget::Socket(777));
        fake.sockets.insert(
            777,
            TcpSocket {
                local: "10.0.0.2:40000".parse().unwrap(),
                remote: "10.0.0.1:5201".parse().unwrap(),
                listening: false,
                send_queue_bytes: 4 << 20,
                receive_queue_bytes: 0,
            },
        );
        fake.fds.insert(6, FdTarget::Socket(778));
        fake
    }

    fn device(step: Step, name: &str) -> Wait {
        Wait::Step(StepKey::new(step, Place::Device(name.into())))
    }

    #[test]
    fn reads_writes_and_syncs_of_a_file_wait_on_its_device() {
        let mut look = fake();
        let read = classify(
            1,
            1,
            Some("folio_wait_bit_common"),
            call(0, [3, 0, 0, 0, 0, 0]),
            &mut look,
        );
        assert_eq!(read, device(Step::DiskRead, "loop3"));
        let direct = classify(
            1,
            1,
            Some("__iomap_dio_rw"),
            call(18, [3, 0, 0, 0, 0, 0]),
            &mut look,
        );
        assert_eq!(direct, device(Step::DiskWrite, "loop3"));
        let fsync = classify(
            1,
            1,
            Some("folio_wait_bit"),
            call(74, [3, 0, 0, 0, 0, 0]),
            &mut look,
        );
        assert_eq!(fsync, device(Step::DiskWrite, "loop3"));
    }

    #[test]
    fn metadata_reads_and_changes_wait_on_the_device_of_their_path() {
        let mut look = fake();
        look.paths.insert(0x7000, (7, 3));
        // newfstatat(AT_FDCWD, path): an inode read from loop3.
        let stat = classify(
            1,
            1,
            Some("__ext4_get_inode_loc"),
            call(262, [0xffff_ff9c, 0x7000, 0, 0, 0, 0]),
            &mut look,
        );
        assert_eq!(stat, device(Step::DiskRead, "loop3"));
        let open = classify(
            1,
            1,
            Some("ext4_read_bh"),
            call(257, [u64::MAX - 99, 0x7000, 0, 0, 0, 0]),
            &mut look,
        );
        assert_eq!(open, device(Step::DiskRead, "loop3"));
        // unlink(path) waiting for the journal: a write to loop3.
        let unlink = classify(
            1,
            1,
            Some("jbd2_log_wait_commit"),
            call(87, [0x7000, 0, 0, 0, 0, 0]),
            &mut look,
        );
        assert_eq!(unlink, device(Step::DiskWrite, "loop3"));
        // getdents64 of a folder's descriptor.
        let listing = classify(
            1,
            1,
            Some("__ext4_find_entry"),
            call(217, [3, 0, 0, 0, 0, 0]),
            &mut look,
        );
        assert_eq!(listing, device(Step::DiskRead, "loop3"));
        // A path that cannot be read still names the step; a lock is not the device.
        let unknown = classify(
            1,
            1,
            Some("ext4_read_bh"),
            call(4, [0x9000, 0, 0, 0, 0, 0]),
            &mut look,
        );
        assert_eq!(unknown, step(Step::DiskRead, "a file's metadata"));
        let locked = classify(
            1,
            1,
            Some("rwsem_down_write_slowpath"),
            call(87, [0x7000, 0, 0, 0, 0, 0]),
            &mut look,
        );
        assert_eq!(locked, step(Step::Other, "rwsem_down_write_slowpath"));
    }

    #[test]
    fn a_pipe_waits_on_its_other_end_and_a_socket_on_its_peer() {
        let mut look = fake();
        let read = classify(
            9,
            9,
            Some("anon_pipe_read"),
            call(0, [4, 0, 0, 0, 0, 0]),
            &mut look,
        );
        assert_eq!(
            read,
            Wait::On(On::Pipe {
                key: (12, 99),
                writers: true,
                pid: 9
            })
        );
        let send = classify(
            9,
            9,
            Some("wait_woken"),
            call(44, [5, 0, 0, 0, 0, 0]),
            &mut look,
        );
        let Wait::Step(key) = send else {
            panic!("{send:?}")
        };
        assert_eq!(key.step, Step::NetSend);
        assert_eq!(key.place.words(), "10.0.0.1:5201 via veth-a");
        // A socket not in the TCP tables is a local one.
        let unix = classify(9, 9, None, call(45, [6, 0, 0, 0, 0, 0]), &mut look);
        assert_eq!(unix, step(Step::Other, "a local (UNIX) socket"));
    }

    #[test]
    fn select_prefers_the_socket_it_waits_to_write() {
        let mut look = fake();
        look.awaited = vec![
            Awaited {
                fd: 4,
                writing: false,
            },
            Awaited {
                fd: 5,
                writing: true,
            },
        ];
        let wait = classify(
            9,
            9,
            Some("do_select"),
            call(23, [8, 1, 2, 0, 0, 0]),
            &mut look,
        );
        assert!(
            matches!(wait, Wait::Step(ref k) if k.step == Step::NetSend),
            "{wait:?}"
        );
        look.awaited.clear();
        let timer = classify(
            9,
            9,
            Some("do_select"),
            call(23, [0, 0, 0, 0, 1, 0]),
            &mut look,
        );
        assert_eq!(timer, step(Step::Sleep, "timer"));
    }

    #[test]
    fn waits_on_children_threads_and_timers() {
        let mut look = fake();
        for minus_one in [u64::MAX, 0xffff_ffff] {
            let any = classify(
                9,
                9,
                Some("do_wait"),
                call(61, [minus_one, 0, 0, 0, 0, 0]),
                &mut look,
            );
            assert_eq!(
                any,
                Wait::On(On::Children {
                    pid: 9,
                    child: None
                })
            );
        }
        let one = classify(
            9,
            9,
            Some("do_wait"),
            call(61, [42, 0, 0, 0, 0, 0]),
            &mut look,
        );
        assert_eq!(
            one,
            Wait::On(On::Children {
                pid: 9,
                child: Some(42)
            })
        );
        let sleep = classify(
            9,
            9,
            Some("hrtimer_nanosleep"),
            call(230, [0; 6]),
            &mut look,
        );
        assert_eq!(sleep, step(Step::Sleep, "timer"));
        let fault = classify(
            9,
            9,
            Some("folio_wait_bit_common"),
            Some(Syscall::Fault),
            &mut look,
        );
        assert_eq!(fault, step(Step::Memory, "page faults"));
        let hidden = classify(9, 9, None, None, &mut look);
        assert_eq!(hidden, step(Step::Other, "waits not readable"));
    }

    #[test]
    fn a_futex_waits_on_a_mutex_owner_a_joined_thread_or_the_siblings() {
        let mut look = fake();
        look.threads = vec![10, 11];
        look.words.insert(0x1000 + 8, 11);
        let owned = classify(
            9,
            10,
            Some("futex_do_wait"),
            call(202, [0x1000, 128, 2, 0, 0, 0]),
            &mut look,
        );
        assert_eq!(owned, Wait::On(On::Thread(11)));
        look.words.insert(0x2000, 11);
        let join = classify(
            9,
            10,
            Some("futex_do_wait"),
            call(202, [0x2000, 0, 11, 0, 0, 0]),
            &mut look,
        );
        assert_eq!(join, Wait::On(On::Thread(11)));
        let condvar = classify(
            9,
            10,
            Some("futex_do_wait"),
            call(202, [0x3000, 137, 0, 0, 0, 0]),
            &mut look,
        );
        assert_eq!(condvar, Wait::On(On::Siblings { pid: 9, tid: 10 }));
    }
}
