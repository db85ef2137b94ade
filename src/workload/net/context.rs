//! What the platform said of a net test's path, as stored in a workload's `context`:
//! the interface that carried it, the link's rate and the goodput limit derived from
//! them. One struct, so the live workload writes what the stored kind reads.

use serde::{Deserialize, Serialize};

use crate::platform::nics::{self, Nic};

/// The path of a net test as the client saw it; fields are null where nothing said.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetContext {
    /// The server's address the test connected to.
    pub address: Option<String>,
    /// The local interface of the first data connection.
    pub interface: Option<Nic>,
    /// The link's rate, bits per second.
    pub link_bits_per_sec: Option<f64>,
    /// Where that rate came from: `--link-rate` or `sysfs`.
    pub link_source: Option<String>,
    /// Bytes of framing each packet costs on the wire besides its IP packet.
    pub framing_bytes: Option<u64>,
    /// The MSS of the connections.
    pub mss_bytes: Option<u64>,
    /// The path MTU of the connections.
    pub mtu_bytes: Option<u64>,
    /// The most TCP payload the link carries in one direction, where all of the above
    /// are known.
    pub goodput_limit_bytes_per_sec: Option<f64>,
}

impl NetContext {
    /// The context of a test to `address` over `interface`, whose link runs at `link`
    /// (bits per second, and who said so).
    pub fn of(
        address: Option<String>,
        interface: Option<Nic>,
        link: Option<(f64, &str)>,
        mss_bytes: Option<u64>,
        mtu_bytes: Option<u64>,
    ) -> NetContext {
        let framing_bytes = interface.as_ref().map(Nic::framing_bytes);
        let goodput_limit_bytes_per_sec = match (link, mtu_bytes, mss_bytes, framing_bytes) {
            (Some((bits, _)), Some(mtu), Some(mss), Some(framing)) => {
                Some(nics::goodput_limit_bytes_per_sec(bits, mtu, mss, framing))
            }
            _ => None,
        };
        NetContext {
            address,
            interface,
            link_bits_per_sec: link.map(|(bits, _)| bits),
            link_source: link.map(|(_, source)| source.to_string()),
            framing_bytes,
            mss_bytes,
            mtu_bytes,
            goodput_limit_bytes_per_sec,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_stored_context_reads_back_and_writes_again_as_it_was() {
        // As the binary of 61f461b stored it (tests/fixtures/runs-61f461b, run 7).
        let stored = json!({"address": "127.0.0.1:5399",
            "interface": {"name": "lo", "kind": "loopback", "mtu_bytes": 65536,
                          "speed_bits_per_sec": null, "addresses": ["127.0.0.1", "::1"]},
            "link_bits_per_sec": null, "link_source": null, "framing_bytes": 0,
            "mss_bytes": 32768, "mtu_bytes": 65535, "goodput_limit_bytes_per_sec": null});
        let context: NetContext = serde_json::from_value(stored.clone()).unwrap();
        let again = NetContext::of(
            context.address.clone(),
            context.interface.clone(),
            None,
            Some(32768),
            Some(65535),
        );
        assert_eq!(context, again);
        assert_eq!(
            serde_json::to_string(&again).unwrap(),
            serde_json::to_string(&stored).unwrap(),
            "same keys in the same order"
        );
    }
}
