//! Least-squares fits of measured figures to laws: polynomials (frequency against active
//! cores) and the scaling laws of a rate against threads or CPUs (linear, power law,
//! Amdahl, USL). Pure functions over numbers, with the goodness of fit (R²) and
//! residuals returned so a report can judge a fit rather than trust it.

mod estimate;
mod goodness;
mod laws;
mod least_squares;
mod polynomial;
mod scaling;
mod summary;

pub use goodness::{aicc, r_squared};
pub use laws::{Law, LawParams};
pub use polynomial::{PolynomialFit, evaluate, polynomial};
pub use scaling::{FitError, FitWarning, LawFit, ScalingFits, fit_scaling};
pub use summary::FitsSummary;

#[cfg(test)]
mod tests;
