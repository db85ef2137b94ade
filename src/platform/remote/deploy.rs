//! Putting this ratelab on a host: in a per-user cache folder there
//! (`${XDG_CACHE_HOME:-$HOME/.cache}/ratelab/`), under a name made of its version and
//! the hash of its bytes, so a copy that differs is never run; copied over ssh's stdin
//! when missing. A host whose CPU architecture differs is refused with the reason.

use std::io::Write as _;
use std::process::Stdio;

use sha2::{Digest, Sha256};

use super::Host;
use super::ssh;

/// The cache folder on the remote host, as its shell expands it.
const REMOTE_DIR: &str = "\"${XDG_CACHE_HOME:-$HOME/.cache}/ratelab\"";

/// This binary as it is on a host.
pub struct Binary {
    /// Its file name there: `ratelab-0.1.0-1a2b3c4d5e6f`.
    name: String,
}

impl Binary {
    /// Its path for the remote shell.
    pub fn remote_path(&self) -> String {
        format!("{REMOTE_DIR}/{}", ssh::quote(&self.name))
    }
}

/// Makes sure this binary is on `host`; says when it copies.
pub fn ensure(host: &Host, say: &dyn Fn(&str)) -> Result<Binary, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this ratelab: {e}"))?;
    let bytes = std::fs::read(&exe).map_err(|e| format!("cannot read {}: {e}", exe.display()))?;
    let hash: String = Sha256::digest(&bytes)[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let binary = Binary {
        name: format!("ratelab-{}-{hash}", env!("CARGO_PKG_VERSION")),
    };
    let probe = format!(
        "uname -m; if [ -x {path} ]; then echo present; else echo missing; fi",
        path = binary.remote_path()
    );
    let output = ssh::command(&host.ssh, &probe)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start ssh: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cannot reach it over ssh (exit {}): {}",
            output.status.code().unwrap_or(-1),
            super::last_line(&output.stderr)
        ));
    }
    let said = String::from_utf8_lossy(&output.stdout);
    let mut lines = said.lines();
    let arch = lines.next().unwrap_or("").trim().to_string();
    if !same_arch(&arch, std::env::consts::ARCH) {
        return Err(format!(
            "its CPU architecture is {arch:?} and this ratelab is built for {}: build ratelab for {arch} and run the fleet from there, or leave the host out",
            std::env::consts::ARCH
        ));
    }
    if lines.next().map(str::trim) == Some("present") {
        return Ok(binary);
    }
    say(&format!(
        "{}: copying ratelab ({}) to its cache folder as {}",
        host.name,
        crate::vocab::units::format_bytes(bytes.len() as u64),
        binary.name
    ));
    let copy = format!(
        "mkdir -p {dir} && cat > {path}.part.$$ && chmod 755 {path}.part.$$ && mv -f {path}.part.$$ {path}",
        dir = REMOTE_DIR,
        path = binary.remote_path()
    );
    let mut child = ssh::command(&host.ssh, &copy)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start ssh: {e}"))?;
    let written = child
        .stdin
        .take()
        .map(|mut stdin| stdin.write_all(&bytes))
        .transpose();
    let stderr = child.stderr.take().map(super::read_all).unwrap_or_default();
    let status = child.wait().map_err(|e| format!("ssh: {e}"))?;
    if !status.success() || written.is_err() {
        return Err(format!(
            "cannot copy ratelab there: {}",
            super::last_line(stderr.as_bytes())
        ));
    }
    Ok(binary)
}

/// Whether `uname -m` names the architecture Rust calls `ours`.
fn same_arch(uname: &str, ours: &str) -> bool {
    match ours {
        "arm" => uname.starts_with("arm"),
        "x86" => matches!(uname, "i386" | "i486" | "i586" | "i686"),
        "powerpc64" => uname.starts_with("ppc64"),
        _ => uname == ours,
    }
}
