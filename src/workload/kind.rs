//! What ratelab knows of a kind without running it: how to summarise, judge, tabulate,
//! chart and compare its stored workloads. A kind names its typed shapes (params,
//! context, items, summary) in [`Kind`]; a stored workload is decoded once into them
//! ([`Stored`]), naming the run, workload and item of anything it cannot read, and the
//! runner and the reports ask that typed view what they need through [`View`], which
//! each kind implements on its own `Stored`. The registry hands out [`KindEntry`].

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::decoded::Decoded;
use super::{InPlace, Site};
use crate::document::{Knee, RunDocument, Verdict, WorkloadRecord};
use crate::storage::item::DiskItem;
use crate::vocab::{
    Chart, CommandEnd, Exposure, LinkLimit, ProfileFigure, RateUnit, Samples, SummaryLine, Table,
    Unmeasured,
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
#[derive(Debug, Clone, thiserror::Error)]
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
    /// The lasting changes of rate in its series, as stored or as just concluded.
    pub knees: Option<Vec<Knee>>,
}

#[cfg(test)]
thread_local! {
    /// How many stored workloads this thread decoded, for the tests that count them.
    static DECODES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many stored workloads this thread has decoded so far.
#[cfg(test)]
pub fn decodes() -> usize {
    DECODES.with(|n| n.get())
}

impl<'a, K: Kind + ?Sized> Stored<'a, K> {
    /// Decodes workload `at` as kind `K`.
    pub fn decode(at: At<'a>) -> Result<Stored<'a, K>, DecodeError> {
        #[cfg(test)]
        DECODES.with(|n| n.set(n.get() + 1));
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
            knees: record.series.as_ref().and_then(|s| s.knees.clone()),
        })
    }

    /// Its index among the run's workloads.
    pub fn index(&self) -> usize {
        self.at.index
    }
}

/// A kind's typed shapes as stored, and what it concludes from them. How its stored
/// workloads are judged and shown is its [`View`].
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

    /// Statistics over the workload's items; `run` holds the other workloads of its run.
    fn summarize(w: &Stored<Self>, run: &Decoded) -> Self::Summary;

    /// Lasting changes of rate in the workload's series, where its runs make them
    /// meaningful (sustained runs); none by default.
    fn knees(_w: &Stored<Self>) -> Option<Vec<Knee>> {
        None
    }

    /// Its work made from `params` to run in `site`, a place another kind made; `None`
    /// for a kind that runs only where it is pointed.
    fn in_place(_params: Self::Params, _site: Site) -> Option<Box<dyn InPlace>> {
        None
    }
}

/// A workload's knees and summary as a run concludes them, to be stored.
#[derive(Debug, Clone)]
pub struct Concluded {
    /// Its knees, where its kind looks for them.
    pub knees: Option<Vec<Knee>>,
    /// Its summary, as JSON.
    pub summary: Value,
}

/// What a run concludes of a decoded workload, whatever its kind.
pub trait Conclude {
    /// Its knees and summary from its items, kept in the view (so what is asked of it
    /// next sees them) and given as they are stored.
    fn conclude(&mut self, run: &Decoded) -> Concluded;

    /// Its typed values set apart from the document they were read from, while the
    /// runner writes to it, to be attached to it again without decoding.
    fn apart(self: Box<Self>) -> Box<dyn Attach>;
}

impl<K: Kind> Conclude for Stored<'_, K>
where
    for<'b> Stored<'b, K>: View,
{
    fn conclude(&mut self, run: &Decoded) -> Concluded {
        self.knees = K::knees(self);
        let summary = K::summarize(self, run);
        let value = serde_json::to_value(&summary).expect("summaries serialise to JSON");
        self.summary = Some(summary);
        Concluded {
            knees: self.knees.clone(),
            summary: value,
        }
    }

    fn apart(self: Box<Self>) -> Box<dyn Attach> {
        let Stored {
            params,
            context,
            items,
            summary,
            knees,
            ..
        } = *self;
        Box::new(Typed::<K> {
            params,
            context,
            items,
            summary,
            knees,
        })
    }
}

/// A decoded workload's typed values, apart from the document they were read from.
pub trait Attach {
    /// Its view again, on workload `at`: the same workload of the same run, now
    /// concluded, judged or stored.
    fn attach<'b>(self: Box<Self>, at: At<'b>) -> Box<dyn View + 'b>;
}

/// A [`Stored`] without its place in a run.
struct Typed<K: Kind> {
    params: K::Params,
    context: K::Context,
    items: Vec<K::Item>,
    summary: Option<K::Summary>,
    knees: Option<Vec<Knee>>,
}

impl<K: Kind> Attach for Typed<K>
where
    for<'b> Stored<'b, K>: View,
{
    fn attach<'b>(self: Box<Self>, at: At<'b>) -> Box<dyn View + 'b> {
        let record = at.record();
        assert_eq!(record.kind, K::NAME, "a view attached to another workload");
        Box::new(Stored::<K> {
            at,
            record,
            params: self.params,
            context: self.context,
            items: self.items,
            summary: self.summary,
            knees: self.knees,
        })
    }
}

