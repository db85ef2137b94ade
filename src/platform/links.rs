//! The link at the bottom of a chain: what joins a whole disk to the machine
//! (PCIe for NVMe, a SATA or USB link, virtio) and that link's limit.
//!
//! Each kind is recognised from the disk's place in /sys/devices: NVMe by name
//! and its controller's PCI device, SATA by an `ataN` port above it, USB by a
//! `usbN` bus above it, virtio by its driver or a `virtioN` parent.

use std::path::{Path, PathBuf};

use super::block::{ChainStep, StepKind};
use super::devices::dir_name;
use super::limits::{self, LinkRate};
use super::{Roots, read_attr};

/// The step for the whole disk in `dir`, named `node`, with its link's limit.
pub(crate) fn disk_step(roots: &Roots, dir: &Path, name: &str, node: String) -> ChainStep {
    let memory = |detail: &str| ChainStep::without_limit(StepKind::Memory, node.clone(), detail);
    if name.starts_with("zram") {
        return memory("compressed RAM disk (zram): limit unknown");
    }
    if name.starts_with("ram") {
        return memory("RAM disk (brd): limit unknown");
    }
    if name.starts_with("pmem") {
        return memory("persistent memory: limit unknown");
    }
    if name.starts_with("nvme") {
        return nvme_step(roots, dir, node);
    }
    let ancestors = ancestors(roots, dir);
    if is_virtio(dir, &ancestors) {
        let detail = "virtual disk: limit unknown";
        return ChainStep::without_limit(StepKind::Virtio, node, detail);
    }
    if let Some(port) = ancestors.iter().find_map(|dir| ata_port(dir)) {
        return sata_step(roots, port, node);
    }
    if ancestors.iter().any(|dir| is_usb_bus(dir)) {
        return usb_step(&ancestors, node);
    }
    if dir.join("device/scsi_level").exists() {
        let detail = "SCSI disk: link speed unknown";
        return ChainStep::without_limit(StepKind::Scsi, node, detail);
    }
    let detail = "unrecognised device: limit unknown";
    ChainStep::without_limit(StepKind::Other, node, detail)
}

/// `dir` and the folders above it, up to (not including) /sys/devices.
fn ancestors(roots: &Roots, dir: &Path) -> Vec<PathBuf> {
    let devices = roots.sys("devices");
    let devices = std::fs::canonicalize(&devices).unwrap_or(devices);
    dir.ancestors()
        .take_while(|ancestor| ancestor.starts_with(&devices) && *ancestor != devices)
        .map(Path::to_path_buf)
        .collect()
}

fn is_virtio(dir: &Path, ancestors: &[PathBuf]) -> bool {
    let driver = std::fs::read_link(dir.join("device/driver")).ok();
    driver.is_some_and(|driver| driver.ends_with("virtio_blk"))
        || ancestors
            .iter()
            .any(|ancestor| dir_name(ancestor).starts_with("virtio"))
}

/// The port number of an `ataN` folder.
fn ata_port(dir: &Path) -> Option<u32> {
    dir_name(dir).strip_prefix("ata")?.parse().ok()
}

/// Whether a folder is a USB bus (its root hub, `usbN`).
fn is_usb_bus(dir: &Path) -> bool {
    dir_name(dir)
        .strip_prefix("usb")
        .is_some_and(|number| !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()))
}

fn sata_step(roots: &Roots, port: u32, node: String) -> ChainStep {
    // A port's first link has its number (link3 on ata3); see sysfs-ata in the kernel ABI docs.
    let spd = read_attr(&roots.sys(&format!("class/ata_link/link{port}/sata_spd")));
    match spd.as_deref().and_then(limits::sata_link) {
        Some(link) => linked(StepKind::Sata, node, link),
        None => {
            let detail = format!("ATA port ata{port}: link speed unknown");
            ChainStep::without_limit(StepKind::Sata, node, detail)
        }
    }
}

