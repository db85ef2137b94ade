//! The JSON report: the run document (docs/json.md), pretty-printed.

use crate::document::RunDocument;

/// The document as pretty JSON with a final newline.
pub fn render(doc: &RunDocument) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(doc).expect("run documents serialise");
    bytes.push(b'\n');
    bytes
}
