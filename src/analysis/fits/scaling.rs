//! How a rate scales with a count: points (n threads or CPUs, y a rate such as loops/s,
//! bytes/s, or a speedup t₁/tₙ) fitted to the linear, power, Amdahl and USL laws, the
//! law the data favour, and a warning when they cannot tell the laws apart. Used by
//! `scale`, `task` and `cpu`.

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::estimate;
use super::goodness::{aicc, r_squared};
use super::laws::{Law, LawParams};
use crate::vocab::chart::spread;

/// Fewest distinct counts to tell the laws apart: any three-parameter law passes
/// through three points.
const MIN_DISTINCT_N: usize = 4;
/// Fewest points for every law's AICc to be defined: the USL's three parameters, the
/// noise variance, and two more for the small-sample correction to stay finite.
const MIN_POINTS: usize = 6;
/// AICc difference below which two laws are about equally supported (Burnham &
/// Anderson, "Model Selection and Multimodel Inference", 2002, §2.6: within 2, both
/// have substantial support).
const MIN_DELTA_AICC: f64 = 2.0;

/// One law fitted to the points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LawFit {
    /// The law and its parameters, serialised as `"law"` and `"params"`.
    #[serde(flatten)]
    pub params: LawParams,
    /// Coefficient of determination of the rates (not of a linearised form).
    pub r2: f64,
    /// Each point's y minus the fitted y, in y's unit and the points' order.
    pub residuals: Vec<f64>,
    /// Corrected Akaike information criterion (lower is better; only differences
    /// between laws mean anything); absent with too few points.
    pub aicc: Option<f64>,
}

impl LawFit {
    /// Which law this is.
    pub fn law(&self) -> Law {
        self.params.law()
    }

    /// The fitted curve, scaled by `scale`, from n = 1 to `to`, with its name and R² for
    /// a chart's legend.
    pub fn curve(&self, scale: f64, to: f64) -> (String, Vec<(f64, f64)>) {
        let law: &LawParams = &self.params;
        let points = spread(1.0, to, CURVE_POINTS)
            .into_iter()
            .map(|n| (n, law.evaluate(n) * scale))
            .collect();
        (
            format!("{} fit (R² {:.3})", law.law().name(), self.r2),
            points,
        )
    }
}

/// Every law that could be fitted, the one the data favour, and any doubt about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalingFits {
    /// The fitted laws, simplest first; a law is missing when it could not be fitted.
    pub fits: Vec<LawFit>,
    /// The law with the lowest AICc; absent when no law could be weighed.
    pub best_fit: Option<Law>,
    /// Why `best_fit` should not be trusted, if it should not.
    pub warning: Option<FitWarning>,
}

impl ScalingFits {
    /// The fit of `law`, if it could be fitted.
    pub fn get(&self, law: Law) -> Option<&LawFit> {
        self.fits.iter().find(|fit| fit.law() == law)
    }

    /// The fit of the best law.
    pub fn best(&self) -> Option<&LawFit> {
        self.best_fit.and_then(|law| self.get(law))
    }

    /// The curve of the best law, scaled by `scale`, from n = 1 to `to`, with its name
    /// and R² for a chart's legend; `None` when no law is best.
    pub fn best_curve(&self, scale: f64, to: f64) -> Option<(String, Vec<(f64, f64)>)> {
        Some(self.best()?.curve(scale, to))
    }
}

/// Points on a drawn curve of a fitted law.
const CURVE_POINTS: usize = 40;

/// Why the choice of law is doubtful.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FitWarning {
    /// Too few points, or too few distinct counts, to weigh every law.
    TooFewPoints {
        /// How many points were given.
        points: usize,
        /// How many distinct n among them.
        distinct_n: usize,
    },
    /// The best two laws fit about equally well.
    Indistinct {
        /// The law chosen.
        best: Law,
        /// The next best law.
        runner_up: Law,
        /// The runner-up's AICc minus the best's.
        delta_aicc: f64,
    },
}

