//! Golden files: what ratelab prints, kept under tests/golden/ so that every change to
//! what users read shows in review. `RATELAB_BLESS=1 cargo test` rewrites them from
//! what the binary prints now; without it, a difference fails the test with both texts.

use std::path::{Path, PathBuf};

/// Where the golden files live.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Checks `actual` against the golden file `name` (a path under tests/golden/), or
/// writes it there when RATELAB_BLESS is set.
pub fn check(name: &str, actual: &str) {
    let path = dir().join(name);
    if std::env::var_os("RATELAB_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("golden files sit in a folder"))
            .expect("create the golden folder");
        std::fs::write(&path, actual).expect("write the golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read golden file {}: {e} (RATELAB_BLESS=1 cargo test writes it)",
            path.display()
        )
    });
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from what ratelab prints now, first at line {} \
             (RATELAB_BLESS=1 cargo test rewrites it if the change is meant):\n\
             --- expected\n{expected}\n--- actual\n{actual}",
            path.display(),
            first + 1
        );
    }
}
