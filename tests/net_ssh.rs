//! `ratelab net HOST --ssh`: the server started over ssh on a namespace host with a key
//! made for the one test, no server started by hand, the link's goodput limit reached,
//! and nothing left running there. These need root; without it they say why they skip.

mod common;

use common::ssh_hosts::Hosts;
use common::{ratelab, root_or_skip, run_json};

#[test]
fn net_over_ssh_starts_its_own_server_and_reaches_the_goodput_limit() {
    let test = "net_over_ssh_starts_its_own_server_and_reaches_the_goodput_limit";
    if !root_or_skip(test, "it makes a network namespace with its own sshd") {
        return;
    }
    let _lock = common::rig::exclusive();
    let hosts = Hosts::new(1, &[]);
    hosts.shape(0, "2gbit");
    let address = hosts.addresses[0].clone();
    let doc = run_json(
        ratelab()
            .env("RATELAB_SSH", hosts.ssh())
            .args(["net", &address, "--ssh", &hosts.destination(0)])
            .args([
                "-t",
                "4",
                "--link-rate",
                "2Gbit/s",
                "--json",
                "--no-store",
                "-q",
            ]),
    );
    assert_eq!(doc["status"], "complete");
    let summary = &doc["workloads"][0]["summary"];
    let share = summary["share_of_goodput_limit"].as_f64().unwrap();
    eprintln!("received at {share:.3} of the goodput limit");
    assert!(share >= 0.97, "{share}: {summary}");
    assert!(share <= 1.03, "{share}: {summary}");
    // The far end's figures came back through the test's protocol.
    assert!(
        doc["workloads"][0]["summary"]["cpu"]["remote_fraction"].is_number(),
        "{summary}"
    );
    // The server served its one test and is gone.
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        hosts.ratelab_processes(0).is_empty(),
        "a server is left on the host"
    );
    // The key never stood on a command line: it is not in the client's arguments either.
    assert!(
        !doc["workloads"][0]["params"]
            .to_string()
            .contains("key\":\"")
    );
}

#[test]
fn a_scenario_starts_its_far_end_over_ssh_beside_a_disk_workload() {
    let test = "a_scenario_starts_its_far_end_over_ssh_beside_a_disk_workload";
    if !root_or_skip(test, "it makes a network namespace with its own sshd") {
        return;
    }
    let _lock = common::rig::exclusive();
    let hosts = Hosts::new(1, &[]);
    hosts.shape(0, "2gbit");
    let dir = common::disk_tempdir();
    let scenario = dir.path().join("copy.toml");
    std::fs::write(
        &scenario,
        format!(
            "[[workload]]\nkind = \"disk\"\ntarget = \"{}\"\nsizes = \"64M,64M\"\nphase = \"write\"\n\n\
             [[workload]]\nkind = \"net\"\ntarget = \"{}\"\nssh = \"{}\"\ntime = \"2s\"\nlink_rate = \"2Gbit/s\"\n",
            dir.path().display(),
            hosts.addresses[0],
            hosts.destination(0)
        ),
    )
    .unwrap();
    let doc = run_json(
        ratelab()
            .env("RATELAB_SSH", hosts.ssh())
            .arg("run")
            .arg(&scenario)
            .args(["--json", "--no-store", "-q"]),
    );
    assert_eq!(doc["status"], "complete");
    let net = &doc["workloads"][1];
    assert_eq!(net["params"]["ssh"], hosts.destination(0));
    assert_eq!(net["params"]["key"], true);
    let share = net["summary"]["share_of_goodput_limit"].as_f64().unwrap();
    assert!(share >= 0.9, "{share}");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        hosts.ratelab_processes(0).is_empty(),
        "a server is left on the host"
    );
}
