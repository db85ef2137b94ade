//! The many hosts of DESIGN.md: network namespaces joined to this one by veth pairs,
//! each with its own host name (a UTS namespace) and its own sshd on its own address,
//! key-only login with a key made for the test, and an ssh config (`ssh -F FILE`, as
//! RATELAB_SSH gives it) that sends each host its own cache folder. sshd, the
//! namespaces and the links are removed on drop, also when the test fails.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Some hosts, and the ssh client set up to reach them.
pub struct Hosts {
    dir: tempfile::TempDir,
    names: Vec<String>,
    /// Each host's address.
    pub addresses: Vec<String>,
    tag: String,
}

fn run(program: &str, args: &[&str]) {
    let status = Command::new(program).args(args).status().unwrap();
    assert!(status.success(), "{program} {} failed", args.join(" "));
}

impl Hosts {
    /// `count` hosts named `host-1`..; the ones in `down` get no sshd.
    pub fn new(count: usize, down: &[usize]) -> Hosts {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tag = format!("rs{}x{n}", std::process::id() % 10_000);
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let d = dir.path().to_str().unwrap().to_string();
        for key in ["hostkey", "userkey"] {
            run(
                "ssh-keygen",
                &["-q", "-t", "ed25519", "-N", "", "-f", &format!("{d}/{key}")],
            );
        }
        std::fs::copy(
            dir.path().join("userkey.pub"),
            dir.path().join("authorized_keys"),
        )
        .unwrap();
        std::fs::create_dir_all("/run/sshd").unwrap();
        let mut hosts = Hosts {
            dir,
            names: Vec::new(),
            addresses: Vec::new(),
            tag,
        };
        let mut config = format!(
            "Host *\n  IdentityFile {d}/userkey\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  \
             UserKnownHostsFile /dev/null\n  BatchMode yes\n  LogLevel ERROR\n  ConnectTimeout 3\n"
        );
        for index in 0..count {
            let name = format!("{}h{index}", hosts.tag);
            let subnet = 150 + (n as usize * 8 + index) % 100;
            let (local, address) = (format!("10.231.{subnet}.1"), format!("10.231.{subnet}.2"));
            run("ip", &["netns", "add", &name]);
            run(
                "ip",
                &[
                    "link",
                    "add",
                    &format!("{name}a"),
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &format!("{name}b"),
                ],
            );
            run("ip", &["link", "set", &format!("{name}b"), "netns", &name]);
            run(
                "ip",
                &[
                    "addr",
                    "add",
                    &format!("{local}/24"),
                    "dev",
                    &format!("{name}a"),
                ],
            );
            run("ip", &["link", "set", &format!("{name}a"), "up"]);
            run(
                "ip",
                &[
                    "-n",
                    &name,
                    "addr",
                    "add",
                    &format!("{address}/24"),
                    "dev",
                    &format!("{name}b"),
                ],
            );
            run(
                "ip",
                &["-n", &name, "link", "set", &format!("{name}b"), "up"],
            );
            run("ip", &["-n", &name, "link", "set", "lo", "up"]);
            let cache = format!("{d}/cache-{index}");
            config.push_str(&format!(
                "Host {address}\n  SetEnv XDG_CACHE_HOME={cache}\n"
            ));
            if !down.contains(&index) {
                let sshd = format!(
                    "Port 22\nListenAddress {address}\nHostKey {d}/hostkey\nAuthorizedKeysFile {d}/authorized_keys\n\
                     PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                     UsePAM no\nStrictModes no\nPidFile {d}/sshd-{index}.pid\nAcceptEnv XDG_*\n"
                );
                let file = format!("{d}/sshd-{index}.conf");
                std::fs::write(&file, sshd).unwrap();
                run(
                    "ip",
                    &[
                        "netns",
                        "exec",
                        &name,
                        "unshare",
                        "--uts",
                        "sh",
                        "-c",
                        &format!(
                            "echo host-{} > /proc/sys/kernel/hostname && /usr/sbin/sshd -f {file}",
                            index + 1
                        ),
                    ],
                );
            }
            hosts.names.push(name);
            hosts.addresses.push(address);
        }
        std::fs::write(hosts.dir.path().join("ssh_config"), config).unwrap();
        hosts
    }

    /// The command to give RATELAB_SSH: ssh with this rig's config.
    pub fn ssh(&self) -> String {
        format!("ssh -F {}", self.dir.path().join("ssh_config").display())
    }

    /// The destination of host `index` (from 0).
    pub fn destination(&self, index: usize) -> String {
        format!("root@{}", self.addresses[index])
    }

    /// A folder of the rig, for an inventory.
    pub fn folder(&self) -> &Path {
        self.dir.path()
    }

    /// Where host `index` caches ratelab.
    pub fn cache(&self, index: usize) -> PathBuf {
        self.dir
            .path()
            .join(format!("cache-{index}"))
            .join("ratelab")
    }

    /// Shapes the link to host `index` to `rate` (tc's words: `2gbit`) each way, as the
    /// two-host rig does.
    pub fn shape(&self, index: usize, rate: &str) {
        let name = &self.names[index];
        let tbf = [
            "root", "tbf", "rate", rate, "burst", "2mb", "latency", "50ms",
        ];
        let here = format!("{name}a");
        let there = format!("{name}b");
        run(
            "tc",
            &[&["qdisc", "add", "dev", here.as_str()][..], &tbf].concat(),
        );
        run(
            "ip",
            &[
                &[
                    "netns",
                    "exec",
                    name.as_str(),
                    "tc",
                    "qdisc",
                    "add",
                    "dev",
                    there.as_str(),
                ][..],
                &tbf,
            ]
            .concat(),
        );
    }

    /// Pids of ratelab processes running in host `index`'s network namespace.
    pub fn ratelab_processes(&self, index: usize) -> Vec<String> {
        let output = Command::new("ip")
            .args(["netns", "pids", &self.names[index]])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout)
            .split_whitespace()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.starts_with("ratelab"))
            })
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for (index, name) in self.names.iter().enumerate() {
            let pid = self.dir.path().join(format!("sshd-{index}.pid"));
            if let Ok(pid) = std::fs::read_to_string(pid) {
                let _ = Command::new("kill").arg(pid.trim()).status();
            }
            // Whatever still runs there (sessions sshd forked) goes with the namespace.
            let _ = Command::new("sh")
                .args(["-c", &format!("ip netns pids {name} | xargs -r kill -9")])
                .status();
            let _ = Command::new("ip").args(["netns", "del", name]).status();
            // Usually gone with the namespace already: quietly.
            let _ = Command::new("ip")
                .args(["link", "del", &format!("{name}a")])
                .output();
        }
    }
}
