#!/usr/bin/env bash
# catch.sh: the proof that the rig tests can fail. Builds ratelab with the `catch`
# feature (src/catch.rs), which multiplies one family of figures at its source by a
# factor read from RATELAB_CATCH, then runs the tests named for that family with the
# family's figures 20% low (0.8) and then 20% high (1.2), and prints every test that
# still passed. The list it ends with should be empty: a test named for a figure that
# passes with the figure 20% off proves nothing about it.
#
# Usage: tests/catch.sh [FAMILY...]      (default: every family below)
# Runs as the suite does (CI=1, as root for the rigs); about 40 minutes on 2 cores.
# Its own build goes to target/catch, so the ordinary build and suite are untouched;
# each run's output is kept in target/catch/logs/FAMILY-FACTOR-BINARY.log.
set -Eeuo pipefail
cd "$(dirname "$0")/.."

# FAMILY: the tests named for it, as BINARY::TEST.
declare -A TESTS=(
    [storage]="
        disk_rig::direct_figures_match_the_rig_rate_with_both_engines
        disk_rig::buffered_fsync_writes_match_fio
        side_by_side::two_folders_on_one_device_share_it_as_fio_jobs_do
        side_by_side::two_devices_with_their_own_limits_keep_their_own_rates
        side_by_side::a_limit_changed_mid_run_gives_one_knee_where_it_changed
        image_rig::containers_on_a_slow_disk_stay_under_its_limit_and_prove_every_layer_evicted
        net_rig::a_scenario_runs_net_and_disk_together_on_one_clock"
    [iops]="
        iops::random_4k_on_an_iops_limited_disk_is_the_limit_and_what_fio_measures
        iops::sequential_1m_on_a_bandwidth_limited_disk_is_the_limit
        iops::a_write_rate_that_drops_mid_test_is_called_a_knee"
    [latency]="
        iops::random_4k_on_an_iops_limited_disk_is_the_limit_and_what_fio_measures"
    [net]="
        net_rig::net_reaches_the_goodput_limit_of_a_shaped_link_and_reports_the_mss
        net_iperf3::net_iperf3_agrees_with_iperf3_c_on_a_shaped_link
        net_iperf3::net_iperf3_runs_its_tests_against_the_newest_iperf3_s_and_both_ends_agree
        net_serve_iperf3::every_release_runs_its_tests_against_net_serve_and_both_ends_agree
        net_serve_iperf3::a_test_of_bytes_on_a_shaped_link_is_measured_as_iperf3s_server_measures_it"
    [cpu]="
        cpu::the_int_loop_runs_as_fast_as_its_c_twin"
    [scale]="
        scale::runs_held_by_affinity_are_timed_as_their_own_clocks_say_and_sleep_does_not_speed_up
        scale::a_cpu_quota_holds_a_command_as_a_vm_of_that_many_vcpus"
    [task]="
        task::a_throttled_destination_makes_write_the_limit
        task::a_throttled_source_makes_read_the_measured_limit"
    [task_what_if]="
        task::decompressing_between_two_throttles_gains_by_freeing_write_what_their_rates_say"
    [why]="
        why::a_compressor_is_limited_by_its_cpu_alone_and_in_a_pipeline
        why::a_compressor_sharing_its_cpu_with_yes_waits_for_it_and_names_yes
        why_rig::a_reader_of_a_throttled_disk_is_limited_by_it_and_set_against_its_run
        why_rig::direct_and_buffered_writers_of_a_throttled_disk_are_limited_by_it
        why_rig::a_pipeline_from_a_throttled_disk_is_limited_by_its_slower_step
        why_rig::an_iperf3_sender_over_a_shaped_link_is_limited_by_sending_to_its_peer
        why_corpus::make_of_a_c_project_is_limited_by_the_compilers_cpu
        why_corpus::python_threads_under_the_gil_are_limited_by_one_cpu
        why_corpus::git_gc_of_a_clone_is_limited_by_gits_cpu
        why_corpus::sqlite_commits_on_a_throttled_disk_are_limited_by_its_writes
        why_corpus::sort_spilling_to_a_throttled_disk_is_limited_by_what_an_unthrottled_run_confirms
        why_corpus::curl_over_a_shaped_link_is_limited_by_receiving_at_its_rate"
    [why_what_if]="
        why_what_if::a_reader_of_a_throttled_disk_is_measured_limited_by_it_and_not_by_its_cpu
        why_what_if::a_compressor_of_a_cached_file_is_measured_limited_by_its_cpu
        why_what_if::a_pipeline_from_a_throttled_disk_is_measured_limited_by_the_read
        why_what_if::make_of_a_c_project_is_measured_limited_by_its_cpu
        why_what_if::sqlite_commits_are_measured_limited_by_the_disk_s_writes_and_the_forecast_holds
        why_what_if::a_sender_then_receiver_over_a_shaped_link_is_measured_half_limited_by_each_way"
)
ORDER=(storage iops latency net cpu scale task task_what_if why why_what_if)
FACTORS=(0.8 1.2)

families=("$@")
[[ ${#families[@]} -gt 0 ]] || families=("${ORDER[@]}")
for family in "${families[@]}"; do
    [[ -n ${TESTS[$family]:-} ]] || { echo "catch.sh: no family \"$family\" (${ORDER[*]})" >&2; exit 2; }
done

TARGET=target/catch
LOGS=$TARGET/logs
mkdir -p "$LOGS"
export CI=1
cargo test --release --features catch --target-dir "$TARGET" --no-run --quiet

survivors=()
for family in "${families[@]}"; do
    # The binaries of the family, in the order first named.
    binaries=()
    for entry in ${TESTS[$family]}; do
        binary=${entry%%::*}
        [[ " ${binaries[*]} " == *" $binary "* ]] || binaries+=("$binary")
    done
    for factor in "${FACTORS[@]}"; do
        for binary in "${binaries[@]}"; do
            names=()
            for entry in ${TESTS[$family]}; do
                [[ ${entry%%::*} == "$binary" ]] && names+=("${entry#*::}")
            done
            log=$LOGS/$family-$factor-$binary.log
            echo "catch.sh: $family x$factor: $binary (${#names[@]} tests)" >&2
            RATELAB_CATCH="$family:$factor" cargo test --release --features catch \
                --target-dir "$TARGET" --test "$binary" -- --exact "${names[@]}" \
                >"$log" 2>&1 || true
            for name in "${names[@]}"; do
                # What it failed on: the line after its panic.
                why=$(grep -A1 "^thread '$name' .*panicked" "$log" | sed -n 2p | cut -c1-160 || true)
                if grep -q "^test $name \.\.\. ok" "$log"; then
                    survivors+=("$family x$factor: $binary::$name")
                    echo "    passed: $name" >&2
                elif ! grep -q "^test $name \.\.\. FAILED" "$log"; then
                    survivors+=("$family x$factor: $binary::$name (did not run: see $log)")
                    echo "    did not run: $name" >&2
                elif [[ $why == *"would be skipped"* || $why == *"every try was disturbed"* ]]; then
                    # A skip or a machine too busy to judge is not a figure caught.
                    survivors+=("$family x$factor: $binary::$name (not checked: $why)")
                    echo "    not checked: $name: $why" >&2
                else
                    echo "    caught: $name: $why" >&2
                fi
            done
        done
    done
done

echo
if [[ ${#survivors[@]} -eq 0 ]]; then
    echo "catch.sh: every test failed with its family's figures 20% off (${families[*]})"
else
    echo "catch.sh: ${#survivors[@]} still passed with their family's figures 20% off:"
    printf '  %s\n' "${survivors[@]}"
    exit 1
fi
