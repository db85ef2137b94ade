//! Scenario files: TOML that lists workloads of any kind to run side by side. Each
//! workload's fields are its verb's own flags (`sizes = "1G"` is `--sizes 1G`), parsed
//! by the same clap definitions, so a flag is defined once; errors name the line and
//! the field.

use std::path::Path;
use std::time::Duration;

use clap::Parser;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::{Cli, Command};
use crate::exit::UsageError;
use crate::workload::Workload;

/// A kind a scenario can run: its name (also its verb's) and how a parsed command line
/// of that verb becomes a workload maker for one target.
#[derive(Clone, Copy)]
pub struct ScenarioKind {
    /// The kind's name, which is its verb's.
    pub name: &'static str,
    /// Makes the maker from the verb's parsed command and the target; `None` for a command
    /// of another verb, an error in words for values that do not go together.
    pub make: fn(Command, &str) -> Option<Result<Maker, String>>,
}
/// Run-level settings a scenario may hold besides its workloads.
const SETTINGS: [&str; 4] = ["interval", "alone", "label", "workload"];
/// Workload fields that are not flags of the kind's verb.
const OWN_FIELDS: [&str; 3] = ["kind", "target", "start_delay"];
/// Words clap knows that are not fields of a workload.
const NOT_FIELDS: [&str; 2] = ["help", "version"];
/// Flags of the run, not of one workload.
const RUN_FLAGS: [&str; 6] = ["json", "db", "label", "no_store", "quiet", "interval"];

/// Makes a workload from a scenario entry; given `Some(i)`, the copy run alone for `i`.
pub type Maker = Box<dyn Fn(Option<usize>) -> Box<dyn Workload>>;

/// A parsed scenario.
pub struct Scenario {
    /// One maker per workload, in file order.
    pub workloads: Vec<Maker>,
    /// Each workload's start delay.
    pub delays: Vec<Duration>,
    /// Sampling interval, if the file sets one.
    pub interval: Option<Duration>,
    /// Whether each workload runs alone first.
    pub alone: bool,
    /// The run's label, if the file sets one.
    pub label: Option<String>,
}

/// Reads and checks the scenario at `path`.
pub fn load(path: &Path) -> Result<Scenario, UsageError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("cannot read the scenario {}: {e}", path.display())))?;
    parse(&text, &path.display().to_string())
}

/// The scenario's text and name, to place an error at its line.
struct Place<'a> {
    text: &'a str,
    name: &'a str,
}

impl Place<'_> {
    /// An error at the line where `span` starts.
    fn at(&self, span: Span, message: String) -> UsageError {
        let line = self.text[..span.start.min(self.text.len())]
            .matches('\n')
            .count()
            + 1;
        UsageError(format!("{}, line {line}: {message}", self.name))
    }
}

/// Where a key or value stands in the scenario's text.
type Span = std::ops::Range<usize>;

/// Parses a scenario; `name` is how errors refer to the file.
pub fn parse(text: &str, name: &str) -> Result<Scenario, UsageError> {
    let place = Place { text, name };
    let table = DeTable::parse(text)
        .map_err(|e| UsageError(format!("{name}: {}", e.to_string().trim_end())))?;
    let mut scenario = Scenario {
        workloads: Vec::new(),
        delays: Vec::new(),
        interval: None,
        alone: false,
        label: None,
    };
    for (key, value) in table.get_ref() {
        setting(&mut scenario, key, value, &place)?;
    }
    if scenario.workloads.is_empty() {
        return Err(UsageError(format!(
            "{name}: no [[workload]] tables: nothing to run"
        )));
    }
    if scenario.alone && scenario.workloads.len() < 2 {
        return Err(UsageError(format!(
            "{name}: alone = true needs two workloads or more to compare with"
        )));
    }
    Ok(scenario)
}

