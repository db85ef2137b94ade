//! Copying runs in from another store or from exported run documents. A run keeps its
//! UUID wherever it goes, so importing the same runs twice stores them once; a run
//! stored before runs had a UUID is known by one derived from what it is.

use sha2::{Digest, Sha256};

use super::write::{insert_items, insert_run, store_end};
use super::{Error, Store};
use crate::document::RunDocument;

/// The UUID a run is known by across stores: its own, or for a run stored before runs
/// had one, one derived from its machine, times, verb, label and workloads (so that
/// the same old run imported twice is known both times).
pub fn identity(doc: &RunDocument) -> String {
    if let Some(uuid) = &doc.run_uuid {
        return uuid.clone();
    }
    let what = serde_json::json!([
        doc.machine.hostname,
        doc.machine.machine_id,
        doc.started_at,
        doc.finished_at,
        doc.verb,
        doc.label,
        doc.ratelab_version,
        doc.workloads
            .iter()
            .map(|w| (&w.kind, &w.target, w.items.len()))
            .collect::<Vec<_>>(),
    ]);
    let digest = Sha256::digest(what.to_string().as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    // Version 8: "custom", as RFC 9562 names a UUID made by an application's own rule.
    uuid::Uuid::new_v8(bytes).to_string()
}

impl Store {
    /// Stores `doc` as a new run of this store, keeping its identity, unless a run with
    /// that identity is here already; returns the new run's id, or `None` when it was
    /// here. The run is stored whole or not at all.
    pub fn import_run(&mut self, doc: &RunDocument) -> Result<Option<i64>, Error> {
        let mut copy = RunDocument {
            run_uuid: Some(identity(doc)),
            ..doc.clone()
        };
        self.atomically(|db| {
            // A run already here conflicts on its UUID and inserts nothing, even when
            // another process imports the same run at the same moment.
            let Some(id) = insert_run(db, &copy).map_err(|e| self.sql(e))? else {
                return Ok(None);
            };
            for (index, workload) in copy.workloads.iter().enumerate() {
                insert_items(db, id, index, 0, &workload.items).map_err(|e| self.sql(e))?;
            }
            copy.run_id = Some(id);
            store_end(db, &copy).map_err(|e| self.sql(e))?;
            Ok(Some(id))
        })
    }
}
