//! docs/architecture.md against the tree: every module of the crate is named in its
//! layers, every kind's folder in the workload layer, and every module of the storage
//! core has a row in its table, so the page a newcomer reads first cannot fall behind
//! the code unseen; and the tree against the page's rules: no import runs back up a
//! floor, and no files of a kind's folder use each other in a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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

/// The floors of the layer block, top first: the first word of each line, or the
/// names listed on a line of several (`sensors, control, error, …`).
fn floors(page: &str) -> Vec<Vec<String>> {
    let block = page
        .split("```")
        .nth(1)
        .expect("the layer block, the page's first code block");
    block
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.trim().is_empty())
        .map(|l| {
            let names = l.split("  ").next().unwrap_or(l);
            names.split(',').map(|n| n.trim().to_string()).collect()
        })
        .collect()
}

/// Every module the layer block names.
fn layers(page: &str) -> BTreeSet<String> {
    floors(page).into_iter().flatten().collect()
}

/// The `.rs` files under `path` (itself, if it is one), each with the code before its
/// tests (`#[cfg(test)]` at the start of a line) and without comments.
fn code_files(path: &Path) -> Vec<(PathBuf, String)> {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        return entries.iter().flat_map(|p| code_files(p)).collect();
    }
    if path.extension().is_none_or(|e| e != "rs") {
        return Vec::new();
    }
    let text = std::fs::read_to_string(path).unwrap();
    let code = text
        .lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    vec![(path.to_path_buf(), code)]
}

/// The paths a use tree names, from its start in `text` (`a::{b, c::d}` gives `a`,
/// `a::b`, `a::c::d`); `self` names the path it is in.
fn use_tree(text: &str) -> Vec<Vec<String>> {
    fn tree(text: &[u8], at: &mut usize, prefix: &[String]) -> Vec<Vec<String>> {
        let skip = |at: &mut usize| {
            while *at < text.len() && text[*at].is_ascii_whitespace() {
                *at += 1;
            }
        };
        let mut path = prefix.to_vec();
        loop {
            skip(at);
            let start = *at;
            while *at < text.len() && (text[*at].is_ascii_alphanumeric() || text[*at] == b'_') {
                *at += 1;
            }
            if *at > start {
                let word = String::from_utf8_lossy(&text[start..*at]).to_string();
                if word != "self" {
                    path.push(word);
                }
                if text[*at..].starts_with(b"::") {
                    *at += 2;
                    continue;
                }
                return vec![path];
            }
            if text.get(*at) != Some(&b'{') {
                return vec![path];
            }
            *at += 1;
            let mut out = vec![path.clone()];
            loop {
                skip(at);
                match text.get(*at) {
                    Some(b'}') | None => {
                        *at += 1;
                        return out;
                    }
                    Some(b',') => *at += 1,
                    _ => {
                        let before = *at;
                        out.extend(tree(text, at, &path));
                        if *at == before {
                            *at += 1;
                        }
                    }
                }
            }
        }
    }
    tree(text.as_bytes(), &mut 0, &[])
}

/// Each path `code` names after `prefix` (`crate::`, `super::`), with the number of
/// `super::` before it.
fn named_after<'a>(
    code: &'a str,
    prefix: &'a str,
) -> impl Iterator<Item = (usize, Vec<String>)> + 'a {
    code.match_indices(prefix)
        .filter_map(move |(at, _)| {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                return None;
            }
            let mut rest = &code[at..];
            let mut supers = 0;
            while let Some(r) = rest.strip_prefix(prefix) {
                supers += 1;
                rest = r;
            }
            Some(use_tree(rest).into_iter().map(move |p| (supers, p)))
        })
        .flatten()
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

#[test]
fn no_import_runs_back_up_a_floor() {
    let floors = floors(&page());
    let floor_of: BTreeMap<&str, usize> = floors
        .iter()
        .enumerate()
        .flat_map(|(n, names)| names.iter().map(move |name| (name.as_str(), n)))
        .collect();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut up = Vec::new();
    for (module, &floor) in &floor_of {
        let path = if src.join(module).is_dir() {
            src.join(module)
        } else {
            src.join(format!("{module}.rs"))
        };
        for (file, code) in code_files(&path) {
            for (_, named) in named_after(&code, "crate::") {
                let Some(used) = named.first() else { continue };
                if floor_of.get(used.as_str()).is_some_and(|&f| f < floor) {
                    up.push(format!(
                        "{} uses crate::{used}",
                        file.strip_prefix(&src).unwrap().display()
                    ));
                }
            }
        }
    }
    up.sort();
    up.dedup();
    assert!(
        up.is_empty(),
        "imports up a floor of docs/architecture.md: {up:#?}"
    );
}
/// A kind's folder as modules: each file's module path under the folder (`server`,
/// `server/exchange`), its code, and the names each folder's `mod.rs` re-exports
/// (`pub use x::{A, B}`) with the module they come from.
struct Folder {
    files: BTreeMap<Vec<String>, (bool, String)>,
    exported: BTreeMap<Vec<String>, Vec<String>>,
}

