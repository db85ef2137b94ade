//! Each scaling law's least-squares parameters for a set of points: a closed-form start
//! from the law's linearised form, refined by Levenberg–Marquardt on the rates
//! themselves, so every law is judged by the same squared error in y.
//!
//! σ, κ ≥ 0 are kept by an active set rather than a change of variables: each face of
//! the constraints (σ and κ free, either held at 0, both at 0) is fitted unconstrained,
//! and the best result that obeys the constraints is the constrained optimum. A
//! substitution such as σ = u² would flatten the error surface at 0, which is where
//! Amdahl data leave κ.

use super::laws::{self, Law, LawParams};
use super::least_squares::{Curve, linear, refine};
use super::polynomial::polynomial;

const POWER: Curve = Curve {
    value: laws::power,
    gradient: laws::power_gradient,
};

const USL: Curve = Curve {
    value: laws::usl,
    gradient: laws::usl_gradient,
};

/// The least-squares parameters of `law` for `points` (n, y), every y > 0 and of order
/// one (the caller divides by `y_scale`, which is multiplied back into the rates here);
/// `None` when the law cannot be fitted to them.
pub(super) fn fit(law: Law, points: &[(f64, f64)], y_scale: f64) -> Option<LawParams> {
    match law {
        Law::Linear => {
            let (ns, ys): (Vec<f64>, Vec<f64>) = points.iter().copied().unzip();
            let line = polynomial(&ns, &ys, 1)?;
            Some(LawParams::Linear {
                intercept: line.coefficients[0] * y_scale,
                slope: line.coefficients[1] * y_scale,
            })
        }
        Law::Power => {
            // ln y = ln a + b ln n is a straight line: exact on noise-free data.
            let (ln_ns, ln_ys): (Vec<f64>, Vec<f64>) =
                points.iter().map(|&(n, y)| (n.ln(), y.ln())).unzip();
            let line = polynomial(&ln_ns, &ln_ys, 1)?;
            let start = [line.coefficients[0].exp(), line.coefficients[1]];
            let p = refine(POWER, points, &start, &[true, true])?;
            (p[0] > 0.0).then_some(LawParams::Power {
                a: p[0] * y_scale,
                b: p[1],
            })
        }
        Law::Amdahl => {
            let [lambda, sigma, _] = rational(points, &[[true, false], [false, false]])?;
            Some(LawParams::Amdahl {
                serial_fraction: sigma,
                lambda: lambda * y_scale,
            })
        }
        Law::Usl => {
            let faces = [[true, true], [true, false], [false, true], [false, false]];
            let [lambda, sigma, kappa] = rational(points, &faces)?;
            Some(LawParams::usl(sigma, kappa, lambda * y_scale))
        }
    }
}

/// [λ, σ, κ] of the USL with the least squared error over the given faces ([σ free,
/// κ free]; a parameter not free is held at 0) whose result has σ, κ ≥ 0 and λ > 0.
fn rational(points: &[(f64, f64)], faces: &[[bool; 2]]) -> Option<[f64; 3]> {
    faces
        .iter()
        .filter_map(|&[sigma_free, kappa_free]| face(points, sigma_free, kappa_free))
        .filter(|p| {
            p[0] > 0.0
                && p[1] >= 0.0
                && p[2] >= 0.0
                && points
                    .iter()
                    .all(|&(n, _)| laws::usl_denominator(p, n) > 0.0)
        })
        .map(|p| {
            let sse: f64 = points
                .iter()
                .map(|&(n, y)| (laws::usl(&p, n) - y).powi(2))
                .sum();
            (p, sse)
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(p, _)| p)
}

/// [λ, σ, κ] fitted with only the named parameters (and λ) free.
fn face(points: &[(f64, f64)], sigma_free: bool, kappa_free: bool) -> Option<[f64; 3]> {
    // n / X(n) = (1 + σ(n − 1) + κn(n − 1)) / λ is linear in 1/λ, σ/λ and κ/λ: exact on
    // noise-free data, and close enough to start from otherwise.
    let rows: Vec<Vec<f64>> = points
        .iter()
        .map(|&(n, _)| {
            let mut row = vec![1.0];
            if sigma_free {
                row.push(n - 1.0);
            }
            if kappa_free {
                row.push(n * (n - 1.0));
            }
            row
        })
        .collect();
    let targets: Vec<f64> = points.iter().map(|&(n, y)| n / y).collect();
    let c = linear(&rows, &targets)?;
    let mut start = [1.0 / c[0], 0.0, 0.0];
    let mut rest = c[1..].iter().map(|ci| (ci / c[0]).max(0.0));
    if sigma_free {
        start[1] = rest.next()?;
    }
    if kappa_free {
        start[2] = rest.next()?;
    }
    if !(start[0] > 0.0 && start[0].is_finite()) {
        // The linearised fit put the curve through a pole; start from perfect scaling,
        // the least-squares λ of y = λn.
        let (yn, nn) = points
            .iter()
            .fold((0.0, 0.0), |(yn, nn), &(n, y)| (yn + y * n, nn + n * n));
        start = [yn / nn, 0.0, 0.0];
    }
    let p = refine(USL, points, &start, &[true, sigma_free, kappa_free])?;
    Some([p[0], p[1], p[2]])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usl_points(lambda: f64, sigma: f64, kappa: f64, counts: u32) -> Vec<(f64, f64)> {
        (1..=counts)
            .map(|n| {
                let n = f64::from(n);
                (n, laws::usl(&[lambda, sigma, kappa], n))
            })
            .collect()
    }

    #[test]
    fn constraints_hold_when_the_data_pull_past_them() {
        // Superlinear data (a cache that fits better when split) want σ < 0.
        let points: Vec<(f64, f64)> = (1..=8)
            .map(|n| (f64::from(n), f64::from(n).powf(1.2)))
            .collect();
        let Some(LawParams::Usl { sigma, kappa, .. }) = fit(Law::Usl, &points, 1.0) else {
            panic!("no usl fit");
        };
        assert!(sigma >= 0.0 && kappa >= 0.0, "{sigma} {kappa}");
        let Some(LawParams::Amdahl {
            serial_fraction, ..
        }) = fit(Law::Amdahl, &points, 1.0)
        else {
            panic!("no amdahl fit");
        };
        assert_eq!(serial_fraction, 0.0);
    }

    #[test]
    fn amdahl_data_leave_kappa_at_zero() {
        let points = usl_points(1.0, 0.1, 0.0, 12);
        let Some(LawParams::Usl { sigma, kappa, .. }) = fit(Law::Usl, &points, 1.0) else {
            panic!("no usl fit");
        };
        assert!(
            (sigma - 0.1).abs() < 1e-9 && kappa.abs() < 1e-9,
            "{sigma} {kappa}"
        );
    }

    #[test]
    fn rates_are_scaled_back() {
        let points = usl_points(1.0, 0.05, 0.001, 16);
        let Some(LawParams::Usl { lambda, .. }) = fit(Law::Usl, &points, 2.5e9) else {
            panic!("no usl fit");
        };
        assert!((lambda / 2.5e9 - 1.0).abs() < 1e-9, "{lambda}");
    }
}
