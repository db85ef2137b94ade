//! One uncached (or deliberately cached) read of a file, as every storage kind times
//! it: the file and the layers below it put in the cache state asked for, what they
//! still hold measured, then the read timed by an engine.

use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::cache::{self, Eviction};
use super::engine::{Engine, ReadJob, Transfer};
use super::layers::{Layer, LayerResidency, evict_and_measure};
use super::workdir;
use crate::control::Controls;
use crate::error::Error;

/// How a file is read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum ReadMode {
    /// O_DIRECT with aligned buffers: the device, never the page cache.
    Direct,
    /// Evicted from the page cache first, then read through it.
    Flushed,
    /// Read through a warm page cache, to show what the cache does.
    Cached,
}

impl ReadMode {
    /// The name stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadMode::Direct => "direct",
            ReadMode::Flushed => "flushed",
            ReadMode::Cached => "cached",
        }
    }
}

/// How much of a file the caches held just before its read.
pub struct Residency {
    /// The fraction of the file in its own page cache.
    pub file: f64,
    /// What each layer below it held.
    pub layers: Vec<LayerResidency>,
}

/// Puts one file in the cache state `mode` asks for, with the `layers` below it when the
/// file is ours, measures how much of it is resident, and times its read. A file that
/// is not ours (`layers` is `None`) is only advised out of the cache, never synced or
/// dropped with the machine's whole cache.
pub fn read_one(
    controls: Controls,
    engine: &mut dyn Engine,
    path: &Path,
    size: u64,
    mode: ReadMode,
    until: Option<Instant>,
    layers: Option<&[Layer]>,
) -> Result<(Transfer, Residency), Error> {
    let probe = workdir::open_for_read(path, false)?;
    let how = match (mode, layers.is_some()) {
        (ReadMode::Cached, _) => None,
        (_, false) => Some(Eviction::Foreign),
        (ReadMode::Direct, true) => Some(Eviction::Advise),
        (ReadMode::Flushed, true) => Some(Eviction::Force),
    };
    let layers = match how {
        Some(how) => {
            cache::evict(&probe, path, size, how)?;
            // The file first: writing back its pages is what fills the layers below.
            evict_and_measure(layers.unwrap_or_default(), &probe, size, how)?
        }
        None => {
            cache::warm(&probe, path, size)?;
            Vec::new()
        }
    };
    let fraction = Residency {
        file: cache::resident_fraction(&probe, path, size)?,
        layers,
    };
    let direct = mode == ReadMode::Direct;
    let reader = if direct {
        workdir::open_for_read(path, true)?
    } else {
        probe
    };
    let job = ReadJob {
        file: &reader,
        path,
        size,
        direct,
        progress: controls.progress,
        cancel: controls.cancel,
        until,
    };
    Ok((engine.read(&job)?, fraction))
}
