//! The target folder and the work folder ratelab creates under it: checks before
//! anything is written, and removal of everything written, whatever happens.

use std::fs::File;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::vocab::units::format_size;

/// Prefix of every work folder's name.
const WORK_PREFIX: &str = "ratelab-";
/// The list of kept files, written in a work folder kept with --keep.
const MANIFEST: &str = "ratelab-files.json";

/// Checks that `target` is a writable folder on a filesystem, never a device.
pub fn check_target(target: &Path) -> Result<PathBuf, Error> {
    let refuse = |reason: &str| Error::Target {
        path: target.to_path_buf(),
        reason: reason.to_string(),
    };
    let meta = std::fs::metadata(target).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => refuse("no such file or directory"),
        _ => refuse(&e.to_string()),
    })?;
    if meta.file_type().is_block_device() || meta.file_type().is_char_device() {
        return Err(refuse(
            "it is a device; ratelab never writes to raw devices: give a folder on its filesystem",
        ));
    }
    if !meta.is_dir() {
        return Err(refuse("not a directory"));
    }
    let vfs = rustix::fs::statvfs(target).map_err(|e| refuse(&e.to_string()))?;
    if vfs.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY) {
        return Err(refuse("read-only file system"));
    }
    if rustix::fs::access(
        target,
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
    )
    .is_err()
    {
        return Err(refuse("permission denied"));
    }
    std::fs::canonicalize(target).map_err(|e| refuse(&e.to_string()))
}

/// Metadata and allocation slack for `files` files of `needed_bytes` in all: 2% of
/// the data, 16 MiB at least, and 64 KiB per file.
fn margin(needed_bytes: u64, files: u64) -> u64 {
    (needed_bytes / 50)
        .max(16 << 20)
        .saturating_add(files.saturating_mul(64 << 10))
}

/// How many files of `file_size` fit in the target's free space with the margin, up to
/// `most`; refuses the run if not even one does.
pub fn files_that_fit(target: &Path, file_size: u64, most: u64) -> Result<u64, Error> {
    let mut files = most.max(1);
    loop {
        match check_space(target, file_size.saturating_mul(files), files) {
            Ok(()) => return Ok(files),
            Err(e) if files == 1 => return Err(e),
            Err(_) => files -= 1,
        }
    }
}

/// Refuses a series that does not fit in the target's free space with a margin.
pub fn check_space(target: &Path, needed_bytes: u64, files: u64) -> Result<(), Error> {
    check_space_for(
        target,
        needed_bytes,
        files,
        &("series", "use smaller --sizes or fewer --repeat passes"),
    )
}

/// Refuses what (`what`, with the `hint` of what to change) does not fit in the
/// target's free space with a margin.
pub fn check_space_for(
    target: &Path,
    needed_bytes: u64,
    files: u64,
    about: &'static (&'static str, &'static str),
) -> Result<(), Error> {
    let vfs = rustix::fs::statvfs(target).map_err(|e| Error::io("inspect", target, e))?;
    if vfs.f_blocks == 0 {
        // ramfs and some pseudo filesystems report no size at all: nothing to check.
        return Ok(());
    }
    let available = vfs.f_bavail * vfs.f_frsize;
    let margin = margin(needed_bytes, files);
    if needed_bytes.saturating_add(margin) > available {
        return Err(Error::Space {
            about,
            path: target.to_path_buf(),
            needed: format_size(needed_bytes),
            margin: format_size(margin),
            available: format_size(available),
        });
    }
    if vfs.f_files > 0 && vfs.f_favail < files + 16 {
        return Err(Error::Target {
            path: target.to_path_buf(),
            reason: format!(
                "only {} inodes are free and the {} makes {files} files",
                vfs.f_favail, about.0
            ),
        });
    }
    Ok(())
}

/// One file of a kept series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeptFile {
    /// File name inside the work folder.
    pub name: String,
    /// Its size.
    pub size_bytes: u64,
}

/// The folder ratelab writes in, and every file it created there.
pub struct WorkDir {
    path: PathBuf,
    created: Vec<PathBuf>,
    owned: bool,
    kept: bool,
}

