//! Storage chains probed against fake sysfs and procfs trees built in a temp
//! folder, with the same symlinks the kernel makes, so each kind of device can
//! be tested on a machine that has none of them.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use super::Roots;
use super::block::{Prober, StepKind, StorageChain, probe_mounts_in};

/// A fake root: `sys/`, `proc/self/mountinfo`, and real folders to probe.
struct FakeSystem {
    _dir: tempfile::TempDir,
    root: PathBuf,
    mountinfo: String,
}

impl FakeSystem {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        Self {
            _dir: dir,
            root,
            mountinfo: String::new(),
        }
    }

    fn roots(&self) -> Roots {
        std::fs::write(self.root.join("proc/self/mountinfo"), &self.mountinfo).unwrap();
        Roots::at(&self.root)
    }

    fn file(&self, relative: &str, text: &str) {
        let path = self.root.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn link(&self, relative: &str, target: &str) {
        let path = self.root.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        symlink(target, path).unwrap();
    }

    /// A block device at `sys/devices/{place}` with the links sysfs has to it.
    fn block_device(&self, number: &str, place: &str) {
        let name = place.rsplit('/').next().unwrap();
        self.file(&format!("sys/devices/{place}/dev"), &format!("{number}\n"));
        self.file(
            &format!("sys/devices/{place}/uevent"),
            &format!("DEVNAME={name}\n"),
        );
        self.link(
            &format!("sys/dev/block/{number}"),
            &format!("../../devices/{place}"),
        );
        self.link(
            &format!("sys/class/block/{name}"),
            &format!("../../devices/{place}"),
        );
    }

    /// A real folder to probe, listed in mountinfo as a mount of `number`.
    fn mount(&mut self, folder: &str, number: &str, fs_type: &str, source: &str) -> PathBuf {
        let point = self.root.join(folder);
        std::fs::create_dir_all(&point).unwrap();
        let id = self.mountinfo.lines().count() + 20;
        self.mountinfo += &format!(
            "{id} 1 {number} / {} rw,relatime shared:1 - {fs_type} {source} rw\n",
            point.display()
        );
        std::fs::create_dir_all(self.root.join("proc/self")).unwrap();
        point
    }

    fn probe(&self, path: &Path) -> StorageChain {
        let roots = self.roots();
        Prober::new(&roots).unwrap().probe(path, &[]).unwrap()
    }
}

fn kinds(chain: &StorageChain) -> Vec<StepKind> {
    chain.steps.iter().map(|step| step.kind).collect()
}

fn assert_rate(chain: &StorageChain, bytes_per_sec: f64) {
    let rate = chain.max_bytes_per_sec.expect("a known limit");
    assert!(
        (rate - bytes_per_sec).abs() < 1.0,
        "{rate} != {bytes_per_sec}: {chain:#?}"
    );
}

const NVME_PCI: &str = "pci0000:00/0000:00:1d.0/0000:3d:00.0";

fn nvme_gen3_x4(fake: &FakeSystem) {
    fake.file(
        &format!("sys/devices/{NVME_PCI}/current_link_speed"),
        "8.0 GT/s PCIe\n",
    );
    fake.file(&format!("sys/devices/{NVME_PCI}/current_link_width"), "4\n");
    fake.file(
        &format!("sys/devices/{NVME_PCI}/nvme/nvme0/transport"),
        "pcie\n",
    );
    fake.block_device("259:0", &format!("{NVME_PCI}/nvme/nvme0/nvme0n1"));
}

fn sata_disk(fake: &FakeSystem, speed: &str) {
    let disk = "pci0000:00/0000:00:17.0/ata3/host2/target2:0:0/2:0:0:0/block/sda";
    fake.block_device("8:0", disk);
    fake.block_device("8:1", &format!("{disk}/sda1"));
    fake.file(&format!("sys/devices/{disk}/sda1/partition"), "1\n");
    fake.file("sys/class/ata_link/link3/sata_spd", speed);
}

fn usb_disk(fake: &FakeSystem, speed: &str) {
    let bus = "pci0000:00/0000:00:14.0/usb2";
    fake.file(&format!("sys/devices/{bus}/speed"), "20000\n");
    fake.file(&format!("sys/devices/{bus}/2-1/speed"), speed);
    fake.block_device(
        "8:16",
        &format!("{bus}/2-1/2-1:1.0/host4/target4:0:0/4:0:0:0/block/sdb"),
    );
}

