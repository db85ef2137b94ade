//! What a process's file descriptor leads to (/proc/PID/fd/N): a file on a block
//! device, a block device itself, a pipe, a socket or a terminal; which end of a pipe
//! it holds (/proc/PID/fdinfo/N); and the descriptors a thread blocked in poll, select
//! or epoll waits on, read from its memory (/proc/PID/mem) or the epoll's fdinfo,
//! without stopping it. All of it needs the access ptrace needs: the user's own
//! processes, or root.

use std::fs::File;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};

/// What a descriptor leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FdTarget {
    /// A file (or folder) on the filesystem of device `major:minor`.
    File {
        /// The device the filesystem is on, as `st_dev` says.
        device: (u32, u32),
        /// Its path, as the link says.
        path: String,
    },
    /// A block device opened itself (`/dev/loop3`).
    BlockDevice((u32, u32)),
    /// A pipe or FIFO; both ends have the same key.
    Pipe((u64, u64)),
    /// A socket, by its inode.
    Socket(u64),
    /// A terminal or other character device.
    Terminal(String),
    /// Anything else (an eventfd, an epoll, a timerfd), by its link.
    Other(String),
}

/// Where descriptor `fd` of process `pid` leads, and its link text; `None` when it is
/// closed or may not be looked at.
pub fn target(pid: u32, fd: u64) -> Option<(String, FdTarget)> {
    let path = format!("/proc/{pid}/fd/{fd}");
    let link = std::fs::read_link(&path).ok()?;
    let link = link.to_string_lossy().into_owned();
    if let Some(inode) = link
        .strip_prefix("socket:[")
        .and_then(|r| r.strip_suffix(']'))
    {
        return Some((link.clone(), FdTarget::Socket(inode.parse().ok()?)));
    }
    // stat follows the link to the open file itself, wherever it is now.
    let meta = std::fs::metadata(&path).ok()?;
    let kind = meta.file_type();
    let split = |dev: u64| (rustix::fs::major(dev), rustix::fs::minor(dev));
    let target = if kind.is_fifo() {
        FdTarget::Pipe((meta.dev(), meta.ino()))
    } else if kind.is_block_device() {
        FdTarget::BlockDevice(split(meta.rdev()))
    } else if kind.is_char_device() {
        FdTarget::Terminal(link.clone())
    } else if kind.is_file() || kind.is_dir() {
        FdTarget::File {
            device: split(meta.dev()),
            path: link.clone(),
        }
    } else {
        FdTarget::Other(link.clone())
    };
    Some((link, target))
}

/// Whether descriptor `fd` of `pid` was opened for writing (the write end of a pipe),
/// from the `flags:` line of its fdinfo (octal, O_ACCMODE in the low two bits).
pub fn opened_for_writing(pid: u32, fd: u64) -> Option<bool> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).ok()?;
    let flags = text.lines().find_map(|l| l.strip_prefix("flags:"))?.trim();
    let flags = u64::from_str_radix(flags, 8).ok()?;
    Some(flags & 0b11 != 0)
}

