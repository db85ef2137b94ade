//! The machine a run was measured on: CPU, memory, kernel, hypervisor.
//!
//! Each field comes from one kernel or distribution source; a source that is
//! missing leaves the field `None`, never a made-up value.

use serde::{Deserialize, Serialize};

use super::{Roots, read_attr};

/// What the machine is, as stored with every run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Machine {
    /// Host name.
    pub hostname: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Operating system name from /etc/os-release.
    pub os: Option<String>,
    /// CPU model name.
    pub cpu_model: Option<String>,
    /// Logical CPUs online.
    pub logical_cpus: usize,
    /// Total memory in bytes.
    pub memory_bytes: Option<u64>,
    /// Hypervisor in use, when the machine is virtual.
    pub virtualization: Option<String>,
    /// The machine's identity across stores: /etc/machine-id hashed for ratelab
    /// (HMAC-SHA256 keyed by it, as systemd's app-specific ids are, so the id itself
    /// never leaves the machine), 32 hex digits; null where there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_id: Option<String>,
}

/// Reads the machine description from the running system.
pub fn probe_machine() -> Machine {
    let uname = rustix::system::uname();
    Machine {
        hostname: uname.nodename().to_string_lossy().into_owned(),
        kernel: uname.release().to_string_lossy().into_owned(),
        ..machine_from(&Roots::system(), cpuid_hypervisor())
    }
}

/// Everything but the uname fields, read from the files under `roots`.
fn machine_from(roots: &Roots, cpuid_vendor: Option<String>) -> Machine {
    let cpuinfo = std::fs::read_to_string(roots.proc("cpuinfo")).unwrap_or_default();
    let meminfo = std::fs::read_to_string(roots.proc("meminfo")).unwrap_or_default();
    Machine {
        hostname: String::new(),
        kernel: String::new(),
        os: os_name(roots),
        cpu_model: cpu_model(&cpuinfo),
        logical_cpus: online_cpus(roots),
        memory_bytes: memory_bytes(&meminfo),
        virtualization: virtualization(roots, &cpuinfo, cpuid_vendor),
        machine_id: machine_id(roots),
    }
}

/// /etc/machine-id (else D-Bus's copy), hashed for ratelab: machine-id(5) asks that the
/// id not be shown to the network as it is.
fn machine_id(roots: &Roots) -> Option<String> {
    use hmac::{Hmac, Mac};
    let id = ["etc/machine-id", "var/lib/dbus/machine-id"]
        .iter()
        .find_map(|file| std::fs::read_to_string(roots.file(file)).ok())?;
    let id = id.trim();
    if id.is_empty() {
        return None;
    }
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(id.as_bytes()).ok()?;
    mac.update(b"ratelab machine identity");
    let digest = mac.finalize().into_bytes();
    Some(digest[..16].iter().map(|b| format!("{b:02x}")).collect())
}

/// PRETTY_NAME (else NAME) from os-release, which os-release(5) says to look
/// for in /etc first and /usr/lib second.
fn os_name(roots: &Roots) -> Option<String> {
    ["etc/os-release", "usr/lib/os-release"]
        .iter()
        .find_map(|file| std::fs::read_to_string(roots.file(file)).ok())
        .and_then(|text| {
            os_release_value(&text, "PRETTY_NAME").or_else(|| os_release_value(&text, "NAME"))
        })
}

/// One variable of an os-release file, unquoted.
fn os_release_value(text: &str, key: &str) -> Option<String> {
    let raw = text
        .lines()
        .find_map(|line| line.trim().strip_prefix(key)?.strip_prefix('='))?
        .trim();
    let value = if let Some(inner) = raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
        // Double quotes allow shell escapes of ", \, $ and `.
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            out.push(if c == '\\' {
                chars.next().unwrap_or(c)
            } else {
                c
            });
        }
        out
    } else if let Some(inner) = raw.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')) {
        inner.to_string()
    } else {
        raw.to_string()
    };
    (!value.is_empty()).then_some(value)
}