impl fmt::Display for FitWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FitWarning::TooFewPoints { points, distinct_n } => write!(
                f,
                "{points} points at {distinct_n} distinct counts are too few to tell the \
                 scaling laws apart (need {MIN_POINTS} points at {MIN_DISTINCT_N} or more counts)"
            ),
            FitWarning::Indistinct {
                best,
                runner_up,
                delta_aicc,
            } => write!(
                f,
                "{best} and {runner_up} fit about equally well (AICc {delta_aicc:.1} apart, \
                 under {MIN_DELTA_AICC}); points at more or higher counts would tell them apart"
            ),
        }
    }
}

/// Points that cannot be fitted at all.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum FitError {
    /// Nothing to fit.
    #[error("no points to fit")]
    NoPoints,
    /// A NaN or infinite value.
    #[error("point {index} is not a finite number (n = {n}, y = {y})")]
    NotFinite {
        /// The point's position, from 0.
        index: usize,
        /// Its count.
        n: f64,
        /// Its rate.
        y: f64,
    },
    /// A count of zero or less.
    #[error("point {index} has n = {n}; counts must be above zero")]
    NonPositiveCount {
        /// The point's position, from 0.
        index: usize,
        /// Its count.
        n: f64,
    },
    /// A rate of zero or less, which no scaling law describes (a failed run).
    #[error("the point at n = {n} has a rate of {y}; scaling laws need rates above zero")]
    NonPositiveRate {
        /// The point's count.
        n: f64,
        /// Its rate.
        y: f64,
    },
}

/// Fits each scaling law to `points` (n, y) by least squares on y, and names the best by
/// AICc; repeated n (several runs per count) are fine and add weight.
///
/// A law is left out when there are fewer points or distinct n than its parameters, or
/// its fit fails; a law with fewer than its parameters + 3 points is fitted but not
/// weighed, so below five points there is no `best_fit`. An error only when a point is
/// not finite, n ≤ 0 or y ≤ 0.
pub fn fit_scaling(points: &[(f64, f64)]) -> Result<ScalingFits, FitError> {
    validate(points)?;
    let mut counts: Vec<f64> = points.iter().map(|&(n, _)| n).collect();
    counts.sort_by(f64::total_cmp);
    counts.dedup();
    let distinct_n = counts.len();
    let ys: Vec<f64> = points.iter().map(|&(_, y)| y).collect();
    // Rates of 1e9 bytes/s and serial fractions of 0.05 in one solve condition it
    // badly; fit y / mean(y) and scale the rates back.
    let y_scale = ys.iter().sum::<f64>() / ys.len() as f64;
    let scaled: Vec<(f64, f64)> = points.iter().map(|&(n, y)| (n, y / y_scale)).collect();

    let mut fits = Vec::new();
    for law in Law::ALL {
        let parameters = law.parameter_count();
        if points.len() < parameters || distinct_n < parameters {
            continue;
        }
        let Some(params) = estimate::fit(law, &scaled, y_scale) else {
            continue;
        };
        let residuals: Vec<f64> = points
            .iter()
            .map(|&(n, y)| y - params.evaluate(n))
            .collect();
        if residuals.iter().any(|r| !r.is_finite()) {
            continue;
        }
        fits.push(LawFit {
            params,
            r2: r_squared(&ys, &residuals),
            aicc: aicc(&ys, &residuals, parameters),
            residuals,
        });
    }

    // AICc rather than adjusted R²: it weighs a parameter by how much it cuts the error
    // in information terms, which suits nested laws (Amdahl inside USL, where an extra
    // κ always lowers the error a little), and its small-sample correction matters at the
    // 5–20 points a scaling run gives. Ties go to the simpler law (earlier in the list).
    let mut ranked: Vec<(Law, f64)> = fits
        .iter()
        .filter_map(|fit| fit.aicc.map(|value| (fit.law(), value)))
        .collect();
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
    let best_fit = ranked.first().map(|&(law, _)| law);

    let warning = if points.len() < MIN_POINTS || distinct_n < MIN_DISTINCT_N {
        Some(FitWarning::TooFewPoints {
            points: points.len(),
            distinct_n,
        })
    } else {
        match ranked[..] {
            [(best, first), (runner_up, second), ..] if second - first < MIN_DELTA_AICC => {
                Some(FitWarning::Indistinct {
                    best,
                    runner_up,
                    delta_aicc: second - first,
                })
            }
            _ => None,
        }
    };
    Ok(ScalingFits {
        fits,
        best_fit,
        warning,
    })
}

