//! The scaling fits as a kind stores them in its summary (`fits`, `best_fit`,
//! `fit_warning`), and the sentence a verdict makes of them; shared by every kind that
//! fits a rate against a count.

use serde::{Deserialize, Serialize};

use super::laws::Law;
use super::scaling::{LawFit, fit_scaling};

/// The fits of a rate against a count as a kind's summary stores them, in its fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitsSummary {
    /// Every law that could be fitted, simplest first; null when the points cannot be
    /// fitted at all.
    pub fits: Option<Vec<LawFit>>,
    /// The law the data favour; null when no law could be weighed.
    pub best_fit: Option<Law>,
    /// Why the best law should not be trusted, or why no law was fitted, in words.
    pub fit_warning: Option<String>,
}

impl FitsSummary {
    /// The laws fitted to `points` (count, rate).
    pub fn of(points: &[(f64, f64)]) -> FitsSummary {
        match fit_scaling(points) {
            Ok(fits) => FitsSummary {
                fit_warning: fits.warning.as_ref().map(ToString::to_string),
                best_fit: fits.best_fit,
                fits: Some(fits.fits),
            },
            Err(e) => FitsSummary {
                fits: None,
                best_fit: None,
                fit_warning: Some(e.to_string()),
            },
        }
    }

    /// The fit of the best law, if one is best and was fitted.
    pub fn best(&self) -> Option<&LawFit> {
        let best = self.best_fit?;
        self.fits.iter().flatten().find(|fit| fit.law() == best)
    }

    /// The curve of the best law, scaled by `scale`, from n = 1 to `to`, with its name
    /// and R² for a chart's legend; `None` when no law is best.
    pub fn best_curve(&self, scale: f64, to: f64) -> Option<(String, Vec<(f64, f64)>)> {
        Some(self.best()?.curve(scale, to))
    }

    /// In words: the best law with its R² and parameters (and any doubt about it), or
    /// why no law was fitted; `rate` writes a rate (the one-thread rate λ) in its unit.
    pub fn sentence(&self, rate: &dyn Fn(f64) -> String) -> Option<String> {
        let warning = self.fit_warning.as_deref();
        let Some(best) = self.best_fit else {
            return warning.map(|w| format!("no scaling law is fitted: {w}"));
        };
        let fit = self.best();
        let params = fit
            .map(|fit| {
                fit.params
                    .named()
                    .into_iter()
                    .map(|(name, value)| match value {
                        None => format!("{} -", words(name)),
                        Some(v) => format!("{} {}", words(name), figure(name, v, rate)),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        Some(format!(
            "the {best} law fits best (R² {:.3}; {params}){}",
            fit.map_or(f64::NAN, |fit| fit.r2),
            warning.map(|w| format!(" — {w}")).unwrap_or_default()
        ))
    }
}

/// A parameter's name as people read it: `serial fraction`, `one-thread rate λ`.
fn words(name: &str) -> &str {
    match name {
        "serial_fraction" => "serial fraction",
        "sigma" => "contention σ",
        "kappa" => "coherency κ",
        "lambda" => "one-thread rate λ",
        "peak_concurrency" => "peak at",
        other => other,
    }
}

/// A parameter's value in its unit, to three significant digits: shares in percent,
/// λ as a rate, the peak in threads.
fn figure(name: &str, value: f64, rate: &dyn Fn(f64) -> String) -> String {
    match name {
        "serial_fraction" | "sigma" | "kappa" => format!("{}%", three(value * 100.0)),
        "lambda" => rate(value),
        "peak_concurrency" => format!("{} threads", three(value)),
        _ => three(value),
    }
}

/// A number to three significant digits: `0.0312`, `5.00`, `28.6`, `1230`.
fn three(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let digits = 2 - value.abs().log10().floor() as i32;
    format!("{value:.*}", digits.clamp(0, 12) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::fits::LawParams;

    /// Rates of an Amdahl law with a 5% serial fraction at 1..=8 threads.
    fn amdahl_points() -> Vec<(f64, f64)> {
        let law = LawParams::Amdahl {
            serial_fraction: 0.05,
            lambda: 1000.0,
        };
        (1..=8)
            .map(|n| (n as f64, law.evaluate(n as f64)))
            .collect()
    }

    #[test]
    fn the_sentence_names_the_best_law_and_its_parameters() {
        let summary = FitsSummary::of(&amdahl_points());
        let words = summary.sentence(&|r| format!("{r:.0} a/s")).unwrap();
        assert!(
            words.starts_with(
                "the amdahl law fits best (R² 1.000; serial fraction 5.00%, one-thread rate λ 1000 a/s)"
            ),
            "{words}"
        );
        assert_eq!(three(0.031234), "0.0312");
        assert_eq!(three(28.61), "28.6");
        assert_eq!(three(1234.5), "1234");
        assert!(summary.best_curve(1.0, 8.0).is_some());
    }

    #[test]
    fn points_that_cannot_be_fitted_say_why_and_store_null_fits() {
        let summary = FitsSummary::of(&[(1.0, 0.0)]);
        assert_eq!(
            serde_json::to_value(&summary).unwrap(),
            serde_json::json!({
                "fits": null,
                "best_fit": null,
                "fit_warning": "the point at n = 1 has a rate of 0; scaling laws need rates above zero",
            })
        );
        assert_eq!(
            summary.sentence(&|r| r.to_string()).unwrap(),
            "no scaling law is fitted: the point at n = 1 has a rate of 0; scaling laws need rates above zero"
        );
        assert_eq!(summary.best_curve(1.0, 2.0), None);
    }
}