/// The open descriptors of `pid`; empty when it is gone or may not be looked at.
pub fn descriptors(pid: u32) -> Vec<u64> {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// The inodes of the sockets `pid` holds open, from the descriptors' links alone.
pub fn socket_inodes(pid: u32) -> Vec<u64> {
    descriptors(pid)
        .into_iter()
        .filter_map(|fd| {
            let link = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()?;
            link.to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// A descriptor a blocked thread waits on, and whether it waits to write to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Awaited {
    /// The descriptor.
    pub fd: u64,
    /// Waiting until it can be written (POLLOUT, a write set); else until it can be read.
    pub writing: bool,
}

/// poll(2)'s event bits (asm-generic/poll.h).
const POLLIN: u16 = 0x001;
const POLLOUT: u16 = 0x004;
/// Most descriptors read from a blocked call's arguments: a bound on what a peer's
/// numbers can make ratelab read.
const MAX_AWAITED: u64 = 4096;

/// The descriptors of a `poll`/`ppoll` call: `nfds` structs `{int fd; short events;
/// short revents}` at `address` in the memory of `pid`; `None` where it cannot be read.
pub fn polled(mem: &File, address: u64, nfds: u64) -> Option<Vec<Awaited>> {
    let count = nfds.min(MAX_AWAITED) as usize;
    let mut bytes = vec![0u8; count * 8];
    mem.read_exact_at(&mut bytes, address).ok()?;
    Some(parse_pollfds(&bytes))
}

/// The descriptors of made-up `struct pollfd` bytes, each once.
pub fn parse_pollfds(bytes: &[u8]) -> Vec<Awaited> {
    let mut out = Vec::new();
    for chunk in bytes.chunks_exact(8) {
        let fd = i32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        let events = u16::from_ne_bytes([chunk[4], chunk[5]]);
        if fd < 0 {
            continue;
        }
        if events & POLLOUT != 0 {
            out.push(Awaited {
                fd: fd as u64,
                writing: true,
            });
        } else if events & POLLIN != 0 {
            out.push(Awaited {
                fd: fd as u64,
                writing: false,
            });
        }
    }
    out
}

/// The descriptors of a `select`/`pselect6` call: `nfds` bits in each of the read and
/// write sets at `reads` and `writes` (either may be 0: none) in the memory of `pid`;
/// `None` where a set cannot be read.
pub fn selected(mem: &File, nfds: u64, reads: u64, writes: u64) -> Option<Vec<Awaited>> {
    let words = nfds.min(MAX_AWAITED).div_ceil(64) as usize;
    let mut out = Vec::new();
    for (address, writing) in [(writes, true), (reads, false)] {
        if address == 0 {
            continue;
        }
        let mut bytes = vec![0u8; words * 8];
        mem.read_exact_at(&mut bytes, address).ok()?;
        out.extend(
            set_bits(&bytes, nfds)
                .into_iter()
                .map(|fd| Awaited { fd, writing }),
        );
    }
    Some(out)
}

/// The descriptors set in an `fd_set`'s bytes, below `nfds`.
pub fn set_bits(bytes: &[u8], nfds: u64) -> Vec<u64> {
    let mut out = Vec::new();
    for (word_index, word) in bytes.chunks_exact(8).enumerate() {
        let mut word = u64::from_ne_bytes(word.try_into().expect("8 bytes"));
        while word != 0 {
            let bit = u64::from(word.trailing_zeros());
            let fd = word_index as u64 * 64 + bit;
            if fd < nfds {
                out.push(fd);
            }
            word &= word - 1;
        }
    }
    out
}

/// The descriptors an epoll instance `epfd` of `pid` watches, from its fdinfo's `tfd:`
/// lines (`tfd: 5 events: 19 data: … pos:0 ino:… sdev:…`, events in hex).
pub fn epoll_watched(pid: u32, epfd: u64) -> Option<Vec<Awaited>> {
    std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{epfd}"))
        .ok()
        .map(|text| parse_epoll_fdinfo(&text))
}

/// The `tfd:` lines of an epoll's fdinfo text.
pub fn parse_epoll_fdinfo(text: &str) -> Vec<Awaited> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_ascii_whitespace();
            if fields.next()? != "tfd:" {
                return None;
            }
            let fd: u64 = fields.next()?.parse().ok()?;
            if fields.next()? != "events:" {
                return None;
            }
            let events = u32::from_str_radix(fields.next()?, 16).ok()?;
            Some(Awaited {
                fd,
                writing: events & u32::from(POLLOUT) != 0,
            })
        })
        .collect()
}

/// The name of block device `major:minor` (`loop3`, `nvme0n1p2`), as sysfs names it;
/// `None` where it is no block device.
pub fn block_device_name((major, minor): (u32, u32)) -> Option<String> {
    let link = std::fs::read_link(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    link.file_name()?.to_str().map(str::to_string)
}

/// The filesystem type and mount source of the mount on device `major:minor`, from
/// the mount table of `pid` (for filesystems with no block device: tmpfs, NFS, FUSE,
/// overlay, btrfs).
pub fn mount_of(pid: u32, (major, minor): (u32, u32)) -> Option<(String, String)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).ok()?;
    parse_mount_of(&text, &format!("{major}:{minor}"))
}

/// The type and source of the first mount on `device` (`0:45`) in a mountinfo text:
/// `ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS…] - TYPE SOURCE SUPER`.
pub fn parse_mount_of(text: &str, device: &str) -> Option<(String, String)> {
    text.lines().find_map(|line| {
        let mut fields = line.split_ascii_whitespace();
        if fields.nth(2)? != device {
            return None;
        }
        let mut after = fields.skip_while(|f| *f != "-");
        after.next()?;
        Some((after.next()?.to_string(), after.next()?.to_string()))
    })
}

/// The memory of process `pid`, to read a blocked call's arguments from; `None` where
/// this user may not.
pub fn memory(pid: u32) -> Option<File> {
    File::open(format!("/proc/{pid}/mem")).ok()
}