/// The first point no law could take.
fn validate(points: &[(f64, f64)]) -> Result<(), FitError> {
    if points.is_empty() {
        return Err(FitError::NoPoints);
    }
    for (index, &(n, y)) in points.iter().enumerate() {
        if !(n.is_finite() && y.is_finite()) {
            return Err(FitError::NotFinite { index, n, y });
        }
        if n <= 0.0 {
            return Err(FitError::NonPositiveCount { index, n });
        }
        if y <= 0.0 {
            return Err(FitError::NonPositiveRate { n, y });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn amdahl(serial_fraction: f64, counts: &[f64]) -> Vec<(f64, f64)> {
        let law = LawParams::Amdahl {
            serial_fraction,
            lambda: 1000.0,
        };
        counts.iter().map(|&n| (n, law.evaluate(n))).collect()
    }

    #[test]
    fn points_no_law_can_take_are_errors() {
        assert_eq!(fit_scaling(&[]), Err(FitError::NoPoints));
        assert!(matches!(
            fit_scaling(&[(1.0, 1.0), (2.0, f64::NAN)]),
            Err(FitError::NotFinite { index: 1, .. })
        ));
        assert!(matches!(
            fit_scaling(&[(f64::INFINITY, 1.0)]),
            Err(FitError::NotFinite { index: 0, .. })
        ));
        assert!(matches!(
            fit_scaling(&[(1.0, 1.0), (0.0, 1.0)]),
            Err(FitError::NonPositiveCount { index: 1, .. })
        ));
        let zero_rate = fit_scaling(&[(1.0, 5.0), (2.0, 0.0)]).unwrap_err();
        assert_eq!(
            zero_rate.to_string(),
            "the point at n = 2 has a rate of 0; scaling laws need rates above zero"
        );
        assert!(fit_scaling(&[(1.0, -3.0)]).is_err());
    }

    #[test]
    fn one_point_gives_no_fit_and_a_warning() {
        let fits = fit_scaling(&[(1.0, 100.0)]).unwrap();
        assert!(fits.fits.is_empty() && fits.best_fit.is_none() && fits.best().is_none());
        assert_eq!(
            fits.warning,
            Some(FitWarning::TooFewPoints {
                points: 1,
                distinct_n: 1
            })
        );
    }

    #[test]
    fn three_counts_fit_but_cannot_be_told_apart() {
        let fits = fit_scaling(&amdahl(0.1, &[1.0, 2.0, 4.0])).unwrap();
        assert_eq!(fits.fits.len(), 4, "{fits:#?}");
        assert_eq!(
            fits.best_fit, None,
            "AICc needs more points than parameters + 2"
        );
        let warning = fits.warning.unwrap();
        assert!(matches!(
            warning,
            FitWarning::TooFewPoints { distinct_n: 3, .. }
        ));
        assert_eq!(
            warning.to_string(),
            "3 points at 3 distinct counts are too few to tell the scaling laws apart \
             (need 6 points at 4 or more counts)"
        );
    }

    #[test]
    fn repeats_at_two_counts_name_a_law_but_warn() {
        let mut points = amdahl(0.1, &[1.0, 2.0]);
        points.extend(amdahl(0.1, &[1.0, 2.0, 1.0, 2.0]));
        let fits = fit_scaling(&points).unwrap();
        assert!(
            fits.get(Law::Usl).is_none(),
            "three parameters from two counts"
        );
        assert!(fits.best_fit.is_some());
        assert!(matches!(
            fits.warning,
            Some(FitWarning::TooFewPoints { distinct_n: 2, .. })
        ));
    }

    #[test]
    fn perfect_scaling_is_linear_and_power_alike() {
        let points: Vec<(f64, f64)> = (1..=8)
            .map(|n| (f64::from(n), 5.0 * f64::from(n)))
            .collect();
        let fits = fit_scaling(&points).unwrap();
        assert_eq!(
            fits.best_fit,
            Some(Law::Linear),
            "ties go to the simpler law"
        );
        let Some(FitWarning::Indistinct {
            best,
            runner_up,
            delta_aicc,
        }) = fits.warning
        else {
            panic!("no warning: {fits:#?}");
        };
        assert_eq!(
            (best, runner_up, delta_aicc),
            (Law::Linear, Law::Power, 0.0)
        );
        assert!(
            fits.warning
                .unwrap()
                .to_string()
                .starts_with("linear and power fit about equally well")
        );
    }

    #[test]
    fn repeated_counts_add_weight_not_confusion() {
        let counts: Vec<f64> = (1..=8).flat_map(|n| [f64::from(n); 3]).collect();
        let fits = fit_scaling(&amdahl(0.15, &counts)).unwrap();
        assert_eq!(fits.best_fit, Some(Law::Amdahl));
        let Some(LawParams::Amdahl {
            serial_fraction, ..
        }) = fits.best().map(|fit| fit.params)
        else {
            panic!("{fits:#?}");
        };
        assert!((serial_fraction - 0.15).abs() < 1e-9);
        assert_eq!(fits.best().unwrap().residuals.len(), counts.len());
    }

    #[test]
    fn serialises_as_the_spec_says() {
        let counts: Vec<f64> = (1..=8).map(f64::from).collect();
        let fits = fit_scaling(&amdahl(0.1, &counts)).unwrap();
        let json = serde_json::to_value(&fits).unwrap();
        assert_eq!(json["best_fit"], "amdahl");
        assert_eq!(json["warning"], serde_json::Value::Null);
        let laws: Vec<&str> = json["fits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|fit| fit["law"].as_str().unwrap())
            .collect();
        assert_eq!(laws, ["linear", "power", "amdahl", "usl"]);
        let amdahl = &json["fits"][2];
        assert!(
            amdahl["params"]["serial_fraction"].is_f64() && amdahl["params"]["lambda"].is_f64()
        );
        assert!(amdahl["r2"].is_f64() && amdahl["residuals"].is_array() && amdahl["aicc"].is_f64());
        assert!(json["fits"][3]["params"]["peak_concurrency"].is_null());
        let back: ScalingFits = serde_json::from_value(json).unwrap();
        assert_eq!(back, fits);
    }

    proptest! {
        #[test]
        fn never_panics_and_every_fit_is_finite(
            points in prop::collection::vec((-1.0f64..100.0, -1e3f64..1e12), 0..12)
        ) {
            if let Ok(fits) = fit_scaling(&points) {
                for fit in &fits.fits {
                    prop_assert!(fit.r2.is_finite());
                    prop_assert_eq!(fit.residuals.len(), points.len());
                    prop_assert!(fit.residuals.iter().all(|r| r.is_finite()));
                }
                prop_assert_eq!(fits.best_fit.is_some(), fits.best().is_some());
            }
        }

        #[test]
        fn usl_parameters_come_back_to_one_percent(
            sigma in 0.01f64..0.5,
            kappa in 1e-4f64..0.05,
            lambda in 1.0f64..1e10,
            counts in 8u32..=32,
        ) {
            let truth = LawParams::usl(sigma, kappa, lambda);
            let points: Vec<(f64, f64)> =
                (1..=counts).map(|n| (f64::from(n), truth.evaluate(f64::from(n)))).collect();
            let fits = fit_scaling(&points).unwrap();
            prop_assert_eq!(fits.best_fit, Some(Law::Usl));
            let Some(LawParams::Usl { sigma: s, kappa: k, lambda: l, .. }) =
                fits.best().map(|fit| fit.params) else { unreachable!() };
            prop_assert!((s / sigma - 1.0).abs() < 0.01, "sigma {} vs {}", s, sigma);
            prop_assert!((k / kappa - 1.0).abs() < 0.01, "kappa {} vs {}", k, kappa);
            prop_assert!((l / lambda - 1.0).abs() < 0.01, "lambda {} vs {}", l, lambda);
        }
    }
}
