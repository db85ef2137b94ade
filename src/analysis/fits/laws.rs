//! The four scaling laws of a rate y against a count n (threads or CPUs): their names,
//! their fitted parameters, and their formulas with the derivatives a least-squares
//! solver needs.
//!
//! Amdahl and the Universal Scalability Law are written in Gunther's throughput form,
//! X(n) = λn / (1 + σ(n − 1) + κn(n − 1)) (N. J. Gunther, "Guerrilla Capacity
//! Planning", 2007); Amdahl is the case κ = 0.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A scaling law, simplest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Law {
    /// y = intercept + slope · n.
    Linear,
    /// y = a · n^b.
    Power,
    /// y = λn / (1 + σ(n − 1)), σ the serial fraction.
    Amdahl,
    /// y = λn / (1 + σ(n − 1) + κn(n − 1)), the Universal Scalability Law.
    Usl,
}

impl Law {
    /// Every law, simplest first (the order ties are broken in).
    pub const ALL: [Law; 4] = [Law::Linear, Law::Power, Law::Amdahl, Law::Usl];

    /// The law's name as in JSON: `linear`, `power`, `amdahl` or `usl`.
    pub fn name(self) -> &'static str {
        match self {
            Law::Linear => "linear",
            Law::Power => "power",
            Law::Amdahl => "amdahl",
            Law::Usl => "usl",
        }
    }

    /// How many parameters are fitted.
    pub fn parameter_count(self) -> usize {
        match self {
            Law::Linear | Law::Power | Law::Amdahl => 2,
            Law::Usl => 3,
        }
    }
}

