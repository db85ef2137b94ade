#!/usr/bin/env python3
"""Measuring helpers for bench/why-vs-perf, each printing one JSON object:

  measure.py run -- CMD...              wall and CPU seconds of CMD (its rusage)
  measure.py why BIN OUT -- CMD...      `BIN why --json --no-store --out OUT -- CMD`:
                                        why's answer, and ratelab's own CPU (all its
                                        threads, in clock ticks, not what it reaped)
  measure.py kernel DATA ROOT           the kernel's record in perf.data DATA of the tree
                                        under pid ROOT: the process (by name) with most
                                        CPU, its share of the root's wall, and the kind
                                        of wait it spent most time off the CPUs in

The kernel's record is read as tests/common/judge.rs reads it (shared/WHY.md, "The
kernel's own record"): a timehist line's wait time belongs to the thread's previous
switch-out, whose state and stack say what it was.
"""
import json
import os
import re
import subprocess
import sys
import time


def spawn(argv):
    """Starts argv with its stdout and stdin elsewhere: this one's stdout is the result."""
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL).pid


def run(argv):
    start = time.monotonic()
    pid = spawn(argv)
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - start
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "status": os.waitstatus_to_exitcode(status)}


def proc_times(pid):
    """(own, reaped children's) CPU seconds of pid, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return ((int(fields[11]) + int(fields[12])) / tick,
            (int(fields[13]) + int(fields[14])) / tick)


def why(binary, out, argv):
    start = time.monotonic()
    pid = spawn([binary, "why", "--json", "--no-store", "--out", out, "--"] + argv)
    # Its own CPU, all its threads, read from its zombie before it is reaped: the
    # rusage of a reaped ratelab also holds the command it reaped.
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    wall = time.monotonic() - start
    own = proc_times(pid)[0]
    os.wait4(pid, 0)
    doc = json.load(open(out))
    work = doc["workloads"][0]
    limit = work["summary"]["limiting"]
    return {"wall_s": wall, "ratelab_cpu_s": own,
            "sampler_cpu_s": work["context"]["sampler_cpu_seconds"],
            "command_wall_s": work["context"]["wall_s"],
            "step": limit["step"], "where": limit["where"], "share": limit["share"],
            "speedup_if_free": limit.get("speedup_if_free"),
            "speedup_if_free_with_cpu": limit.get("speedup_if_free_with_cpu", "absent")}


KINDS = [
    ("disk", re.compile(r"^(io_schedule|folio_wait|wait_on_page|__lock_page|jbd2|blk_|xlog_"
                        r"|xfs_log_force|bit_wait_io$|__wait_on_buffer$|submit_bio_wait$"
                        r"|wb_wait_for_completion$|balance_dirty_pages$|rq_qos_wait$"
                        r"|wbt_wait$|__iomap_dio_rw$)")),
    ("pipe", re.compile(r"^(anon_pipe_read|anon_pipe_write|pipe_read|pipe_write|pipe_wait)")),
    ("futex", re.compile(r"^futex_")),
    ("child", re.compile(r"^(do_wait|kernel_wait4)$")),
    ("socket", re.compile(r"^(sk_wait_data|sk_stream_wait_memory|inet_csk_accept"
                          r"|__skb_wait_for_more_packets|sock_alloc_send_pskb|unix_stream_)")),
    ("timer", re.compile(r"^(do_nanosleep|hrtimer_nanosleep)$")),
    ("poll", re.compile(r"^(do_poll|do_select|ep_poll|do_epoll_wait|poll_schedule_timeout"
                        r"|do_sys_poll)$")),
    ("signal", re.compile(r"^(do_sigtimedwait|sys_pause|__do_sys_pause|do_signal_stop)$")),
]


def kind_of(stack):
    names = [re.split(r"[.+ ]", f)[0] for f in stack]
    socket = any(n.startswith(("tcp_", "inet_", "sk_")) for n in names)
    for name in names:
        if name == "wait_woken" and socket:
            return "socket"
        for kind, pattern in KINDS:
            if pattern.search(name):
                return kind
    return "other"


LINE = re.compile(r"^\s*(\d+\.\d+)\s+\[\d+\]\s+(.*?)\[(\d+)(?:/(\d+))?\]\s+([\d.]+)\s+([\d.]+)"
                  r"\s+([\d.]+)\s+(\S)\s*(.*)$")


def kernel(data, root):
    events = subprocess.run(["perf", "script", "-i", data, "--show-task-events", "-G",
                             "-F", "comm,tid,time"], capture_output=True, text=True).stdout
    parent, name, exited = {}, {}, None
    for line in events.splitlines():
        m = re.search(r"([\d.]+): PERF_RECORD_FORK\((\d+):\d+\):\((\d+):\d+\)", line)
        if m and m.group(2) != m.group(3):
            parent[int(m.group(2))] = int(m.group(3))
        m = re.search(r"PERF_RECORD_COMM(?: exec)?: (.*):(\d+)/(\d+)$", line)
        if m and m.group(2) == m.group(3):
            name[int(m.group(2))] = m.group(1)
        m = re.search(r"([\d.]+): PERF_RECORD_EXIT\((\d+):(\d+)\)", line)
        if m and int(m.group(2)) == root and m.group(2) == m.group(3):
            exited = float(m.group(1))

    def in_tree(pid):
        for _ in range(64):
            if pid == root:
                return True
            if pid not in parent:
                return False
            pid = parent[pid]
        return False

    timehist = subprocess.run(["perf", "sched", "timehist", "-i", data, "--state", "-g",
                               "--max-stack", "16"], capture_output=True, text=True).stdout
    last, cpu, off, start, end = {}, {}, {}, None, None
    for line in timehist.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        t, _, tid, pid = float(m.group(1)), m.group(2), int(m.group(3)), m.group(4)
        pid = int(pid) if pid else tid
        if tid == 0 or not in_tree(pid):
            continue
        wait, delay, ran = (float(m.group(i)) / 1000 for i in (5, 6, 7))
        state, stack = m.group(8), [f for f in m.group(9).split(" <- ") if f]
        who = name.get(pid, m.group(2))
        if pid == root:
            start = t - ran if start is None else min(start, t - ran)
            end = t if state in "XZ" else end
        cpu[who] = cpu.get(who, 0.0) + ran
        previous = last.get(tid)
        if previous and previous[0] not in "RWp":
            kinds = off.setdefault(who, {})
            kinds[previous[1]] = kinds.get(previous[1], 0.0) + max(wait - delay, 0.0)
        last[tid] = (state, kind_of(stack))
    end = max(e for e in (exited, end) if e is not None)
    wall = end - start
    top = max(cpu, key=cpu.get)
    kinds = off.get(top, {"other": 0.0})
    kind = max(kinds, key=kinds.get)
    return {"wall_s": wall, "top": top, "top_cpu_s": cpu[top], "top_share": cpu[top] / wall,
            "top_kind": kind, "top_kind_s": kinds[kind]}


def main():
    verb = sys.argv[1]
    if verb == "run":
        result = run(sys.argv[3:])
    elif verb == "why":
        result = why(sys.argv[2], sys.argv[3], sys.argv[5:])
    elif verb == "kernel":
        result = kernel(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(f"measure.py: unknown verb {verb}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
