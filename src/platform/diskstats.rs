//! Bytes a block device has written, from /proc/diskstats: what a layer below a
//! filesystem really wrote, against what was written above it (write amplification).

use std::path::Path;

/// Bytes the block device `name` (`vda`, `loop3`) has written since boot; `None` when
/// /proc/diskstats does not list it.
pub fn bytes_written(name: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/diskstats").ok()?;
    written_in(&text, name)
}

/// The device name of a mount source (`/dev/vda1` → `vda1`), as /proc/diskstats names it.
pub fn device_name(source: &str) -> Option<String> {
    let path = Path::new(source);
    let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    resolved
        .strip_prefix("/dev")
        .ok()
        .and_then(|name| name.to_str())
        .map(str::to_string)
}

/// Bytes written by `name` in a /proc/diskstats text: its tenth field counts 512-byte
/// sectors (Documentation/admin-guide/iostats.rst), whatever the device's block size.
fn written_in(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.get(2) == Some(&name))
            .then(|| fields.get(9)?.parse::<u64>().ok())
            .flatten()
            .map(|sectors| sectors * 512)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sectors_written_are_read_from_the_tenth_field() {
        let text = "   7       0 loop0 10 0 80 1 5 0 40 2 0 3 3 0 0 0 0 0 0\n \
                    253       0 vda 900 12 54000 300 700 80 123456 900 0 800 1200 0 0 0 0 0 0\n";
        assert_eq!(written_in(text, "vda"), Some(123456 * 512));
        assert_eq!(written_in(text, "loop0"), Some(40 * 512));
        assert_eq!(written_in(text, "sdb"), None);
    }
}
