//! Least-squares polynomials (frequency against active cores is about quadratic), solved
//! in closed form, with R² and residuals so a report can judge the fit.

use serde::{Deserialize, Serialize};

use super::goodness::r_squared;

/// A polynomial fitted to points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolynomialFit {
    /// Coefficients from the constant up: `y = c[0] + c[1]·x + c[2]·x² ...`.
    pub coefficients: Vec<f64>,
    /// Coefficient of determination, 1 − SS_res / SS_tot; 1 when the points lie on the
    /// curve (also when every y is equal and the fit is exact).
    pub r2: f64,
    /// Each point's y minus the fitted value, in the points' order.
    pub residuals: Vec<f64>,
}

/// The value of the polynomial with `coefficients` (constant first) at `x`.
pub fn evaluate(coefficients: &[f64], x: f64) -> f64 {
    coefficients.iter().rev().fold(0.0, |acc, &c| acc * x + c)
}

/// The least-squares polynomial of `degree` through the points (`xs[i]`, `ys[i]`);
/// `None` when the lengths differ, there are fewer distinct x than `degree + 1`, or a
/// value is not finite.
///
/// x is centred and scaled to [-1, 1] before the normal equations are solved (Gaussian
/// elimination with partial pivoting), which keeps them well conditioned for the low
/// degrees used here; the coefficients are then expanded back to powers of x.
pub fn polynomial(xs: &[f64], ys: &[f64], degree: usize) -> Option<PolynomialFit> {
    if xs.len() != ys.len() || xs.iter().chain(ys).any(|v| !v.is_finite()) {
        return None;
    }
    let mut distinct = xs.to_vec();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    if distinct.len() < degree + 1 {
        return None;
    }
    let (low, high) = (distinct[0], distinct[distinct.len() - 1]);
    let centre = (low + high) / 2.0;
    let scale = if high > low { (high - low) / 2.0 } else { 1.0 };
    let size = degree + 1;
    // Normal equations A·b = v over u = (x − centre) / scale.
    let mut a = vec![vec![0.0; size + 1]; size];
    for (&x, &y) in xs.iter().zip(ys) {
        let u = (x - centre) / scale;
        let powers: Vec<f64> = (0..2 * size).map(|k| u.powi(k as i32)).collect();
        for (row, equation) in a.iter_mut().enumerate() {
            for (column, cell) in equation.iter_mut().take(size).enumerate() {
                *cell += powers[row + column];
            }
            equation[size] += y * powers[row];
        }
    }
    let scaled = solve(a)?;
    let coefficients = expand(&scaled, centre, scale);
    let residuals: Vec<f64> = xs
        .iter()
        .zip(ys)
        .map(|(&x, &y)| y - evaluate(&coefficients, x))
        .collect();
    let r2 = r_squared(ys, &residuals);
    Some(PolynomialFit {
        coefficients,
        r2,
        residuals,
    })
}

/// Solves an augmented system (each row: coefficients, then the right-hand side).
fn solve(mut a: Vec<Vec<f64>>) -> Option<Vec<f64>> {
    let size = a.len();
    for column in 0..size {
        let pivot =
            (column..size).max_by(|&i, &j| a[i][column].abs().total_cmp(&a[j][column].abs()))?;
        if a[pivot][column].abs() < 1e-12 {
            return None;
        }
        a.swap(column, pivot);
        for row in column + 1..size {
            let (above, below) = a.split_at_mut(row);
            let (pivot_row, target) = (&above[column], &mut below[0]);
            let factor = target[column] / pivot_row[column];
            for (cell, &p) in target.iter_mut().zip(pivot_row).skip(column) {
                *cell -= factor * p;
            }
        }
    }
    let mut b = vec![0.0; size];
    for row in (0..size).rev() {
        let known: f64 = (row + 1..size).map(|k| a[row][k] * b[k]).sum();
        b[row] = (a[row][size] - known) / a[row][row];
    }
    b.iter().all(|v| v.is_finite()).then_some(b)
}

/// Turns coefficients over u = (x − centre) / scale into coefficients over x, by the
/// binomial expansion of each (x − centre)^k.
fn expand(scaled: &[f64], centre: f64, scale: f64) -> Vec<f64> {
    let mut out = vec![0.0; scaled.len()];
    for (k, &b) in scaled.iter().enumerate() {
        let factor = b / scale.powi(k as i32);
        let mut binomial = 1.0;
        for (j, coefficient) in out.iter_mut().enumerate().take(k + 1) {
            // C(k, j) · x^j · (−centre)^(k − j)
            *coefficient += factor * binomial * (-centre).powi((k - j) as i32);
            binomial = binomial * (k - j) as f64 / (j + 1) as f64;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn recovers_known_coefficients_exactly() {
        let xs: Vec<f64> = (0..9).map(f64::from).collect();
        let ys: Vec<f64> = xs
            .iter()
            .map(|x| 3.2e9 - 1.5e8 * x + 4.0e6 * x * x)
            .collect();
        let fit = polynomial(&xs, &ys, 2).unwrap();
        assert!(close(fit.coefficients[0], 3.2e9), "{:?}", fit.coefficients);
        assert!(close(fit.coefficients[1], -1.5e8), "{:?}", fit.coefficients);
        assert!(close(fit.coefficients[2], 4.0e6), "{:?}", fit.coefficients);
        assert!(close(fit.r2, 1.0));
        assert!(fit.residuals.iter().all(|r| r.abs() < 1e-3));
    }

    #[test]
    fn a_line_with_noise_has_r2_below_one_and_residuals_summing_to_zero() {
        let xs = [1.0, 2.0, 3.0, 4.0, 5.0];
        let ys = [2.1, 3.9, 6.2, 7.8, 10.1];
        let fit = polynomial(&xs, &ys, 1).unwrap();
        assert!((fit.coefficients[1] - 2.0).abs() < 0.05);
        assert!(fit.r2 > 0.99 && fit.r2 < 1.0);
        assert!(fit.residuals.iter().sum::<f64>().abs() < 1e-9);
        assert!(close(evaluate(&fit.coefficients, 0.0), fit.coefficients[0]));
    }

    #[test]
    fn too_few_distinct_points_or_bad_values_give_no_fit() {
        assert!(polynomial(&[1.0, 1.0, 2.0], &[1.0, 2.0, 3.0], 2).is_none());
        assert!(polynomial(&[1.0, 2.0], &[1.0], 1).is_none());
        assert!(polynomial(&[1.0, 2.0, f64::NAN], &[1.0, 2.0, 3.0], 1).is_none());
        let flat = polynomial(&[1.0, 2.0, 3.0], &[5.0, 5.0, 5.0], 2).unwrap();
        assert!(close(flat.r2, 1.0) && close(flat.coefficients[0], 5.0));
    }
}
