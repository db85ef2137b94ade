//! The sampler: one clock for every workload that runs at once. At each tick it reads
//! every running workload's byte and operation counters and records what moved since
//! the last tick, so series of workloads that ran together line up in time.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::control::Progress;
use crate::document::{Series, StageEnd};

/// Series of a group of workloads on one clock.
pub struct Sampler {
    start: Instant,
    clock_unix_s: f64,
    interval: Duration,
    ticks: u32,
    tracks: Vec<Track>,
}

struct Track {
    workload: usize,
    progress: Arc<Progress>,
    last_bytes: u64,
    last_ops: u64,
    started_at_s: Option<f64>,
    finished_at_s: Option<f64>,
    t_s: Vec<f64>,
    bytes: Vec<u64>,
    ops: Vec<u64>,
    stages: Vec<StageEnd>,
}

impl Sampler {
    /// A clock that starts at `start` and ticks every `interval`, for these workloads
    /// and their counters.
    pub fn new(
        start: Instant,
        interval: Duration,
        members: Vec<(usize, Arc<Progress>)>,
    ) -> Sampler {
        let tracks = members
            .into_iter()
            .map(|(workload, progress)| Track {
                workload,
                progress,
                last_bytes: 0,
                last_ops: 0,
                started_at_s: None,
                finished_at_s: None,
                t_s: Vec::new(),
                bytes: Vec::new(),
                ops: Vec::new(),
                stages: Vec::new(),
            })
            .collect();
        Sampler {
            start,
            // The wall clock read next to the monotonic one, to within microseconds.
            clock_unix_s: (SystemTime::now() - start.elapsed())
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            interval,
            ticks: 0,
            tracks,
        }
    }

    /// When the next sample is due.
    pub fn next_tick(&self) -> Instant {
        self.start + self.interval * (self.ticks + 1)
    }

    /// Seconds from the common start to `at`.
    fn seconds(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.start).as_secs_f64()
    }

    /// Records what every running workload moved since the last sample.
    pub fn sample(&mut self, now: Instant) {
        let t = self.seconds(now);
        for track in &mut self.tracks {
            if track.started_at_s.is_some() && track.finished_at_s.is_none() {
                track.record(t);
            }
        }
        // Skip ticks missed while busy: samples stay on the interval grid.
        while self.next_tick() <= now {
            self.ticks += 1;
        }
    }

    /// Marks `workload` as started at `at` (after its delay). Its counters are new for
    /// this group, so everything they hold from here on belongs to its series.
    pub fn started(&mut self, workload: usize, at: Instant) {
        let t = self.seconds(at);
        if let Some(track) = self.track(workload) {
            track.started_at_s = Some(t);
        }
    }

    /// Marks `workload` as finished at `at`, with a last, partial sample. A tick taken
    /// after the finish but before this news arrived already holds the last bytes: its
    /// end moves back to the finish, so time never runs backwards in the series.
    pub fn finished(&mut self, workload: usize, at: Instant) {
        let t = self.seconds(at);
        if let Some(track) = self.track(workload)
            && let Some(started) = track.started_at_s
        {
            let moved = track.progress.bytes() != track.last_bytes;
            match track.t_s.last().copied() {
                Some(last) if last >= t && !moved => {
                    let floor = track.t_s.iter().rev().nth(1).copied().unwrap_or(started);
                    *track.t_s.last_mut().expect("a last sample") = t.max(floor);
                }
                _ => track.record(t),
            }
            track.finished_at_s = Some(t.max(track.t_s.last().copied().unwrap_or(t)));
        }
    }

    /// Notes that `workload` ended its stage `stage` at `at`.
    pub fn stage_done(&mut self, workload: usize, at: Instant, stage: String) {
        let t_s = self.seconds(at);
        if let Some(track) = self.track(workload) {
            track.stages.push(StageEnd { stage, t_s });
        }
    }

    fn track(&mut self, workload: usize) -> Option<&mut Track> {
        self.tracks.iter_mut().find(|t| t.workload == workload)
    }

    /// The series of every workload that started.
    pub fn into_series(self) -> Vec<(usize, Series)> {
        let interval_s = self.interval.as_secs_f64();
        let clock_unix_s = self.clock_unix_s;
        self.tracks
            .into_iter()
            .filter_map(|track| {
                Some((
                    track.workload,
                    Series {
                        interval_s,
                        clock_unix_s,
                        started_at_s: track.started_at_s?,
                        finished_at_s: track.finished_at_s,
                        t_s: track.t_s,
                        bytes: track.bytes,
                        ops: track.ops,
                        knees: None,
                        stages: track.stages,
                    },
                ))
            })
            .collect()
    }
}