/// The C string at `address` in a process's memory (a path a blocked call was given),
/// up to `PATH_MAX` bytes.
pub fn string_at(mem: &File, address: u64) -> Option<std::ffi::OsString> {
    use std::os::unix::ffi::OsStringExt;
    const PATH_MAX: usize = 4096;
    let mut text = Vec::new();
    let mut chunk = [0u8; 256];
    while text.len() < PATH_MAX {
        let at = address.checked_add(text.len() as u64)?;
        // A chunk may cross into an unmapped page: read what there is, a byte at a time.
        let got = match mem.read_at(&mut chunk, at) {
            Ok(n) if n > 0 => n,
            _ => mem.read_at(&mut chunk[..1], at).ok().filter(|n| *n > 0)?,
        };
        match chunk[..got].iter().position(|b| *b == 0) {
            Some(end) => {
                text.extend_from_slice(&chunk[..end]);
                return Some(std::ffi::OsString::from_vec(text));
            }
            None => text.extend_from_slice(&chunk[..got]),
        }
    }
    None
}

/// The device (`st_dev`) of the filesystem that holds `path` as process `pid` sees it:
/// relative to its descriptor `dirfd` (a `*at` call's), else to its working folder.
/// A path that does not exist (a file being made, or already unlinked) is on its
/// folder's filesystem.
pub fn device_of_path(pid: u32, dirfd: Option<u64>, path: &std::ffi::OsStr) -> Option<(u32, u32)> {
    let path = std::path::Path::new(path);
    let base = match (path.is_absolute(), dirfd) {
        (true, _) => format!("/proc/{pid}/root"),
        (false, Some(fd)) => format!("/proc/{pid}/fd/{fd}"),
        (false, None) => format!("/proc/{pid}/cwd"),
    };
    let full = std::path::Path::new(&base).join(path.strip_prefix("/").unwrap_or(path));
    let meta = match std::fs::symlink_metadata(&full) {
        Ok(meta) => meta,
        Err(_) => std::fs::metadata(full.parent()?).ok()?,
    };
    Some((rustix::fs::major(meta.dev()), rustix::fs::minor(meta.dev())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pollfds_say_which_descriptors_and_which_way() {
        let mut bytes = Vec::new();
        for (fd, events) in [(3i32, POLLIN), (-1, POLLIN), (5, POLLOUT | POLLIN), (7, 0)] {
            bytes.extend(fd.to_ne_bytes());
            bytes.extend(events.to_ne_bytes());
            bytes.extend(0u16.to_ne_bytes());
        }
        assert_eq!(
            parse_pollfds(&bytes),
            vec![
                Awaited {
                    fd: 3,
                    writing: false
                },
                Awaited {
                    fd: 5,
                    writing: true
                }
            ]
        );
    }

    #[test]
    fn fd_sets_give_their_bits_below_nfds() {
        let mut bytes = vec![0u8; 16];
        bytes[0] = 0b1001_0000; // 4 and 7
        bytes[8] = 0b0000_0011; // 64 and 65
        assert_eq!(set_bits(&bytes, 66), vec![4, 7, 64, 65]);
        assert_eq!(set_bits(&bytes, 65), vec![4, 7, 64]);
    }

    #[test]
    fn epoll_fdinfo_lists_what_it_watches() {
        let text = "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\n\
                    tfd:        5 events:       19 data:                5  pos:0 ino:2a0f sdev:8\n\
                    tfd:        9 events:        4 data:                9  pos:0 ino:2a10 sdev:8\n";
        assert_eq!(
            parse_epoll_fdinfo(text),
            vec![
                Awaited {
                    fd: 5,
                    writing: false
                },
                Awaited {
                    fd: 9,
                    writing: true
                }
            ]
        );
    }

    #[test]
    fn mountinfo_names_an_anonymous_devices_filesystem() {
        let text = "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
                    30 22 0:45 / /dev/shm rw,nosuid shared:5 - tmpfs tmpfs rw,size=100k\n";
        assert_eq!(
            parse_mount_of(text, "0:45"),
            Some(("tmpfs".into(), "tmpfs".into()))
        );
        assert_eq!(
            parse_mount_of(text, "254:0"),
            Some(("ext4".into(), "/dev/vda".into()))
        );
        assert_eq!(parse_mount_of(text, "9:9"), None);
    }

    #[test]
    fn this_processes_pipe_reads_as_a_pipe_with_two_ends() {
        let (reader, writer) = std::io::pipe().unwrap();
        use std::os::fd::AsRawFd;
        let pid = std::process::id();
        let (r, w) = (reader.as_raw_fd() as u64, writer.as_raw_fd() as u64);
        let (_, a) = target(pid, r).unwrap();
        let (_, b) = target(pid, w).unwrap();
        assert!(matches!(a, FdTarget::Pipe(_)));
        assert_eq!(a, b);
        assert_eq!(opened_for_writing(pid, r), Some(false));
        assert_eq!(opened_for_writing(pid, w), Some(true));
        assert!(descriptors(pid).contains(&r));
    }
}
