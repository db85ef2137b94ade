//! The slow disk of DESIGN.md: a file-backed loop device with direct I/O, formatted and
//! mounted, and a blkio cgroup that holds the processes under test to a known rate.
//! cgroup v1 uses blkio.throttle.*_bps_device, v2 uses io.max. Everything is removed
//! on drop, also when the test fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// Rig tests measure rates: they run one at a time so they do not share the disk or CPUs.
static RIG_LOCK: Mutex<()> = Mutex::new(());

/// Takes the rig lock for the rest of the test.
pub fn exclusive() -> MutexGuard<'static, ()> {
    RIG_LOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A mounted loop device with an ext4 filesystem.
pub struct SlowDisk {
    dir: tempfile::TempDir,
    device: String,
    major_minor: String,
    mount: PathBuf,
    mounted: bool,
}

/// Bytes per second, in MiB/s as the rig is specified.
pub const MIB: u64 = 1 << 20;

/// How far ahead of its rate blk-throttle lets I/O run, as measured: a file often
/// finishes about one 100 ms slice early. The loop device's own counters show it: the
/// first 50 ms of a direct write at 200 MiB/s moved 20 MiB, then 20 MiB per 100 ms
/// (8-10% of a 128 MiB file at 100 MiB/s, 4% of 512 MiB at 200 MiB/s). Beside busy
/// cores one 512 MiB write finished 183 ms early: the tests' 5% margin above the rate,
/// once this slice is taken back, covers that. Which writes get the credit, and how
/// much, was not traced in the kernel's code.
pub const SLICE_S: f64 = 0.1;

/// The rate of `size` bytes moved at `bytes_per_sec` with the throttle's one slice of
/// credit taken back: the least the rig's own rate can have been.
pub fn less_one_slice(size: f64, bytes_per_sec: f64) -> f64 {
    size / (size / bytes_per_sec + SLICE_S)
}

impl SlowDisk {
    /// A loop device of `size_bytes` with an ext4 filesystem, mounted, unthrottled.
    pub fn new(size_bytes: u64) -> SlowDisk {
        SlowDisk::with_sector_size(size_bytes, 512)
    }

    /// The same on a backing file in memory (tmpfs): for a rate above what this VM's
    /// disk keeps at queue depth 1 in its slower moods (a SEQ1M-Q1T1 write through the
    /// loop ran 189 MB/s there, under a 200 MiB/s throttle), so the throttle alone sets
    /// the rig's rate.
    #[allow(dead_code)]
    pub fn in_memory(size_bytes: u64) -> SlowDisk {
        let dir = tempfile::Builder::new()
            .prefix("ratelab-test-")
            .tempdir_in("/dev/shm")
            .expect("create a folder on /dev/shm");
        SlowDisk::on(dir, size_bytes, 512)
    }

    /// The same with logical sectors of `sector` bytes (4096: a 4Kn disk).
    #[allow(dead_code)]
    pub fn with_sector_size(size_bytes: u64, sector: u32) -> SlowDisk {
        SlowDisk::on(super::disk_tempdir(), size_bytes, sector)
    }

    /// A loop device of `size_bytes` and `sector`-byte sectors on a backing file in
    /// `dir`, formatted and mounted there.
    fn on(dir: tempfile::TempDir, size_bytes: u64, sector: u32) -> SlowDisk {
        let image = dir.path().join("disk.img");
        std::fs::File::create(&image)
            .and_then(|f| f.set_len(size_bytes))
            .expect("create the backing file");
        let device = run(
            "losetup",
            &[
                "--direct-io=on",
                "--sector-size",
                &sector.to_string(),
                "-f",
                "--show",
                image.to_str().unwrap(),
            ],
        );
        let mut disk = SlowDisk {
            major_minor: String::new(),
            mount: dir.path().join("mnt"),
            dir,
            device: device.trim().to_string(),
            mounted: false,
        };
        disk.major_minor = run("lsblk", &["-dno", "MAJ:MIN", &disk.device])
            .trim()
            .to_string();
        run(
            "mkfs.ext4",
            &[
                "-q",
                "-F",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0",
                &disk.device,
            ],
        );
        std::fs::create_dir(&disk.mount).expect("create the mount point");
        run("mount", &[&disk.device, disk.mount.to_str().unwrap()]);
        disk.mounted = true;
        disk
    }

    /// The mounted filesystem.
    pub fn path(&self) -> &Path {
        &self.mount
    }

    /// The loop device (`/dev/loopN`).
    pub fn device(&self) -> &str {
        &self.device
    }

    /// A scratch folder beside the mount, not on the rig.
    pub fn scratch(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SlowDisk {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("sync").status();
            if !quiet("umount", &[self.mount.to_str().unwrap()]) {
                let _ = quiet("umount", &["-l", self.mount.to_str().unwrap()]);
            }
        }
        let _ = quiet("losetup", &["-d", &self.device]);
    }
}

