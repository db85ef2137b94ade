//! A filesystem of the test's own, served over /dev/fuse from a thread of the test: one
//! file, `data`, held in memory. Its first read from a chosen byte, and its first write,
//! are held until the kernel says the caller was interrupted by a signal, and are then
//! answered EINTR, as a FUSE filesystem (sshfs, a mounted object store) may answer
//! when its user presses Ctrl-Z. Root only: it mounts with mount(2).

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

const ROOT: u64 = 1;
const FILE: u64 = 2;
/// The one file's name.
pub const NAME: &str = "data";

const LOOKUP: u32 = 1;
const FORGET: u32 = 2;
const GETATTR: u32 = 3;
const SETATTR: u32 = 4;
const OPEN: u32 = 14;
const READ: u32 = 15;
const WRITE: u32 = 16;
const STATFS: u32 = 17;
const RELEASE: u32 = 18;
const FSYNC: u32 = 20;
const FLUSH: u32 = 25;
const INIT: u32 = 26;
const OPENDIR: u32 = 27;
const READDIR: u32 = 28;
const RELEASEDIR: u32 = 29;
const INTERRUPT: u32 = 36;
const BATCH_FORGET: u32 = 42;

/// Every read and write goes to this server as it is asked, from the caller's thread.
const FOPEN_DIRECT_IO: u32 = 1;
const FUSE_BIG_WRITES: u32 = 1 << 5;
const FUSE_MAX_PAGES: u32 = 1 << 22;
/// Largest write the kernel sends in one request.
const MAX_WRITE: u32 = 1 << 20;
const IN_HEADER: usize = 40;

/// A request held until its caller was interrupted, or what came of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A read or write of the file held: its opcode name, the calling thread, its byte.
    Held(&'static str, u32, u64),
    /// The held request's caller was interrupted; the request was answered EINTR.
    Interrupted(&'static str, u64),
}

/// What the server holds.
struct Hold {
    /// The first read from this byte on is held; `None`: no read is.
    reads_from: Option<u64>,
    /// Whether the first write is held.
    writes: bool,
}

/// The mounted filesystem; unmounted when dropped.
pub struct Fuse {
    dir: tempfile::TempDir,
    /// Every request's opcode name and byte, in order.
    pub log: Arc<Mutex<Vec<(&'static str, u64)>>>,
    /// The file's bytes.
    pub content: Arc<Mutex<Vec<u8>>>,
    events: Receiver<Event>,
    server: Option<JoinHandle<()>>,
}

impl Fuse {
    /// Mounts a filesystem whose file holds `content`, holding the first read from byte
    /// `hold_reads_from` (if any) and the first write (if `hold_writes`).
    pub fn mount(content: Vec<u8>, hold_reads_from: Option<u64>, hold_writes: bool) -> Fuse {
        let dir = tempfile::Builder::new()
            .prefix("ratelab-fuse-")
            .tempdir()
            .unwrap();
        let device = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .expect("open /dev/fuse");
        let options = std::ffi::CString::new(format!(
            "fd={},rootmode=40000,user_id=0,group_id=0,allow_other",
            device.as_raw_fd()
        ))
        .unwrap();
        let target = std::ffi::CString::new(dir.path().to_str().unwrap()).unwrap();
        // SAFETY: every pointer is a live NUL-terminated string.
        let rc = unsafe {
            libc::mount(
                c"ratelab-test".as_ptr(),
                target.as_ptr(),
                c"fuse".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                options.as_ptr().cast(),
            )
        };
        assert_eq!(rc, 0, "mount fuse: {}", std::io::Error::last_os_error());
        let log = Arc::new(Mutex::new(Vec::new()));
        let content = Arc::new(Mutex::new(content));
        let (tell, events) = channel();
        let hold = Hold {
            reads_from: hold_reads_from,
            writes: hold_writes,
        };
        let server = {
            let (log, content) = (log.clone(), content.clone());
            std::thread::spawn(move || serve(device, hold, &log, &content, &tell))
        };
        Fuse {
            dir,
            log,
            content,
            events,
            server: Some(server),
        }
    }

    /// The file's path.
    pub fn file(&self) -> PathBuf {
        self.dir.path().join(NAME)
    }

    /// The mount's folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The next event, waiting up to `seconds`.
    pub fn event(&self, seconds: u64) -> Option<Event> {
        self.events
            .recv_timeout(std::time::Duration::from_secs(seconds))
            .ok()
    }
}

impl Drop for Fuse {
    fn drop(&mut self) {
        let target = std::ffi::CString::new(self.dir.path().to_str().unwrap()).unwrap();
        // SAFETY: a live NUL-terminated path.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
    }
}

/// Little-endian fields of a request's body, read in order.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn u32(&mut self) -> u32 {
        let (head, rest) = self.0.split_at(4);
        self.0 = rest;
        u32::from_le_bytes(head.try_into().unwrap())
    }

    fn u64(&mut self) -> u64 {
        let (head, rest) = self.0.split_at(8);
        self.0 = rest;
        u64::from_le_bytes(head.try_into().unwrap())
    }
}

