//! The scaling fits as a kind stores them in its summary (`fits`, `best_fit`,
//! `fit_warning`), and the sentence a verdict makes of them; shared by every kind that
//! fits a rate against a count.

use serde_json::{Map, Value, json};

use super::scaling::fit_scaling;

/// The summary fields of the laws fitted to `points` (count, rate).
pub fn fits_summary(points: &[(f64, f64)]) -> Map<String, Value> {
    let fits = fit_scaling(points);
    let value = json!({
        "fits": fits.as_ref().map(|f| &f.fits).ok(),
        "best_fit": fits.as_ref().ok().and_then(|f| f.best_fit),
        "fit_warning": match &fits {
            Ok(f) => f.warning.as_ref().map(ToString::to_string),
            Err(e) => Some(e.to_string()),
        },
    });
    match value {
        Value::Object(map) => map,
        _ => unreachable!("a JSON object"),
    }
}

/// In words: the best law with its R² and parameters (and any doubt about it), or why
/// no law was fitted. `summary` holds the fields of [`fits_summary`].
pub fn fits_sentence(summary: &Value) -> Option<String> {
    let warning = summary["fit_warning"].as_str();
    let Some(best) = summary["best_fit"].as_str() else {
        return warning.map(|w| format!("no scaling law is fitted: {w}"));
    };
    let fit = summary["fits"]
        .as_array()
        .and_then(|fits| fits.iter().find(|f| f["law"] == best))
        .cloned()
        .unwrap_or_default();
    let params = fit["params"]
        .as_object()
        .map(|p| {
            p.iter()
                .map(|(k, v)| {
                    let v = v.as_f64().map_or("-".into(), |v| format!("{v:.4}"));
                    format!("{k} {v}")
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    Some(format!(
        "the {best} law fits best (R² {:.3}; {params}){}",
        fit["r2"].as_f64().unwrap_or(f64::NAN),
        warning.map(|w| format!(" — {w}")).unwrap_or_default()
    ))
}
