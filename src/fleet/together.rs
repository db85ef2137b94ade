//! The fleet's hosts started at one agreed instant (`--together`): each host's clock
//! offset is estimated first, each run is told the instant on its own clock, and once
//! they are back, how far each started from it (on the fleet's clock) and the skew
//! between them are stored with every run.

use super::clock::{self, Offset};
use super::{Host, Outcome, follow, outcome, start};
use crate::control::Cancel;
use crate::document::FleetStart;
use crate::platform::remote::deploy;

/// Seconds between the agreed instant and now, for every run to be set up by then:
/// an ssh connection and ratelab's own checks, per host in parallel.
const LEAD_S: f64 = 2.0;

/// Runs `verb` on every host at one instant; each host's outcome, in order.
pub fn run_together(
    hosts: &[Host],
    verb: &[String],
    say: &dyn Fn(&str),
    cancel: &Cancel,
) -> Vec<Outcome> {
    // Copy and clock first, one host after another: neither is timed.
    let ready: Vec<Result<(deploy::Binary, Offset), String>> = hosts
        .iter()
        .map(|host| {
            let binary = deploy::ensure(host, say)?;
            let offset = clock::offset(host)?;
            say(&format!(
                "{}: clock {:+.1} ms from here (within {:.1} ms)",
                host.name,
                offset.seconds * 1e3,
                offset.error_s * 1e3
            ));
            Ok((binary, offset))
        })
        .collect();
    if cancel.is_set() {
        return hosts
            .iter()
            .map(|_| Outcome::Failed("not run: interrupted".into()))
            .collect();
    }
    let agreed = clock::now_unix_s() + LEAD_S;
    let mut runs = Vec::new();
    let mut outcomes: Vec<Option<Outcome>> = Vec::new();
    for (host, ready) in hosts.iter().zip(&ready) {
        let started = ready
            .as_ref()
            .map_err(String::clone)
            .and_then(|(binary, offset)| {
                start(host, binary, verb, Some(agreed + offset.seconds), say)
            });
        match started {
            Ok(run) => {
                runs.push(run);
                outcomes.push(None);
            }
            Err(reason) => outcomes.push(Some(Outcome::Failed(reason))),
        }
    }
    follow(&mut runs, say, cancel);
    let mut finished = runs.into_iter().map(|run| outcome(run.finish()));
    let mut outcomes: Vec<Outcome> = outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| finished.next().expect("one outcome per run")))
        .collect();
    mark(hosts, &ready, &mut outcomes, agreed);
    outcomes
}

/// Stores with every run how it kept to the agreed instant, and the skew of them all.
fn mark(
    hosts: &[Host],
    ready: &[Result<(deploy::Binary, Offset), String>],
    outcomes: &mut [Outcome],
    agreed: f64,
) {
    // When each run's workloads started, on the fleet's clock.
    let starts: Vec<Option<f64>> = outcomes
        .iter()
        .zip(ready)
        .map(|(outcome, ready)| {
            let (Outcome::Ran(doc), Ok((_, offset))) = (outcome, ready) else {
                return None;
            };
            doc.workloads
                .iter()
                .filter_map(|w| w.series.as_ref().map(|s| s.clock_unix_s))
                .reduce(f64::min)
                .map(|at| at - offset.seconds)
        })
        .collect();
    let known: Vec<f64> = starts.iter().flatten().copied().collect();
    let skew_s = match (
        known.iter().copied().reduce(f64::min),
        known.iter().copied().reduce(f64::max),
    ) {
        (Some(first), Some(last)) => last - first,
        _ => return,
    };
    let names: Vec<String> = hosts.iter().map(|h| h.name.clone()).collect();
    for ((outcome, ready), at) in outcomes.iter_mut().zip(ready).zip(&starts) {
        if let (Outcome::Ran(doc), Ok((_, offset)), Some(at)) = (outcome, ready, at) {
            doc.fleet = Some(FleetStart {
                hosts: names.clone(),
                requested_unix_s: agreed,
                clock_offset_s: offset.seconds,
                clock_offset_error_s: offset.error_s,
                start_error_s: at - agreed,
                skew_s,
            });
        }
    }
}
