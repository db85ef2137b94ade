use std::fs::File;
use std::path::{Path, PathBuf};

use super::*;

/// Writes then reads back `blocks` blocks of `block` bytes, one slot's buffer each.
struct Blocks {
    path: PathBuf,
    file: File,
    op: Op,
    block: usize,
    blocks: u64,
    next: u64,
    bufs: Vec<Vec<u8>>,
    moved: u64,
    reaped: Vec<u64>,
}

impl Blocks {
    fn new(path: &Path, op: Op, block: usize, blocks: u64, slots: usize) -> Blocks {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .unwrap();
        Blocks {
            path: path.to_path_buf(),
            file,
            op,
            block,
            blocks,
            next: 0,
            bufs: (0..slots).map(|_| vec![0; block]).collect(),
            moved: 0,
            reaped: Vec::new(),
        }
    }
}

impl Source for Blocks {
    fn path(&self) -> &Path {
        &self.path
    }

    fn next(&mut self, slot: usize, _since: Instant) -> Option<Request> {
        if self.next == self.blocks {
            return None;
        }
        let index = self.next;
        self.next += 1;
        let buf = &mut self.bufs[slot];
        if self.op == Op::Write {
            buf.fill(index as u8 + 1);
        }
        Some(Request::whole(
            self.op,
            &self.file,
            index * self.block as u64,
            buf.as_mut_ptr(),
            self.block,
        ))
    }

    fn done(&mut self, slot: usize, request: &Request, moved: usize, _reaped: Instant) {
        let index = request.offset / self.block as u64;
        if self.op == Op::Read {
            assert!(self.bufs[slot].iter().all(|&b| b == index as u8 + 1));
        }
        self.moved += moved as u64;
        self.reaped.push(index);
    }
}

fn engines() -> Vec<Engine> {
    let mut engines = vec![Engine::sync()];
    // Where io_uring is refused altogether (a sandbox's seccomp) the sync engine stands.
    if let Ok(ring) = Engine::uring(8, "a unit test") {
        engines.push(ring);
    }
    engines
}

#[test]
fn both_back_ends_write_and_read_every_block_once() {
    let dir = tempfile::tempdir().unwrap();
    for (n, mut engine) in engines().into_iter().enumerate() {
        let path = dir.path().join(format!("f{n}"));
        let slots = engine.depth();
        let mut writes = Blocks::new(&path, Op::Write, 4096, 100, slots);
        engine.run(&mut writes, &Cancel::default()).unwrap();
        assert_eq!(writes.moved, 100 * 4096);
        let mut reads = Blocks::new(&path, Op::Read, 4096, 100, slots);
        engine.run(&mut reads, &Cancel::default()).unwrap();
        reads.reaped.sort_unstable();
        assert_eq!(reads.reaped, (0..100).collect::<Vec<_>>());
    }
}

#[test]
fn a_read_past_the_end_is_named_short_with_its_byte() {
    let dir = tempfile::tempdir().unwrap();
    for (n, mut engine) in engines().into_iter().enumerate() {
        let path = dir.path().join(format!("g{n}"));
        let bytes: Vec<u8> = (0..10_000).map(|i| (i / 4096 + 1) as u8).collect();
        std::fs::write(&path, bytes).unwrap();
        let mut reads = Blocks::new(&path, Op::Read, 4096, 3, engine.depth());
        let e = engine.run(&mut reads, &Cancel::default()).unwrap_err();
        let words = format!("{:#}", anyhow::Error::from(e));
        assert!(words.contains("short read at byte 10000"), "{words}");
    }
}

#[test]
fn a_failed_request_is_named_with_its_errno_offset_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ro");
    std::fs::write(&path, [0u8; 8192]).unwrap();
    for mut engine in engines() {
        // A descriptor opened for reading only: every write fails with EBADF.
        let mut writes = Blocks::new(&path, Op::Write, 4096, 2, engine.depth());
        writes.file = File::open(&path).unwrap();
        let e = engine.run(&mut writes, &Cancel::default()).unwrap_err();
        let words = format!("{:#}", anyhow::Error::from(e));
        assert!(words.starts_with("cannot write "), "{words}");
        assert!(words.contains(&path.display().to_string()), "{words}");
        assert!(
            words.contains("at byte 0") || words.contains("at byte 4096"),
            "{words}"
        );
        assert!(words.contains("Bad file descriptor"), "{words}");
    }
    let full = fault::failed(Op::Write, &path, 1 << 20, libc::ENOSPC);
    let words = format!("{:#}", anyhow::Error::from(full));
    assert!(
        words.contains("at byte 1048576") && words.contains("the filesystem is full (ENOSPC)"),
        "{words}"
    );
}

#[test]
fn a_cancel_stops_the_requests_and_says_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    for mut engine in engines() {
        let cancel = Cancel::default();
        cancel.stop();
        let mut writes = Blocks::new(&dir.path().join("c"), Op::Write, 4096, 10, engine.depth());
        let e = engine.run(&mut writes, &cancel).unwrap_err();
        assert!(matches!(e, Error::Interrupted), "{e}");
    }
}

#[test]
fn a_completion_is_whole_partial_short_or_failed() {
    let request = Request {
        op: Op::Read,
        fd: 0,
        offset: 0,
        buf: std::ptr::null_mut(),
        len: 8192,
        expect: 6000,
        short_ends: false,
    };
    assert_eq!(Reaped::of(&request, 0, 8192), Reaped::Whole(8192));
    assert_eq!(Reaped::of(&request, 0, 6000), Reaped::Whole(6000));
    assert_eq!(Reaped::of(&request, 0, 4096), Reaped::Partial(4096));
    assert_eq!(Reaped::of(&request, 4096, 0), Reaped::Short(4096));
    assert_eq!(Reaped::of(&request, 0, -28), Reaped::Failed(28));
    let direct = Request {
        short_ends: true,
        ..request
    };
    assert_eq!(Reaped::of(&direct, 0, 4096), Reaped::Short(4096));
    let rest = request.rest(4096);
    assert_eq!((rest.offset, rest.len, rest.expect), (4096, 4096, 1904));
}
