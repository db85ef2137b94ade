//! The storage core's one request engine meeting what devices do: a 4Kn disk whose
//! direct I/O takes 4096-byte steps (what does not fit is refused before a byte is
//! written, naming the device), a filesystem that fills up midway (named ENOSPC with
//! its byte, the run stored incomplete and nothing left), a job whose buffers would not
//! fit in memory (refused with its figure), an I/O error under a read and a write (named
//! with its errno and byte), and a signal arriving while a read or a write waits on a
//! network-like filesystem (EINTR, asked again: the run goes on).

mod common;

use std::path::Path;
use std::process::Stdio;

use common::rig::{self, MIB, SlowDisk, Throttle};
use common::{RIG_NEEDS, entries, root_or_skip};

/// What is left in `target` but the filesystem's own folder and `filler`.
fn left(target: &Path, filler: &str) -> Vec<String> {
    entries(target)
        .into_iter()
        .filter(|e| e != "lost+found" && e != filler)
        .collect()
}

#[test]
fn a_4kn_disk_refuses_512_byte_direct_io_before_writing_and_runs_the_rest() {
    let test = "a_4kn_disk_refuses_512_byte_direct_io_before_writing_and_runs_the_rest";
    if !root_or_skip(test, RIG_NEEDS) {
        return;
    }
    let _lock = rig::exclusive();
    let disk = SlowDisk::with_sector_size(256 * MIB, 4096);
    let device = Path::new(disk.device())
        .file_name()
        .unwrap()
        .to_str()
        .unwrap();
    let message = common::refused(
        common::ratelab()
            .arg("iops")
            .arg(disk.path())
            .args(["--size", "16M", "--tests", "RND4K-Q1T1,RND512-Q1T1"])
            .args(["--seconds", "0.2", "--ramp", "0", "--no-store"]),
        3,
        &[&format!(
            "RND512-Q1T1 needs 512-byte direct I/O; {device} takes 4096"
        )],
    );
    eprintln!("{message}");
    assert!(
        left(disk.path(), "").is_empty(),
        "{:?}",
        entries(disk.path())
    );

    let doc = common::run_json(
        common::ratelab()
            .arg("iops")
            .arg(disk.path())
            .args(["--size", "16M", "--tests", "RND4K-Q1T1,SEQ1M-Q8T1"])
            .args([
                "--repeat",
                "1",
                "--seconds",
                "0.3",
                "--ramp",
                "0",
                "--json",
                "--no-store",
                "-q",
            ]),
    );
    assert_eq!(doc["status"], "complete", "{doc}");
    let items = doc["workloads"][0]["items"].as_array().unwrap();
    assert_eq!(items.len(), 4, "{doc}");
    assert!(
        items.iter().all(|i| i["ios"].as_u64().unwrap() > 0),
        "{doc}"
    );

    // The disk series reads a 10 KiB file's tail exactly with a 4096-byte request.
    let doc = common::run_json(common::ratelab().arg("disk").arg(disk.path()).args([
        "--sizes",
        "10K,1M",
        "--json",
        "--no-store",
        "-q",
    ]));
    assert_eq!(doc["status"], "complete", "{doc}");
    assert!(
        left(disk.path(), "").is_empty(),
        "{:?}",
        entries(disk.path())
    );
}

/// Runs `verb TARGET args` on a filesystem that another writer fills once ratelab's work
/// folder appears: the run must fail naming ENOSPC at a byte, be stored incomplete,
/// and leave nothing of its own.
fn fills_up_midway(verb: &str, args: &[&str]) {
    let disk = SlowDisk::new(160 * MIB);
    let throttle = Throttle::new();
    // Slow writes, so the filler takes the space while ratelab is still writing.
    throttle.limit(&disk, 16 * MIB, 64 * MIB);
    let db = disk.scratch().join("results.db");
    let child = throttle
        .command(common::bin())
        .arg(verb)
        .arg(disk.path())
        .args(args)
        .arg("--db")
        .arg(&db)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for_work_folder(disk.path());
    std::thread::sleep(std::time::Duration::from_millis(300));
    let free = rustix::fs::statvfs(disk.path()).unwrap();
    let filler = disk.path().join("filler");
    let status = std::process::Command::new("fallocate")
        .arg("-l")
        .arg((free.f_bavail * free.f_frsize).to_string())
        .arg(&filler)
        .status()
        .unwrap();
    assert!(status.success(), "fallocate");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{verb}: {stderr}");
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("the filesystem is full (ENOSPC)")
            && stderr.contains("at byte")
            && !stderr.contains("short write"),
        "{stderr}"
    );
    let runs = common::stored_runs(&db);
    assert_eq!(runs[0]["status"], "incomplete", "{runs}");
    assert!(
        left(disk.path(), "filler").is_empty(),
        "{:?}",
        entries(disk.path())
    );
}