#[test]
fn nvme_gen3_x4_is_limited_by_its_pcie_link() {
    let mut fake = FakeSystem::new();
    nvme_gen3_x4(&fake);
    let point = fake.mount("mnt/nvme", "259:0", "ext4", "/dev/nvme0n1");
    let chain = fake.probe(&point.join("."));
    assert_eq!(kinds(&chain), [StepKind::Filesystem, StepKind::Nvme]);
    assert_rate(&chain, 8e9 * 4.0 * 128.0 / 130.0 / 8.0);
    assert_eq!(chain.steps[1].name, "/dev/nvme0n1");
    assert_eq!(
        chain.limit_via.as_deref(),
        Some("/dev/nvme0n1: NVMe over PCIe 8.0 GT/s x4 (3.94 GB/s after 128b/130b)")
    );
    assert_eq!(chain.fs_type, "ext4");
    assert_eq!(chain.mount_point, point);
}

#[test]
fn a_partition_leads_to_its_disk() {
    let mut fake = FakeSystem::new();
    sata_disk(&fake, "6.0 Gbps\n");
    let point = fake.mount("mnt/sata", "8:1", "xfs", "/dev/sda1");
    let chain = fake.probe(&point);
    assert_eq!(
        kinds(&chain),
        [StepKind::Filesystem, StepKind::Partition, StepKind::Sata]
    );
    assert_eq!(chain.steps[1].detail, "partition 1 of /dev/sda");
    assert_rate(&chain, 600e6);
    assert_eq!(
        chain.limit_via.as_deref(),
        Some("/dev/sda: SATA link 6.0 Gbps (600 MB/s after 8b/10b)")
    );
}

#[test]
fn an_unknown_sata_speed_stays_unknown() {
    let mut fake = FakeSystem::new();
    sata_disk(&fake, "<unknown>\n");
    let point = fake.mount("mnt/sata", "8:0", "ext4", "/dev/sda");
    let chain = fake.probe(&point);
    assert_eq!(kinds(&chain), [StepKind::Filesystem, StepKind::Sata]);
    assert_eq!(chain.max_bytes_per_sec, None);
    assert_eq!(chain.limit_via, None);
}

#[test]
fn usb_speeds_become_limits() {
    for (speed, bytes_per_sec) in [
        ("5000\n", 500e6),
        ("10000\n", 10e9 * 128.0 / 132.0 / 8.0),
        ("480\n", 60e6),
    ] {
        let mut fake = FakeSystem::new();
        usb_disk(&fake, speed);
        let point = fake.mount("mnt/usb", "8:16", "exfat", "/dev/sdb");
        let chain = fake.probe(&point);
        assert_eq!(kinds(&chain), [StepKind::Filesystem, StepKind::Usb]);
        // The disk's own device speed counts, not its bus's 20000.
        assert_rate(&chain, bytes_per_sec);
    }
}

#[test]
fn a_loop_device_is_followed_to_its_backing_file() {
    let mut fake = FakeSystem::new();
    sata_disk(&fake, "6.0 Gbps\n");
    let backing_mount = fake.mount("mnt/sata", "8:1", "ext4", "/dev/sda1");
    let image = backing_mount.join("disk.img");
    std::fs::write(&image, b"").unwrap();
    fake.block_device("7:0", "virtual/block/loop0");
    fake.file(
        "sys/devices/virtual/block/loop0/loop/backing_file",
        &format!("{}\n", image.display()),
    );
    fake.file("sys/devices/virtual/block/loop0/loop/dio", "1\n");
    let point = fake.mount("mnt/loop", "7:0", "ext4", "/dev/loop0");
    let chain = fake.probe(&point);
    assert_eq!(
        kinds(&chain),
        [
            StepKind::Filesystem,
            StepKind::Loop,
            StepKind::Filesystem,
            StepKind::Partition,
            StepKind::Sata
        ]
    );
    assert_eq!(
        chain.steps[1].detail,
        format!("backing file {}, direct I/O on", image.display())
    );
    assert_rate(&chain, 600e6);
}

