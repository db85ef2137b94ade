//! The what-if, measured: the whole task run again with each step made free in turn
//! (the input already in memory, bytes passed on without the codec, the output dropped
//! unsynced), so that what a step costs the task is a measurement, not a model.

use super::pipeline::{self, Input, Middle, Output};
use super::steps::{Direction, Transform, Uncached};
use super::{Step, TaskItem, TaskWorkload};
use crate::error::Error;
use crate::workload::Context;

/// A step of the task, made free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Free {
    Read,
    Transform,
    Write,
}

impl TaskWorkload {
    /// Runs the whole task with each step free in turn at `how`'s threads, sending an
    /// item for each.
    pub(super) fn what_if(&mut self, ctx: &Context, how: Transform) -> Result<(), Error> {
        for free in [Free::Read, Free::Transform, Free::Write] {
            self.whole_with_free(ctx, how, free)?;
        }
        Ok(())
    }

    /// The whole task with `free` taking no time.
    fn whole_with_free(&mut self, ctx: &Context, how: Transform, free: Free) -> Result<(), Error> {
        let (_, size) = self.source.clone().expect("set in prepare");
        let (input_path, input_size) = self.input.clone().expect("set in setup");
        let op = match free {
            Free::Read => Step::Read,
            Free::Transform => how.direction.step(),
            Free::Write => Step::Write,
        };
        ctx.sink.status(format!(
            "{} threads: the whole task with {op} free",
            how.threads
        ));
        let name = self.output_name("what-if");
        let (memory, kept) = self.memory.as_ref().expect("made in setup");
        let transformed = self.output.as_deref().expect("made in setup");
        let workdir = self.workdir.as_mut().expect("made in setup");
        let mut residency = None;
        let input = match free {
            Free::Read => Input::Memory {
                bytes: &memory.as_slice()[..*kept],
                total: input_size,
            },
            _ => {
                let file = Uncached::open(&input_path, input_size, self.made, &self.plan.layers)?;
                residency = Some((file.cached_fraction_before, file.direct));
                Input::File(file)
            }
        };
        let middle = match free {
            // What the in-memory step made of the bytes it held.
            Free::Transform => Middle::Free {
                output: transformed,
                per: *kept as u64,
            },
            _ => Middle::Codec(how),
        };
        let output = match free {
            Free::Write => Output::Dropped,
            _ => Output::File(workdir, &name),
        };
        let compress = how.direction == Direction::Compress;
        let whole = pipeline::run(ctx, input, middle, output, compress.then_some(size))?;
        if let Some(path) = &whole.output {
            self.workdir
                .as_mut()
                .expect("made in setup")
                .remove_file(path)?;
        }
        ctx.sink.item(&TaskItem {
            output_bytes: Some(whole.output_bytes),
            cached_fraction_before: residency.map(|r| r.0),
            direct: residency.map(|r| r.1),
            free: Some(op),
            ..TaskItem::timed(Step::WhatIf, how.threads, size, size, whole.seconds)
        });
        Ok(())
    }
}
