//! Sustained mode: write (or read) without pause for a set time, like the script people
//! write to log a copy's speed every second. Files of `--file-size` are written in turn
//! through a ring of as many as the free space holds, then written over in place; the
//! rate series and its knees are the result, the files are items as usual.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::DiskWorkload;
use super::passes::WriteSpec;
use crate::control::Progress;
use crate::error::Error;
use crate::storage::engine::Engine;
use crate::storage::workdir::{self, KeptFile};
use crate::vocab::units::format_size;
use crate::workload::{Context, Sink};

impl DiskWorkload {
    /// Writes the files a sustained read goes through, before the common start; their
    /// bytes count in no series.
    pub(super) fn lay_out(&mut self, ctx: &Context) -> Result<(), Error> {
        let size = self
            .plan
            .file_size_bytes
            .expect("sustained runs have a file size");
        let mut engine = self.engine.take().expect("the engine is made first");
        // Bytes laid out go to counters no sampler reads.
        let (events, _ignored) = std::sync::mpsc::channel();
        let quiet = Context {
            cancel: ctx.cancel.clone(),
            sink: Sink::new(0, events, Arc::new(Progress::default())),
        };
        let mut result = Ok(());
        for index in 0..self.ring {
            let name = format!("sustained-{index:03}.dat");
            ctx.sink
                .status(format!("lay out {} to read", format_size(size)));
            let spec = WriteSpec {
                name: &name,
                size,
                create: true,
                until: None,
            };
            if let Err(e) = self.write_file(&quiet, engine.as_mut(), &spec, 0) {
                result = Err(e);
                break;
            }
            self.kept.push(KeptFile {
                name,
                size_bytes: size,
            });
        }
        self.engine = Some(engine);
        result
    }

    /// Writes or reads the ring's files in turn until `duration` has passed. A write
    /// run adds a file to its ring only while one more fits in the free space at that
    /// moment (other workloads may be filling the same disk), then writes over the
    /// oldest. Items are stored about once a second.
    pub(super) fn run_sustained(
        &mut self,
        ctx: &Context,
        engine: &mut dyn Engine,
        duration: Duration,
    ) -> Result<(), Error> {
        let size = self
            .plan
            .file_size_bytes
            .expect("sustained runs have a file size");
        let until = Instant::now() + duration;
        let mut ring: Vec<KeptFile> = Vec::new();
        let mut turn = 0usize;
        let mut stored_at = Instant::now();
        while Instant::now() < until {
            if ctx.cancel.is_set() {
                return Err(Error::Interrupted);
            }
            let item = if self.plan.phase.writes() {
                let grow = ring.len() < self.ring
                    && (ring.is_empty() || workdir::check_space(&self.target, size, 1).is_ok());
                let slot = if grow { ring.len() } else { turn % ring.len() };
                let round = if grow {
                    1
                } else {
                    (turn / ring.len() + 1) as u32
                };
                let name = format!("sustained-{slot:03}.dat");
                ctx.sink.status(format!(
                    "sustained write, file {} (round {round})",
                    slot + 1
                ));
                let spec = WriteSpec {
                    name: &name,
                    size,
                    create: grow,
                    until: Some(until),
                };
                let item = self.write_file(ctx, engine, &spec, round)?;
                if grow {
                    ring.push(KeptFile {
                        name,
                        size_bytes: 0,
                    });
                }
                // A file cut short by the deadline is only as long as what was written.
                ring[slot].size_bytes = ring[slot].size_bytes.max(item.bytes);
                if !grow {
                    turn += 1;
                }
                item
            } else {
                let kept = self.kept[turn % self.kept.len()].clone();
                let mode = self.plan.read_modes[0];
                ctx.sink
                    .status(format!("sustained read ({})", mode.as_str()));
                let round = (turn / self.kept.len() + 1) as u32;
                turn += 1;
                self.read_file(ctx, engine, &kept, mode, round, Some(until))?
            };
            ctx.sink.item(&item);
            if stored_at.elapsed() >= Duration::from_secs(1) {
                ctx.sink.stage_done("sustained");
                stored_at = Instant::now();
            }
        }
        ctx.sink.stage_done("sustained");
        if self.plan.keep {
            let files = if self.plan.phase.writes() {
                ring
            } else {
                self.kept.clone()
            };
            self.keep(&files)?;
        }
        Ok(())
    }
}