/// Answers the kernel's requests until the filesystem is unmounted.
fn serve(
    mut device: File,
    mut hold: Hold,
    log: &Mutex<Vec<(&'static str, u64)>>,
    content: &Mutex<Vec<u8>>,
    tell: &Sender<Event>,
) {
    let mut buf = vec![0u8; 2 * MAX_WRITE as usize];
    // Requests held: unique, opcode name.
    let mut held: Vec<(u64, &'static str)> = Vec::new();
    loop {
        let n = match device.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            // ENODEV: unmounted.
            Err(_) => return,
        };
        let mut header = Fields(&buf[..IN_HEADER]);
        let (_len, opcode, unique, node) = (header.u32(), header.u32(), header.u64(), header.u64());
        let (_uid, _gid, pid) = (header.u32(), header.u32(), header.u32());
        let body = &buf[IN_HEADER..n];
        let mut fields = Fields(body);
        let size = content.lock().unwrap().len() as u64;
        let reply: Option<Result<Vec<u8>, i32>> = match opcode {
            INIT => {
                let (major, _minor, readahead) = (fields.u32(), fields.u32(), fields.u32());
                assert_eq!(major, 7, "FUSE protocol 7");
                let mut out = Vec::new();
                for v in [7u32, 31, readahead, FUSE_BIG_WRITES | FUSE_MAX_PAGES] {
                    out.extend(v.to_le_bytes());
                }
                out.extend(16u16.to_le_bytes()); // max_background
                out.extend(12u16.to_le_bytes()); // congestion_threshold
                out.extend(MAX_WRITE.to_le_bytes());
                out.extend(1u32.to_le_bytes()); // time_gran
                out.extend(256u16.to_le_bytes()); // max_pages
                out.resize(64, 0);
                Some(Ok(out))
            }
            LOOKUP => {
                let name = body.split(|&b| b == 0).next().unwrap_or_default();
                if node == ROOT && name == NAME.as_bytes() {
                    let mut out = Vec::new();
                    for v in [FILE, 0, 1, 1] {
                        out.extend(v.to_le_bytes());
                    }
                    out.extend([0u8; 8]);
                    out.extend(attr(FILE, size));
                    Some(Ok(out))
                } else {
                    Some(Err(libc::ENOENT))
                }
            }
            GETATTR | SETATTR => {
                let mut out = Vec::new();
                out.extend(1u64.to_le_bytes());
                out.extend([0u8; 8]);
                out.extend(attr(node, size));
                Some(Ok(out))
            }
            OPEN | OPENDIR => {
                let flags = if opcode == OPEN { FOPEN_DIRECT_IO } else { 0 };
                let mut out = Vec::new();
                out.extend(1u64.to_le_bytes());
                out.extend(flags.to_le_bytes());
                out.extend(0u32.to_le_bytes());
                Some(Ok(out))
            }
            READ | WRITE => {
                let name = if opcode == READ { "read" } else { "write" };
                let (_fh, offset, len) = (fields.u64(), fields.u64(), fields.u32());
                log.lock().unwrap().push((name, offset));
                let hold_this = if opcode == READ {
                    hold.reads_from
                        .is_some_and(|from| offset >= from && node == FILE)
                } else {
                    hold.writes
                };
                if hold_this {
                    if opcode == READ {
                        hold.reads_from = None;
                    } else {
                        hold.writes = false;
                    }
                    held.push((unique, name));
                    let _ = tell.send(Event::Held(name, pid, offset));
                    None
                } else if opcode == READ {
                    let data = content.lock().unwrap();
                    let start = (offset as usize).min(data.len());
                    let end = (start + len as usize).min(data.len());
                    Some(Ok(data[start..end].to_vec()))
                } else {
                    let data = &body[40..40 + len as usize];
                    let mut file = content.lock().unwrap();
                    let end = offset as usize + data.len();
                    if file.len() < end {
                        file.resize(end, 0);
                    }
                    file[offset as usize..end].copy_from_slice(data);
                    let mut out = Vec::new();
                    out.extend(len.to_le_bytes());
                    out.extend(0u32.to_le_bytes());
                    Some(Ok(out))
                }
            }
            INTERRUPT => {
                let of = fields.u64();
                if let Some(at) = held.iter().position(|&(u, _)| u == of) {
                    let (held_unique, name) = held.remove(at);
                    answer(&mut device, held_unique, Err(libc::EINTR));
                    let _ = tell.send(Event::Interrupted(name, held_unique));
                }
                None
            }
            STATFS => {
                let mut out = Vec::new();
                for v in [1u64 << 20, 1 << 19, 1 << 19, 100, 90] {
                    out.extend(v.to_le_bytes());
                }
                for v in [4096u32, 255, 4096] {
                    out.extend(v.to_le_bytes());
                }
                out.resize(80, 0);
                Some(Ok(out))
            }
            READDIR => Some(Ok(Vec::new())),
            FLUSH | RELEASE | RELEASEDIR | FSYNC => Some(Ok(Vec::new())),
            FORGET | BATCH_FORGET => None,
            _ => Some(Err(libc::ENOSYS)),
        };
        if let Some(reply) = reply {
            answer(&mut device, unique, reply);
        }
    }
}

/// Writes the answer to request `unique`: its bytes, or an errno.
fn answer(device: &mut File, unique: u64, reply: Result<Vec<u8>, i32>) {
    let (error, payload) = match reply {
        Ok(payload) => (0i32, payload),
        Err(errno) => (-errno, Vec::new()),
    };
    let mut out = Vec::with_capacity(16 + payload.len());
    out.extend(((16 + payload.len()) as u32).to_le_bytes());
    out.extend(error.to_le_bytes());
    out.extend(unique.to_le_bytes());
    out.extend(payload);
    // ENOENT here: the request was interrupted and ended before this answer came.
    let _ = device.write(&out);
}

/// The attributes of node `node` (the root folder, or the file of `size` bytes).
fn attr(node: u64, size: u64) -> Vec<u8> {
    let (size, mode, nlink) = if node == ROOT {
        (0, 0o40755u32, 2u32)
    } else {
        (size, 0o100644, 1)
    };
    let mut out = Vec::new();
    for v in [node, size, size.div_ceil(512), 0, 0, 0] {
        out.extend(v.to_le_bytes());
    }
    for v in [0u32, 0, 0, mode, nlink, 0, 0, 0, 4096, 0] {
        out.extend(v.to_le_bytes());
    }
    out
}
