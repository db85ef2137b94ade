//! What of a work folder's containers is still on the machine: loop devices on its
//! files, mounts in it, daemons serving its images, files in it. The proof, for tests
//! and for a run's end, that a teardown left nothing behind.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::platform::{Roots, mounts, read_attr};

/// Each thing of ours still present under `dir`, one line each; empty when all is gone.
pub fn leftovers(dir: &Path) -> Vec<String> {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut found = loop_devices(&dir);
    found.extend(mounts_under(&dir));
    found.extend(daemons(&dir));
    found.extend(files(&dir));
    found
}

/// Loop devices whose backing file is under `dir`, gone or not.
fn loop_devices(dir: &Path) -> Vec<String> {
    let Ok(block) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut found: Vec<String> = block
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().as_bytes().starts_with(b"loop"))
        .filter_map(|entry| {
            let backing = read_attr(&entry.path().join("loop/backing_file"))?;
            // A backing file that was removed while attached is named "PATH (deleted)".
            let file = backing.strip_suffix(" (deleted)").unwrap_or(&backing);
            Path::new(file).starts_with(dir).then(|| {
                format!(
                    "loop device /dev/{} on {backing}",
                    entry.file_name().to_string_lossy()
                )
            })
        })
        .collect();
    found.sort();
    found
}

/// Mounts at or under `dir`, stale FUSE exports included.
fn mounts_under(dir: &Path) -> Vec<String> {
    let Ok(entries) = mounts::read_mountinfo(&Roots::system()) else {
        return Vec::new();
    };
    entries
        .iter()
        .filter(|entry| entry.mount_point.starts_with(dir))
        .map(|entry| {
            format!(
                "{} mount of {} at {}",
                entry.fs_type,
                entry.source,
                entry.mount_point.display()
            )
        })
        .collect()
}

/// qemu-storage-daemon processes whose command line names a path under `dir`.
fn daemons(dir: &Path) -> Vec<String> {
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut prefix = dir.as_os_str().as_bytes().to_vec();
    prefix.push(b'/');
    let mut found: Vec<(u32, String)> = processes
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let mut args = cmdline
                .split(|byte| *byte == 0)
                .filter(|arg| !arg.is_empty());
            let program = Path::new(std::ffi::OsStr::from_bytes(args.next()?));
            let ours = program.file_name()?.as_bytes() == b"qemu-storage-daemon"
                && args.any(|arg| arg.windows(prefix.len()).any(|w| w == prefix.as_slice()));
            ours.then(|| {
                let words: Vec<_> = cmdline
                    .split(|byte| *byte == 0)
                    .map(String::from_utf8_lossy)
                    .collect();
                (
                    pid,
                    format!(
                        "qemu-storage-daemon process {pid}: {}",
                        words.join(" ").trim()
                    ),
                )
            })
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, line)| line).collect()
}

/// Files and folders under `dir` (not `dir` itself), not followed into mounts.
fn files(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let Ok(device) = std::fs::metadata(dir).map(|m| m.dev()) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut pending: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        let mut entries: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        entries.sort();
        for path in entries {
            let meta = std::fs::symlink_metadata(&path);
            let is_folder = meta.as_ref().is_ok_and(|m| m.is_dir());
            // A mounted filesystem is reported as a mount; its files are not ours to list.
            let same_device = meta.as_ref().is_ok_and(|m| m.dev() == device);
            let what = match &meta {
                Ok(_) if is_folder => "folder",
                Ok(_) => "file",
                // A stale FUSE export cannot even be inspected (ENOTCONN).
                Err(_) => "uninspectable entry",
            };
            found.push(format!("{what} {}", path.display()));
            if is_folder && same_device {
                pending.push(path);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_folders_under_the_folder_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        assert!(leftovers(dir.path()).is_empty());
        std::fs::create_dir(dir.path().join("c0.mnt")).unwrap();
        std::fs::write(dir.path().join("c0.mnt/inner"), b"x").unwrap();
        std::fs::write(dir.path().join("c0.img"), b"x").unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(
            leftovers(dir.path()),
            [
                format!("file {}", root.join("c0.img").display()),
                format!("folder {}", root.join("c0.mnt").display()),
                format!("file {}", root.join("c0.mnt/inner").display()),
            ]
        );
    }
}
