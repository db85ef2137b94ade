//! What ratelab knows of a kind without running it: how to summarise, judge, tabulate,
//! chart and compare its stored workloads. A kind implements [`Kind`] on its own typed
//! shapes (params, context, items, summary); the runner and the reports reach every
//! kind through [`StoredKind`], which decodes a stored workload and names the run,
//! workload and item of anything it cannot read, so nothing corrupt is passed over.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{InPlace, Site};
use crate::document::{Knee, RunDocument, Verdict, WorkloadRecord};
use crate::vocab::{
    Chart, Exposure, LinkLimit, ProfileFigure, RateUnit, Samples, SummaryLine, Table, Unmeasured,
};

/// One workload of a run: where every hook of a kind starts from.
#[derive(Debug, Clone, Copy)]
pub struct At<'a> {
    /// The run it belongs to, with the other workloads beside it.
    pub run: &'a RunDocument,
    /// Its index among the run's workloads.
    pub index: usize,
}

impl<'a> At<'a> {
    /// Workload `index` of `run`.
    pub fn new(run: &'a RunDocument, index: usize) -> At<'a> {
        At { run, index }
    }

    /// Its record as stored.
    pub fn record(&self) -> &'a WorkloadRecord {
        &self.run.workloads[self.index]
    }

    /// The words that place it: `run 12, workload 2 (disk)`, and how to see it as stored.
    fn place(&self) -> (String, String) {
        let run = self
            .run
            .run_id
            .map_or("the run".to_string(), |id| format!("run {id}"));
        let place = format!(
            "{run}, workload {} ({})",
            self.index + 1,
            self.record().kind
        );
        let id = self
            .run
            .run_id
            .map_or("ID".to_string(), |id| id.to_string());
        (place, format!("ratelab results export {id} --format json"))
    }
}

/// A stored value of a workload that cannot be read back as its kind's shape.
#[derive(Debug, thiserror::Error)]
#[error(
    "{place}: the stored {what} cannot be read ({detail}); `{export}` still shows it as stored"
)]
pub struct DecodeError {
    /// The run and workload: `run 12, workload 2 (disk)`.
    pub place: String,
    /// The command that shows the run as stored, corrupt value included.
    pub export: String,
    /// Which value: `params`, `summary`, `item 17`.
    pub what: String,
    /// What serde said.
    pub detail: String,
}

/// A kind's stored workload, decoded into the kind's own shapes.
pub struct Stored<'a, K: Kind + ?Sized> {
    /// Where it sits in its run.
    pub at: At<'a>,
    /// Its record as stored (target, warnings, series).
    pub record: &'a WorkloadRecord,
    /// Its parameters.
    pub params: K::Params,
    /// What the platform said of its target.
    pub context: K::Context,
    /// Every item, in the order measured.
    pub items: Vec<K::Item>,
    /// Its summary; `None` before the run was summarised (or when it never finished).
    pub summary: Option<K::Summary>,
}

impl<'a, K: Kind + ?Sized> Stored<'a, K> {
    /// Decodes workload `at` as kind `K`.
    pub fn decode(at: At<'a>) -> Result<Stored<'a, K>, DecodeError> {
        let record = at.record();
        let fail = |what: String, e: serde_json::Error| {
            let (place, export) = at.place();
            DecodeError {
                place,
                export,
                what,
                detail: e.to_string(),
            }
        };
        let items = record
            .items
            .iter()
            .enumerate()
            .map(|(n, item)| {
                K::Item::deserialize(item).map_err(|e| fail(format!("item {}", n + 1), e))
            })
            .collect::<Result<_, _>>()?;
        Ok(Stored {
            at,
            record,
            params: K::Params::deserialize(&record.params).map_err(|e| fail("params".into(), e))?,
            context: match &record.context {
                Value::Null => K::Context::default(),
                context => {
                    K::Context::deserialize(context).map_err(|e| fail("context".into(), e))?
                }
            },
            items,
            summary: match &record.summary {
                Value::Null => None,
                summary => {
                    Some(K::Summary::deserialize(summary).map_err(|e| fail("summary".into(), e))?)
                }
            },
        })
    }

    /// Its index among the run's workloads.
    pub fn index(&self) -> usize {
        self.at.index
    }
}

/// What ratelab knows of one kind of workload, on the kind's own typed shapes. Hooks
/// beyond summary, verdicts and tables have defaults: a kind overrides what it has.
pub trait Kind: Sync + 'static {
    /// The kind's name as stored (`disk`).
    const NAME: &'static str;
    /// Its validated parameters, as stored in `params`.
    type Params: Serialize + DeserializeOwned;
    /// What the platform said of its target, as stored in `context`; `()` for none.
    type Context: Serialize + DeserializeOwned + Default;
    /// One measured item.
    type Item: Serialize + DeserializeOwned;
    /// Statistics over the items, as stored in `summary`.
    type Summary: Serialize + DeserializeOwned;