#[test]
fn a_filesystem_that_fills_up_while_iops_fills_its_file_is_named_enospc() {
    // The disk series meets the same in disk_rig.rs (enospc_mid_run_...).
    let test = "a_filesystem_that_fills_up_while_iops_fills_its_file_is_named_enospc";
    if !root_or_skip(test, RIG_NEEDS) {
        return;
    }
    let _lock = rig::exclusive();
    fills_up_midway(
        "iops",
        &["--size", "96M", "--tests", "RND4K-Q1T1", "--seconds", "0.2"],
    );
}

#[test]
fn a_job_whose_buffers_would_not_fit_in_memory_is_refused_with_its_figure() {
    let dir = common::disk_tempdir();
    let message = common::refused(
        common::ratelab().arg("iops").arg(dir.path()).args([
            "--size",
            "1G",
            "--tests",
            "SEQ64M-Q64T16",
            "--no-store",
        ]),
        3,
        &[
            "SEQ64M-Q64T16 would hold 128 GiB of I/O buffers",
            "more than a quarter of the",
        ],
    );
    eprintln!("{message}");
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
}

/// A qcow2 image whose data requests fail with EIO once ratelab starts writing: qemu's
/// blkdebug driver between the image and its file (qcow2 -> blkdebug -> file), exported
/// by qemu-storage-daemon over FUSE, on a loop device, ext4. The filesystem is made in a
/// first daemon without rules; in the second, the first new cluster (ratelab's fill)
/// moves blkdebug to state 2, where every `event` request (`read_aio` or `write_aio`)
/// fails with EIO.
struct FaultyDisk {
    dir: tempfile::TempDir,
    daemon: Option<std::process::Child>,
    device: Option<String>,
}