/// One top-level setting of the scenario, or its list of workloads.
fn setting(
    scenario: &mut Scenario,
    key: &Spanned<std::borrow::Cow<'_, str>>,
    value: &Spanned<DeValue>,
    place: &Place,
) -> Result<(), UsageError> {
    match key.get_ref().as_ref() {
        "interval" => {
            let text = string(value).ok_or_else(|| {
                place.at(
                    value.span(),
                    "interval must be a time such as \"100ms\"".into(),
                )
            })?;
            let interval =
                super::values::parse_interval(text).map_err(|e| place.at(value.span(), e))?;
            scenario.interval = Some(interval);
        }
        "alone" => {
            scenario.alone = value
                .get_ref()
                .as_bool()
                .ok_or_else(|| place.at(value.span(), "alone must be true or false".into()))?;
        }
        "label" => {
            let label = string(value)
                .ok_or_else(|| place.at(value.span(), "label must be a string".into()))?;
            scenario.label = Some(label.to_string());
        }
        "workload" => {
            let DeValue::Array(entries) = value.get_ref() else {
                return Err(place.at(
                    value.span(),
                    "workload must be a list of [[workload]] tables".into(),
                ));
            };
            for entry in entries.iter() {
                let DeValue::Table(fields) = entry.get_ref() else {
                    return Err(place.at(
                        entry.span(),
                        "each workload must be a [[workload]] table".into(),
                    ));
                };
                let (maker, delay) = workload(fields, entry.span(), place)?;
                scenario.workloads.push(maker);
                scenario.delays.push(delay);
            }
        }
        other => {
            return Err(place.at(
                key.span(),
                format!(
                    "unknown setting \"{other}\" (settings: {})",
                    SETTINGS.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// What a `[[workload]]` table says besides its verb's flags: its kind, target and
/// start delay.
struct Head<'a> {
    kind: &'static ScenarioKind,
    target: &'a str,
    delay: Duration,
}

impl<'a> Head<'a> {
    /// Reads the kind, target and start delay of a workload table.
    fn of(fields: &'a DeTable, span: Span, place: &Place) -> Result<Head<'a>, UsageError> {
        let get = |name: &str| {
            fields
                .iter()
                .find(|(k, _)| k.get_ref().as_ref() == name)
                .map(|(_, v)| v)
        };
        let kind_value = get("kind").ok_or_else(|| {
            place.at(
                span.clone(),
                "a workload needs a kind (kind = \"disk\")".into(),
            )
        })?;
        let kind = string(kind_value).ok_or_else(|| {
            place.at(
                kind_value.span(),
                "kind must be a string such as \"disk\"".into(),
            )
        })?;
        let Some(scenario_kind) = super::SCENARIO_KINDS.iter().find(|k| k.name == kind) else {
            let names: Vec<&str> = super::SCENARIO_KINDS.iter().map(|k| k.name).collect();
            return Err(place.at(
                kind_value.span(),
                format!("unknown kind \"{kind}\" (kinds: {})", names.join(", ")),
            ));
        };
        let target_value = get("target")
            .ok_or_else(|| place.at(span.clone(), format!("a {kind} workload needs a target")))?;
        let target = string(target_value)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                place.at(
                    target_value.span(),
                    "target must be a path or a host (HOST, HOST:PORT or [IPv6]:PORT), as a string"
                        .into(),
                )
            })?;
        let delay = match get("start_delay") {
            Some(value) => {
                let text = string(value).ok_or_else(|| {
                    place.at(
                        value.span(),
                        "start_delay must be a time such as \"2s\"".into(),
                    )
                })?;
                super::values::parse_time(text)
                    .map_err(|e| place.at(value.span(), format!("field start_delay: {e}")))?
            }
            None => Duration::ZERO,
        };
        Ok(Head {
            kind: scenario_kind,
            target,
            delay,
        })
    }

    /// The command line of the kind's verb with `flags`: the target goes after "--", so
    /// no path is ever read as a flag.
    fn argv(&self, flags: &[String]) -> Vec<String> {
        let mut argv = vec!["ratelab".to_string(), self.kind.name.to_string()];
        argv.extend(flags.iter().cloned());
        argv.extend(["--".to_string(), self.target.to_string()]);
        argv
    }
}

/// One `[[workload]]` table: its maker and start delay.
fn workload(fields: &DeTable, span: Span, place: &Place) -> Result<(Maker, Duration), UsageError> {
    let head = Head::of(fields, span.clone(), place)?;
    let flags = flags(fields, &head, place)?;
    let cli = Cli::try_parse_from(head.argv(&flags))
        .map_err(|e| place.at(span.clone(), clap_message(&e)))?;
    let maker = (head.kind.make)(cli.command, head.target)
        .expect("the verb parsed is the kind's own")
        .map_err(|e| place.at(span, e))?;
    Ok((maker, head.delay))
}

/// The verb's flags a workload table's fields stand for. Each field is tried alone first,
/// so an error names its line; the caller then parses them all together.
fn flags(fields: &DeTable, head: &Head, place: &Place) -> Result<Vec<String>, UsageError> {
    let kind = head.kind.name;
    let mut flags = Vec::new();
    for (key, value) in fields.iter() {
        let field = key.get_ref().as_ref();
        if OWN_FIELDS.contains(&field) {
            continue;
        }
        if RUN_FLAGS.contains(&field) || field == "alone" {
            return Err(place.at(
                key.span(),
                format!("{field} is a setting of the whole run, not of one workload"),
            ));
        }
        if NOT_FIELDS.contains(&field) {
            return Err(place.at(
                key.span(),
                format!("unknown field \"{field}\" for a {kind} workload"),
            ));
        }
        let flag = flag_args(field, value).ok_or_else(|| {
            place.at(
                value.span(),
                format!("field {field}: give a string, a number, true or false, or a list"),
            )
        })?;
        match flag {
            Some(flag) => {
                // Alone, a field whose flag needs another (file_size needs duration)
                // misses it; that is checked with all the fields together.
                match Cli::try_parse_from(head.argv(std::slice::from_ref(&flag))) {
                    Err(e) if e.kind() != clap::error::ErrorKind::MissingRequiredArgument => {
                        return Err(place.at(key.span(), field_error(kind, field, &e)));
                    }
                    _ => {}
                }
                flags.push(flag);
            }
            // false: a switch left off; a flag that takes a value cannot be false.
            None => {
                let switch = format!("--{}", field.replace('_', "-"));
                match Cli::try_parse_from(head.argv(&[switch])) {
                    Ok(_) => {}
                    Err(e) if e.kind() == clap::error::ErrorKind::UnknownArgument => {
                        return Err(place.at(key.span(), field_error(kind, field, &e)));
                    }
                    Err(_) => {
                        return Err(place.at(
                            value.span(),
                            format!("field {field} takes a value, not false"),
                        ));
                    }
                }
            }
        }
    }
    Ok(flags)
}

/// The command-line word for one field: `--sizes=1G`, `--direct`, or, for `false`,
/// `Some(None)`; `None` for a value no flag takes. One word, so a value that starts
/// with "-" is never taken for a flag.
fn flag_args(field: &str, value: &Spanned<DeValue>) -> Option<Option<String>> {
    let flag = format!("--{}", field.replace('_', "-"));
    let text = match value.get_ref() {
        DeValue::Boolean(true) => return Some(Some(flag)),
        DeValue::Boolean(false) => return Some(None),
        DeValue::String(s) => s.to_string(),
        DeValue::Integer(i) => integer(i)?,
        DeValue::Float(f) => f.as_str().to_string(),
        DeValue::Array(items) => items
            .iter()
            .map(|item| match item.get_ref() {
                DeValue::String(s) => Some(s.to_string()),
                DeValue::Integer(i) => integer(i),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?
            .join(","),
        _ => return None,
    };
    Some(Some(format!("{flag}={text}")))
}

/// A TOML integer in decimal, whatever base the file wrote it in.
fn integer(value: &toml::de::DeInteger) -> Option<String> {
    let digits = value.as_str().replace('_', "");
    let (negative, digits) = match digits.strip_prefix('-') {
        Some(rest) => (true, rest.to_string()),
        None => (false, digits.trim_start_matches('+').to_string()),
    };
    let digits = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0o"))
        .or_else(|| digits.strip_prefix("0b"))
        .unwrap_or(&digits);
    let number = i128::from_str_radix(digits, value.radix()).ok()?;
    Some((if negative { -number } else { number }).to_string())
}

fn string<'a>(value: &'a Spanned<DeValue>) -> Option<&'a str> {
    value.get_ref().as_str()
}

/// A clap error about one field, in the scenario's words.
fn field_error(kind: &str, field: &str, error: &clap::Error) -> String {
    match error.kind() {
        clap::error::ErrorKind::UnknownArgument => {
            format!("unknown field \"{field}\" for a {kind} workload")
        }
        _ => format!("field {field}: {}", clap_message(error)),
    }
}

/// The first line of a clap error, without its "error: " prefix.
fn clap_message(error: &clap::Error) -> String {
    if error.kind() == clap::error::ErrorKind::MissingRequiredArgument
        && let Some(clap::error::ContextValue::Strings(flags)) =
            error.get(clap::error::ContextKind::InvalidArg)
    {
        let fields: Vec<String> = flags
            .iter()
            .map(|f| {
                let name = f.split_whitespace().next().unwrap_or(f);
                name.trim_start_matches('-').replace('-', "_")
            })
            .collect();
        return format!("this workload also needs {}", fields.join(", "));
    }
    let text = error.render().to_string();
    let first = text.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        match parse(text, "s.toml") {
            Ok(_) => panic!("parsed: {text}"),
            Err(e) => e.0,
        }
    }

    #[test]
    fn integers_in_any_base_and_dashed_values() {
        let scenario = parse(
            "[[workload]]\nkind = \"disk\"\ntarget = \"-odd-folder\"\nrepeat = 0x10\nqueue_depth = 0b11\n",
            "s.toml",
        )
        .unwrap_or_else(|e| panic!("{}", e.0));
        let params = (scenario.workloads[0])(None).params();
        assert_eq!(params["repeat"], 16);
        assert_eq!(params["queue_depth"], 3);
        assert_eq!(params["target"], "-odd-folder");
    }

    #[test]
    fn a_good_scenario() {
        let scenario = parse(
            "interval = \"250ms\"\nalone = true\n\n[[workload]]\nkind = \"disk\"\ntarget = \"/a\"\n\
             sizes = \"1M,2M\"\ndirect = true\n\n[[workload]]\nkind = \"disk\"\ntarget = \"/b\"\n\
             start_delay = \"2s\"\nread = [\"direct\", \"cached\"]\n",
            "s.toml",
        )
        .unwrap();
        assert_eq!(scenario.workloads.len(), 2);
        assert_eq!(
            scenario.delays,
            vec![Duration::ZERO, Duration::from_secs(2)]
        );
        assert_eq!(scenario.interval, Some(Duration::from_millis(250)));
        assert!(scenario.alone);
        let made = (scenario.workloads[0])(None);
        assert_eq!(
            made.params()["sizes_bytes"],
            serde_json::json!([1 << 20, 2 << 20])
        );
        assert_eq!((scenario.workloads[1])(Some(1)).alone_of(), Some(1));
    }

    #[test]
    fn fields_that_need_each_other_and_net_workloads() {
        let scenario = parse(
            "[[workload]]\nkind = \"disk\"\ntarget = \"/a\"\nfile_size = \"64M\"\nduration = \"5s\"\n\n\
             [[workload]]\nkind = \"net\"\ntarget = \"10.0.0.2\"\nparallel = 2\nbidir = true\nbytes = \"1G\"\n",
            "s.toml",
        )
        .unwrap_or_else(|e| panic!("{}", e.0));
        let net = (scenario.workloads[1])(None);
        assert_eq!(net.kind(), "net");
        assert_eq!(net.target(), "10.0.0.2:5301");
        let at = |target: &str| {
            let text = format!("[[workload]]\nkind = \"net\"\ntarget = \"{target}\"\n");
            let scenario = parse(&text, "s.toml").unwrap_or_else(|e| panic!("{}", e.0));
            (scenario.workloads[0])(None).target()
        };
        assert_eq!(at("10.0.0.2:5420"), "10.0.0.2:5420");
        assert_eq!(at("[::1]:5420"), "[::1]:5420");
        assert_eq!(at("::1"), "[::1]:5301");
        let twice =
            error("[[workload]]\nkind = \"net\"\ntarget = \"10.0.0.2:5420\"\nport = 5999\n");
        assert_eq!(
            twice,
            "s.toml, line 1: net workload to 10.0.0.2:5420: the port is given twice, \
             in the target (5420) and as port = 5999; give it in one place"
        );
        let bad_port = error("[[workload]]\nkind = \"net\"\ntarget = \"10.0.0.2:0\"\n");
        assert!(
            bad_port.contains("line 1") && bad_port.contains("\"10.0.0.2:0\""),
            "{bad_port}"
        );
        let params = net.params();
        assert_eq!(params["streams"], 2);
        assert_eq!(params["direction"], "bidir");
        assert_eq!(params["bytes"], 1u64 << 30);
        let alone = error("[[workload]]\nkind = \"disk\"\ntarget = \"/a\"\nfile_size = \"64M\"\n");
        assert!(alone.contains("duration"), "{alone}");
    }

    #[test]
    fn the_readme_example_parses() {
        let readme = include_str!("../../README.md");
        let start = readme
            .find("```toml\n")
            .expect("a TOML example in the README")
            + 8;
        let end = start + readme[start..].find("```").unwrap();
        let scenario =
            parse(&readme[start..end], "README.md").unwrap_or_else(|e| panic!("{}", e.0));
        assert_eq!(scenario.workloads.len(), 2);
        assert_eq!(scenario.delays[1], Duration::from_secs(2));
    }

    #[test]
    fn errors_name_the_line_and_the_field() {
        let typo = error("[[workload]]\nkind = \"disk\"\ntarget = \"/a\"\nsizez = \"1M\"\n");
        assert_eq!(
            typo,
            "s.toml, line 4: unknown field \"sizez\" for a disk workload"
        );
        let kind = error("[[workload]]\nkind = \"gpu\"\ntarget = \"/a\"\n");
        assert_eq!(
            kind,
            "s.toml, line 2: unknown kind \"gpu\" (kinds: disk, iops, net)"
        );
        let size = error("[[workload]]\nkind = \"disk\"\ntarget = \"/a\"\n\nsizes = \"10Q\"\n");
        assert!(
            size.starts_with("s.toml, line 5: field sizes: ") && size.contains("\"10Q\""),
            "{size}"
        );
        let setting = error("intervall = \"1s\"\n");
        assert!(
            setting.starts_with("s.toml, line 1: unknown setting \"intervall\""),
            "{setting}"
        );
        let syntax = error("[[workload]\n");
        assert!(syntax.contains("line 1"), "{syntax}");
        let negative = error("[[workload]]\nkind = \"disk\"\ntarget = \"/a\"\nrepeat = -1\n");
        assert!(
            negative.starts_with("s.toml, line 4: field repeat: "),
            "{negative}"
        );
        let value_false = error("[[workload]]\nkind = \"disk\"\ntarget = \"/a\"\nsizes = false\n");
        assert_eq!(
            value_false,
            "s.toml, line 4: field sizes takes a value, not false"
        );
        let inner_alone = error("[[workload]]\nkind = \"disk\"\ntarget = \"/a\"\nalone = true\n");
        assert!(
            inner_alone.contains("line 4") && inner_alone.contains("whole run"),
            "{inner_alone}"
        );
        let lonely = error("alone = true\n[[workload]]\nkind = \"disk\"\ntarget = \"/a\"\n");
        assert!(lonely.contains("two workloads"), "{lonely}");
        let empty_target = error("[[workload]]\nkind = \"disk\"\ntarget = \"\"\n");
        assert!(
            empty_target.contains("line 3") && empty_target.contains("target"),
            "{empty_target}"
        );
        let run_flag = error("[[workload]]\nkind = \"disk\"\ntarget = \"/a\"\njson = true\n");
        assert!(
            run_flag.contains("line 4") && run_flag.contains("whole run"),
            "{run_flag}"
        );
    }
}