    /// Whether its series count bytes moved, so that its rate over time is charted.
    const RATE_SERIES: bool = true;

    /// The unit its rates are shown in, wherever they are shown.
    const RATE_UNIT: RateUnit = RateUnit::BytesPerSec;

    /// Statistics over the workload's items.
    fn summarize(&self, w: &Stored<Self>) -> Self::Summary;

    /// Conclusions about the workload, in words.
    fn verdicts(&self, w: &Stored<Self>) -> Vec<Verdict>;

    /// Tables for the terminal and text reports.
    fn tables(&self, w: &Stored<Self>) -> Vec<Table>;

    /// The lines it gives a run's summary: its headline figures against their limits
    /// (and, for a task, the step that limits it); none by default.
    fn summary_lines(&self, _w: &Stored<Self>) -> Result<Vec<SummaryLine>, DecodeError> {
        Ok(Vec::new())
    }

    /// What it could not measure on this machine and why, each said at length by one
    /// of its info verdicts; nothing by default.
    fn unmeasured(&self, _w: &Stored<Self>) -> Vec<Unmeasured> {
        Vec::new()
    }

    /// Its tables where a run of many parts is shown at a glance (`profile`): fewer and
    /// narrower, fitting 80 columns; its full tables by default.
    fn brief_tables(&self, w: &Stored<Self>) -> Vec<Table> {
        self.tables(w)
    }

    /// Conclusions that need the other workloads of the same run (a task beside the
    /// storage series of its folder); none by default.
    fn verdicts_beside(&self, _w: &Stored<Self>) -> Result<Vec<Verdict>, DecodeError> {
        Ok(Vec::new())
    }

    /// Lasting changes of rate in the workload's series, where its runs make them
    /// meaningful (sustained runs); none by default.
    fn knees(&self, _w: &Stored<Self>) -> Option<Vec<Knee>> {
        None
    }

    /// Charts for the HTML report, besides the rate over time; none by default.
    fn charts(&self, _w: &Stored<Self>) -> Vec<Chart> {
        Vec::new()
    }

    /// The items as `results compare` groups them, with their unit; `None` for a kind
    /// whose items have no key to group them by across runs.
    fn samples(&self, _w: &Stored<Self>) -> Option<Samples> {
        None
    }

    /// The physical limit of the link its figures were checked against, for the
    /// report's list of limits; `None` for a kind that measures no link.
    fn link_limit(&self, _w: &Stored<Self>) -> Option<LinkLimit> {
        None
    }

    /// What other work on the machine can move its figures; the CPUs by default.
    fn exposure(&self, _w: &Stored<Self>) -> Exposure {
        Exposure::CPU
    }

    /// The rate at which it streamed large files for `op` (`read`, `write`) on its
    /// target, as a task beside it can expect; `None` for a kind that streams no files.
    fn streaming_rate(&self, _w: &Stored<Self>, _op: &str) -> Option<f64> {
        None
    }

    /// The one rate that stands for the whole workload, as a kind that runs it in many
    /// places compares them (a task's whole rate at its most threads); `None` by default.
    fn whole_rate(&self, _w: &Stored<Self>) -> Option<f64> {
        None
    }

    /// The figures a later profile of the machine sets against this one's; none by
    /// default.
    fn profile_figures(&self, _w: &Stored<Self>) -> Vec<ProfileFigure> {
        Vec::new()
    }

    /// How the user's command it ran ended (`exit 7`, `signal 9`); `None` for a kind
    /// that runs no command, or while it ran.
    fn command_end(&self, _w: &Stored<Self>) -> Option<String> {
        None
    }

    /// Its work made from `params` to run in `site`, a place another kind made; `None`
    /// for a kind that runs only where it is pointed.
    fn in_place(&self, _params: Self::Params, _site: Site) -> Option<Box<dyn InPlace>> {
        None
    }
}

/// A kind as the runner and the reports use it, whatever its shapes: each call decodes
/// the stored workload and fails with a [`DecodeError`] naming what it cannot read.
pub trait StoredKind: Sync {
    /// The kind's name as stored.
    fn name(&self) -> &'static str;

    /// Whether its series count bytes moved.
    fn rate_series(&self) -> bool;

    /// The unit its rates are shown in.
    fn rate_unit(&self) -> RateUnit;

    /// The summary to store, as JSON.
    fn summarize(&self, at: At) -> Result<Value, DecodeError>;

    /// Its verdicts, its own and those beside the other workloads of the run.
    fn verdicts(&self, at: At) -> Result<Vec<Verdict>, DecodeError>;

    /// Its tables.
    fn tables(&self, at: At) -> Result<Vec<Table>, DecodeError>;

    /// Its lines of the run's summary.
    fn summary_lines(&self, at: At) -> Result<Vec<SummaryLine>, DecodeError>;

    /// What it could not measure here.
    fn unmeasured(&self, at: At) -> Result<Vec<Unmeasured>, DecodeError>;

