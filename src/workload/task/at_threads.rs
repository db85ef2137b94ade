//! What a task runs at one thread count: read, transform and write each alone, then
//! the whole task at once with its output checked against the original, each step
//! sending its item as it ends.

use crate::storage::layers::{read_below, read_below_fraction};
use std::time::Instant;

use super::pipeline::{self, Input, Middle, Output};
use super::steps::{self, Direction, Transform, Uncached};
use super::{Step, TaskItem, TaskKind, TaskWorkload};
use crate::error::Error;
use crate::workload::{Context, Kind};

/// Times the in-memory transform is run alone at most, so that one slice of CPU
/// taken by the host or other work does not set its rate: its median is the step's,
/// and the fastest bounds what a whole task without another step can reach.
const TRANSFORM_SAMPLES: usize = 3;

/// Seconds after which no further sample of the transform alone is begun: a task of
/// gigabytes is timed once, as before.
const TRANSFORM_SECONDS: f64 = 2.0;

impl TaskWorkload {
    /// The name of the output file of `step`, with the codec's extension.
    pub(super) fn output_name(&self, step: &str) -> String {
        match self.plan.direction {
            Direction::Compress => format!("{step}.{}", self.plan.codec.as_str()),
            Direction::Decompress => format!("{step}.out"),
        }
    }

    /// Runs every step at `threads` and sends the items.
    pub(super) fn run_threads(&mut self, ctx: &Context, threads: usize) -> Result<(), Error> {
        let how = self.how(threads);
        self.read_step(ctx, how)?;
        let (output, original) = self.transform_step(ctx, how)?;
        self.write_step(ctx, how, output, original)?;
        self.whole_step(ctx, how)?;
        if self.plan.what_if {
            self.what_if(ctx, how)?;
        }
        ctx.sink.stage_done(super::brief::threads(threads));
        Ok(())
    }

    /// The read step alone: the input read uncached into memory.
    fn read_step(&mut self, ctx: &Context, how: Transform) -> Result<(), Error> {
        let (_, size) = self.source.clone().expect("set in prepare");
        let (input_path, input_size) = self.input.clone().expect("set in setup");
        ctx.sink.status(format!(
            "{} threads: read {}",
            how.threads,
            input_path.display()
        ));
        let (memory, _) = self.memory.as_mut().expect("made in setup");
        let below = read_below(&self.plan.layers);
        let reader = Uncached::open(&input_path, input_size, self.made, &self.plan.layers)?;
        // The whole buffer: its length is whole pages, as reads with O_DIRECT need.
        let seconds = steps::read(ctx, &reader, memory.as_mut_slice())?;
        ctx.sink.item(&TaskItem {
            cached_fraction_before: Some(reader.cached_fraction_before),
            layers: reader.layers.clone(),
            read_below_fraction: read_below_fraction(below, &self.plan.layers, input_size),
            direct: Some(reader.direct),
            ..TaskItem::timed(Step::Read, how.threads, input_size, size, seconds)
        });
        Ok(())
    }

    /// The transform step alone, in memory, timed up to [`TRANSFORM_SAMPLES`] times
    /// within [`TRANSFORM_SECONDS`], an item each; gives its output and the original
    /// bytes it stands for.
    fn transform_step(&mut self, ctx: &Context, how: Transform) -> Result<(Vec<u8>, u64), Error> {
        let (input_path, _) = self.input.clone().expect("set in setup");
        let compress = how.direction == Direction::Compress;
        ctx.sink.status(format!(
            "{} threads: {} in memory",
            how.threads,
            how.direction.as_str()
        ));
        let (memory, kept) = self.memory.as_ref().expect("made in setup");
        let kept = *kept;
        let pledged = compress.then_some(kept as u64);
        let mut output = self.output.take().expect("made in setup");
        let began = Instant::now();
        let mut samples = 0;
        loop {
            output.clear();
            let started = Instant::now();
            let output_bytes;
            (output, output_bytes) = steps::transform(
                ctx,
                how,
                pledged,
                &memory.as_slice()[..kept],
                output,
                &input_path,
            )?;
            let seconds = started.elapsed().as_secs_f64();
            let original = if compress { kept as u64 } else { output_bytes };
            ctx.sink.item(&TaskItem {
                output_bytes: Some(output_bytes),
                ..TaskItem::timed(
                    how.direction.step(),
                    how.threads,
                    kept as u64,
                    original,
                    seconds,
                )
            });
            samples += 1;
            if samples == TRANSFORM_SAMPLES || began.elapsed().as_secs_f64() >= TRANSFORM_SECONDS {
                return Ok((output, original));
            }
        }
    }

    /// The write step alone: the transform's `output` written to a new file and synced.
    fn write_step(
        &mut self,
        ctx: &Context,
        how: Transform,
        output: Vec<u8>,
        original: u64,
    ) -> Result<(), Error> {
        ctx.sink.status(format!(
            "{} threads: write {}",
            how.threads,
            self.plan.out.display()
        ));
        let name = self.output_name("write-only");
        let workdir = self.workdir.as_mut().expect("made in setup");
        let seconds = steps::write(ctx, workdir, &name, &output)?;
        let bytes = output.len() as u64;
        ctx.sink.item(&TaskItem::timed(
            Step::Write,
            how.threads,
            bytes,
            original,
            seconds,
        ));
        self.output = Some(output);
        Ok(())
    }

    /// The whole task at once (read, transform, write), its output then decoded and
    /// compared with the original.
    fn whole_step(&mut self, ctx: &Context, how: Transform) -> Result<(), Error> {
        let (source_path, size) = self.source.clone().expect("set in prepare");
        let (input_path, input_size) = self.input.clone().expect("set in setup");
        let compress = how.direction == Direction::Compress;
        // `task.zst` beside the write step's `write-only.zst`.
        let task_name = self.output_name(TaskKind::NAME);
        ctx.sink
            .status(format!("{} threads: the whole task", how.threads));
        let workdir = self.workdir.as_mut().expect("made in setup");
        let below = read_below(&self.plan.layers);
        let reader = Uncached::open(&input_path, input_size, self.made, &self.plan.layers)?;
        let (fraction, direct, layers) = (
            reader.cached_fraction_before,
            reader.direct,
            reader.layers.clone(),
        );
        let whole = pipeline::run(
            ctx,
            Input::File(reader),
            Middle::Codec(how),
            Output::File(workdir, &task_name),
            compress.then_some(size),
        )?;
        let output = whole.output.expect("written to a file");
        let read_below_fraction = read_below_fraction(below, &self.plan.layers, input_size);
        ctx.sink
            .status(format!("{} threads: check the round trip", how.threads));
        let decode = compress.then_some(how.codec);
        let round_trip_ok = steps::file_digest(&output, decode, &ctx.cancel)? == self.digest;
        let workdir = self.workdir.as_mut().expect("made in setup");
        workdir.remove_file(&output)?;
        ctx.sink.item(&TaskItem {
            output_bytes: Some(whole.output_bytes),
            cached_fraction_before: Some(fraction),
            layers,
            read_below_fraction,
            direct: Some(direct),
            round_trip_ok: Some(round_trip_ok),
            ..TaskItem::timed(Step::Total, how.threads, size, size, whole.seconds)
        });
        if !round_trip_ok {
            ctx.sink.warning(format!(
                "the output of {} at {} threads does not decode to {}",
                how.codec.as_str(),
                how.threads,
                source_path.display()
            ));
        }
        Ok(())
    }
}
