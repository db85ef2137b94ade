//! Network interfaces: which one carries a connection, its MTU, its link speed and
//! kind, and the most TCP payload such a link can carry (its goodput limit).

use std::net::IpAddr;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// One network interface as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Nic {
    /// Its name (`eth0`, `veth1`, `lo`).
    pub name: String,
    /// `loopback`, `veth`, `ethernet`, `virtual` (a bridge, a tunnel) or `other`.
    pub kind: String,
    /// Its MTU.
    pub mtu_bytes: Option<u64>,
    /// The negotiated link speed, bits per second; null where the driver does not say.
    pub speed_bits_per_sec: Option<u64>,
    /// Its addresses.
    pub addresses: Vec<IpAddr>,
}

impl Nic {
    /// Bytes of framing each packet costs on the wire besides its IP packet: the
    /// Ethernet header for links that a qdisc shapes (veth, virtual), and header, FCS,
    /// preamble and inter-frame gap (38 bytes) on a physical Ethernet wire.
    pub fn framing_bytes(&self) -> u64 {
        match self.kind.as_str() {
            "ethernet" => 38,
            "loopback" => 0,
            _ => 14,
        }
    }

    /// Bytes a queue on it (tc's, which counts each segment's headers) counts for each
    /// byte its own counters count of a TCP flow: a software link counts a segmented
    /// packet's headers once (veth, loopback, a bridge: 191 Mbit/s on a veth held to
    /// 200 at MTU 1500, so (MTU + 14) / (MTU − 52 or 72 for IPv6)); an Ethernet
    /// driver counts each segment as sent.
    pub fn queued_per_counted(&self, ipv6: bool) -> f64 {
        if self.kind == "ethernet" {
            return 1.0;
        }
        let mtu = self.mtu_bytes.unwrap_or(1500).max(1280) as f64;
        let headers = if ipv6 { 72.0 } else { 52.0 };
        (mtu + 14.0) / (mtu - headers)
    }
}

/// Every interface of this network namespace, by name.
pub fn nics() -> Vec<Nic> {
    let mut found: Vec<Nic> = Vec::new();
    if let Ok(addresses) = nix::ifaddrs::getifaddrs() {
        for entry in addresses {
            let address = entry.address.as_ref().and_then(|a| {
                a.as_sockaddr_in()
                    .map(|v4| IpAddr::V4(v4.ip()))
                    .or_else(|| a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
            });
            let index = match found.iter().position(|n| n.name == entry.interface_name) {
                Some(index) => index,
                None => {
                    found.push(describe(&entry.interface_name));
                    found.len() - 1
                }
            };
            if let Some(address) = address {
                found[index].addresses.push(address);
            }
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// The interface that holds `local`, the local address of a connection.
pub fn nic_of(local: IpAddr) -> Option<Nic> {
    let local = match local {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(local, IpAddr::V4),
        v4 => v4,
    };
    nics().into_iter().find(|n| n.addresses.contains(&local))
}

/// One interface of this network namespace, by name, as sysfs describes it.
pub fn describe(name: &str) -> Nic {
    let base = Path::new("/sys/class/net").join(name);
    let read = |file: &str| {
        std::fs::read_to_string(base.join(file))
            .ok()
            .map(|s| s.trim().to_string())
    };
    let mtu_bytes = read("mtu").and_then(|m| m.parse().ok());
    // "speed" is in Mbit/s; unknown links say -1 or refuse the read.
    let speed_bits_per_sec = read("speed")
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|&s| s > 0)
        .map(|s| s as u64 * 1_000_000);
    let driver = std::fs::read_link(base.join("device/driver"))
        .ok()
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()));
    let link_type = read("type").and_then(|t| t.parse::<u32>().ok());
    let kind = if link_type == Some(772) {
        "loopback"
    } else if read("uevent").is_some_and(|u| u.contains("DEVTYPE=veth"))
        || std::fs::read_link(base.join("device")).is_err() && name.starts_with("veth")
    {
        "veth"
    } else if link_type == Some(1) && driver.is_some() {
        "ethernet"
    } else if link_type == Some(1) {
        "virtual"
    } else {
        "other"
    };
    Nic {
        name: name.to_string(),
        kind: kind.to_string(),
        mtu_bytes,
        speed_bits_per_sec,
        addresses: Vec::new(),
    }
}

/// The most TCP payload per second a link of `link_bits_per_sec` carries, when each
/// packet holds `mss` bytes of payload and costs `framing` more on the wire: a packet
/// of `mtu` bytes where the segments fill it, and of the payload and its IPv4 and TCP
/// headers with timestamps (52 bytes) where the MSS was set below it (`-M`).
pub fn goodput_limit_bytes_per_sec(
    link_bits_per_sec: f64,
    mtu: u64,
    mss: u64,
    framing: u64,
) -> f64 {
    // IPv6 with TCP options takes up to 80 bytes of headers: a segment that leaves no
    // more room than that fills its packet.
    let packet = if mtu.saturating_sub(mss) <= 80 {
        mtu
    } else {
        mss + 52
    };
    link_bits_per_sec / 8.0 * mss as f64 / (packet + framing) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goodput_limits_of_the_issue() {
        // 10 Gbit/s shaped veth: 9.56 Gbit/s at MTU 1500, 9.93 at MTU 9000.
        let at_1500 = goodput_limit_bytes_per_sec(10e9, 1500, 1448, 14) * 8.0 / 1e9;
        let at_9000 = goodput_limit_bytes_per_sec(10e9, 9000, 8948, 14) * 8.0 / 1e9;
        assert!((at_1500 - 9.564).abs() < 0.001, "{at_1500}");
        assert!((at_9000 - 9.927).abs() < 0.001, "{at_9000}");
        // -M 1436 on a jumbo link: packets of 1488 bytes, not of the MTU.
        let clamped = goodput_limit_bytes_per_sec(10e9, 9000, 1436, 14) * 8.0 / 1e9;
        assert!((clamped - 9.561).abs() < 0.001, "{clamped}");
    }

    #[test]
    fn loopback_is_found() {
        let lo = nic_of("127.0.0.1".parse().unwrap()).expect("lo holds 127.0.0.1");
        assert_eq!(lo.kind, "loopback");
        assert_eq!(lo.framing_bytes(), 0);
    }
}
