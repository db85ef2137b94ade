//! A run's workloads as one command reads them: each decoded once into its kind's
//! view, so every report, verdict and comparison asks the same typed values, and a
//! workload that cannot be read fails only what asks it.

use super::kind::{At, Attach, Concluded, DecodeError, View};
use crate::analysis::interference;
use crate::document::RunDocument;

/// One workload's view (or its typed values, set apart), or why there is none.
enum Slot<V> {
    /// Decoded into its kind's view.
    View(V),
    /// Of a kind this version does not know.
    Unknown,
    /// Of a known kind, but a value of it cannot be read.
    Corrupt(DecodeError),
}

impl<V> Slot<V> {
    /// The same slot with its view turned by `f`.
    fn map<W>(self, f: impl FnOnce(V) -> W) -> Slot<W> {
        match self {
            Slot::View(view) => Slot::View(f(view)),
            Slot::Unknown => Slot::Unknown,
            Slot::Corrupt(e) => Slot::Corrupt(e),
        }
    }
}

/// Every workload of a run, each decoded once into its kind's view.
pub struct Decoded<'a> {
    /// The run as stored.
    pub doc: &'a RunDocument,
    /// Whether other work disturbed the run: as stored, or as the run concludes it.
    pub disturbed: bool,
    slots: Vec<Slot<Box<dyn View + 'a>>>,
}

/// A run's decoded workloads set apart from its document while the runner writes to
/// it (concludes, judges, stores), to be attached to it again without decoding.
pub struct Apart {
    slots: Vec<Slot<Box<dyn Attach>>>,
}

impl Apart {
    /// The views again, on `doc`: the run they were decoded from, as it now stands.
    pub fn attach(self, doc: &RunDocument) -> Decoded<'_> {
        assert_eq!(
            self.slots.len(),
            doc.workloads.len(),
            "views of another run"
        );
        let slots = self
            .slots
            .into_iter()
            .enumerate()
            .map(|(index, slot)| slot.map(|typed| typed.attach(At::new(doc, index))))
            .collect();
        Decoded {
            doc,
            disturbed: interference::disturbed(doc),
            slots,
        }
    }
}

impl<'a> Decoded<'a> {
    /// Each workload of `doc` decoded into its kind's view.
    pub fn of(doc: &'a RunDocument) -> Decoded<'a> {
        let slots = (0..doc.workloads.len())
            .map(|index| match super::kind(&doc.workloads[index].kind) {
                None => Slot::Unknown,
                Some(kind) => match kind.decode(At::new(doc, index)) {
                    Ok(view) => Slot::View(view),
                    Err(e) => Slot::Corrupt(e),
                },
            })
            .collect();
        Decoded {
            doc,
            disturbed: interference::disturbed(doc),
            slots,
        }
    }

    /// Workload `index`'s view; `None` for a kind this version does not know (or an
    /// index past the run's workloads), the error for one that cannot be read.
    pub fn view(&self, index: usize) -> Result<Option<&(dyn View + 'a)>, DecodeError> {
        match self.slots.get(index) {
            Some(Slot::View(view)) => Ok(Some(view.as_ref())),
            Some(Slot::Corrupt(e)) => Err(e.clone()),
            Some(Slot::Unknown) | None => Ok(None),
        }
    }

    /// The views set apart from the document, so that it can be written to.
    pub fn apart(self) -> Apart {
        Apart {
            slots: self
                .slots
                .into_iter()
                .map(|slot| slot.map(|view| view.apart()))
                .collect(),
        }
    }

    /// Every workload's knees and summary concluded from its items, in the run's
    /// order (`None` for a kind this version does not know); each view keeps what it
    /// concluded, and each sees the others as they stand.
    pub fn conclude(&mut self) -> Result<Vec<Option<Concluded>>, DecodeError> {
        let mut out = Vec::with_capacity(self.slots.len());
        for index in 0..self.slots.len() {
            // Taken out while it concludes, so it can be told of the others.
            let slot = std::mem::replace(&mut self.slots[index], Slot::Unknown);
            let (slot, concluded) = match slot {
                Slot::View(mut view) => {
                    let concluded = view.conclude(self);
                    (Slot::View(view), Some(concluded))
                }
                Slot::Corrupt(e) => return Err(e),
                Slot::Unknown => (Slot::Unknown, None),
            };
            self.slots[index] = slot;
            out.push(concluded);
        }
        Ok(out)
    }
}

/// For the kinds' tests: what is asked of one workload of a run.
#[cfg(test)]
pub(crate) mod asked {
    use super::*;
    use crate::workload::Concluded;

    /// `ask` of workload `index` of `doc`, decoded with the rest of its run.
    pub fn of<T>(
        doc: &RunDocument,
        index: usize,
        ask: impl FnOnce(&dyn View, &Decoded) -> T,
    ) -> Result<T, DecodeError> {
        let run = Decoded::of(doc);
        let view = run.view(index)?.expect("a kind this version knows");
        Ok(ask(view, &run))
    }

    /// The verdicts of workload `index` of `doc`.
    pub fn verdicts(
        doc: &RunDocument,
        index: usize,
    ) -> Result<Vec<crate::document::Verdict>, DecodeError> {
        of(doc, index, |w, run| w.verdicts(run))?
    }

    /// The summary lines of workload `index` of `doc`.
    pub fn summary_lines(
        doc: &RunDocument,
        index: usize,
    ) -> Result<Vec<crate::vocab::SummaryLine>, DecodeError> {
        of(doc, index, |w, run| w.summary_lines(run))?
    }

    /// Workload `index` of `doc` concluded, as the runner concludes it.
    pub fn concluded(doc: &RunDocument, index: usize) -> Result<Concluded, DecodeError> {
        let mut run = Decoded::of(doc);
        Ok(run.conclude()?.swap_remove(index).expect("a known kind"))
    }
}