#[test]
fn a_loop_cycle_stops() {
    let mut fake = FakeSystem::new();
    fake.block_device("7:1", "virtual/block/loop1");
    let point = fake.mount("mnt/loop", "7:1", "ext4", "/dev/loop1");
    let image = point.join("self.img");
    std::fs::write(&image, b"").unwrap();
    fake.file(
        "sys/devices/virtual/block/loop1/loop/backing_file",
        &image.display().to_string(),
    );
    let chain = fake.probe(&point);
    assert_eq!(
        kinds(&chain),
        [
            StepKind::Filesystem,
            StepKind::Loop,
            StepKind::Filesystem,
            StepKind::Other
        ]
    );
    assert!(chain.steps[3].detail.contains("cycle"), "{chain:#?}");
    assert_eq!(chain.max_bytes_per_sec, None);
}

#[test]
fn device_mapper_over_several_members_is_bounded_by_their_sum() {
    let mut fake = FakeSystem::new();
    nvme_gen3_x4(&fake);
    sata_disk(&fake, "6.0 Gbps\n");
    fake.block_device("253:0", "virtual/block/dm-0");
    fake.file("sys/devices/virtual/block/dm-0/dm/name", "vg-data\n");
    fake.file("sys/devices/virtual/block/dm-0/dm/uuid", "LVM-abc\n");
    fake.link(
        "sys/devices/virtual/block/dm-0/slaves/nvme0n1",
        &format!("../../../../{NVME_PCI}/nvme/nvme0/nvme0n1"),
    );
    fake.link(
        "sys/devices/virtual/block/dm-0/slaves/sda1",
        "../../../../pci0000:00/0000:00:17.0/ata3/host2/target2:0:0/2:0:0:0/block/sda/sda1",
    );
    let point = fake.mount("mnt/lvm", "253:0", "ext4", "/dev/mapper/vg-data");
    let chain = fake.probe(&point);
    // A striped volume can read from both links at once: the sum is the honest bound.
    assert_eq!(
        kinds(&chain),
        [StepKind::Filesystem, StepKind::DeviceMapper]
    );
    assert_eq!(
        chain.steps[1].detail,
        "LVM volume vg-data over nvme0n1 (3.94 GB/s), sda1 (600 MB/s): at most their sum, 4.54 GB/s"
    );
    assert_rate(&chain, 8e9 * 4.0 * 128.0 / 130.0 / 8.0 + 600e6);
}

#[test]
fn a_stack_with_a_member_of_unknown_limit_has_no_limit() {
    let mut fake = FakeSystem::new();
    sata_disk(&fake, "6.0 Gbps\n");
    fake.block_device("254:0", "pci0000:00/0000:00:02.0/virtio1/block/vda");
    fake.block_device("9:0", "virtual/block/md0");
    fake.link(
        "sys/devices/virtual/block/md0/slaves/sda1",
        "../../../../pci0000:00/0000:00:17.0/ata3/host2/target2:0:0/2:0:0:0/block/sda/sda1",
    );
    fake.link(
        "sys/devices/virtual/block/md0/slaves/vda",
        "../../../../pci0000:00/0000:00:02.0/virtio1/block/vda",
    );
    let point = fake.mount("mnt/md", "9:0", "ext4", "/dev/md0");
    let chain = fake.probe(&point);
    assert_eq!(chain.max_bytes_per_sec, None, "{chain:#?}");
    assert!(
        chain.steps[1].detail.ends_with("limit unknown"),
        "{}",
        chain.steps[1].detail
    );
}

#[test]
fn unrecognised_and_virtio_disks_have_no_limit() {
    let mut fake = FakeSystem::new();
    fake.block_device("202:0", "vbd-51712/block/xvda");
    fake.block_device("254:0", "pci0000:00/0000:00:02.0/virtio1/block/vda");
    let xen = fake.mount("mnt/xen", "202:0", "ext4", "/dev/xvda");
    let vda = fake.mount("mnt/vda", "254:0", "ext4", "/dev/vda");
    let chain = fake.probe(&xen);
    assert_eq!(kinds(&chain), [StepKind::Filesystem, StepKind::Other]);
    assert_eq!((chain.max_bytes_per_sec, chain.limit_via), (None, None));
    let chain = fake.probe(&vda);
    assert_eq!(kinds(&chain), [StepKind::Filesystem, StepKind::Virtio]);
    assert_eq!(chain.steps[1].detail, "virtual disk: limit unknown");
    assert_eq!(chain.max_bytes_per_sec, None);
}

