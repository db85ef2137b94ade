//! `ratelab run FILE.toml`: errors name the line and the field, and a workload that
//! fails mid-run stops the others cleanly, with the run stored incomplete.

mod common;

use common::{disk_tempdir, entries, ratelab, refused, stored_run, wait_for_work_folder};

fn scenario(dir: &std::path::Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("scenario.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn scenario_errors_name_the_line_and_the_field() {
    let dir = disk_tempdir();
    let target = dir.path().display();
    for (text, expect) in [
        (
            format!("[[workload]]\nkind = \"disk\"\ntarget = \"{target}\"\nsizez = \"1M\"\n"),
            "line 4: unknown field \"sizez\" for a disk workload",
        ),
        (
            format!("[[workload]]\nkind = \"gpu\"\ntarget = \"{target}\"\n"),
            "line 2: unknown kind \"gpu\" (kinds: disk, iops, net)",
        ),
        (
            format!("[[workload]]\nkind = \"disk\"\ntarget = \"{target}\"\n\nsizes = \"1M,10Q\"\n"),
            "line 5: field sizes: ",
        ),
    ] {
        let file = scenario(dir.path(), &text);
        let message = refused(
            ratelab().arg("run").arg(&file).arg("--no-store"),
            2,
            &[expect],
        );
        assert!(message.contains("scenario.toml"), "{message}");
    }
    assert_eq!(entries(dir.path()), vec!["scenario.toml".to_string()]);
}

#[test]
fn a_workload_that_fails_stops_the_others_and_the_run_is_incomplete() {
    let dir = disk_tempdir();
    let (steady, failing) = (dir.path().join("steady"), dir.path().join("failing"));
    std::fs::create_dir(&steady).unwrap();
    std::fs::create_dir(&failing).unwrap();
    let db = dir.path().join("results.db");
    let file = scenario(
        dir.path(),
        &format!(
            "[[workload]]\nkind = \"disk\"\ntarget = \"{}\"\nsizes = \"256M,256M,256M\"\ndirect = true\n\
             block_size = \"4K\"\nphase = \"write\"\n\n\
             [[workload]]\nkind = \"disk\"\ntarget = \"{}\"\nsizes = \"32M,32M,32M,32M,32M,32M\"\n\
             direct = true\nblock_size = \"4K\"\nphase = \"write\"\n",
            steady.display(),
            failing.display()
        ),
    );
    let child = ratelab()
        .arg("run")
        .arg(&file)
        .args(["-q", "--db"])
        .arg(&db)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_work_folder(&failing);
    // Someone removes the second workload's folder: its next file cannot be created.
    for entry in entries(&failing) {
        std::fs::remove_dir_all(failing.join(entry)).unwrap();
    }
    let output = child.wait_with_output().unwrap();
    let message = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{message}");
    assert!(
        message.contains("disk workload 2") && message.contains("stored as incomplete"),
        "{message}"
    );
    assert!(
        entries(&steady).is_empty(),
        "the stopped workload left {:?}",
        entries(&steady)
    );
    let doc = stored_run(&db, 1);
    assert_eq!(doc["status"], "incomplete");
    assert!(
        doc["incomplete_reason"]
            .as_str()
            .unwrap()
            .contains("disk workload 2"),
        "{}",
        doc["incomplete_reason"]
    );
}
