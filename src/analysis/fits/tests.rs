//! The scaling fits against synthetic data of known laws and parameters: noise-free
//! data must give the parameters back to 1% and name the law; data with ±0.5% noise
//! must give them within the looser bounds of `cases`, and name the law nearly always
//! (Amdahl data now and then show a κ that AICc accepts: noise that looks like
//! coherency cost is, at 16 points, indistinguishable from it).

use super::*;

/// Seeds tried for the noisy cases.
const SEEDS: u64 = 200;

/// Points of `law` at n = 1..=counts, each rate times 1 ± `noise` (a deterministic
/// pseudo-random share, the same on every run).
fn synthetic(law: LawParams, counts: u32, noise: f64) -> Vec<(f64, f64)> {
    seeded(law, counts, noise, 1)
}

/// As `synthetic`, with the noise drawn from `seed` (not 0).
fn seeded(law: LawParams, counts: u32, noise: f64, seed: u64) -> Vec<(f64, f64)> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (1..=counts)
        .map(|n| {
            // xorshift64: any fixed sequence spread over [0, 1) will do.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
            let n = f64::from(n);
            (n, law.evaluate(n) * (1.0 + noise * (2.0 * unit - 1.0)))
        })
        .collect()
}

/// |got − want| / |want|.
fn relative_error(got: f64, want: f64) -> f64 {
    (got - want).abs() / want.abs()
}

/// Fits the points, checks the best law, and returns the fit of `law`.
fn fit_and_pick(points: &[(f64, f64)], law: Law) -> LawFit {
    let fits = fit_scaling(points).unwrap();
    assert_eq!(fits.best_fit, Some(law), "{fits:#?}");
    fits.get(law).unwrap().clone()
}

/// Parameters (name, value) of a fit, in a fixed order, for comparing.
fn named(params: &LawParams) -> Vec<(&'static str, f64)> {
    match *params {
        LawParams::Linear { intercept, slope } => vec![("intercept", intercept), ("slope", slope)],
        LawParams::Power { a, b } => vec![("a", a), ("b", b)],
        LawParams::Amdahl {
            serial_fraction,
            lambda,
        } => vec![("serial_fraction", serial_fraction), ("lambda", lambda)],
        LawParams::Usl {
            sigma,
            kappa,
            lambda,
            peak_concurrency,
        } => vec![
            ("sigma", sigma),
            ("kappa", kappa),
            ("lambda", lambda),
            ("peak_concurrency", peak_concurrency.unwrap_or(f64::NAN)),
        ],
    }
}

/// The cases of the issue, each with n up to, and the bound on every parameter's
/// relative error under ±0.5% noise over all seeds (the worst measured, rounded up): σ
/// and κ of the USL pull against each other, so they move most.
fn cases() -> Vec<(LawParams, u32, f64)> {
    vec![
        (
            LawParams::Amdahl {
                serial_fraction: 0.05,
                lambda: 1.2e6,
            },
            16,
            0.04,
        ),
        (
            LawParams::Amdahl {
                serial_fraction: 0.2,
                lambda: 3.5e9,
            },
            16,
            0.02,
        ),
        (LawParams::usl(0.03, 0.001, 2.0e8), 32, 0.10),
        (LawParams::usl(0.1, 0.01, 4.0e5), 32, 0.04),
        (LawParams::Power { a: 3.0, b: 0.8 }, 16, 0.02),
        (
            LawParams::Linear {
                intercept: 50.0,
                slope: 20.0,
            },
            16,
            0.02,
        ),
    ]
}

#[test]
fn noise_free_parameters_come_back_to_one_percent_and_the_law_is_named() {
    for (truth, counts, _) in cases() {
        let fit = fit_and_pick(&synthetic(truth, counts, 0.0), truth.law());
        for ((name, got), (_, want)) in named(&fit.params).into_iter().zip(named(&truth)) {
            let error = relative_error(got, want);
            assert!(
                error < 0.01,
                "{} {name}: {got} vs {want} ({error:e})",
                truth.law()
            );
        }
        assert!(fit.r2 > 1.0 - 1e-9, "{fit:?}");
    }
}

#[test]
fn noise_free_fits_carry_no_warning() {
    for (truth, counts, _) in cases() {
        let fits = fit_scaling(&synthetic(truth, counts, 0.0)).unwrap();
        assert_eq!(fits.warning, None, "{}: {fits:#?}", truth.law());
    }
}

#[test]
fn noisy_data_name_the_law() {
    for (truth, counts, _) in cases() {
        let fit = fit_and_pick(&synthetic(truth, counts, 0.005), truth.law());
        assert!(fit.r2 > 0.99, "{fit:?}");
    }
}

#[test]
fn noisy_parameters_stay_within_their_bounds_for_every_seed() {
    for (truth, counts, bound) in cases() {
        let mut named_right = 0;
        for seed in 1..=SEEDS {
            let fits = fit_scaling(&seeded(truth, counts, 0.005, seed)).unwrap();
            named_right += usize::from(fits.best_fit == Some(truth.law()));
            let fit = fits.get(truth.law()).unwrap();
            for ((name, got), (_, want)) in named(&fit.params).into_iter().zip(named(&truth)) {
                let error = relative_error(got, want);
                assert!(
                    error < bound,
                    "{} {name}: {got} vs {want} ({error:.4})",
                    truth.law()
                );
            }
        }
        // Measured: 189 and 192 of 200 for the two Amdahl cases, all for the others.
        let floor = if truth.law() == Law::Amdahl { 0.9 } else { 1.0 };
        assert!(
            named_right as f64 >= floor * SEEDS as f64,
            "{}: named in {named_right} of {SEEDS}",
            truth.law()
        );
    }
}

#[test]
fn amdahl_data_give_usl_no_coherency_cost() {
    let truth = LawParams::Amdahl {
        serial_fraction: 0.05,
        lambda: 1.0,
    };
    let fits = fit_scaling(&synthetic(truth, 16, 0.0)).unwrap();
    let Some(LawParams::Usl {
        sigma,
        kappa,
        peak_concurrency,
        ..
    }) = fits.get(Law::Usl).map(|fit| fit.params)
    else {
        panic!("no usl fit: {fits:#?}");
    };
    assert!(
        relative_error(sigma, 0.05) < 1e-6 && kappa < 1e-9,
        "{sigma} {kappa}"
    );
    assert!(peak_concurrency.is_none_or(|peak| peak > 1e3));
}
