//! docs/architecture.md against the tree: every module of the crate is named in its
//! layers, every kind's folder in the workload layer, and every module of the storage
//! core has a row in its table, so the page a newcomer reads first cannot fall behind
//! the code unseen.

use std::collections::BTreeSet;
use std::path::Path;

/// The page, read whole.
fn page() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
        .expect("read docs/architecture.md")
}

/// The modules in folder `src/<dir>`: its `.rs` files but `mod.rs`, `lib.rs` and
/// `main.rs`, and its folders, by name.
fn modules(dir: &str) -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(dir);
    std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("read {}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            if p.is_dir() {
                return Some(name);
            }
            let stem = name.strip_suffix(".rs")?;
            (!["mod", "lib", "main"].contains(&stem)).then(|| stem.to_string())
        })
        .collect()
}

/// The first word of each line of the layer block, and the names listed on a line
/// of several (`monitor, control, error, …`).
fn layers(page: &str) -> BTreeSet<String> {
    let block = page
        .split("```")
        .nth(1)
        .expect("the layer block, the page's first code block");
    block
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.trim().is_empty())
        .flat_map(|l| {
            let names = l.split("  ").next().unwrap_or(l);
            names
                .split(',')
                .map(|n| n.trim().to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The module named in the first cell of each row of the storage core's table.
fn storage_rows(page: &str) -> BTreeSet<String> {
    let section = page
        .split("## The storage core")
        .nth(1)
        .expect("the storage core's section");
    section
        .lines()
        .take_while(|l| !l.starts_with("##"))
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn every_module_of_the_crate_is_in_a_layer() {
    let named = layers(&page());
    let tree = modules("");
    assert_eq!(
        named, tree,
        "docs/architecture.md's layers name {named:?}; src/ holds {tree:?}"
    );
}

#[test]
fn every_module_of_the_storage_core_has_a_row() {
    let rows = storage_rows(&page());
    let tree = modules("storage");
    assert_eq!(
        rows, tree,
        "docs/architecture.md's storage table names {rows:?}; src/storage holds {tree:?}"
    );
}

#[test]
fn every_kind_folder_is_named_in_the_workload_layer() {
    let page = page();
    let listed = page
        .split("one folder each (")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("the workload layer's list of kinds");
    let named: BTreeSet<String> = listed
        .split(',')
        .map(|k| k.split_whitespace().collect::<String>())
        .collect();
    let folders: BTreeSet<String> = modules("workload")
        .into_iter()
        .filter(|m| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("src/workload")
                .join(m)
                .is_dir()
        })
        .collect();
    assert_eq!(
        named, folders,
        "docs/architecture.md's workload layer names {named:?}; src/workload's folders are {folders:?}"
    );
}
