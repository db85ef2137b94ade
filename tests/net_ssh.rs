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