impl WorkDir {
    /// Creates a new, uniquely named work folder under `target`.
    pub fn create(target: &Path) -> Result<WorkDir, Error> {
        let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
            .to_string()
            .replace([':', '-'], "");
        // Two workloads of one run may share a target: a counter keeps their folders apart.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let serial = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = target.join(format!(
            "{WORK_PREFIX}{}-{}-{serial}",
            stamp.trim_end_matches('Z'),
            std::process::id()
        ));
        std::fs::create_dir(&path).map_err(|e| Error::io("create the work folder", &path, e))?;
        Ok(WorkDir {
            path,
            created: Vec::new(),
            owned: true,
            kept: false,
        })
    }

    /// Opens the newest work folder under `target` kept by an earlier `--keep` run.
    pub fn open_kept(target: &Path) -> Result<(WorkDir, Vec<KeptFile>), Error> {
        let entries = std::fs::read_dir(target).map_err(|e| Error::io("list", target, e))?;
        let newest = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with(WORK_PREFIX))
            .filter(|e| e.path().join(MANIFEST).is_file())
            .max_by_key(|e| e.file_name());
        let Some(entry) = newest else {
            return Err(Error::Target {
                path: target.to_path_buf(),
                reason:
                    "no files kept by an earlier run: write them first with --phase write --keep"
                        .into(),
            });
        };
        let path = entry.path();
        let manifest = path.join(MANIFEST);
        let text =
            std::fs::read_to_string(&manifest).map_err(|e| Error::io("read", &manifest, e))?;
        let files: Vec<KeptFile> = serde_json::from_str(&text)
            .map_err(|e| Error::Input(format!("cannot read {}: {e}", manifest.display())))?;
        Ok((
            WorkDir {
                path,
                created: Vec::new(),
                owned: false,
                kept: false,
            },
            files,
        ))
    }

    /// The folder's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Remembers files that other threads created here, for removal.
    pub fn adopt(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        self.created.extend(paths);
    }

    /// Creates a new file in the folder and remembers it for removal.
    pub fn create_file(&mut self, name: &str, direct: bool) -> Result<(PathBuf, File), Error> {
        let path = self.path.join(name);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        if direct {
            options.custom_flags(libc::O_DIRECT);
        }
        // The kernel can create the file and then refuse O_DIRECT: remember it first.
        self.created.push(path.clone());
        match options.open(&path) {
            Ok(file) => Ok((path, file)),
            Err(e) => {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    // Not ours: never remove it.
                    self.created.pop();
                }
                Err(direct_error(e, "create", &path, direct))
            }
        }
    }

    /// Removes one file this folder created.
    pub fn remove_file(&mut self, path: &Path) -> Result<(), Error> {
        std::fs::remove_file(path).map_err(|e| Error::io("remove", path, e))?;
        self.created.retain(|p| p != path);
        Ok(())
    }

    /// Writes the manifest that `--phase read` finds later.
    pub fn write_manifest(&self, files: &[KeptFile]) -> Result<(), Error> {
        let path = self.path.join(MANIFEST);
        let text = serde_json::to_string_pretty(files).expect("manifest serialises");
        std::fs::write(&path, text).map_err(|e| Error::io("write", &path, e))
    }

    /// Removes every file created here and the folder itself, if this run made it.
    pub fn remove_all(&mut self) -> Result<(), Error> {
        let mut first_error = None;
        for path in std::mem::take(&mut self.created) {
            if let Err(e) = std::fs::remove_file(&path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                first_error.get_or_insert(Error::io("remove", &path, e));
            }
        }
        if self.owned {
            let _ = std::fs::remove_file(self.path.join(MANIFEST));
            if let Err(e) = std::fs::remove_dir(&self.path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                first_error.get_or_insert(Error::io("remove the work folder", &self.path, e));
            }
            self.owned = false;
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Forgets the files, so they stay after the run (--keep).
    pub fn keep(&mut self) {
        self.created.clear();
        self.owned = false;
        self.kept = true;
    }

    /// Whether [`WorkDir::keep`] left the files for later.
    pub fn is_kept(&self) -> bool {
        self.kept
    }
}

/// Refuses a target whose filesystem does not take O_DIRECT, before anything is
/// created there. Probes with an unnamed O_TMPFILE, which leaves nothing behind;
/// filesystems without O_TMPFILE are left to the first real open. `instead` is what the
/// kind's user can give instead, naming its flags.
pub fn check_direct(target: &Path, instead: &str) -> Result<(), Error> {
    let probe = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_TMPFILE | libc::O_DIRECT)
        .open(target);
    match probe {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Err(Error::Unsupported(format!(
            "the filesystem of {} does not support O_DIRECT (direct I/O): {instead}",
            target.display()
        ))),
        _ => Ok(()),
    }
}

/// Opens an existing file for reading, with O_DIRECT when asked.
pub fn open_for_read(path: &Path, direct: bool) -> Result<File, Error> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    if direct {
        options.custom_flags(libc::O_DIRECT);
    }
    options
        .open(path)
        .map_err(|e| direct_error(e, "open", path, direct))
}

/// Opens an existing file to write over it in place (sustained runs reuse their files).
pub fn open_for_overwrite(path: &Path, direct: bool) -> Result<File, Error> {
    open_to_write(path, direct, false)
}

/// Opens an existing file to read it and write over it in place (a mix of block
/// requests).
pub fn open_for_read_write(path: &Path, direct: bool) -> Result<File, Error> {
    open_to_write(path, direct, true)
}

fn open_to_write(path: &Path, direct: bool, read: bool) -> Result<File, Error> {
    let mut options = std::fs::OpenOptions::new();
    options.read(read).write(true);
    if direct {
        options.custom_flags(libc::O_DIRECT);
    }
    options
        .open(path)
        .map_err(|e| direct_error(e, "open", path, direct))
}

/// Opens a file just created for buffered writes of its unaligned tail.
pub fn open_for_tail(path: &Path) -> Result<File, Error> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| Error::io("open", path, e))
}

/// Names O_DIRECT when the filesystem refuses it, since that is what the user can change.
fn direct_error(e: std::io::Error, op: &'static str, path: &Path, direct: bool) -> Error {
    if direct && e.raw_os_error() == Some(libc::EINVAL) {
        Error::Unsupported(format!(
            "the filesystem of {} does not support O_DIRECT (direct I/O)",
            path.display()
        ))
    } else {
        Error::io(op, path, e)
    }
}