    /// Its tables at a glance.
    fn brief_tables(&self, at: At) -> Result<Vec<Table>, DecodeError>;

    /// Its knees, where it looks for them.
    fn knees(&self, at: At) -> Result<Option<Vec<Knee>>, DecodeError>;

    /// Its charts.
    fn charts(&self, at: At) -> Result<Vec<Chart>, DecodeError>;

    /// Its items as compared, where it is compared.
    fn samples(&self, at: At) -> Result<Option<Samples>, DecodeError>;

    /// The limit of its link, where it measures one.
    fn link_limit(&self, at: At) -> Result<Option<LinkLimit>, DecodeError>;

    /// What other work can move its figures.
    fn exposure(&self, at: At) -> Result<Exposure, DecodeError>;

    /// Its streaming rate of large files for `op`, where it measures one.
    fn streaming_rate(&self, at: At, op: &str) -> Result<Option<f64>, DecodeError>;

    /// The one rate that stands for the whole workload, where it has one.
    fn whole_rate(&self, at: At) -> Result<Option<f64>, DecodeError>;

    /// The figures a later profile sets against this one's.
    fn profile_figures(&self, at: At) -> Result<Vec<ProfileFigure>, DecodeError>;

    /// How the user's command it ran ended, where it ran one.
    fn command_end(&self, at: At) -> Result<Option<String>, DecodeError>;

    /// Its work made from stored `params` to run in `site`; `Ok(None)` for a kind that
    /// cannot, an error for params it cannot read.
    fn in_place(
        &self,
        params: &Value,
        site: Site,
    ) -> Result<Option<Box<dyn InPlace>>, serde_json::Error>;
}

impl<K: Kind> StoredKind for K {
    fn name(&self) -> &'static str {
        K::NAME
    }

    fn rate_series(&self) -> bool {
        K::RATE_SERIES
    }

    fn rate_unit(&self) -> RateUnit {
        K::RATE_UNIT
    }

    fn summarize(&self, at: At) -> Result<Value, DecodeError> {
        let summary = Kind::summarize(self, &Stored::decode(at)?);
        Ok(serde_json::to_value(summary).expect("summaries serialise to JSON"))
    }

    fn verdicts(&self, at: At) -> Result<Vec<Verdict>, DecodeError> {
        let stored = Stored::decode(at)?;
        let mut verdicts = Kind::verdicts(self, &stored);
        verdicts.extend(self.verdicts_beside(&stored)?);
        Ok(verdicts)
    }

    fn tables(&self, at: At) -> Result<Vec<Table>, DecodeError> {
        Ok(Kind::tables(self, &Stored::decode(at)?))
    }

    fn summary_lines(&self, at: At) -> Result<Vec<SummaryLine>, DecodeError> {
        Kind::summary_lines(self, &Stored::decode(at)?)
    }

    fn unmeasured(&self, at: At) -> Result<Vec<Unmeasured>, DecodeError> {
        Ok(Kind::unmeasured(self, &Stored::decode(at)?))
    }

    fn brief_tables(&self, at: At) -> Result<Vec<Table>, DecodeError> {
        Ok(Kind::brief_tables(self, &Stored::decode(at)?))
    }

    fn knees(&self, at: At) -> Result<Option<Vec<Knee>>, DecodeError> {
        Ok(Kind::knees(self, &Stored::decode(at)?))
    }

    fn charts(&self, at: At) -> Result<Vec<Chart>, DecodeError> {
        Ok(Kind::charts(self, &Stored::decode(at)?))
    }

    fn samples(&self, at: At) -> Result<Option<Samples>, DecodeError> {
        Ok(Kind::samples(self, &Stored::decode(at)?))
    }

    fn link_limit(&self, at: At) -> Result<Option<LinkLimit>, DecodeError> {
        Ok(Kind::link_limit(self, &Stored::decode(at)?))
    }

    fn exposure(&self, at: At) -> Result<Exposure, DecodeError> {
        Ok(Kind::exposure(self, &Stored::decode(at)?))
    }

    fn streaming_rate(&self, at: At, op: &str) -> Result<Option<f64>, DecodeError> {
        Ok(Kind::streaming_rate(self, &Stored::decode(at)?, op))
    }

    fn whole_rate(&self, at: At) -> Result<Option<f64>, DecodeError> {
        Ok(Kind::whole_rate(self, &Stored::decode(at)?))
    }

    fn profile_figures(&self, at: At) -> Result<Vec<ProfileFigure>, DecodeError> {
        Ok(Kind::profile_figures(self, &Stored::decode(at)?))
    }

    fn command_end(&self, at: At) -> Result<Option<String>, DecodeError> {
        Ok(Kind::command_end(self, &Stored::decode(at)?))
    }

    fn in_place(
        &self,
        params: &Value,
        site: Site,
    ) -> Result<Option<Box<dyn InPlace>>, serde_json::Error> {
        Ok(Kind::in_place(self, K::Params::deserialize(params)?, site))
    }
}
