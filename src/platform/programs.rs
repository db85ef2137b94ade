//! Programs a verb starts for the user (`monitor -- CMD`, `why -- CMD`): found on PATH
//! as a shell finds them, before anything runs, so a typo is refused first.

use std::path::{Path, PathBuf};

use crate::error::Error;

/// The program `program` names: a path as given, or the first executable of that name
/// on PATH, as a shell would find it.
pub fn resolve(program: &str) -> Result<PathBuf, Error> {
    let refused = |why: &str| {
        Error::io(
            "start",
            program,
            std::io::Error::new(std::io::ErrorKind::NotFound, why.to_string()),
        )
    };
    let executable = |path: &Path| {
        path.is_file() && rustix::fs::access(path, rustix::fs::Access::EXEC_OK).is_ok()
    };
    if program.is_empty() {
        return Err(refused("the command is empty"));
    }
    if program.contains('/') {
        let path = PathBuf::from(program);
        return if executable(&path) {
            Ok(path)
        } else if path.exists() {
            Err(refused("not an executable file"))
        } else {
            Err(refused("no such file"))
        };
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|path| executable(path))
        .ok_or_else(|| refused("no such program on PATH"))
}
