//! Disk-image containers made for real: raw images on direct-I/O loop devices and qcow2
//! images through qemu-storage-daemon's FUSE export, written to and torn down; and the
//! proof that nothing is left, also after the daemon crashes, a container is dropped
//! without a teardown, or making one fails halfway. These need root; without it they
//! say why they skip.

mod common;

use std::error::Error as _;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use common::{have_or_skip, root_or_skip};
use ratelab::platform::container::{
    Container, ContainerSpec, Filesystem, Format, Preallocation, leftovers,
};

const NEEDS: &str = "it attaches images to loop devices and mounts them";
const IMAGE_BYTES: u64 = 256 << 20;
const WRITTEN_BYTES: usize = 20 << 20;

fn spec(format: Format, cluster_size_bytes: Option<u64>) -> ContainerSpec {
    ContainerSpec {
        format,
        cluster_size_bytes,
        extended_l2: false,
        preallocation: Preallocation::Off,
        fs: Filesystem::Ext4,
        image_size_bytes: IMAGE_BYTES,
    }
}

/// Whether the test can run here; says why not otherwise.
fn can_run(test: &str) -> bool {
    root_or_skip(test, NEEDS)
        && ["losetup", "mkfs.ext4", "qemu-img", "qemu-storage-daemon"]
            .iter()
            .all(|program| have_or_skip(test, program))
}

/// Writes a file of `WRITTEN_BYTES` in the container; with `sync`, fsyncs it.
fn write_file(container: &Container, sync: bool) {
    let path = container.mount_point().join("data");
    let mut file = std::fs::File::create(&path).expect("create a file in the container");
    let block: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    for _ in 0..WRITTEN_BYTES / block.len() {
        file.write_all(&block).expect("write in the container");
    }
    if sync {
        file.sync_all().expect("fsync in the container");
    }
}

/// Asserts that the file `write_file` made lies, byte for byte, where the filesystem
/// inside says in each layer that holds the device as it is (the only place ratelab
/// counts those layers' cache against a read); `false` where the filesystem does not
/// say in device offsets.
fn file_lies_where_its_extents_say(container: &Container, label: &str) -> bool {
    use std::os::unix::fs::FileExt;
    let path = container.mount_point().join("data");
    let contents = std::fs::read(&path).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let Some(ranges) = ratelab::platform::extents::on_device(&file, contents.len() as u64) else {
        return false;
    };
    let layers: Vec<_> = container
        .layers()
        .into_iter()
        .filter(|l| l.same_offsets)
        .collect();
    assert!(
        !layers.is_empty(),
        "{label}: no layer holds the device as it is"
    );
    for layer in layers {
        let below = std::fs::File::open(&layer.path).unwrap();
        let mut placed = Vec::with_capacity(contents.len());
        for range in &ranges {
            let mut bytes = vec![0u8; (range.end - range.start) as usize];
            below.read_exact_at(&mut bytes, range.start).unwrap();
            placed.extend_from_slice(&bytes);
        }
        assert!(
            placed == contents,
            "{label}: the {} does not hold the file at {ranges:?}",
            layer.name
        );
    }
    true
}

/// Asserts that nothing of ours is left under `dir`, and that the system agrees.
fn assert_nothing_left(dir: &Path) {
    assert_eq!(
        leftovers(dir),
        Vec::<String>::new(),
        "left in {}",
        dir.display()
    );
    let dir = std::fs::canonicalize(dir).unwrap();
    let dir = dir.to_string_lossy();
    let losetup = std::process::Command::new("losetup")
        .arg("-a")
        .output()
        .unwrap();
    let losetup = String::from_utf8_lossy(&losetup.stdout);
    assert!(
        !losetup.contains(&*dir),
        "losetup -a still lists: {losetup}"
    );
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    assert!(
        !mounts.contains(&*dir),
        "/proc/mounts still lists: {mounts}"
    );
}

/// Asserts that `leftovers` sees every part of a live container.
fn assert_live_parts_are_found(container: &Container, dir: &Path) {
    let found = leftovers(dir);
    let has = |text: &str| found.iter().any(|line| line.contains(text));
    let loop_line = format!("loop device {}", container.loop_device().display());
    let mut expected = vec![
        loop_line.as_str(),
        "ext4 mount of /dev/loop",
        "file ",
        "folder ",
    ];
    if container.spec().format == Format::Qcow2 {
        expected.extend(["fuse mount of /dev/fuse", "qemu-storage-daemon process"]);
    }
    for text in expected {
        assert!(
            has(text),
            "{text:?} missing from leftovers of a live container: {found:#?}"
        );
    }
}

