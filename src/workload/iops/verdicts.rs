//! What ratelab says of an iops workload's figures: reads the page cache served, tests
//! faster than the link under the target allows, writes the device may have absorbed in
//! a cache, and where a test's rate changed for good (a cache filling up). Rates are
//! judged by each test's median round, as the table shows it; a change for good is
//! looked for over all its rounds, one after another, as the device ran them.

use super::kind::IopsKind;
use super::rounds::Rounds;
use super::stored::IopsItem;
use super::stored::IopsOp;
use crate::analysis::knees;
use crate::catch::Family;
use crate::document::{Knee, Series, Severity, Verdict};
use crate::storage::rates::LINK_MARGIN;
use crate::vocab::units::{format_bytes, format_iops_words, format_rate, format_seconds};
use crate::workload::Stored;

/// A read that found more than this share of the file cached is flagged.
const CACHED: f64 = 0.05;
/// Write tests shorter than this may end before a device's write cache fills.
const SUSTAINED_S: f64 = 30.0;

/// A verdict before it is placed: its code, severity and words.
type Said = (&'static str, Severity, String);

/// Every verdict on the workload.
pub fn verdicts(w: &Stored<IopsKind>) -> Vec<Verdict> {
    let verdict = Verdict::about(Some(w.index()));
    let knees = knees(w);
    let buffered = (!w.params.direct).then(|| {
        (
            "iops_buffered",
            Severity::Info,
            "requests went through the page cache (--buffered): writes may be counted when cached, not when stored".into(),
        )
    });
    let short = knees.is_empty().then(|| write_short(w)).flatten();
    let virtual_disk = w
        .context
        .chain
        .as_ref()
        .and_then(|chain| chain.virtual_disk_words(&w.record.target))
        .map(|words| ("virtual_disk", Severity::Warning, words));
    read_cached(w)
        .into_iter()
        .chain(virtual_disk)
        .chain(buffered)
        .chain(faster_than_link(w))
        .chain(knees)
        .chain(short)
        .map(|(code, severity, words)| verdict(code, severity, words))
        .collect()
}

/// Reads that found more than [`CACHED`] of the file in the page cache before them.
fn read_cached(w: &Stored<IopsKind>) -> Option<Said> {
    let cached: Vec<String> = medians(w)
        .into_iter()
        .filter(|i| i.cached_fraction_before.is_some_and(|f| f > CACHED))
        .map(|i| {
            format!(
                "{} {} ({:.0}% of the file cached before it)",
                i.test,
                i.op_words(),
                100.0 * i.cached_fraction_before.unwrap_or_default()
            )
        })
        .collect();
    (!cached.is_empty()).then(|| {
        (
            "iops_read_cached",
            Severity::Warning,
            format!(
                "the page cache held part of the test file before {}: those reads may be faster than the storage",
                cached.join(", ")
            ),
        )
    })
}

/// Tests that moved more bytes than the link under the target allows.
fn faster_than_link(w: &Stored<IopsKind>) -> Option<Said> {
    let chain = w.context.chain.as_ref()?;
    let limit = chain.max_bytes_per_sec?;
    let fast: Vec<String> = medians(w)
        .into_iter()
        .filter(|i| i.bytes_per_sec > limit * LINK_MARGIN)
        .map(|i| {
            format!(
                "{} {} at {}",
                i.test,
                i.op_words(),
                format_rate(i.bytes_per_sec)
            )
        })
        .collect();
    (!fast.is_empty()).then(|| {
        (
            "iops_faster_than_link",
            Severity::Warning,
            format!(
                "{} on {} ran faster than its link allows ({}, at most {}): a cache served them, not the device",
                fast.join(", "),
                w.record.target,
                chain.limit_via.as_deref().unwrap_or("its link"),
                format_rate(limit)
            ),
        )
    })
}

/// Each test and op's median round, in the order run.
fn medians<'w>(w: &'w Stored<'_, IopsKind>) -> Vec<&'w IopsItem> {
    Rounds::of(&w.items).iter().map(Rounds::median).collect()
}

/// Each place a test's rate changed for good.
fn knees(w: &Stored<IopsKind>) -> Vec<Said> {
    let mut said = Vec::new();
    for rounds in Rounds::of(&w.items) {
        let item = rounds.items[0];
        let iops = |bytes_per_sec: f64| format_iops_words(bytes_per_sec / item.block_bytes as f64);
        for knee in knees_of(&rounds) {
            said.push((
                "iops_knee",
                Severity::Info,
                format!(
                    "{} {} on {} changed for good after {}, {} into the test: from {} to {} \
                     (a cache filling up, or a thermal or link throttle, does this)",
                    item.test,
                    item.op_words(),
                    w.record.target,
                    format_seconds(knee.t_s),
                    format_bytes(knee.bytes_before),
                    iops(knee.before_bytes_per_sec),
                    iops(knee.after_bytes_per_sec)
                ),
            ));
        }
    }
    said
}

/// For O_DIRECT write tests too short to outlast a write cache (with no knee seen),
/// that the device may have absorbed them.
fn write_short(w: &Stored<IopsKind>) -> Option<Said> {
    let writes = w.items.iter().any(|i| i.op == IopsOp::Write);
    (writes && w.params.direct && w.params.seconds < SUSTAINED_S).then(|| {
        (
            "iops_write_short",
            Severity::Info,
            format!(
                "each write test ran {} after a {} ramp: a device with a write cache (an SSD's SLC, a controller's memory) may have absorbed all of it; `--seconds 60` shows whether the rate holds, and where it drops",
                format_seconds(w.params.seconds),
                format_seconds(w.params.ramp_seconds)
            ),
        )
    })
}

/// Where a test's rate changed for good, from the intervals of its rounds, one after
/// another: a write cache that fills in the first round leaves the rest slower, a knee
/// no round shows alone. Its time counts the counted seconds of the rounds before.
fn knees_of(rounds: &Rounds) -> Vec<Knee> {
    let item = rounds.items[0];
    let intervals = rounds.intervals();
    if intervals.is_empty() || item.interval_seconds <= 0.0 {
        return Vec::new();
    }
    let length = item.interval_seconds;
    let series = Series {
        interval_s: length,
        clock_unix_s: 0.0,
        started_at_s: 0.0,
        finished_at_s: Some(rounds.seconds()),
        t_s: (1..=intervals.len()).map(|n| n as f64 * length).collect(),
        bytes: intervals.iter().map(|i| i.ios * item.block_bytes).collect(),
        ops: intervals.iter().map(|i| i.ios).collect(),
        knees: None,
        stages: Vec::new(),
    };
    knees::skewed(knees::detect(&series), Family::Iops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::{RunDocument, WorkloadRecord};
    use crate::workload::At;
    use crate::workload::iops::latency::{IntervalFigures, Latency};
    use crate::workload::iops::{BlockTest, IopsPlan, Order, Rw};
    use serde_json::json;

    /// A 4 KiB random write whose intervals of half a second completed `ios`.
    fn item(ios: &[u64]) -> IopsItem {
        let mut latency = Latency::new();
        latency.record(std::time::Duration::from_micros(100));
        let total: u64 = ios.iter().sum();
        let seconds = ios.len() as f64 * 0.5;
        IopsItem {
            test: "RND4K-Q1T1".into(),
            op: IopsOp::Write,
            rw: "write".into(),
            round: 1,
            order: Order::Random,
            block_bytes: 4096,
            queue_depth: 1,
            threads: 1,
            seconds,
            ios: total,
            iops: total as f64 / seconds,
            bytes_per_sec: (total * 4096) as f64 / seconds,
            latency_ns: latency.figures().unwrap(),
            histogram: latency.encode(),
            interval_seconds: 0.5,
            intervals: ios
                .iter()
                .map(|&ios| IntervalFigures {
                    ios,
                    p50_ns: Some(100_000),
                    p99_ns: Some(100_000),
                })
                .collect(),
            cached_fraction_before: None,
            direct: true,
        }
    }

    fn codes(items: Vec<IopsItem>, seconds: f64, limit: Option<f64>) -> Vec<Verdict> {
        let plan = IopsPlan {
            target: "/x".into(),
            size_bytes: 1 << 30,
            tests: vec!["RND4K-Q1T1".parse::<BlockTest>().unwrap()],
            rw: vec![Rw::Write],
            seconds,
            ramp_seconds: 1.0,
            direct: true,
            repeat: 1,
            seed: 1,
        };
        let mut record = WorkloadRecord::for_test(
            "iops",
            "/x",
            items
                .iter()
                .map(|i| serde_json::to_value(i).unwrap())
                .collect(),
        );
        record.params = serde_json::to_value(&plan).unwrap();
        record.context = json!({ "chain": limit.map(|limit| json!({
            "path": "/x", "mount_point": "/", "fs_type": "ext4", "source": "/dev/sda",
            "steps": [], "max_bytes_per_sec": limit, "limit_via": "SATA 3 Gbit/s",
        })) });
        let doc = RunDocument::for_test(vec![record]);
        let stored = Stored::<IopsKind>::decode(At::new(&doc, 0)).unwrap();
        verdicts(&stored)
    }

    #[test]
    fn a_write_rate_that_drops_for_good_is_a_knee_and_a_short_steady_one_may_be_cached() {
        // 60 s at 1000 IOPS, then 250: a write cache filled at 30 s.
        let mut ios = vec![500u64; 60];
        ios.extend(vec![125u64; 60]);
        let said = codes(vec![item(&ios)], 60.0, None);
        let knee = said.iter().find(|v| v.code == "iops_knee").expect("a knee");
        assert!(knee.message.contains("after 30.0 s"), "{}", knee.message);
        assert!(
            knee.message.contains("from 1000 IOPS to 250 IOPS"),
            "{}",
            knee.message
        );
        assert!(!said.iter().any(|v| v.code == "iops_write_short"));
        let steady = codes(vec![item(&[500; 10])], 5.0, None);
        let codes_of = |v: &[Verdict]| v.iter().map(|v| v.code.clone()).collect::<Vec<_>>();
        assert_eq!(codes_of(&steady), ["iops_write_short"]);
        assert!(codes_of(&codes(vec![item(&[500; 120])], 60.0, None)).is_empty());
    }

    #[test]
    fn a_knee_between_rounds_is_found_over_them_all() {
        // Three rounds of 5 s: the first at 1000 IOPS, then a cache is full and the rest
        // run at 250 throughout, each steady on its own.
        let rounds: Vec<IopsItem> = [500u64, 125, 125]
            .iter()
            .zip(1..)
            .map(|(&ios, round)| IopsItem {
                round,
                ..item(&[ios; 10])
            })
            .collect();
        let said = codes(rounds, 5.0, None);
        let knee = said.iter().find(|v| v.code == "iops_knee").expect("a knee");
        assert!(knee.message.contains("after 5.00 s"), "{}", knee.message);
        assert!(
            knee.message.contains("from 1000 IOPS to 250 IOPS"),
            "{}",
            knee.message
        );
    }

    #[test]
    fn the_median_round_is_judged_against_the_link() {
        // 4.1 MB/s in the median round only is over a 3 MB/s link; a round over it beside
        // two under it is not the figure shown.
        let over = |ios: u64, round| IopsItem {
            round,
            ..item(&[ios; 10])
        };
        let one_fast = vec![over(500, 1), over(300, 2), over(300, 3)];
        let said = codes(one_fast, 5.0, Some(3e6));
        assert!(!said.iter().any(|v| v.code == "iops_faster_than_link"));
        let two_fast = vec![over(500, 1), over(300, 2), over(500, 3)];
        let said = codes(two_fast, 5.0, Some(3e6));
        assert!(said.iter().any(|v| v.code == "iops_faster_than_link"));
    }

    #[test]
    fn a_test_faster_than_the_link_is_flagged() {
        // 1000 IOPS of 4 KiB is 4.1 MB/s: over a 3 MB/s link, within a 5 MB/s one.
        let said = codes(vec![item(&[500; 10])], 5.0, Some(3e6));
        let fast = said
            .iter()
            .find(|v| v.code == "iops_faster_than_link")
            .expect("flagged");
        assert!(
            fast.message.contains("RND4K-Q1T1 write at 4.10 MB/s"),
            "{}",
            fast.message
        );
        assert!(fast.message.contains("SATA 3 Gbit/s"), "{}", fast.message);
        let said = codes(vec![item(&[500; 10])], 5.0, Some(5e6));
        assert!(!said.iter().any(|v| v.code == "iops_faster_than_link"));
    }
}
