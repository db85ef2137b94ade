//! What this machine must offer before any container is made: root, the loop driver,
//! FUSE and QEMU's tools for qcow2, each filesystem's mkfs and checker, and room on
//! the host. A run that would fail halfway is refused here, naming what is missing.

use std::path::Path;

use super::spec::{ContainerSpec, Filesystem, Format};
use super::tools::on_path;
use crate::error::Error;
use crate::vocab::units::format_size;

/// What the space refusal says needs the room, and what the user can change.
const SPACE_ABOUT: &(&str, &str) = &(
    "largest container",
    "use a smaller --image-size, smaller --sizes or another target",
);

/// Refuses, before anything is made in `dir`, specs that cannot be made or this machine
/// cannot hold: `written_bytes` is the most that will be written inside one container.
pub fn check_environment(
    specs: &[ContainerSpec],
    dir: &Path,
    written_bytes: u64,
) -> Result<(), Error> {
    for spec in specs {
        spec.validate()?;
    }
    if !rustix::process::geteuid().is_root() {
        return unsupported(
            "disk-image containers need root: attaching loop devices and mounting filesystems are root's",
        );
    }
    if !Path::new("/dev/loop-control").exists() {
        return unsupported(
            "/dev/loop-control is missing: the loop driver is not loaded (modprobe loop); it attaches images",
        );
    }
    need_tool(
        "losetup",
        "util-linux",
        "it attaches images to loop devices",
    )?;
    need_tool("mount", "mount", "it mounts the filesystem inside")?;
    need_tool("umount", "mount", "it unmounts the filesystem inside")?;
    if specs.iter().any(|spec| spec.format == Format::Qcow2) {
        need_tool("qemu-img", "qemu-utils", "it creates qcow2 images")?;
        need_tool(
            "qemu-storage-daemon",
            "qemu-utils",
            "it attaches qcow2 images",
        )?;
        if !Path::new("/dev/fuse").exists() {
            return unsupported(
                "/dev/fuse is missing: the fuse module is not loaded (modprobe fuse); qemu-storage-daemon exports qcow2 images through it",
            );
        }
    }
    let mut checked = Vec::new();
    for spec in specs {
        if !checked.contains(&spec.fs) {
            need_filesystem_tools(spec.fs)?;
            checked.push(spec.fs);
        }
    }
    check_space(specs, dir, written_bytes)
}

/// mkfs and the read-only checker of `fs`.
fn need_filesystem_tools(fs: Filesystem) -> Result<(), Error> {
    let (mkfs, checker, package) = match fs {
        Filesystem::Ext4 => ("mkfs.ext4", "e2fsck", "e2fsprogs"),
        Filesystem::Xfs => ("mkfs.xfs", "xfs_repair", "xfsprogs"),
        Filesystem::Btrfs => ("mkfs.btrfs", "btrfs", "btrfs-progs"),
    };
    need_tool(mkfs, package, &format!("it makes {fs} filesystems"))?;
    need_tool(checker, package, &format!("it checks new {fs} filesystems"))
}

fn need_tool(program: &str, package: &str, why: &str) -> Result<(), Error> {
    match on_path(program) {
        Some(_) => Ok(()),
        None => unsupported(&format!(
            "{program} is not installed (Debian package {package}); {why}"
        )),
    }
}

/// Refuses when the largest container does not fit in `dir`'s free space with a margin:
/// containers are made one after another, each removed before the next.
fn check_space(specs: &[ContainerSpec], dir: &Path, written_bytes: u64) -> Result<(), Error> {
    let Some(needed) = specs
        .iter()
        .map(|spec| spec.host_bytes(written_bytes))
        .max()
    else {
        return Ok(());
    };
    let vfs = rustix::fs::statvfs(dir).map_err(|e| Error::io("inspect", dir, e))?;
    if vfs.f_blocks == 0 {
        // ramfs and some pseudo filesystems report no size at all: nothing to check.
        return Ok(());
    }
    let available = vfs.f_bavail.saturating_mul(vfs.f_frsize);
    let margin = margin(needed);
    if needed.saturating_add(margin) > available {
        return Err(Error::Space {
            about: SPACE_ABOUT,
            path: dir.to_path_buf(),
            needed: format_size(needed),
            margin: format_size(margin),
            available: format_size(available),
        });
    }
    Ok(())
}

/// Room kept free beside a container: 2% of it, 64 MiB at least (the daemon's log,
/// the host filesystem's own metadata for a large file).
fn margin(needed_bytes: u64) -> u64 {
    (needed_bytes / 50).max(64 << 20)
}

fn unsupported(message: &str) -> Result<(), Error> {
    Err(Error::Unsupported(message.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_names_its_package_and_use() {
        let err = need_tool("ratelab-no-mkfs", "e2fsprogs", "it makes ext4 filesystems")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "ratelab-no-mkfs is not installed (Debian package e2fsprogs); it makes ext4 filesystems"
        );
    }

    #[test]
    fn an_image_larger_than_the_free_space_is_refused_before_anything_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let vfs = rustix::fs::statvfs(dir.path()).unwrap();
        let free = vfs.f_bavail * vfs.f_frsize;
        let spec = ContainerSpec {
            format: Format::RawPrealloc,
            cluster_size_bytes: None,
            extended_l2: false,
            preallocation: super::super::Preallocation::Off,
            fs: Filesystem::Ext4,
            image_size_bytes: (free + (1 << 30)).next_multiple_of(512),
        };
        let err = check_space(&[spec], dir.path(), 0).unwrap_err();
        assert!(matches!(err, Error::Space { .. }), "{err}");
        assert!(err.to_string().contains("largest container"), "{err}");
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
    }
}