impl fmt::Display for Law {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A law with its fitted parameters; rates are in the unit of the fitted y (loops/s,
/// bytes/s, or a unitless speedup) and counts in the unit of n (threads or CPUs).
///
/// Serialised as `"law": "usl", "params": { "sigma": ..., ... }`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "law", content = "params", rename_all = "lowercase")]
pub enum LawParams {
    /// y = intercept + slope · n.
    Linear {
        /// y at n = 0, in y's unit.
        intercept: f64,
        /// Gain in y per unit of n.
        slope: f64,
    },
    /// y = a · n^b.
    Power {
        /// y at n = 1, in y's unit.
        a: f64,
        /// The exponent: 1 is perfect scaling, below 1 diminishing returns.
        b: f64,
    },
    /// y = λn / (1 + σ(n − 1)).
    Amdahl {
        /// Serial fraction σ ≥ 0: the share of the work that does not run in parallel.
        serial_fraction: f64,
        /// λ, the rate at n = 1, in y's unit.
        lambda: f64,
    },
    /// y = λn / (1 + σ(n − 1) + κn(n − 1)).
    Usl {
        /// Contention σ ≥ 0 (the serial fraction).
        sigma: f64,
        /// Coherency κ ≥ 0: the cost of keeping n workers in step, growing as n².
        kappa: f64,
        /// λ, the rate at n = 1, in y's unit.
        lambda: f64,
        /// The n where the rate peaks, √((1 − σ) / κ); absent when κ = 0 or σ ≥ 1.
        peak_concurrency: Option<f64>,
    },
}

impl LawParams {
    /// Which law these parameters belong to.
    pub fn law(&self) -> Law {
        match self {
            LawParams::Linear { .. } => Law::Linear,
            LawParams::Power { .. } => Law::Power,
            LawParams::Amdahl { .. } => Law::Amdahl,
            LawParams::Usl { .. } => Law::Usl,
        }
    }

    /// Each parameter's name as stored and its value (`None` where it has none), in
    /// the order they are stored.
    pub fn named(&self) -> Vec<(&'static str, Option<f64>)> {
        match *self {
            LawParams::Linear { intercept, slope } => {
                vec![("intercept", Some(intercept)), ("slope", Some(slope))]
            }
            LawParams::Power { a, b } => vec![("a", Some(a)), ("b", Some(b))],
            LawParams::Amdahl {
                serial_fraction,
                lambda,
            } => vec![
                ("serial_fraction", Some(serial_fraction)),
                ("lambda", Some(lambda)),
            ],
            LawParams::Usl {
                sigma,
                kappa,
                lambda,
                peak_concurrency,
            } => vec![
                ("sigma", Some(sigma)),
                ("kappa", Some(kappa)),
                ("lambda", Some(lambda)),
                ("peak_concurrency", peak_concurrency),
            ],
        }
    }

    /// The fitted y at `n`.
    pub fn evaluate(&self, n: f64) -> f64 {
        match *self {
            LawParams::Linear { intercept, slope } => intercept + slope * n,
            LawParams::Power { a, b } => power(&[a, b], n),
            LawParams::Amdahl {
                serial_fraction,
                lambda,
            } => usl(&[lambda, serial_fraction, 0.0], n),
            LawParams::Usl {
                sigma,
                kappa,
                lambda,
                ..
            } => usl(&[lambda, sigma, kappa], n),
        }
    }

    /// USL parameters with the peak worked out.
    pub fn usl(sigma: f64, kappa: f64, lambda: f64) -> LawParams {
        let peak_concurrency = (kappa > 0.0 && sigma < 1.0).then(|| ((1.0 - sigma) / kappa).sqrt());
        LawParams::Usl {
            sigma,
            kappa,
            lambda,
            peak_concurrency,
        }
    }
}

/// a · n^b for p = [a, b].
pub(super) fn power(p: &[f64], n: f64) -> f64 {
    p[0] * n.powf(p[1])
}

/// ∂(a · n^b)/∂(a, b) for p = [a, b].
pub(super) fn power_gradient(p: &[f64], n: f64, out: &mut [f64]) {
    let n_b = n.powf(p[1]);
    out[0] = n_b;
    out[1] = p[0] * n_b * n.ln();
}

/// The USL denominator 1 + σ(n − 1) + κn(n − 1) for p = [λ, σ, κ].
pub(super) fn usl_denominator(p: &[f64], n: f64) -> f64 {
    1.0 + p[1] * (n - 1.0) + p[2] * n * (n - 1.0)
}

/// λn / (1 + σ(n − 1) + κn(n − 1)) for p = [λ, σ, κ].
pub(super) fn usl(p: &[f64], n: f64) -> f64 {
    p[0] * n / usl_denominator(p, n)
}

/// ∂X/∂(λ, σ, κ) of the USL for p = [λ, σ, κ].
pub(super) fn usl_gradient(p: &[f64], n: f64, out: &mut [f64]) {
    let d = usl_denominator(p, n);
    let x_over_d = p[0] * n / (d * d);
    out[0] = n / d;
    out[1] = -x_over_d * (n - 1.0);
    out[2] = -x_over_d * n * (n - 1.0);
}

#[cfg(test)]
mod tests {
    use super::*;

    type Value = fn(&[f64], f64) -> f64;
    type Gradient = fn(&[f64], f64, &mut [f64]);

    /// Central differences of `value` in each parameter.
    fn numeric_gradient(value: Value, p: &[f64], n: f64) -> Vec<f64> {
        (0..p.len())
            .map(|i| {
                let h = 1e-6 * p[i].abs().max(1e-3);
                let (mut up, mut down) = (p.to_vec(), p.to_vec());
                up[i] += h;
                down[i] -= h;
                (value(&up, n) - value(&down, n)) / (2.0 * h)
            })
            .collect()
    }

    #[test]
    fn gradients_match_finite_differences() {
        let cases: [(Value, Gradient, &[f64]); 2] = [
            (power, power_gradient, &[3.0, 0.8]),
            (usl, usl_gradient, &[2.0, 0.05, 0.002]),
        ];
        for (value, gradient, p) in cases {
            for n in [1.0, 2.5, 7.0, 32.0] {
                let mut analytic = vec![0.0; p.len()];
                gradient(p, n, &mut analytic);
                for (a, b) in analytic.iter().zip(numeric_gradient(value, p, n)) {
                    assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{a} {b} at {n}");
                }
            }
        }
    }

    #[test]
    fn usl_peaks_where_its_formula_says() {
        let params = LawParams::usl(0.1, 0.01, 100.0);
        let LawParams::Usl {
            peak_concurrency: Some(peak),
            ..
        } = params
        else {
            panic!("no peak in {params:?}");
        };
        assert!((peak - 90f64.sqrt()).abs() < 1e-12);
        let at_peak = params.evaluate(peak);
        assert!(at_peak > params.evaluate(peak - 0.5) && at_peak > params.evaluate(peak + 0.5));
        assert!(matches!(
            LawParams::usl(0.1, 0.0, 1.0),
            LawParams::Usl {
                peak_concurrency: None,
                ..
            }
        ));
    }

    #[test]
    fn serialises_as_law_and_named_params() {
        let json = serde_json::to_value(LawParams::Amdahl {
            serial_fraction: 0.05,
            lambda: 10.0,
        })
        .unwrap();
        assert_eq!(
            json,
            serde_json::json!({ "law": "amdahl", "params": { "serial_fraction": 0.05, "lambda": 10.0 } })
        );
        assert_eq!(serde_json::to_value(Law::Usl).unwrap(), "usl");
        assert_eq!(Law::Usl.to_string(), "usl");
    }

    #[test]
    fn named_params_are_the_stored_ones_in_their_order() {
        for params in [
            LawParams::Linear {
                intercept: 1.0,
                slope: 2.0,
            },
            LawParams::Power { a: 1.0, b: 0.5 },
            LawParams::Amdahl {
                serial_fraction: 0.05,
                lambda: 10.0,
            },
            LawParams::usl(0.1, 0.01, 100.0),
            LawParams::usl(0.1, 0.0, 100.0),
        ] {
            let stored = serde_json::to_value(params).unwrap();
            let stored: Vec<(String, Option<f64>)> = stored["params"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(name, value)| (name.clone(), value.as_f64()))
                .collect();
            let named: Vec<(String, Option<f64>)> = params
                .named()
                .into_iter()
                .map(|(name, value)| (name.to_string(), value))
                .collect();
            assert_eq!(named, stored);
        }
    }
}
