//! What a test served to an iperf3 client is stored as: a run with both ends, this one
//! local and the client remote, complete only when the two agree.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

use super::Served;
use crate::document::{RunDocument, RunStatus, WorkloadRecord, now_rfc3339};
use crate::workload::net::iperf3::remote_items;
use crate::workload::net::iperf3::wire::Params;
use crate::workload::net::item::{self, Side};
use crate::workload::net::protocol::TestRequest;
use crate::workload::net::{NetContext, NetPlan};

/// The test as a plan, from the client's side as ratelab's own plans are: its host is
/// the iperf3 client, and this end served it.
pub(super) fn plan_of(
    peer: SocketAddr,
    params: &Params,
    request: &TestRequest,
    mss: Option<u32>,
) -> NetPlan {
    NetPlan {
        host: peer.ip().to_string(),
        port: peer.port(),
        streams: request.streams,
        direction: request.direction,
        duration_ms: request.duration_ms,
        bytes: params.bytes(),
        interval_ms: request.interval_ms,
        block_bytes: request.block_bytes,
        window_bytes: request.window_bytes,
        mss_bytes: mss,
        iperf3: true,
        served: true,
        own_server: false,
        udp: request.udp,
        ..NetPlan::loopback(Duration::ZERO, 1)
    }
}

/// The run a served iperf3 test is stored as: this end local, the client remote;
/// incomplete, with the reason, when the two ends disagree. The client's title
/// (iperf3 -T) is its label.
pub(super) fn document(peer: SocketAddr, done: &Served, started_at: String) -> RunDocument {
    let plan = &done.plan;
    let mut items: Vec<Value> =
        item::items_of_report(&done.local, Side::Local, plan.direction, plan.streams)
            .iter()
            .chain(&remote_items(
                &done.remote,
                &done.theirs,
                plan.direction,
                plan.streams,
            ))
            .map(|i| serde_json::to_value(i).expect("items serialise"))
            .collect();
    items.shrink_to_fit();
    let first = done.local.streams.first();
    let mss = first.and_then(|s| s.mss_bytes);
    let mtu = first.and_then(|s| s.mtu_bytes);
    let nic = done.local_ip.and_then(crate::platform::nics::nic_of);
    let link = nic
        .as_ref()
        .and_then(|n| n.speed_bits_per_sec)
        .map(|s| (s as f64, "sysfs"));
    let context = NetContext::of(Some(peer.to_string()), nic, link, mss, mtu);
    let (status, incomplete_reason) = match &done.disagreement {
        Some(reason) => (
            RunStatus::Incomplete,
            Some(format!("error: the two ends disagree: {reason}")),
        ),
        None => (RunStatus::Complete, None),
    };
    let mut doc = RunDocument::begin(
        "net",
        Some("iperf3 client".into()),
        crate::platform::probe_machine(),
        vec![WorkloadRecord {
            kind: "net".into(),
            target: format!("iperf3 client {peer}"),
            params: serde_json::to_value(plan).expect("plans serialise"),
            context: serde_json::to_value(context).expect("contexts serialise"),
            items,
            summary: Value::Null,
            series: None,
            alone_of: None,
            measured_by: None,
            warnings: Vec::new(),
        }],
    );
    doc.status = status;
    doc.incomplete_reason = incomplete_reason;
    doc.started_at = started_at;
    doc.finished_at = Some(now_rfc3339());
    // Summaries and verdicts are the runner's to make, when the run is stored.
    doc
}