/// A stored workload decoded into its kind's shapes, as the runner and the reports ask
/// it. Each kind implements it on its own [`Stored`]; hooks beyond verdicts and tables
/// have defaults, so a kind overrides what it has. `run` holds the run's other
/// workloads, each decoded once.
pub trait View: Conclude {
    /// Conclusions about the workload, in words, its own and those beside the other
    /// workloads of its run (a task beside the storage series of its folder).
    fn verdicts(&self, run: &Decoded) -> Result<Vec<Verdict>, DecodeError>;

    /// Tables for the terminal and text reports.
    fn tables(&self) -> Vec<Table>;

    /// The lines it gives a run's summary: its headline figures against their limits
    /// (and, for a task, the step that limits it); none by default.
    fn summary_lines(&self, _run: &Decoded) -> Result<Vec<SummaryLine>, DecodeError> {
        Ok(Vec::new())
    }

    /// What it could not measure on this machine and why, each said at length by one
    /// of its info verdicts; nothing by default.
    fn unmeasured(&self) -> Vec<Unmeasured> {
        Vec::new()
    }

    /// Its tables where a run of many parts is shown at a glance (`profile`): fewer and
    /// narrower, fitting 80 columns; its full tables by default.
    fn brief_tables(&self) -> Vec<Table> {
        self.tables()
    }

    /// Charts for the HTML report, besides the rate over time; none by default.
    fn charts(&self) -> Vec<Chart> {
        Vec::new()
    }

    /// The items as `results compare` groups them, with their unit; `None` for a kind
    /// whose items have no key to group them by across runs.
    fn samples(&self) -> Option<Samples> {
        None
    }

    /// The physical limit of the link its figures were checked against, for the
    /// report's list of limits; `None` for a kind that measures no link.
    fn link_limit(&self) -> Option<LinkLimit> {
        None
    }

    /// What other work on the machine can move its figures; the CPUs by default.
    fn exposure(&self) -> Exposure {
        Exposure::CPU
    }

    /// The rate at which it streamed large files for `op` (`read`, `write`) on its
    /// target, as a task beside it can expect; `None` for a kind that streams no files.
    fn streaming_rate(&self, _op: &str) -> Option<f64> {
        None
    }

    /// The files it wrote and read, one item each, for a kind that sets places side by
    /// side by them (an image's places); none by default.
    fn file_items(&self) -> &[DiskItem] {
        &[]
    }

    /// The one rate that stands for the whole workload, as a kind that runs it in many
    /// places compares them (a task's whole rate at its most threads); `None` by default.
    fn whole_rate(&self) -> Option<f64> {
        None
    }

    /// The figures a later profile of the machine sets against this one's; none by
    /// default.
    fn profile_figures(&self) -> Vec<ProfileFigure> {
        Vec::new()
    }

    /// How the user's command it ran ended (`exit 7`, `signal 9`); `None` for a kind
    /// that runs no command, or while it ran.
    fn command_end(&self) -> Option<CommandEnd> {
        None
    }
}

/// A kind as the registry holds it: its name and units, its stored workloads decoded
/// into views, and its work made to run in a place another kind made.
pub trait KindEntry: Sync {
    /// The kind's name as stored.
    fn name(&self) -> &'static str;

    /// Whether its series count bytes moved.
    fn rate_series(&self) -> bool;

    /// The unit its rates are shown in.
    fn rate_unit(&self) -> RateUnit;

    /// Workload `at` decoded into the kind's view, or what cannot be read.
    fn decode<'a>(&self, at: At<'a>) -> Result<Box<dyn View + 'a>, DecodeError>;

    /// Its work made from stored `params` to run in `site`; `Ok(None)` for a kind that
    /// cannot, an error for params it cannot read.
    fn in_place(
        &self,
        params: &Value,
        site: Site,
    ) -> Result<Option<Box<dyn InPlace>>, serde_json::Error>;
}

impl<K: Kind> KindEntry for K
where
    for<'a> Stored<'a, K>: View,
{
    fn name(&self) -> &'static str {
        K::NAME
    }

    fn rate_series(&self) -> bool {
        K::RATE_SERIES
    }

    fn rate_unit(&self) -> RateUnit {
        K::RATE_UNIT
    }

    fn decode<'a>(&self, at: At<'a>) -> Result<Box<dyn View + 'a>, DecodeError> {
        Ok(Box::new(Stored::<K>::decode(at)?))
    }

    fn in_place(
        &self,
        params: &Value,
        site: Site,
    ) -> Result<Option<Box<dyn InPlace>>, serde_json::Error> {
        Ok(K::in_place(K::Params::deserialize(params)?, site))
    }
}