impl Track {
    fn record(&mut self, t: f64) {
        let bytes = self.progress.bytes();
        let ops = self.progress.ops();
        self.t_s.push(t);
        self.bytes.push(bytes - self.last_bytes);
        self.ops.push(ops - self.last_ops);
        self.last_bytes = bytes;
        self.last_ops = ops;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_line_up_on_one_clock() {
        let start = Instant::now();
        let (a, b) = (Arc::new(Progress::default()), Arc::new(Progress::default()));
        let mut sampler = Sampler::new(
            start,
            Duration::from_millis(100),
            vec![(0, a.clone()), (1, b.clone())],
        );
        sampler.started(0, start);
        a.add(1000);
        sampler.sample(start + Duration::from_millis(100));
        sampler.started(1, start + Duration::from_millis(150));
        a.add(500);
        b.add(200);
        sampler.sample(start + Duration::from_millis(200));
        b.add(100);
        sampler.finished(1, start + Duration::from_millis(250));
        sampler.sample(start + Duration::from_millis(300));
        let series = sampler.into_series();
        let (_, first) = &series[0];
        assert_eq!(first.bytes, vec![1000, 500, 0]);
        assert_eq!(first.t_s, vec![0.1, 0.2, 0.3]);
        assert_eq!(first.finished_at_s, None);
        let (_, second) = &series[1];
        assert_eq!(second.started_at_s, 0.15);
        assert_eq!(second.bytes, vec![200, 100]);
        assert_eq!(second.t_s, vec![0.2, 0.25]);
        assert_eq!(second.finished_at_s, Some(0.25));
        let rates = second.bytes_per_sec();
        assert!((rates[0] - 4000.0).abs() < 1e-6 && (rates[1] - 2000.0).abs() < 1e-6);
    }

    #[test]
    fn stages_are_timed_on_the_clock_and_a_repeated_one_is_one_span() {
        let start = Instant::now();
        let a = Arc::new(Progress::default());
        let mut sampler = Sampler::new(start, Duration::from_millis(100), vec![(0, a)]);
        sampler.started(0, start + Duration::from_millis(50));
        let at = |ms| start + Duration::from_millis(ms);
        sampler.stage_done(0, at(300), "pass 1 write".into());
        sampler.stage_done(0, at(400), "samples".into());
        sampler.stage_done(0, at(500), "samples".into());
        sampler.stage_done(7, at(600), "not ours".into());
        let series = sampler.into_series();
        let (_, series) = &series[0];
        assert_eq!(series.stages.len(), 3);
        assert_eq!(
            series.stage_spans(),
            vec![("pass 1 write", 0.05, 0.3), ("samples", 0.3, 0.5)]
        );
    }

    #[test]
    fn a_finish_heard_after_a_tick_does_not_run_time_backwards() {
        let start = Instant::now();
        let a = Arc::new(Progress::default());
        let mut sampler = Sampler::new(start, Duration::from_millis(100), vec![(0, a.clone())]);
        sampler.started(0, start);
        a.add(100);
        // The workload finished at 0.15 s; the tick at 0.2 s saw its last bytes first.
        sampler.sample(start + Duration::from_millis(200));
        sampler.finished(0, start + Duration::from_millis(150));
        let (_, series) = sampler.into_series().remove(0);
        assert_eq!(series.t_s, vec![0.15]);
        assert_eq!(series.bytes, vec![100]);
        assert_eq!(series.finished_at_s, Some(0.15));
    }

    #[test]
    fn bytes_moved_before_the_start_is_heard_count() {
        let start = Instant::now();
        let a = Arc::new(Progress::default());
        let mut sampler = Sampler::new(start, Duration::from_millis(100), vec![(0, a.clone())]);
        a.add(500);
        sampler.started(0, start + Duration::from_millis(10));
        sampler.sample(start + Duration::from_millis(100));
        let (_, series) = sampler.into_series().remove(0);
        assert_eq!(series.bytes, vec![500]);
    }

    #[test]
    fn missed_ticks_are_skipped_not_bunched() {
        let start = Instant::now();
        let mut sampler = Sampler::new(start, Duration::from_millis(100), vec![]);
        sampler.sample(start + Duration::from_millis(350));
        assert_eq!(sampler.next_tick(), start + Duration::from_millis(400));
    }
}
