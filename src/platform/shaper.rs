//! A link held to a known rate for one peer's TCP traffic alone: the packets to (or
//! from) one address and port on one interface are sent through an `ifb` device of
//! their own whose `tbf` queue holds them to the rate, while the interface's own
//! queue and every other flow keep theirs. Made with iproute2's `ip` and `tc` (root,
//! or CAP_NET_ADMIN), and removed, filters and device, when dropped.

use std::net::SocketAddr;
use std::process::Command;

/// Which way the held traffic goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// To the peer: the interface's egress.
    Send,
    /// From the peer: the interface's ingress.
    Receive,
}

/// What a shaper holds, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkHold {
    /// The interface the traffic crosses (`eth0`, `lo`).
    pub interface: String,
    /// The peer's address and port.
    pub peer: SocketAddr,
    /// Which way.
    pub way: Way,
    /// The rate, bytes per second of frames as the interface counts them.
    pub bytes_per_sec: u64,
}

/// Why a link cannot be held.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    /// Not root: `tc` needs CAP_NET_ADMIN.
    #[error("holding a link to a rate needs root (tc needs CAP_NET_ADMIN)")]
    NotRoot,
    /// The interface has a `clsact` queue of someone else's, left as it is.
    #[error("{0} has tc filters of its own (a clsact qdisc): ratelab leaves them as they are")]
    Taken(String),
    /// `ip` or `tc` failed.
    #[error("`{command}` failed: {why}")]
    Tool {
        /// The command, in words.
        command: String,
        /// What it said, or why it could not start.
        why: String,
    },
}

/// A peer's traffic held to a rate, undone when dropped.
#[derive(Debug)]
pub struct Shaper {
    interface: String,
    ifb: String,
    clsact: bool,
}

impl Shaper {
    /// Holds `hold`'s traffic to its rate until dropped.
    pub fn hold(hold: &LinkHold) -> Result<Shaper, ShapeError> {
        if !rustix::process::geteuid().is_root() {
            return Err(ShapeError::NotRoot);
        }
        let qdiscs = tool("tc", &["qdisc", "show", "dev", &hold.interface])?;
        if qdiscs.contains("clsact") {
            return Err(ShapeError::Taken(hold.interface.clone()));
        }
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        // Interface names have 15 bytes at most.
        let ifb = format!(
            "rlwi{}x{}",
            std::process::id() % 1_000_000,
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 1000
        );
        tool("ip", &["link", "add", &ifb, "type", "ifb"])?;
        // From here on, dropping it undoes what was made.
        let mut shaper = Shaper {
            interface: hold.interface.clone(),
            ifb,
            clsact: false,
        };
        let rate = format!("{}bps", hold.bytes_per_sec.max(1));
        // A burst of 5 ms of the rate (at least a few frames), a queue of 50 ms: TCP
        // meets a slower link, not a policer's drops.
        let burst = (hold.bytes_per_sec / 200).max(32 << 10).to_string();
        let ifb = shaper.ifb.clone();
        tool("ip", &["link", "set", &ifb, "up"])?;
        #[rustfmt::skip]
        let queue = [
            "qdisc", "add", "dev", &ifb, "root", "tbf",
            "rate", &rate, "burst", &burst, "latency", "50ms",
        ];
        tool("tc", &queue)?;
        tool("tc", &["qdisc", "add", "dev", &hold.interface, "clsact"])?;
        shaper.clsact = true;
        let (hook, end, port_field) = match hold.way {
            Way::Send => ("egress", "dst", "dport"),
            Way::Receive => ("ingress", "src", "sport"),
        };
        let (protocol, family, bits) = if hold.peer.is_ipv4() {
            ("ip", "ip", 32)
        } else {
            ("ipv6", "ip6", 128)
        };
        let address = format!("{}/{bits}", hold.peer.ip());
        let port = hold.peer.port().to_string();
        #[rustfmt::skip]
        let filter = [
            "filter", "add", "dev", &hold.interface, hook, "protocol", protocol, "u32",
            "match", family, "protocol", "6", "0xff",
            "match", family, end, &address,
            "match", family, port_field, &port, "0xffff",
            "action", "mirred", "egress", "redirect", "dev", &ifb,
        ];
        tool("tc", &filter)?;
        Ok(shaper)
    }
}

impl Drop for Shaper {
    fn drop(&mut self) {
        if self.clsact {
            let _ = tool("tc", &["qdisc", "del", "dev", &self.interface, "clsact"]);
        }
        let _ = tool("ip", &["link", "del", &self.ifb]);
    }
}

/// Runs an iproute2 tool; its output, or what it said on failing.
fn tool(program: &str, args: &[&str]) -> Result<String, ShapeError> {
    let failed = |why: String| ShapeError::Tool {
        command: format!("{program} {}", args.join(" ")),
        why,
    };
    let output = Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| failed(format!("cannot start {program} (iproute2): {e}")))?;
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stderr);
        return Err(failed(said.trim().to_string()));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
