//! How well a fitted curve matches its points: R² to show a reader, and the corrected
//! Akaike information criterion (AICc) to compare curves with different numbers of
//! parameters fairly.

/// Smallest root-mean-square residual credited to any fit, as a share of the mean |y|.
///
/// On exact synthetic data every law that can pass through the points leaves residuals
/// of rounding size, and ln(SSE) of rounding noise would decide between them at random.
/// No measurement is repeatable to one part in a million, so below this the fits count
/// as equally exact and the parameter penalty alone decides.
const RESOLUTION: f64 = 1e-6;

/// Coefficient of determination, 1 − SS_res / SS_tot, of `ys` against the residuals a
/// fit left; 1 when the points lie on the curve (also when every y is equal and the fit
/// is exact), 0 for no points.
pub fn r_squared(ys: &[f64], residuals: &[f64]) -> f64 {
    if ys.is_empty() {
        return 0.0;
    }
    let mean = ys.iter().sum::<f64>() / ys.len() as f64;
    let total: f64 = ys.iter().map(|y| (y - mean).powi(2)).sum();
    let residual: f64 = residuals.iter().map(|r| r * r).sum();
    if total > 0.0 {
        1.0 - residual / total
    } else if residual <= f64::EPSILON * ys.len() as f64 * mean.abs().max(1.0) {
        1.0
    } else {
        0.0
    }
}

/// AICc of a least-squares fit with `parameters` fitted values to `ys`, from its
/// residuals; `None` when there are too few points for the small-sample correction
/// (fewer than `parameters + 3`: the noise variance counts as one more parameter).
///
/// AIC = N ln(SSE / N) + 2k, plus 2k(k + 1) / (N − k − 1) (Hurvich & Tsai, 1989); lower
/// is better, and only differences between fits to the same points mean anything.
pub fn aicc(ys: &[f64], residuals: &[f64], parameters: usize) -> Option<f64> {
    let points = ys.len() as f64;
    let k = parameters as f64 + 1.0;
    if points - k - 1.0 <= 0.0 {
        return None;
    }
    let mean_abs = ys.iter().map(|y| y.abs()).sum::<f64>() / points;
    let floor = points * (RESOLUTION * mean_abs).powi(2);
    let sse = residuals.iter().map(|r| r * r).sum::<f64>().max(floor);
    if !(sse > 0.0 && sse.is_finite()) {
        return None;
    }
    let value = points * (sse / points).ln() + 2.0 * k + 2.0 * k * (k + 1.0) / (points - k - 1.0);
    value.is_finite().then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r_squared_is_one_on_the_curve_and_lower_off_it() {
        assert_eq!(r_squared(&[1.0, 2.0, 3.0], &[0.0, 0.0, 0.0]), 1.0);
        assert_eq!(r_squared(&[5.0, 5.0], &[0.0, 0.0]), 1.0);
        assert_eq!(r_squared(&[], &[]), 0.0);
        let r2 = r_squared(&[1.0, 2.0, 3.0], &[0.1, -0.1, 0.1]);
        assert!(r2 > 0.9 && r2 < 1.0, "{r2}");
    }

    #[test]
    fn aicc_penalises_parameters_and_needs_enough_points() {
        let ys = [10.0; 8];
        let residuals = [0.5, -0.5, 0.5, -0.5, 0.5, -0.5, 0.5, -0.5];
        let two = aicc(&ys, &residuals, 2).unwrap();
        let three = aicc(&ys, &residuals, 3).unwrap();
        assert!(three > two + 2.0, "{two} {three}");
        assert!(aicc(&ys[..4], &residuals[..4], 2).is_none());
        assert!(aicc(&ys[..5], &residuals[..5], 2).is_some());
    }

    #[test]
    fn exact_fits_tie_at_the_resolution_floor() {
        let ys = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let rounding = aicc(&ys, &[1e-15, 0.0, -1e-15, 0.0, 0.0, 1e-16], 2).unwrap();
        let exact = aicc(&ys, &[0.0; 6], 2).unwrap();
        assert_eq!(rounding, exact);
    }
}