impl FaultyDisk {
    fn new(event: &str) -> FaultyDisk {
        let dir = common::disk_tempdir();
        let mut disk = FaultyDisk {
            dir,
            daemon: None,
            device: None,
        };
        let image = disk.path("disk.qcow2");
        rig::run(
            "qemu-img",
            &[
                "create",
                "-q",
                "-f",
                "qcow2",
                image.to_str().unwrap(),
                "256M",
            ],
        );
        std::fs::create_dir(disk.path("mnt")).unwrap();
        disk.attach(None);
        let device = disk.device.clone().unwrap();
        rig::run(
            "mkfs.ext4",
            &[
                "-q",
                "-F",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0",
                &device,
            ],
        );
        disk.detach();
        let rules = disk.path("rules.conf");
        std::fs::write(
            &rules,
            format!(
                "[set-state]\nevent = \"cluster_alloc\"\nstate = \"1\"\nnew_state = \"2\"\n\n\
                 [inject-error]\nevent = \"{event}\"\nstate = \"2\"\nerrno = \"5\"\n"
            ),
        )
        .unwrap();
        disk.attach(Some(&rules));
        let mnt = disk.path("mnt");
        rig::run(
            "mount",
            &[disk.device.as_ref().unwrap(), mnt.to_str().unwrap()],
        );
        disk
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    /// Starts the daemon (with blkdebug's `rules`, if any) and a loop device on its export.
    fn attach(&mut self, rules: Option<&Path>) {
        let export = self.path("export");
        std::fs::write(&export, b"").unwrap();
        let image = self.path("disk.qcow2");
        let mut nodes = vec![format!(
            "driver=file,node-name=f0,filename={}",
            image.display()
        )];
        let file = match rules {
            Some(rules) => {
                nodes.push(format!(
                    "driver=blkdebug,node-name=dbg,image=f0,config={}",
                    rules.display()
                ));
                "dbg"
            }
            None => "f0",
        };
        nodes.push(format!("driver=qcow2,node-name=q0,file={file}"));
        let mut command = std::process::Command::new("qemu-storage-daemon");
        for node in &nodes {
            command.arg("--blockdev").arg(node);
        }
        command
            .arg("--export")
            .arg(format!(
                "type=fuse,id=e0,node-name=q0,mountpoint={},writable=on",
                export.display()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.daemon = Some(command.spawn().expect("start qemu-storage-daemon"));
        let started = std::time::Instant::now();
        while std::fs::metadata(&export).map_or(0, |m| m.len()) == 0 {
            assert!(
                started.elapsed().as_secs() < 20,
                "the FUSE export did not appear"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let device = rig::run("losetup", &["-f", "--show", export.to_str().unwrap()]);
        self.device = Some(device.trim().to_string());
    }

    /// Unmounts, removes the loop device and stops the daemon.
    fn detach(&mut self) {
        rig::quiet("umount", &[self.path("mnt").to_str().unwrap()]);
        if let Some(device) = self.device.take() {
            rig::quiet("losetup", &["-d", &device]);
        }
        if let Some(mut daemon) = self.daemon.take() {
            // SIGTERM: the daemon takes its FUSE mount down as it ends.
            let pid = rustix::process::Pid::from_raw(daemon.id() as i32).unwrap();
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            // It may hang flushing an image whose file fails: then it is killed.
            let asked = std::time::Instant::now();
            while daemon.try_wait().ok().flatten().is_none() {
                if asked.elapsed().as_secs() >= 5 {
                    let _ = daemon.kill();
                    let _ = daemon.wait();
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        if !rig::quiet("umount", &[self.path("export").to_str().unwrap()]) {
            rig::quiet("umount", &["-l", self.path("export").to_str().unwrap()]);
        }
    }
}

impl Drop for FaultyDisk {
    fn drop(&mut self) {
        self.detach();
    }
}

#[test]
fn an_io_error_under_a_read_and_under_a_write_is_named_with_its_errno_and_byte() {
    let test = "an_io_error_under_a_read_and_under_a_write_is_named_with_its_errno_and_byte";
    if !root_or_skip(test, RIG_NEEDS) || !common::have_or_skip(test, "qemu-storage-daemon") {
        return;
    }
    let _lock = rig::exclusive();
    for (event, verb, args, op) in [
        (
            "read_aio",
            "iops",
            &["--size", "32M", "--tests", "SEQ1M-Q1T1", "--rw", "read"][..],
            "read",
        ),
        (
            "write_aio",
            "iops",
            &["--size", "32M", "--tests", "SEQ1M-Q1T1", "--rw", "read"][..],
            "write",
        ),
        (
            "read_aio",
            "disk",
            &["--sizes", "16M", "--read", "direct"][..],
            "read",
        ),
        (
            "write_aio",
            "disk",
            &["--sizes", "16M", "--direct", "--read", "direct"][..],
            "write",
        ),
        (
            "read_aio",
            "task",
            &["--make-file", "16M", "--threads", "1"][..],
            "read",
        ),
    ] {
        let disk = FaultyDisk::new(event);
        let target = disk.path("mnt");
        let db = disk.path("results.db");
        let mut command = common::ratelab();
        command.arg(verb);
        if verb == "task" {
            command
                .arg("compress")
                .arg(target.join("input"))
                .arg("--out")
                .arg(&target);
        } else {
            command.arg(&target);
        }
        let output = command
            .args(args)
            .args(
                ["--seconds", "0.3", "--ramp", "0"]
                    .iter()
                    .filter(|_| verb == "iops"),
            )
            .arg("--db")
            .arg(&db)
            .arg("-q")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        eprintln!("{verb}, {event}: {stderr}");
        assert_eq!(output.status.code(), Some(3), "{verb}, {event}: {stderr}");
        assert!(
            stderr.contains(&format!("cannot {op} "))
                && stderr.contains("at byte ")
                && stderr.contains("the device reported an I/O error (EIO)"),
            "{verb}, {event}: {stderr}"
        );
        let runs = common::stored_runs(&db);
        assert_eq!(runs[0]["status"], "incomplete", "{runs}");
        assert!(left(&target, "").is_empty(), "{:?}", entries(&target));
    }
}

/// A signal's handler that does nothing: its arrival is what the test is about.
extern "C" fn noted(_: libc::c_int) {}

/// `len` bytes of text, for a codec to work on.
fn text_bytes(len: usize) -> Vec<u8> {
    let mut bytes = common::text(len).into_bytes();
    bytes.truncate(len);
    bytes
}

#[test]
fn a_signal_during_a_read_or_a_write_is_asked_again_not_fatal() {
    let test = "a_signal_during_a_read_or_a_write_is_asked_again_not_fatal";
    if !root_or_skip(test, "it mounts a FUSE filesystem of its own") {
        return;
    }
    use common::fuse::{Event, Fuse};
    use ratelab::storage::request::{self, Op, Request};

    // The binary: Ctrl-Z and `fg` while task's reader waits on a network filesystem
    // (SIGSTOP, then SIGCONT): the filesystem answers the interrupted read EINTR.
    let input = text_bytes(8 * MIB as usize);
    let fuse = Fuse::mount(input.clone(), Some(MIB), false);
    let out = tempfile::tempdir().unwrap();
    let child = common::ratelab()
        .args(["task", "compress"])
        .arg(fuse.file())
        .args([
            "--threads",
            "1",
            "--no-what-if",
            "--no-store",
            "-q",
            "--out",
        ])
        .arg(out.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let held = fuse.event(60);
    let Some(Event::Held("read", _, at)) = held else {
        let output = child.wait_with_output().unwrap();
        panic!(
            "no read was held: {held:?}; {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    // SAFETY: signals to the child this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let interrupted = fuse.event(10);
    std::thread::sleep(std::time::Duration::from_millis(200));
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}");
    assert!(
        matches!(interrupted, Some(Event::Interrupted("read", _))),
        "{interrupted:?}"
    );
    assert!(output.status.success(), "{:?}: {stderr}", output.status);
    let log = fuse.log.lock().unwrap().clone();
    let first = log.iter().position(|&r| r == ("read", at)).unwrap();
    assert!(
        log[first + 1..].contains(&("read", at)),
        "the interrupted read at byte {at} was asked again: {log:?}"
    );
    eprintln!(
        "task: the read at byte {at} was interrupted (EINTR), asked again, and the task ran to its end"
    );
    drop(fuse);

    // The engine's write, in this process: a signal with a handler arrives while the
    // write waits on the filesystem.
    let fuse = Fuse::mount(vec![0; 2 * MIB as usize], None, true);
    // SAFETY: a handler that does nothing, for a signal nothing else here uses.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = noted as *const () as usize;
        libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut());
    }
    let path = fuse.file();
    let data = text_bytes(MIB as usize);
    let writer = {
        let (path, mut data) = (path.clone(), data.clone());
        std::thread::spawn(move || {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .unwrap();
            let write = Request::whole(Op::Write, &file, 0, data.as_mut_ptr(), data.len());
            request::once(&path, &write)
        })
    };
    let held = fuse.event(30);
    assert!(matches!(held, Some(Event::Held("write", _, 0))), "{held:?}");
    use std::os::unix::thread::JoinHandleExt;
    // SAFETY: the writer thread is alive: its write is held.
    unsafe { libc::pthread_kill(writer.as_pthread_t(), libc::SIGUSR1) };
    let interrupted = fuse.event(10);
    assert!(
        matches!(interrupted, Some(Event::Interrupted("write", _))),
        "{interrupted:?}"
    );
    let moved = writer.join().unwrap();
    assert_eq!(moved.map_err(|e| e.to_string()), Ok(MIB as usize));
    assert!(fuse.content.lock().unwrap()[..MIB as usize] == data[..]);
    let log = fuse.log.lock().unwrap().clone();
    assert_eq!(
        log.iter().filter(|&&r| r == ("write", 0)).count(),
        2,
        "{log:?}"
    );
    eprintln!("engine: the write at byte 0 was interrupted (EINTR) and asked again whole");
}