fn usb_step(ancestors: &[PathBuf], node: String) -> ChainStep {
    // The nearest USB device above the disk holds the speed it negotiated.
    let speed = ancestors
        .iter()
        .find_map(|ancestor| read_attr(&ancestor.join("speed")));
    match speed.as_deref().and_then(limits::usb_link) {
        Some(link) => linked(StepKind::Usb, node, link),
        None => ChainStep::without_limit(StepKind::Usb, node, "USB link speed unknown"),
    }
}

fn nvme_step(roots: &Roots, dir: &Path, node: String) -> ChainStep {
    let controllers = nvme_controllers(dir);
    let links: Vec<Result<LinkRate, String>> = controllers
        .iter()
        .map(|controller| controller_link(roots, controller))
        .collect();
    let slowest = links
        .iter()
        .filter_map(|link| link.as_ref().ok())
        .min_by(|a, b| a.bytes_per_sec.total_cmp(&b.bytes_per_sec));
    if let Some(link) = slowest {
        let mut link = link.clone();
        link.detail = format!("NVMe over {}", link.detail);
        if controllers.len() > 1 {
            link.detail += &format!(", the slowest of {} paths", controllers.len());
        }
        return linked(StepKind::Nvme, node, link);
    }
    let detail = links
        .into_iter()
        .find_map(Result::err)
        .unwrap_or_else(|| "NVMe controller not found: limit unknown".to_string());
    ChainStep::without_limit(StepKind::Nvme, node, detail)
}

/// The controllers of an NVMe namespace: its parent folder, or with native
/// multipath (the namespace under `nvme-subsysN`) every `nvmeN` listed there.
fn nvme_controllers(dir: &Path) -> Vec<PathBuf> {
    let Some(parent) = dir.parent() else {
        return Vec::new();
    };
    let is_controller = |name: &str| {
        name.strip_prefix("nvme")
            .is_some_and(|number| !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()))
    };
    if dir_name(parent).starts_with("nvme-subsys") {
        let Ok(entries) = std::fs::read_dir(parent) else {
            return Vec::new();
        };
        let mut controllers: Vec<PathBuf> = entries
            .flatten()
            .filter(|entry| is_controller(&entry.file_name().to_string_lossy()))
            .filter_map(|entry| std::fs::canonicalize(entry.path()).ok())
            .collect();
        controllers.sort();
        controllers
    } else if is_controller(&dir_name(parent)) {
        vec![parent.to_path_buf()]
    } else {
        Vec::new()
    }
}

/// The PCIe link of one NVMe controller, or why it is unknown.
fn controller_link(roots: &Roots, controller: &Path) -> Result<LinkRate, String> {
    if let Some(transport) = read_attr(&controller.join("transport"))
        && transport != "pcie"
    {
        return Err(format!("NVMe over {transport}: limit unknown"));
    }
    let pci = ancestors(roots, controller)
        .into_iter()
        .find(|ancestor| ancestor.join("current_link_speed").exists())
        .ok_or_else(|| "NVMe without a PCIe link in sysfs: limit unknown".to_string())?;
    let speed = read_attr(&pci.join("current_link_speed")).unwrap_or_default();
    let width = read_attr(&pci.join("current_link_width")).unwrap_or_default();
    let mut link = limits::pcie_link(&speed, &width)
        .ok_or_else(|| format!("NVMe on PCIe link \"{speed}\" x{width}: limit unknown"))?;
    // A link can train below what the device supports (a slower slot, fewer lanes).
    let max_speed = read_attr(&pci.join("max_link_speed")).unwrap_or_default();
    let max_width = read_attr(&pci.join("max_link_width")).unwrap_or_default();
    if let Some(max) = limits::pcie_link(&max_speed, &max_width)
        && max.bytes_per_sec > link.bytes_per_sec * 1.001
    {
        let gts = limits::parse_pcie_gts(&max_speed).unwrap_or_default();
        link.detail += &format!(", below the device's PCIe {gts:.1} GT/s x{max_width}");
    }
    Ok(link)
}

fn linked(kind: StepKind, node: String, link: LinkRate) -> ChainStep {
    ChainStep {
        kind,
        name: node,
        detail: link.detail,
        max_bytes_per_sec: Some(link.bytes_per_sec),
    }
}
