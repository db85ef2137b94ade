//! The password file of PostgreSQL's clients (`~/.pgpass`, or `$PGPASSFILE`), read as
//! libpq reads it, so a shared store needs no password on the command line. No crate
//! reads it; the format is five fields a line (libpq's "The Password File").

use std::path::{Path, PathBuf};

/// What a connection is to, as a password file line is matched against it.
#[derive(Debug, Clone, PartialEq)]
pub struct Wanted<'a> {
    /// The host name, or `localhost` for a Unix socket.
    pub host: &'a str,
    /// The port, as text.
    pub port: &'a str,
    /// The database.
    pub database: &'a str,
    /// The user.
    pub user: &'a str,
}

/// The password of the first line of `text` that matches `wanted` (`*` matches any
/// value; `\:` and `\\` are a colon and a backslash; `#` begins a comment line).
pub fn find(text: &str, wanted: &Wanted<'_>) -> Option<String> {
    text.lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .filter_map(fields)
        .find(|f| {
            let matches = |field: &str, value: &str| field == "*" || field == value;
            matches(&f[0], wanted.host)
                && matches(&f[1], wanted.port)
                && matches(&f[2], wanted.database)
                && matches(&f[3], wanted.user)
        })
        .map(|f| f[4].clone())
}

/// The five fields of a line, unescaped; `None` for a line with fewer.
fn fields(line: &str) -> Option<[String; 5]> {
    let mut out: Vec<String> = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    out.last_mut()?.push(next);
                }
            }
            // The password is the rest of the line, colons and all.
            ':' if out.len() < 5 => out.push(String::new()),
            c => out.last_mut()?.push(c),
        }
    }
    out.try_into().ok()
}

/// The password file to read: `$PGPASSFILE`, else `~/.pgpass`.
pub fn location() -> Option<PathBuf> {
    match std::env::var_os("PGPASSFILE") {
        Some(file) if !file.is_empty() => Some(PathBuf::from(file)),
        _ => dirs::home_dir().map(|home| home.join(".pgpass")),
    }
}

/// The password file's text, unless it is missing or others may read it (libpq ignores
/// such a file too, and says so).
pub fn read(path: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).ok()?;
    if meta.permissions().mode() & 0o077 != 0 {
        crate::vocab::width::say(
            "ratelab: warning: ",
            &format!(
                "password file {} has group or world access and is ignored (chmod 0600 it)",
                path.display()
            ),
        );
        return None;
    }
    std::fs::read_to_string(path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const WANTED: Wanted<'static> = Wanted {
        host: "db.lab",
        port: "5432",
        database: "ratelab",
        user: "ann",
    };

    #[test]
    fn the_first_matching_line_gives_the_password() {
        let text = "# comment\n\
                    other:5432:ratelab:ann:no\n\
                    db.lab:5432:*:ann:first\n\
                    *:*:*:*:second\n";
        assert_eq!(find(text, &WANTED).as_deref(), Some("first"));
        assert_eq!(
            find(
                text,
                &Wanted {
                    user: "bob",
                    ..WANTED
                }
            )
            .as_deref(),
            Some("second")
        );
        assert_eq!(find("db.lab:5432:ratelab:ann\n", &WANTED), None);
    }

    #[test]
    fn escapes_and_colons_in_the_password_survive() {
        let text = "db\\:lab:5432:ratelab:ann:a\\:b\\\\c:d\n";
        let wanted = Wanted {
            host: "db:lab",
            ..WANTED
        };
        assert_eq!(find(text, &wanted).as_deref(), Some("a:b\\c:d"));
    }
}
