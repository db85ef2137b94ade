//! The mount table from /proc/self/mountinfo: which mount holds a path, and
//! which mounts hold data rather than kernel interfaces.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::{Error, Roots};

/// Filesystem types that expose the kernel rather than store data.
const KERNEL_INTERFACES: &[&str] = &[
    "proc",
    "sysfs",
    "cgroup",
    "cgroup2",
    "devpts",
    "mqueue",
    "debugfs",
    "tracefs",
    "securityfs",
    "pstore",
    "bpf",
    "configfs",
    "fusectl",
    "hugetlbfs",
    "autofs",
    "binfmt_misc",
    "devtmpfs",
    "nsfs",
    "rpc_pipefs",
    "efivarfs",
    "selinuxfs",
];

/// One line of mountinfo (proc_pid_mountinfo(5)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MountEntry {
    /// Major number of `st_dev` for files on this filesystem.
    pub(crate) major: u32,
    /// Minor number of `st_dev`.
    pub(crate) minor: u32,
    /// The folder of the filesystem mounted here (not `/` for bind mounts).
    pub(crate) root: PathBuf,
    /// Where it is mounted.
    pub(crate) mount_point: PathBuf,
    /// Filesystem type (`ext4`, `fuse.sshfs`).
    pub(crate) fs_type: String,
    /// Mount source (`/dev/vda`, `tmpfs`, `server:/export`).
    pub(crate) source: String,
}

/// The path of the mount table under `roots`.
pub(crate) fn mountinfo_path(roots: &Roots) -> PathBuf {
    roots.proc("self/mountinfo")
}

/// Reads and parses the mount table.
pub(crate) fn read_mountinfo(roots: &Roots) -> Result<Vec<MountEntry>, Error> {
    let path = mountinfo_path(roots);
    let text = std::fs::read_to_string(&path).map_err(|source| Error::Inspect { path, source })?;
    Ok(parse_mountinfo(&text))
}

/// Parses mountinfo text; lines that do not parse are left out.
pub(crate) fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines().filter_map(parse_line).collect()
}

// Fields: id parent major:minor root mount-point options [optional...] - type source super-options
fn parse_line(line: &str) -> Option<MountEntry> {
    let fields: Vec<&str> = line.split(' ').collect();
    let separator = 6 + fields.iter().skip(6).position(|field| *field == "-")?;
    let (major, minor) = fields.get(2)?.split_once(':')?;
    Some(MountEntry {
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
        root: unescaped_path(fields.get(3)?),
        mount_point: unescaped_path(fields.get(4)?),
        fs_type: unescaped_text(fields.get(separator + 1)?),
        source: unescaped_text(fields.get(separator + 2)?),
    })
}

/// Undoes the kernel's octal escapes (`\040` for space, `\011`, `\012`, `\134`).
pub(crate) fn unescape(field: &str) -> Vec<u8> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).filter(|digits| {
            bytes[i] == b'\\' && digits.iter().all(|digit| (b'0'..=b'7').contains(digit))
        });
        match octal {
            Some(digits) => {
                let value = digits
                    .iter()
                    .fold(0u32, |acc, digit| acc * 8 + u32::from(digit - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    out
}

fn unescaped_path(field: &str) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(&unescape(field)))
}

fn unescaped_text(field: &str) -> String {
    String::from_utf8_lossy(&unescape(field)).into_owned()
}

/// The mount holding `path` (canonical): the longest mount point that is a
/// prefix of it, and of mounts stacked on one point the last, which is on top.
pub(crate) fn mount_of<'a>(entries: &'a [MountEntry], path: &Path) -> Option<&'a MountEntry> {
    // `max_by_key` returns the last of equal maxima, which is the top of a stack.
    entries
        .iter()
        .filter(|entry| path.starts_with(&entry.mount_point))
        .max_by_key(|entry| entry.mount_point.components().count())
}

/// Whether a filesystem type is a kernel interface rather than a store of data.
pub(crate) fn is_kernel_interface(fs_type: &str) -> bool {
    KERNEL_INTERFACES.contains(&fs_type)
}