/// The CPU model from /proc/cpuinfo; its key differs between architectures.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    // x86 "model name"; 32-bit ARM "Processor" (older kernels) or "model name";
    // MIPS "cpu model"; PowerPC "cpu"; RISC-V "uarch". arm64 has no model name.
    ["model name", "Processor", "cpu model", "cpu", "uarch"]
        .iter()
        .find_map(|key| cpuinfo_value(cpuinfo, key))
}

/// The first value of `key` in cpuinfo text (`key<tabs>: value`).
fn cpuinfo_value(cpuinfo: &str, key: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        (name.trim() == key && !value.is_empty()).then(|| value.to_string())
    })
}

/// Logical CPUs online, from the kernel's CPU list, else sysconf.
fn online_cpus(roots: &Roots) -> usize {
    read_attr(&roots.sys("devices/system/cpu/online"))
        .and_then(|list| count_cpu_list(&list))
        .unwrap_or_else(|| {
            // SAFETY: sysconf only reads a configuration value.
            let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
            usize::try_from(online).ok().filter(|n| *n > 0).unwrap_or(1)
        })
}

/// Counts the CPUs in a kernel CPU list (`0-3,5,8-9`).
fn count_cpu_list(list: &str) -> Option<usize> {
    super::cores::parse_list(list.trim())
        .map(|cpus| cpus.len())
        .filter(|&n| n > 0)
}

/// MemTotal from /proc/meminfo, in bytes.
fn memory_bytes(meminfo: &str) -> Option<u64> {
    meminfo_bytes(meminfo, "MemTotal:")
}

/// Memory the kernel could give a new program without swapping (MemAvailable), in bytes.
pub fn available_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    meminfo_bytes(&meminfo, "MemAvailable:")
}

/// One `Name:  N kB` field of /proc/meminfo, in bytes.
fn meminfo_bytes(meminfo: &str, field: &str) -> Option<u64> {
    let line = meminfo.lines().find_map(|line| line.strip_prefix(field))?;
    let mut words = line.split_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    // The kernel prints "kB" but means KiB (fs/proc/meminfo.c shifts by 10).
    (words.next() == Some("kB")).then(|| kib * 1024)
}

/// The hypervisor: Xen's sysfs entry, then the CPUID vendor, then DMI, then
/// the cpuinfo `hypervisor` flag alone (a hypervisor that gives no name).
fn virtualization(roots: &Roots, cpuinfo: &str, cpuid_vendor: Option<String>) -> Option<String> {
    if let Some(kind) = read_attr(&roots.sys("hypervisor/type")) {
        return Some(kind);
    }
    let flagged = cpuinfo_value(cpuinfo, "flags")
        .is_some_and(|flags| flags.split_whitespace().any(|flag| flag == "hypervisor"));
    if flagged && let Some(vendor) = cpuid_vendor {
        return Some(hypervisor_from_cpuid(&vendor));
    }
    let dmi = |file: &str| read_attr(&roots.sys(&format!("class/dmi/id/{file}")));
    let product = dmi("product_name").unwrap_or_default();
    // EC2 bare-metal instances carry Amazon's DMI strings but run on no hypervisor.
    if !product.ends_with(".metal") {
        let from_dmi = ["sys_vendor", "product_name", "board_vendor", "bios_vendor"]
            .iter()
            .filter_map(|file| dmi(file))
            .find_map(|value| hypervisor_from_dmi(&value, &product));
        if from_dmi.is_some() {
            return from_dmi;
        }
    }
    flagged.then(|| "unknown hypervisor".to_string())
}