/// A blkio (v1) or io (v2) cgroup whose processes are held to set rates on one or more
/// disks; the rates can change while they run. Declare it after the disks it limits,
/// so that it goes first.
pub struct Throttle {
    path: PathBuf,
    v1: bool,
    limited: std::cell::RefCell<Vec<String>>,
}

impl Throttle {
    /// An empty cgroup.
    pub fn new() -> Throttle {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let name = format!(
            "ratelab-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let v1_root = Path::new("/sys/fs/cgroup/blkio");
        let v1 = v1_root.join("blkio.throttle.write_bps_device").exists();
        let path = if v1 {
            v1_root.join(name)
        } else {
            let root = Path::new("/sys/fs/cgroup");
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+io");
            root.join(name)
        };
        std::fs::create_dir(&path).expect("create a cgroup for the throttle");
        Throttle {
            path,
            v1,
            limited: std::cell::RefCell::new(Vec::new()),
        }
    }

    /// Holds `disk` to these rates (or changes them, also mid-run).
    pub fn limit(
        &self,
        disk: &SlowDisk,
        write_bytes_per_sec: u64,
        read_bytes_per_sec: u64,
    ) -> &Throttle {
        let device = &disk.major_minor;
        if self.v1 {
            write(
                &self.path.join("blkio.throttle.write_bps_device"),
                &format!("{device} {write_bytes_per_sec}"),
            );
            write(
                &self.path.join("blkio.throttle.read_bps_device"),
                &format!("{device} {read_bytes_per_sec}"),
            );
        } else {
            write(
                &self.path.join("io.max"),
                &format!("{device} rbps={read_bytes_per_sec} wbps={write_bytes_per_sec}"),
            );
        }
        self.limited.borrow_mut().push(device.clone());
        self
    }

    /// Holds `disk` to these request rates (I/O operations per second), bytes unlimited.
    pub fn limit_iops(&self, disk: &SlowDisk, write_iops: u64, read_iops: u64) -> &Throttle {
        let device = &disk.major_minor;
        if self.v1 {
            write(
                &self.path.join("blkio.throttle.write_iops_device"),
                &format!("{device} {write_iops}"),
            );
            write(
                &self.path.join("blkio.throttle.read_iops_device"),
                &format!("{device} {read_iops}"),
            );
        } else {
            write(
                &self.path.join("io.max"),
                &format!("{device} riops={read_iops} wiops={write_iops}"),
            );
        }
        self.limited.borrow_mut().push(device.clone());
        self
    }

    /// `program args...` started inside the cgroup, so its I/O is throttled.
    pub fn command(&self, program: impl AsRef<Path>) -> Command {
        let mut words = self.prefix().into_iter();
        let mut command = Command::new(words.next().expect("sh"));
        super::isolated(&mut command)
            .args(words)
            .arg(program.as_ref());
        command
    }

    /// The words that start a program (the words after them) inside the cgroup.
    pub fn prefix(&self) -> Vec<std::ffi::OsString> {
        vec![
            "sh".into(),
            "-c".into(),
            "echo $$ > \"$1\" && shift && exec \"$@\"".into(),
            "sh".into(),
            self.path.join("cgroup.procs").into(),
        ]
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        for device in self.limited.borrow().iter() {
            if self.v1 {
                let _ = std::fs::write(
                    self.path.join("blkio.throttle.write_bps_device"),
                    format!("{device} 0"),
                );
                for file in [
                    "blkio.throttle.read_bps_device",
                    "blkio.throttle.write_iops_device",
                    "blkio.throttle.read_iops_device",
                ] {
                    let _ = std::fs::write(self.path.join(file), format!("{device} 0"));
                }
            } else {
                let _ = std::fs::write(
                    self.path.join("io.max"),
                    format!("{device} rbps=max wbps=max riops=max wiops=max"),
                );
            }
        }
        // Processes that ran here have exited; retry briefly while the kernel lets go.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.path).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text)
        .unwrap_or_else(|e| panic!("cannot write {text:?} to {}: {e}", path.display()));
}

/// Runs a set-up command and returns its stdout; panics with its stderr on failure.
/// Runs `program args...`, which must succeed; its output.
pub fn run(program: &str, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        output.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Runs `program args...` quietly; whether it succeeded.
pub fn quiet(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Syncs `path` and evicts it from the page cache, so that the next read is the disk's.
#[allow(dead_code)]
pub fn evict(path: &Path) {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path).expect("open the test file");
    file.sync_all().expect("sync the test file");
    // SAFETY: posix_fadvise only advises the kernel about this open file's pages.
    let done = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(done, 0, "evict {}", path.display());
}