#[test]
fn filesystems_without_a_block_device() {
    let mut fake = FakeSystem::new();
    fake.block_device("253:1", "virtual/block/zram0");
    let shm = fake.mount("dev/shm", "0:23", "tmpfs", "tmpfs");
    let nfs = fake.mount("mnt/nfs", "0:50", "nfs4", "server:/export");
    let zram = fake.mount("mnt/zram", "253:1", "ext4", "/dev/zram0");
    let no_sysfs = fake.mount("mnt/gone", "8:48", "ext4", "/dev/sdd");
    let cases = [
        (shm, StepKind::Memory),
        (nfs, StepKind::Other),
        (zram, StepKind::Memory),
        (no_sysfs, StepKind::Other),
    ];
    for (point, kind) in cases {
        let chain = fake.probe(&point);
        assert_eq!(kinds(&chain), [StepKind::Filesystem, kind], "{chain:#?}");
        assert_eq!(chain.max_bytes_per_sec, None);
    }
}

#[test]
fn an_anonymous_device_is_found_from_its_source() {
    let mut fake = FakeSystem::new();
    nvme_gen3_x4(&fake);
    // btrfs reports st_dev 0:N though /dev/nvme0n1 holds it.
    let point = fake.mount("mnt/btrfs", "0:40", "btrfs", "/dev/nvme0n1");
    let chain = fake.probe(&point);
    assert_eq!(kinds(&chain), [StepKind::Filesystem, StepKind::Nvme]);
    assert_rate(&chain, 8e9 * 4.0 * 128.0 / 130.0 / 8.0);
}

#[test]
fn multipath_nvme_finds_its_controllers() {
    let mut fake = FakeSystem::new();
    nvme_gen3_x4(&fake);
    let subsystem = "sys/devices/virtual/nvme-subsystem/nvme-subsys0";
    fake.block_device("259:5", "virtual/nvme-subsystem/nvme-subsys0/nvme0n2");
    fake.link(
        &format!("{subsystem}/nvme0"),
        &format!("../../../{NVME_PCI}/nvme/nvme0"),
    );
    let point = fake.mount("mnt/mp", "259:5", "xfs", "/dev/nvme0n2");
    assert_rate(&fake.probe(&point), 8e9 * 4.0 * 128.0 / 130.0 / 8.0);
}

#[test]
fn probing_a_path_outside_every_mount_fails_with_its_name() {
    let mut fake = FakeSystem::new();
    fake.mount("mnt/a", "0:23", "tmpfs", "tmpfs");
    let roots = fake.roots();
    let prober = Prober::new(&roots).unwrap();
    let err = prober.probe(&fake.root.join("proc"), &[]).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cannot find the mount holding /"),
        "{err}"
    );
    let missing = fake.root.join("no/such/path");
    let err = prober.probe(&missing, &[]).unwrap_err();
    assert!(err.to_string().contains("no/such/path"), "{err}");
}

#[test]
fn probe_mounts_probes_each_data_mount_once() {
    let mut fake = FakeSystem::new();
    nvme_gen3_x4(&fake);
    fake.mount("mnt/nvme", "259:0", "ext4", "/dev/nvme0n1");
    fake.mount("mnt/proc", "0:21", "proc", "proc");
    fake.mount("mnt/shm", "0:23", "tmpfs", "tmpfs");
    let chains = probe_mounts_in(&fake.roots());
    let types: Vec<&str> = chains.iter().map(|chain| chain.fs_type.as_str()).collect();
    assert_eq!(types, ["ext4", "tmpfs"]);
}

#[test]
fn this_machine_probes() {
    // Prints the real chains; run with --nocapture to see them.
    for path in ["/", "/dev/shm"] {
        if Path::new(path).exists() {
            let chain = super::probe_path(Path::new(path)).unwrap();
            assert_eq!(chain.steps[0].kind, StepKind::Filesystem);
            eprintln!("{}", serde_json::to_string_pretty(&chain).unwrap());
        }
    }
    assert!(!super::probe_mounts().is_empty());
}