/// The mounts that store data: no kernel interfaces, nothing under /proc or
/// /sys, no mount hidden under a later one on the same point, and one entry
/// per bind-mounted device and root.
pub(crate) fn data_mounts(entries: &[MountEntry]) -> Vec<&MountEntry> {
    let mut seen = HashSet::new();
    entries
        .iter()
        .enumerate()
        .filter(|(index, entry)| {
            !entries[index + 1..]
                .iter()
                .any(|later| later.mount_point == entry.mount_point)
        })
        .map(|(_, entry)| entry)
        .filter(|entry| {
            !is_kernel_interface(&entry.fs_type)
                && !entry.mount_point.starts_with("/proc")
                && !entry.mount_point.starts_with("/sys")
        })
        .filter(|entry| seen.insert((entry.major, entry.minor, entry.root.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24684112k
27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
30 25 0:27 / /dev/shm rw,relatime - tmpfs tmpfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
42 27 7:0 / /mnt/my\\040disk rw,relatime shared:5 master:2 - ext4 /dev/loop0 rw
43 27 7:0 / /mnt/my\\040disk2 rw,relatime - ext4 /dev/loop0 rw
44 27 254:0 /srv /mnt/bind rw,relatime - ext4 /dev/vda rw
45 27 0:50 / /mnt/ab rw - nfs4 server:/export rw
not a mountinfo line
";

    #[test]
    fn fields_and_optional_tags_parse() {
        let entries = parse_mountinfo(SAMPLE);
        assert_eq!(entries.len(), 9);
        let root = &entries[2];
        assert_eq!((root.major, root.minor), (254, 0));
        assert_eq!(root.mount_point, Path::new("/"));
        assert_eq!(root.fs_type, "ext4");
        assert_eq!(root.source, "/dev/vda");
        assert_eq!(entries[7].root, Path::new("/srv"));
        assert_eq!(entries[8].source, "server:/export");
    }

    #[test]
    fn octal_escapes_are_undone() {
        let entries = parse_mountinfo(SAMPLE);
        assert_eq!(entries[5].mount_point, Path::new("/mnt/my disk"));
        assert_eq!(unescape(r"a\011b\012c\134d"), b"a\tb\nc\\d");
        assert_eq!(unescape(r"trailing\04"), b"trailing\\04");
        assert_eq!(unescape(r"not\999octal"), b"not\\999octal");
    }

    #[test]
    fn longest_mount_point_prefix_wins() {
        let entries = parse_mountinfo(SAMPLE);
        let disk = mount_of(&entries, Path::new("/mnt/my disk/a/b")).unwrap();
        assert_eq!(disk.mount_point, Path::new("/mnt/my disk"));
        // Whole components only: /mnt/my disk2 is not under /mnt/my disk.
        let disk2 = mount_of(&entries, Path::new("/mnt/my disk2/x")).unwrap();
        assert_eq!(disk2.mount_point, Path::new("/mnt/my disk2"));
        let root = mount_of(&entries, Path::new("/mnt/a")).unwrap();
        assert_eq!(root.mount_point, Path::new("/"));
        assert_eq!(
            mount_of(&entries, Path::new("/mnt/ab")).unwrap().fs_type,
            "nfs4"
        );
    }

    #[test]
    fn the_top_of_stacked_mounts_wins() {
        let entries = parse_mountinfo(SAMPLE);
        let shm = mount_of(&entries, Path::new("/dev/shm/x")).unwrap();
        assert_eq!((shm.major, shm.minor), (0, 27));
    }

    #[test]
    fn no_mount_matches_a_relative_path() {
        let entries = parse_mountinfo(SAMPLE);
        assert_eq!(mount_of(&entries, Path::new("relative")), None);
    }

    #[test]
    fn data_mounts_skip_interfaces_hidden_mounts_and_duplicate_binds() {
        let entries = parse_mountinfo(SAMPLE);
        let points: Vec<&Path> = data_mounts(&entries)
            .iter()
            .map(|entry| entry.mount_point.as_path())
            .collect();
        assert_eq!(
            points,
            [
                Path::new("/"),
                Path::new("/dev/shm"),
                Path::new("/mnt/my disk"),
                Path::new("/mnt/bind"),
                Path::new("/mnt/ab"),
            ]
        );
        assert_eq!(data_mounts(&entries)[1].minor, 27);
    }
}