/// Names a hypervisor from its CPUID leaf 0x4000_0000 signature.
fn hypervisor_from_cpuid(vendor: &str) -> String {
    let known = [
        ("KVMKVMKVM", "kvm"),
        ("Linux KVM Hv", "kvm"),
        ("TCGTCGTCGTCG", "qemu"),
        ("Microsoft Hv", "microsoft"),
        ("VMwareVMware", "vmware"),
        ("XenVMMXenVMM", "xen"),
        ("VBoxVBoxVBox", "oracle"),
        ("bhyve bhyve", "bhyve"),
        ("ACRNACRNACRN", "acrn"),
        (" lrpepyh  vr", "parallels"),
    ];
    known
        .iter()
        .find(|(signature, _)| vendor.trim_end_matches('\0') == *signature)
        .map_or_else(
            || vendor.trim_matches(['\0', ' ']).to_string(),
            |(_, name)| name.to_string(),
        )
}

/// Names a hypervisor from one DMI string, as systemd-detect-virt does.
fn hypervisor_from_dmi(value: &str, product: &str) -> Option<String> {
    let known = [
        ("KVM", "kvm"),
        ("OpenStack", "kvm"),
        ("KubeVirt", "kvm"),
        ("Amazon EC2", "amazon"),
        ("QEMU", "qemu"),
        ("VMware", "vmware"),
        ("VMW", "vmware"),
        ("innotek GmbH", "oracle"),
        ("VirtualBox", "oracle"),
        ("Xen", "xen"),
        ("Bochs", "bochs"),
        ("Parallels", "parallels"),
        ("BHYVE", "bhyve"),
        ("Hyper-V", "microsoft"),
        ("Apple Virtualization", "apple"),
        ("Google Compute Engine", "google"),
    ];
    if value == "Microsoft Corporation" && product == "Virtual Machine" {
        return Some("microsoft".to_string());
    }
    known
        .iter()
        .find(|(prefix, _)| value.starts_with(prefix))
        .map(|(_, name)| name.to_string())
}

/// The hypervisor's CPUID vendor signature, when the CPU says it runs under one.
#[cfg(target_arch = "x86_64")]
fn cpuid_hypervisor() -> Option<String> {
    use std::arch::x86_64::__cpuid;
    // Leaf 1 ECX bit 31 is reserved for hypervisors to set; leaf 0x4000_0000
    // then holds their signature in EBX, ECX, EDX (Linux arch/x86/kernel/cpu/hypervisor.c).
    if __cpuid(1).ecx & (1 << 31) == 0 {
        return None;
    }
    let leaf = __cpuid(0x4000_0000);
    let bytes = [leaf.ebx, leaf.ecx, leaf.edx]
        .map(u32::to_le_bytes)
        .concat();
    let vendor = String::from_utf8_lossy(&bytes).into_owned();
    (!vendor.trim_matches(['\0', ' ']).is_empty()).then_some(vendor)
}