#[test]
fn each_format_is_made_written_and_removed_without_a_trace() {
    if !can_run("each_format_is_made_written_and_removed_without_a_trace") {
        return;
    }
    let specs = [
        spec(Format::RawSparse, None),
        spec(Format::RawPrealloc, None),
        spec(Format::Qcow2, Some(64 << 10)),
        spec(Format::Qcow2, Some(4 << 10)),
    ];
    for spec in specs {
        let label = spec.label();
        let dir = common::disk_tempdir();
        ratelab::platform::container::check_environment(
            std::slice::from_ref(&spec),
            dir.path(),
            WRITTEN_BYTES as u64,
        )
        .expect("this machine can hold the container");
        let started = Instant::now();
        let mut container = Container::create(&spec, dir.path(), "c0")
            .unwrap_or_else(|e| panic!("{label}: {e:#}: {:?}", e.source()));
        let create_seconds = started.elapsed().as_secs_f64();

        let image = container.image_path().to_path_buf();
        let names: Vec<&str> = container.layers().iter().map(|l| l.name).collect();
        if spec.format == Format::Qcow2 {
            assert!(
                !container.direct_io(),
                "{label}: the loop on FUSE must be buffered"
            );
            assert_eq!(names, ["export", "image"], "{label}");
            assert_eq!(container.layers()[0].path, image.with_extension("export"));
            let pid = container.daemon_pid().expect("a daemon");
            // Its own process group, so that a Ctrl-C at the terminal does not reach it.
            let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
            assert_eq!(rustix::process::getpgid(Some(pid)).unwrap(), pid);
        } else {
            assert!(container.direct_io(), "{label}: the loop has no direct I/O");
            assert_eq!(names, ["image"], "{label}");
            assert_eq!(container.daemon_pid(), None, "{label}");
            assert_eq!(container.daemon_cpu_seconds(), None, "{label}");
        }
        assert_eq!(container.layers().last().unwrap().path, image);
        let device = container.loop_device().to_string_lossy().into_owned();
        assert!(device.starts_with("/dev/loop"), "{label}: {device}");

        write_file(&container, true);
        assert!(
            file_lies_where_its_extents_say(&container, &label),
            "{label}"
        );
        assert_live_parts_are_found(&container, dir.path());
        let allocated = container.allocated_bytes().unwrap();
        let inner = container.inner_used_bytes().unwrap();
        assert!(
            inner >= WRITTEN_BYTES as u64,
            "{label}: inner fs holds {inner} bytes"
        );
        assert!(
            allocated >= WRITTEN_BYTES as u64,
            "{label}: image takes {allocated} bytes"
        );
        if spec.format == Format::RawPrealloc {
            assert!(
                allocated >= IMAGE_BYTES,
                "{label}: {allocated} bytes preallocated"
            );
        }
        let host = container.host_device();
        assert!(
            host.is_some(),
            "{label}: no host device found for {}",
            image.display()
        );
        let cpu = container.daemon_cpu_seconds();
        if spec.format == Format::Qcow2 {
            assert!(cpu.is_some_and(|s| s > 0.0), "{label}: daemon CPU {cpu:?}");
        }

        let started = Instant::now();
        container.teardown().expect("teardown");
        let teardown_seconds = started.elapsed().as_secs_f64();
        container
            .teardown()
            .expect("a second teardown does nothing");
        eprintln!(
            "{label}: create+attach+mkfs+fsck+mount {create_seconds:.2} s, teardown \
             {teardown_seconds:.2} s; after 20 MiB: image {} MiB, inner {} MiB, host {}, \
             daemon CPU {cpu:?} s",
            allocated >> 20,
            inner >> 20,
            host.unwrap()
        );
        assert_nothing_left(dir.path());
    }
}

