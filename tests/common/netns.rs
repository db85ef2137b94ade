//! The two hosts of DESIGN.md: two network namespaces joined by a veth pair, with an
//! MTU set on both sides and a tbf qdisc on both egresses, so the link's rate is known.
//! Servers started in it are killed and the namespaces removed on drop, also when the
//! test fails.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A shaped link between a client namespace and a server namespace.
pub struct Link {
    client: String,
    server: String,
    /// A third namespace between the two, holding a bridge, where there is one.
    bridge: Option<String>,
    /// The server's address on the link.
    pub server_address: String,
    servers: Vec<Child>,
}

fn ip(args: &[&str]) {
    let status = Command::new("ip")
        .args(args)
        .status()
        .expect("run ip (iproute2)");
    assert!(status.success(), "ip {} failed", args.join(" "));
}

/// Starts `ratelab net serve` with `extra` options in `namespace`, bound to `address`,
/// and waits until it listens; its log is drained so it never blocks on a full pipe.
pub fn serve_ratelab_in(namespace: &str, address: &str, port: u16, extra: &[&str]) -> Child {
    let mut child = super::isolated(&mut Command::new("ip"))
        .args(["netns", "exec", namespace])
        .arg(assert_cmd::cargo::cargo_bin!("ratelab"))
        .args(["net", "serve", "--bind", address])
        .args(["--port", &port.to_string()])
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ratelab net serve");
    let mut stderr = BufReader::new(child.stderr.take().expect("piped"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("read the server's log");
    assert!(line.contains("listening on"), "server said: {line}");
    std::thread::spawn(move || for _ in stderr.lines() {});
    child
}

impl Link {
    /// A veth link of `mtu` bytes shaped to `rate` (tc's words: `2gbit`) each way.
    pub fn new(mtu: u32, rate: &str) -> Link {
        // A burst of a few milliseconds of the rate lets tbf reach its rate with TCP.
        Link::with_burst(mtu, rate, "2mb")
    }

    /// The same with tbf's `burst` (tc's words: `128kb`): a transfer's first `burst`
    /// bytes leave at once, which a link held to its rate from the first byte needs
    /// small.
    pub fn with_burst(mtu: u32, rate: &str, burst: &str) -> Link {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Interface names have 15 bytes at most.
        let tag = format!("rl{}x{n}", std::process::id() % 100_000);
        let link = Link {
            client: format!("{tag}c"),
            server: format!("{tag}s"),
            server_address: format!("10.203.{}.2", n % 250),
            bridge: None,
            servers: Vec::new(),
        };
        ip(&["netns", "add", &link.client]);
        ip(&["netns", "add", &link.server]);
        ip(&[
            "link",
            "add",
            &link.client,
            "type",
            "veth",
            "peer",
            "name",
            &link.server,
        ]);
        let mtu = mtu.to_string();
        for (namespace, address) in [
            (&link.client, format!("10.203.{}.1/24", n % 250)),
            (&link.server, format!("{}/24", link.server_address)),
        ] {
            ip(&["link", "set", namespace, "netns", namespace]);
            ip(&["-n", namespace, "addr", "add", &address, "dev", namespace]);
            ip(&["-n", namespace, "link", "set", namespace, "mtu", &mtu, "up"]);
            ip(&["-n", namespace, "link", "set", "lo", "up"]);
            let status = Command::new("ip")
                .args([
                    "netns", "exec", namespace, "tc", "qdisc", "add", "dev", namespace,
                ])
                .args([
                    "root", "tbf", "rate", rate, "burst", burst, "latency", "50ms",
                ])
                .status()
                .expect("run tc");
            assert!(status.success(), "tc qdisc add tbf failed");
        }
        link
    }

    /// Two ends of MTU `ends` joined through a bridge in a namespace between them, whose
    /// port toward the client takes `to_client` bytes and toward the server `to_server`:
    /// a frame above that is dropped there without a word (a bridge forwards frames, so
    /// no ICMP says the packet was too big), as a switch port left at 1500 between two
    /// jumbo hosts does. Not shaped.
    pub fn through_bridge(ends: u32, to_client: u32, to_server: u32) -> Link {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tag = format!("rb{}x{n}", std::process::id() % 100_000);
        let link = Link {
            client: format!("{tag}c"),
            server: format!("{tag}s"),
            server_address: format!("10.205.{}.2", n % 250),
            bridge: Some(format!("{tag}b")),
            servers: Vec::new(),
        };
        let bridge = link.bridge.as_deref().expect("a bridge");
        for namespace in [&link.client, &link.server, bridge] {
            ip(&["netns", "add", namespace]);
            ip(&["-n", namespace, "link", "set", "lo", "up"]);
        }
        ip(&["-n", bridge, "link", "add", "br0", "type", "bridge"]);
        let (ends, to_client, to_server) = (
            ends.to_string(),
            to_client.to_string(),
            to_server.to_string(),
        );
        for (namespace, address, port_mtu) in [
            (&link.client, format!("10.205.{}.1/24", n % 250), &to_client),
            (
                &link.server,
                format!("{}/24", link.server_address),
                &to_server,
            ),
        ] {
            // The end keeps its name in its namespace; its peer, the bridge's port,
            // is named after it with a p.
            let bridge_port = format!("{namespace}p");
            ip(&[
                "-n",
                bridge,
                "link",
                "add",
                namespace,
                "type",
                "veth",
                "peer",
                "name",
                &bridge_port,
            ]);
            ip(&["-n", bridge, "link", "set", namespace, "netns", namespace]);
            ip(&["-n", namespace, "addr", "add", &address, "dev", namespace]);
            ip(&[
                "-n", namespace, "link", "set", namespace, "mtu", &ends, "up",
            ]);
            ip(&["-n", bridge, "link", "set", &bridge_port, "mtu", port_mtu]);
            ip(&[
                "-n",
                bridge,
                "link",
                "set",
                &bridge_port,
                "master",
                "br0",
                "up",
            ]);
        }
        ip(&["-n", bridge, "link", "set", "br0", "up"]);
        link
    }

    /// Shapes the bridge's two ports to `rate` (tc's words: `200mbit`) each way, so the
    /// link's rate is held in the middle, where no sender's own queue feels it: what a
    /// sender sends past it is dropped on the way, as on a slower hop between two hosts.
    pub fn shape_bridge(&self, rate: &str) {
        let bridge = self.bridge.as_deref().expect("a link through a bridge");
        for end in [&self.client, &self.server] {
            let port = format!("{end}p");
            let status = Command::new("ip")
                .args(["netns", "exec", bridge, "tc", "qdisc", "add", "dev", &port])
                .args([
                    "root", "tbf", "rate", rate, "burst", "2mb", "latency", "50ms",
                ])
                .status()
                .expect("run tc");
            assert!(status.success(), "tc qdisc add tbf on {port} failed");
        }
    }

    /// The client's namespace, for `ip netns exec`.
    pub fn client_namespace(&self) -> &str {
        &self.client
    }

    /// `program` to be run in the client's namespace.
    pub fn in_client(&self, program: impl AsRef<Path>) -> Command {
        let mut command = Command::new("ip");
        super::isolated(&mut command)
            .args(["netns", "exec", &self.client])
            .arg(program.as_ref());
        command
    }

    /// Starts `ratelab net serve` in the server's namespace and waits until it listens.
    pub fn serve_ratelab(&mut self, port: u16) {
        self.serve_ratelab_with(port, &[]);
    }

    /// Starts `ratelab net serve` with `extra` options in the server's namespace and
    /// waits until it listens.
    pub fn serve_ratelab_with(&mut self, port: u16, extra: &[&str]) {
        let server = serve_ratelab_in(&self.server, &self.server_address, port, extra);
        self.servers.push(server);
    }

    /// Starts an iperf3 server in the server's namespace and waits until it listens.
    pub fn serve_iperf3(&mut self, port: u16) {
        self.serve_iperf3_with(Path::new("iperf3"), port);
    }

    /// Starts `program -s` (an iperf3) in the server's namespace and waits until it
    /// listens.
    pub fn serve_iperf3_with(&mut self, program: &Path, port: u16) {
        let port_text = port.to_string();
        self.serve(program.as_os_str(), &["-s", "-p", &port_text], port);
    }

    /// Starts `program args...` in the server's namespace and waits until it listens
    /// on `port`; it is killed when the link is dropped.
    pub fn serve(&mut self, program: &std::ffi::OsStr, args: &[&str], port: u16) {
        let child = Command::new("ip")
            .args(["netns", "exec", &self.server])
            .arg(program)
            .args(args)
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {program:?} in {}: {e}", self.server));
        self.servers.push(child);
        for _ in 0..100 {
            let listening = Command::new("ip")
                .args(["netns", "exec", &self.server, "ss", "-ltnH"])
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(&format!(":{port}")));
            if listening {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("{program:?} did not start listening on port {port}");
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        for server in &mut self.servers {
            let _ = server.kill();
            let _ = server.wait();
        }
        // Removing a namespace removes the veth end inside it, and so the pair.
        for namespace in [Some(&self.client), Some(&self.server), self.bridge.as_ref()]
            .into_iter()
            .flatten()
        {
            let _ = Command::new("ip")
                .args(["netns", "del", namespace])
                .status();
        }
    }
}