/// Other architectures have no CPUID; the other sources still apply.
#[cfg(not(target_arch = "x86_64"))]
fn cpuid_hypervisor() -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_root(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    const X86_CPUINFO: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n\
model name\t: Intel(R) Xeon(R) Processor\ncpu MHz\t\t: 2100.000\nflags\t\t: fpu sse2 hypervisor lm\n";

    #[test]
    fn files_under_the_root_fill_the_machine() {
        let root = fake_root(&[
            (
                "etc/os-release",
                "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n",
            ),
            ("proc/cpuinfo", X86_CPUINFO),
            (
                "proc/meminfo",
                "MemTotal:       24684112 kB\nMemFree:  1 kB\n",
            ),
            ("sys/devices/system/cpu/online", "0-1\n"),
            ("sys/class/dmi/id/sys_vendor", "QEMU\n"),
        ]);
        let machine = machine_from(&Roots::at(root.path()), None);
        assert_eq!(
            machine.os.as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        assert_eq!(
            machine.cpu_model.as_deref(),
            Some("Intel(R) Xeon(R) Processor")
        );
        assert_eq!(machine.logical_cpus, 2);
        assert_eq!(machine.memory_bytes, Some(24_684_112 * 1024));
        assert_eq!(machine.virtualization.as_deref(), Some("qemu"));
    }

    #[test]
    fn missing_sources_give_none() {
        let root = fake_root(&[("proc/cpuinfo", "processor\t: 0\nflags\t: fpu sse2\n")]);
        let machine = machine_from(&Roots::at(root.path()), Some("KVMKVMKVM\0\0\0".into()));
        assert_eq!(machine.os, None);
        assert_eq!(machine.cpu_model, None);
        assert_eq!(machine.memory_bytes, None);
        // No hypervisor flag: a CPUID signature alone is not trusted.
        assert_eq!(machine.virtualization, None);
        assert!(machine.logical_cpus >= 1);
    }

    #[test]
    fn hypervisor_sources_in_order() {
        let flagged = fake_root(&[("proc/cpuinfo", X86_CPUINFO)]);
        let roots = Roots::at(flagged.path());
        let kvm = virtualization(&roots, X86_CPUINFO, Some("KVMKVMKVM\0\0\0".into()));
        assert_eq!(kvm.as_deref(), Some("kvm"));
        assert_eq!(
            virtualization(&roots, X86_CPUINFO, None).as_deref(),
            Some("unknown hypervisor")
        );
        let xen = fake_root(&[("sys/hypervisor/type", "xen\n")]);
        assert_eq!(
            virtualization(&Roots::at(xen.path()), "", None).as_deref(),
            Some("xen")
        );
        let metal = fake_root(&[
            ("sys/class/dmi/id/sys_vendor", "Amazon EC2\n"),
            ("sys/class/dmi/id/product_name", "m5.metal\n"),
        ]);
        assert_eq!(virtualization(&Roots::at(metal.path()), "", None), None);
        let hyperv = fake_root(&[
            ("sys/class/dmi/id/sys_vendor", "Microsoft Corporation\n"),
            ("sys/class/dmi/id/product_name", "Virtual Machine\n"),
        ]);
        assert_eq!(
            virtualization(&Roots::at(hyperv.path()), "", None).as_deref(),
            Some("microsoft")
        );
    }

    #[test]
    fn cpu_models_of_other_architectures() {
        assert_eq!(
            cpu_model("processor\t: 0\ncpu\t\t: POWER9 (raw), altivec supported\n").as_deref(),
            Some("POWER9 (raw), altivec supported")
        );
        assert_eq!(
            cpu_model("processor\t: 0\nuarch\t\t: sifive,u74-mc\n").as_deref(),
            Some("sifive,u74-mc")
        );
        assert_eq!(
            cpu_model("processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n"),
            None
        );
    }

    #[test]
    fn os_release_values_unquote() {
        assert_eq!(
            os_release_value("PRETTY_NAME='Arch Linux'\n", "PRETTY_NAME").as_deref(),
            Some("Arch Linux")
        );
        assert_eq!(
            os_release_value("NAME=Fedora\n", "NAME").as_deref(),
            Some("Fedora")
        );
        assert_eq!(
            os_release_value("NAME=\"a \\\"b\\\"\"\n", "NAME").as_deref(),
            Some("a \"b\"")
        );
        assert_eq!(os_release_value("PRETTY_NAME=\"\"\n", "PRETTY_NAME"), None);
    }

    #[test]
    fn cpu_lists_count() {
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("0-3,5,8-9\n"), Some(7));
        assert_eq!(count_cpu_list("3-1"), None);
        assert_eq!(count_cpu_list(""), None);
    }

    #[test]
    fn meminfo_kb_is_kib() {
        assert_eq!(memory_bytes("MemTotal:  1000 kB\n"), Some(1_024_000));
        assert_eq!(memory_bytes("MemFree:  1000 kB\n"), None);
    }

    #[test]
    fn this_machine_probes() {
        let machine = probe_machine();
        assert!(!machine.kernel.is_empty());
        assert!(machine.logical_cpus >= 1);
        eprintln!("{}", serde_json::to_string_pretty(&machine).unwrap());
    }
}