#[test]
fn a_crashed_daemon_leaves_nothing_after_teardown() {
    if !can_run("a_crashed_daemon_leaves_nothing_after_teardown") {
        return;
    }
    let dir = common::disk_tempdir();
    let mut container = Container::create(&spec(Format::Qcow2, None), dir.path(), "crash")
        .expect("create a qcow2 container");
    // Unsynced data: the unmount must write it back into a dead export.
    write_file(&container, false);
    let pid = container.daemon_pid().expect("a daemon");
    let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    // Wait until it is dead (a zombie: the container has not reaped it yet).
    let stat = format!("/proc/{}/stat", pid.as_raw_nonzero());
    let started = Instant::now();
    while !std::fs::read_to_string(&stat).is_ok_and(|s| s.contains(") Z ")) {
        assert!(started.elapsed().as_secs() < 5, "the daemon did not die");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let stale = leftovers(dir.path());
    eprintln!(
        "after kill -9 the export is {}",
        if stale.iter().any(|l| l.starts_with("fuse mount")) {
            "still mounted (stale)"
        } else {
            "unmounted"
        }
    );
    let result = container.teardown();
    eprintln!("teardown after the daemon was killed: {result:?}");
    assert_nothing_left(dir.path());
}

#[test]
fn a_dropped_container_is_torn_down() {
    if !can_run("a_dropped_container_is_torn_down") {
        return;
    }
    let dir = common::disk_tempdir();
    for (name, spec) in [
        ("raw", spec(Format::RawSparse, None)),
        ("qcow2", spec(Format::Qcow2, None)),
    ] {
        let container = Container::create(&spec, dir.path(), name).expect("create");
        write_file(&container, false);
        drop(container);
    }
    assert_nothing_left(dir.path());
}

#[test]
fn a_failure_halfway_removes_what_was_made() {
    if !can_run("a_failure_halfway_removes_what_was_made") {
        return;
    }
    let dir = common::disk_tempdir();
    // The mount folder is in the way: creation fails after the image is made, attached
    // and formatted, and what it made must go; the folder it did not make stays.
    std::fs::create_dir(dir.path().join("c0.mnt")).unwrap();
    let mount_folder = std::fs::canonicalize(dir.path().join("c0.mnt")).unwrap();
    for spec in [spec(Format::RawPrealloc, None), spec(Format::Qcow2, None)] {
        let err = match Container::create(&spec, dir.path(), "c0") {
            Ok(_) => panic!("{}: made over an existing mount folder", spec.label()),
            Err(e) => e,
        };
        let message = format!("{err}: {}", err.source().unwrap());
        assert!(
            message.starts_with(&format!("cannot create {}", mount_folder.display())),
            "{message}"
        );
        assert_eq!(
            leftovers(dir.path()),
            [format!("folder {}", mount_folder.display())]
        );
    }
}

#[test]
fn xfs_and_btrfs_are_made_checked_and_removed() {
    let test = "xfs_and_btrfs_are_made_checked_and_removed";
    if !can_run(test) || !have_or_skip(test, "mkfs.xfs") || !have_or_skip(test, "mkfs.btrfs") {
        return;
    }
    let dir = common::disk_tempdir();
    for fs in [Filesystem::Xfs, Filesystem::Btrfs] {
        for format in [Format::RawSparse, Format::Qcow2] {
            let spec = ContainerSpec {
                fs,
                // mkfs.xfs wants more than 300 MiB.
                image_size_bytes: 320 << 20,
                ..spec(format, None)
            };
            let started = Instant::now();
            let mut container = Container::create(&spec, dir.path(), "c0")
                .unwrap_or_else(|e| panic!("{fs} in {}: {e}: {:?}", spec.label(), e.source()));
            let create_seconds = started.elapsed().as_secs_f64();
            write_file(&container, true);
            // btrfs places files in its own address space, not the device's.
            assert_eq!(
                file_lies_where_its_extents_say(&container, &spec.label()),
                fs == Filesystem::Xfs,
                "{fs} in {}",
                spec.label()
            );
            let inner = container.inner_used_bytes().unwrap();
            assert!(
                inner >= WRITTEN_BYTES as u64,
                "{fs}: inner fs holds {inner} bytes"
            );
            let started = Instant::now();
            container.teardown().expect("teardown");
            eprintln!(
                "{fs} in {}: create {create_seconds:.2} s, teardown {:.2} s",
                spec.label(),
                started.elapsed().as_secs_f64()
            );
            assert_nothing_left(dir.path());
        }
    }
}

#[test]
fn a_busy_container_is_detached_lazily_and_goes_when_released() {
    if !can_run("a_busy_container_is_detached_lazily_and_goes_when_released") {
        return;
    }
    let dir = common::disk_tempdir();
    let mut container =
        Container::create(&spec(Format::Qcow2, None), dir.path(), "busy").expect("create");
    write_file(&container, true);
    // An open file keeps the filesystem busy, as a process still working inside would.
    let open = std::fs::File::open(container.mount_point().join("data")).unwrap();
    let err = container
        .teardown()
        .expect_err("a busy container cannot go at once");
    let message = format!("{err}: {}", err.source().unwrap());
    assert!(message.contains("umount -l"), "{message}");
    eprintln!("teardown of a busy container: {message}");
    drop(open);
    // Once released, the lazily detached filesystem, loop device and export go.
    let started = Instant::now();
    while !leftovers(dir.path()).is_empty() {
        assert!(
            started.elapsed().as_secs() < 10,
            "still left after release: {:#?}",
            leftovers(dir.path())
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    container.teardown().expect("a teardown after release");
    assert_nothing_left(dir.path());
}
