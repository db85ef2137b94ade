//! The solvers behind the scaling fits: Levenberg–Marquardt (the `levenberg-marquardt`
//! crate, a port of MINPACK's lmder) refines a curve's parameters, some of them held
//! fixed; ordinary linear least squares on chosen basis functions gives the starting
//! values.

use levenberg_marquardt::{LeastSquaresProblem, LevenbergMarquardt, TerminationReason};
use nalgebra::{DMatrix, DVector, Dyn, Owned};

/// A curve y = value(p, n) and its gradient in the parameters p.
#[derive(Debug, Clone, Copy)]
pub(super) struct Curve {
    /// y at n for parameters p.
    pub value: fn(&[f64], f64) -> f64,
    /// ∂y/∂p at n, written into the last argument.
    pub gradient: fn(&[f64], f64, &mut [f64]),
}

/// The curve against the points, in the solver's terms.
struct Problem<'a> {
    curve: Curve,
    points: &'a [(f64, f64)],
    /// Every parameter, the fixed ones included.
    params: Vec<f64>,
    /// Indexes of the parameters the solver moves.
    free: Vec<usize>,
}

impl LeastSquaresProblem<f64, Dyn, Dyn> for Problem<'_> {
    type ResidualStorage = Owned<f64, Dyn>;
    type JacobianStorage = Owned<f64, Dyn, Dyn>;
    type ParameterStorage = Owned<f64, Dyn>;

    fn set_params(&mut self, x: &DVector<f64>) {
        for (&i, &value) in self.free.iter().zip(x.iter()) {
            self.params[i] = value;
        }
    }

    fn params(&self) -> DVector<f64> {
        DVector::from_iterator(self.free.len(), self.free.iter().map(|&i| self.params[i]))
    }

    fn residuals(&self) -> Option<DVector<f64>> {
        let residuals = DVector::from_iterator(
            self.points.len(),
            self.points
                .iter()
                .map(|&(n, y)| (self.curve.value)(&self.params, n) - y),
        );
        // A step into a pole (a denominator through zero) is refused, not followed.
        residuals.iter().all(|r| r.is_finite()).then_some(residuals)
    }

    fn jacobian(&self) -> Option<DMatrix<f64>> {
        let mut gradient = vec![0.0; self.params.len()];
        let mut jacobian = DMatrix::zeros(self.points.len(), self.free.len());
        for (row, &(n, _)) in self.points.iter().enumerate() {
            (self.curve.gradient)(&self.params, n, &mut gradient);
            for (column, &i) in self.free.iter().enumerate() {
                jacobian[(row, column)] = gradient[i];
            }
        }
        jacobian.iter().all(|d| d.is_finite()).then_some(jacobian)
    }
}

/// The parameters, starting from `start`, that minimise the squared distance of the
/// curve from the points, moving only those where `free` is true; `None` when the solver
/// fails or there are fewer points than free parameters.
pub(super) fn refine(
    curve: Curve,
    points: &[(f64, f64)],
    start: &[f64],
    free: &[bool],
) -> Option<Vec<f64>> {
    let free: Vec<usize> = (0..start.len()).filter(|&i| free[i]).collect();
    if points.len() < free.len() || start.iter().any(|p| !p.is_finite()) {
        return None;
    }
    if free.is_empty() {
        return Some(start.to_vec());
    }
    let problem = Problem {
        curve,
        points,
        params: start.to_vec(),
        free,
    };
    let (problem, report) = LevenbergMarquardt::new().minimize(problem);
    // "No improvement possible" means the tolerance met machine precision: a minimum.
    let converged = report.termination.was_successful()
        || matches!(
            report.termination,
            TerminationReason::NoImprovementPossible(_)
        );
    (converged && problem.params.iter().all(|p| p.is_finite())).then_some(problem.params)
}

/// The coefficients c minimising Σᵢ (Σⱼ cⱼ·rows[i][j] − targets[i])², by singular value
/// decomposition; `None` when the rows do not determine every coefficient.
pub(super) fn linear(rows: &[Vec<f64>], targets: &[f64]) -> Option<Vec<f64>> {
    let columns = rows.first()?.len();
    if columns == 0 || rows.len() < columns || rows.len() != targets.len() {
        return None;
    }
    let design = DMatrix::from_fn(rows.len(), columns, |i, j| rows[i][j]);
    let svd = design.svd(true, true);
    let largest = svd.singular_values.max();
    let smallest = svd.singular_values.min();
    if !largest.is_finite() || largest <= 0.0 || smallest <= 1e-12 * largest {
        return None;
    }
    let solution = svd.solve(&DVector::from_column_slice(targets), 0.0).ok()?;
    solution
        .iter()
        .all(|c| c.is_finite())
        .then(|| solution.iter().copied().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(p: &[f64], n: f64) -> f64 {
        p[0] + p[1] * n
    }

    fn line_gradient(_: &[f64], n: f64, out: &mut [f64]) {
        out[0] = 1.0;
        out[1] = n;
    }

    const LINE: Curve = Curve {
        value: line,
        gradient: line_gradient,
    };

    #[test]
    fn refine_finds_the_minimum_and_keeps_fixed_parameters() {
        let points: Vec<(f64, f64)> = (1..=5).map(|n| (n as f64, 1.0 + 2.0 * n as f64)).collect();
        let both = refine(LINE, &points, &[0.0, 0.0], &[true, true]).unwrap();
        assert!(
            (both[0] - 1.0).abs() < 1e-9 && (both[1] - 2.0).abs() < 1e-9,
            "{both:?}"
        );
        let slope_only = refine(LINE, &points, &[0.0, 0.0], &[false, true]).unwrap();
        assert_eq!(slope_only[0], 0.0);
        // Σ n(1 + 2n) / Σ n² = 2 + 15/55.
        assert!(
            (slope_only[1] - (2.0 + 15.0 / 55.0)).abs() < 1e-9,
            "{slope_only:?}"
        );
        assert!(refine(LINE, &points[..1], &[0.0, 0.0], &[true, true]).is_none());
    }

    #[test]
    fn linear_solves_and_refuses_undetermined_systems() {
        let rows: Vec<Vec<f64>> = (1..=4).map(|n| vec![1.0, n as f64]).collect();
        let targets: Vec<f64> = (1..=4).map(|n| 3.0 - 0.5 * n as f64).collect();
        let c = linear(&rows, &targets).unwrap();
        assert!(
            (c[0] - 3.0).abs() < 1e-12 && (c[1] + 0.5).abs() < 1e-12,
            "{c:?}"
        );
        let repeated = vec![vec![1.0, 2.0]; 3];
        assert!(linear(&repeated, &[1.0, 1.0, 1.0]).is_none());
        assert!(linear(&[], &[]).is_none());
    }
}