impl Folder {
    fn read(root: &Path) -> Folder {
        let mut files = BTreeMap::new();
        let mut exported = BTreeMap::new();
        for (file, code) in code_files(root) {
            let rel = file.strip_prefix(root).unwrap().with_extension("");
            let mut module: Vec<String> = rel
                .iter()
                .map(|c| c.to_string_lossy().to_string())
                .collect();
            let is_mod = module.last().is_some_and(|m| m == "mod");
            if is_mod {
                module.pop();
                for line in code
                    .lines()
                    .filter(|l| l.contains("pub use ") || l.contains(") use "))
                {
                    let tree = line.split(" use ").nth(1).unwrap_or("");
                    for path in use_tree(tree) {
                        if let (Some(name), true) = (path.last(), path.len() > 1) {
                            let mut key = module.clone();
                            key.push(name.clone());
                            let mut from = module.clone();
                            from.extend(path[..path.len() - 1].iter().cloned());
                            exported.insert(key, from);
                        }
                    }
                }
            }
            files.insert(module, (is_mod, code));
        }
        Folder { files, exported }
    }

    /// The file a path from the folder's root names, through re-exports; `None` for
    /// the folder's own `mod.rs` or what lies outside.
    fn file_of(&self, path: &[String]) -> Option<Vec<String>> {
        for k in (1..=path.len()).rev() {
            let prefix = &path[..k];
            if let Some((is_mod, _)) = self.files.get(prefix) {
                if *is_mod && k < path.len() {
                    let mut key = prefix.to_vec();
                    key.push(path[k].clone());
                    if let Some(from) = self.exported.get(&key) {
                        let mut next = from.clone();
                        next.extend(path[k + 1..].iter().cloned());
                        return self.file_of(&next);
                    }
                }
                return Some(prefix.to_vec());
            }
            if let Some(from) = self.exported.get(prefix) {
                let mut next = from.clone();
                next.extend(path[k..].iter().cloned());
                return self.file_of(&next);
            }
        }
        None
    }

    /// Which files each file uses, a folder's `mod.rs` and its own files apart (the
    /// tree Rust's modules make).
    fn uses(&self, kind: &str) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
        let own = format!("crate::workload::{kind}::");
        let mut uses = BTreeMap::new();
        for (module, (_, code)) in self.files.iter().filter(|(m, _)| !m.is_empty()) {
            let named = named_after(code, "super::")
                .map(|(supers, path)| {
                    let mut from = module[..module.len().saturating_sub(supers)].to_vec();
                    from.extend(path);
                    from
                })
                .chain(named_after(code, &own).map(|(_, path)| path));
            let set: &mut BTreeSet<Vec<String>> = uses.entry(module.clone()).or_default();
            for path in named {
                if let Some(file) = self.file_of(&path) {
                    let nested = file.starts_with(module) || module.starts_with(&file);
                    if !file.is_empty() && !nested {
                        set.insert(file);
                    }
                }
            }
        }
        uses
    }
}

/// A circle in `uses`, if there is one, as the files around it.
fn circle(uses: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<String>> {
    fn visit(
        at: &Vec<String>,
        uses: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        path: &mut Vec<Vec<String>>,
        done: &mut BTreeSet<Vec<String>>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|p| p == at) {
            return Some(
                path[start..]
                    .iter()
                    .chain([at])
                    .map(|m| m.join("/"))
                    .collect(),
            );
        }
        if !done.insert(at.clone()) {
            return None;
        }
        path.push(at.clone());
        for next in uses.get(at).into_iter().flatten() {
            if let Some(found) = visit(next, uses, path, done) {
                return Some(found);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    uses.keys()
        .find_map(|start| visit(start, uses, &mut Vec::new(), &mut done))
}

#[test]
fn no_files_of_a_kind_folder_use_each_other_in_a_circle() {
    let workload = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/workload");
    let mut circles = Vec::new();
    for kind in modules("workload") {
        let root = workload.join(&kind);
        if !root.is_dir() {
            continue;
        }
        if let Some(found) = circle(&Folder::read(&root).uses(&kind)) {
            circles.push(format!("{kind}: {}", found.join(" -> ")));
        }
    }
    assert!(
        circles.is_empty(),
        "files that use each other in a circle: {circles:#?}"
    );
}

/// The longest a function of src/ may be, in lines from `fn` to its closing brace.
const MOST_LINES: usize = 80;

#[test]
fn no_function_of_src_is_over_eighty_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut long = Vec::new();
    for (file, _) in code_files(&src) {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text
            .lines()
            .take_while(|l| !l.starts_with("#[cfg(test)]"))
            .collect();
        for (n, line) in lines.iter().enumerate() {
            let code = line.trim_start();
            let indent = &line[..line.len() - code.len()];
            let words: Vec<&str> = code.split_whitespace().collect();
            let Some(at) = words.iter().position(|w| *w == "fn") else {
                continue;
            };
            let before_fn = &words[..at];
            let a_fn = before_fn.iter().all(|w| {
                w.starts_with("pub") || ["const", "async", "unsafe", "extern"].contains(w)
            });
            if !a_fn || code.trim_end().ends_with(';') {
                continue;
            }
            let close = format!("{indent}}}");
            let end = lines[n..].iter().position(|l| l.trim_end() == close);
            if let Some(end) = end.filter(|end| end + 1 > MOST_LINES) {
                let name = words
                    .get(at + 1)
                    .map_or("", |w| w.split(['(', '<']).next().unwrap_or(w));
                long.push(format!(
                    "{}:{} {name}: {} lines",
                    file.strip_prefix(&src).unwrap().display(),
                    n + 1,
                    end + 1
                ));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MOST_LINES} lines: {long:#?}"
    );
}
