//! What a container is made of (image format, qcow2 cluster layout, preallocation,
//! inner filesystem, size) and the checks that a combination can be made, before
//! any tool is run.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::vocab::units::format_size;

/// qemu's qcow2 cluster size when none is given.
pub const DEFAULT_CLUSTER_SIZE_BYTES: u64 = 64 << 10;
/// The smallest qcow2 cluster qemu-img accepts.
pub const MIN_CLUSTER_SIZE_BYTES: u64 = 512;
/// The largest qcow2 cluster qemu-img accepts.
pub const MAX_CLUSTER_SIZE_BYTES: u64 = 2 << 20;
/// qemu-img: "Extended L2 entries are only supported with cluster sizes of at least
/// 16384 bytes" (each cluster is split into 32 subclusters of at least 512 bytes).
pub const MIN_EXTENDED_L2_CLUSTER_BYTES: u64 = 16 << 10;

/// How the image file is laid out on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// A raw image whose blocks are allocated as they are written.
    RawSparse,
    /// A raw image allocated in full before use.
    RawPrealloc,
    /// A QEMU copy-on-write image, attached through qemu-storage-daemon.
    Qcow2,
}

/// How much of a qcow2 image is allocated when it is made (`-o preallocation=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preallocation {
    /// Nothing beyond the header.
    Off,
    /// The metadata (L2 tables, refcounts), not the data.
    Metadata,
    /// Metadata, and data space reserved with fallocate.
    Falloc,
    /// Metadata, and data written as zeros.
    Full,
}

/// The filesystem made inside a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Filesystem {
    /// ext4, from e2fsprogs.
    Ext4,
    /// XFS, from xfsprogs.
    Xfs,
    /// Btrfs, from btrfs-progs.
    Btrfs,
}

/// One container to make: its image, its allocation and its filesystem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerSpec {
    /// How the image file is laid out.
    pub format: Format,
    /// qcow2 cluster size; `None` is qemu's default (64 KiB).
    pub cluster_size_bytes: Option<u64>,
    /// qcow2 subclusters (`extended_l2=on`).
    pub extended_l2: bool,
    /// qcow2 preallocation.
    pub preallocation: Preallocation,
    /// The filesystem made inside.
    pub fs: Filesystem,
    /// The image's size as the inner filesystem sees it.
    pub image_size_bytes: u64,
}

macro_rules! named {
    ($type:ty, $what:literal, $($variant:path => $name:literal),+ $(,)?) => {
        impl $type {
            /// Every value, in the order help lists them.
            pub const ALL: &[$type] = &[$($variant),+];

            /// The name as typed on the command line.
            pub fn as_str(&self) -> &'static str {
                match self {
                    $($variant => $name),+
                }
            }
        }

        impl FromStr for $type {
            type Err = Error;

            fn from_str(text: &str) -> Result<Self, Error> {
                match text {
                    $($name => Ok($variant)),+,
                    _ => Err(Error::Input(format!(
                        concat!("unknown ", $what, " {:?} (use {})"),
                        text,
                        [$($name),+].join(", ")
                    ))),
                }
            }
        }

        impl std::fmt::Display for $type {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

named!(Format, "image format",
    Format::RawSparse => "raw-sparse",
    Format::RawPrealloc => "raw-prealloc",
    Format::Qcow2 => "qcow2",
);
named!(Preallocation, "preallocation",
    Preallocation::Off => "off",
    Preallocation::Metadata => "metadata",
    Preallocation::Falloc => "falloc",
    Preallocation::Full => "full",
);
named!(Filesystem, "filesystem",
    Filesystem::Ext4 => "ext4",
    Filesystem::Xfs => "xfs",
    Filesystem::Btrfs => "btrfs",
);

impl Filesystem {
    /// The smallest image its mkfs accepts (xfsprogs 6.1: "must be larger than 300MB";
    /// btrfs-progs 6.2: "minimum size for each btrfs device is 114294784").
    pub fn min_size_bytes(&self) -> u64 {
        match self {
            Filesystem::Ext4 => 1 << 20,
            Filesystem::Xfs => 300 << 20,
            Filesystem::Btrfs => 109 << 20,
        }
    }
}

impl ContainerSpec {
    /// The qcow2 cluster size in force (qemu's default when none is given); `None` for raw.
    pub fn cluster_bytes(&self) -> Option<u64> {
        (self.format == Format::Qcow2).then(|| {
            self.cluster_size_bytes
                .unwrap_or(DEFAULT_CLUSTER_SIZE_BYTES)
        })
    }

    /// Whether the image file takes its whole size on the host when it is made.
    pub fn preallocated(&self) -> bool {
        match self.format {
            Format::RawSparse => false,
            Format::RawPrealloc => true,
            Format::Qcow2 => matches!(
                self.preallocation,
                Preallocation::Falloc | Preallocation::Full
            ),
        }
    }

    /// Host space the image can take when `written_bytes` are written inside: its whole
    /// size when preallocated, else what is written plus room for the inner
    /// filesystem's metadata (a sixteenth of the image) and qcow2's tables, at most
    /// the image's size.
    pub fn host_bytes(&self, written_bytes: u64) -> u64 {
        let tables = self.cluster_bytes().map_or(0, |cluster| {
            // An L2 entry (8 bytes, 16 with subclusters) and a 16-bit refcount per cluster.
            let per_cluster = if self.extended_l2 { 18 } else { 10 };
            self.image_size_bytes.div_ceil(cluster) * per_cluster + 4 * cluster
        });
        let data = if self.preallocated() {
            self.image_size_bytes
        } else {
            written_bytes
                .saturating_add(self.image_size_bytes / 16)
                .min(self.image_size_bytes)
        };
        data.saturating_add(tables)
    }

    /// A short name for people: `raw-sparse`, `qcow2 64 KiB`, `qcow2 2 MiB l2 falloc`.
    pub fn label(&self) -> String {
        let Some(cluster) = self.cluster_bytes() else {
            return self.format.as_str().to_string();
        };
        let mut label = format!("qcow2 {}", format_size(cluster));
        if self.extended_l2 {
            label.push_str(" l2");
        }
        if self.preallocation != Preallocation::Off {
            label.push(' ');
            label.push_str(self.preallocation.as_str());
        }
        label
    }

    /// Refuses a combination that cannot be made, naming the flag to change.
    pub fn validate(&self) -> Result<(), Error> {
        let input = |message: String| Err(Error::Input(message));
        if self.format != Format::Qcow2 {
            let format = self.format;
            if self.cluster_size_bytes.is_some() {
                return input(format!(
                    "--cluster-size applies to qcow2 only, not {format}"
                ));
            }
            if self.extended_l2 {
                return input(format!("--extended-l2 applies to qcow2 only, not {format}"));
            }
            if self.preallocation != Preallocation::Off {
                return input(format!(
                    "--preallocation applies to qcow2 only, not {format} (use raw-prealloc for a preallocated raw image)"
                ));
            }
        }
        if let Some(cluster) = self.cluster_size_bytes
            && (!cluster.is_power_of_two()
                || !(MIN_CLUSTER_SIZE_BYTES..=MAX_CLUSTER_SIZE_BYTES).contains(&cluster))
        {
            return input(format!(
                "invalid --cluster-size {cluster}: a qcow2 cluster is a power of two from 512 bytes to 2 MiB"
            ));
        }
        if let Some(cluster) = self.cluster_bytes()
            && self.extended_l2
            && cluster < MIN_EXTENDED_L2_CLUSTER_BYTES
        {
            return input(format!(
                "--extended-l2 needs a --cluster-size of at least 16 KiB, not {}",
                format_size(cluster)
            ));
        }
        if self.image_size_bytes == 0 || !self.image_size_bytes.is_multiple_of(512) {
            return input(format!(
                "invalid --image-size {}: an image is a whole number of 512-byte sectors",
                self.image_size_bytes
            ));
        }
        let min = self.fs.min_size_bytes();
        if self.image_size_bytes < min {
            return input(format!(
                "--image-size {} is too small for {}: mkfs.{} needs at least {}",
                format_size(self.image_size_bytes),
                self.fs,
                self.fs,
                format_size(min)
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qcow2(cluster: Option<u64>, extended_l2: bool) -> ContainerSpec {
        ContainerSpec {
            format: Format::Qcow2,
            cluster_size_bytes: cluster,
            extended_l2,
            preallocation: Preallocation::Off,
            fs: Filesystem::Ext4,
            image_size_bytes: 1 << 30,
        }
    }

    fn raw(format: Format) -> ContainerSpec {
        ContainerSpec {
            format,
            ..qcow2(None, false)
        }
    }

    fn message(spec: &ContainerSpec) -> String {
        match spec.validate() {
            Err(Error::Input(message)) => message,
            other => panic!("{spec:?} gave {other:?}, not an input error"),
        }
    }

    #[test]
    fn names_round_trip_and_unknown_ones_list_the_choices() {
        for format in [Format::RawSparse, Format::RawPrealloc, Format::Qcow2] {
            assert_eq!(format.as_str().parse::<Format>().unwrap(), format);
        }
        for p in [
            Preallocation::Off,
            Preallocation::Metadata,
            Preallocation::Falloc,
            Preallocation::Full,
        ] {
            assert_eq!(p.as_str().parse::<Preallocation>().unwrap(), p);
        }
        for fs in [Filesystem::Ext4, Filesystem::Xfs, Filesystem::Btrfs] {
            assert_eq!(fs.as_str().parse::<Filesystem>().unwrap(), fs);
        }
        let err = "vmdk".parse::<Format>().unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown image format \"vmdk\" (use raw-sparse, raw-prealloc, qcow2)"
        );
        assert!(matches!("zfs".parse::<Filesystem>(), Err(Error::Input(_))));
        assert!("Off".parse::<Preallocation>().is_err());
    }

    #[test]
    fn serde_names_are_the_typed_names() {
        let spec = ContainerSpec {
            preallocation: Preallocation::Falloc,
            fs: Filesystem::Btrfs,
            ..raw(Format::RawPrealloc)
        };
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json["format"], "raw-prealloc");
        assert_eq!(json["preallocation"], "falloc");
        assert_eq!(json["fs"], "btrfs");
        assert_eq!(serde_json::from_value::<ContainerSpec>(json).unwrap(), spec);
    }

    #[test]
    fn labels_are_short_and_name_what_differs() {
        assert_eq!(raw(Format::RawSparse).label(), "raw-sparse");
        assert_eq!(raw(Format::RawPrealloc).label(), "raw-prealloc");
        assert_eq!(qcow2(None, false).label(), "qcow2 64 KiB");
        assert_eq!(qcow2(Some(512), false).label(), "qcow2 512 B");
        assert_eq!(qcow2(Some(2 << 20), true).label(), "qcow2 2 MiB l2");
        let falloc = ContainerSpec {
            preallocation: Preallocation::Falloc,
            ..qcow2(Some(4 << 10), false)
        };
        assert_eq!(falloc.label(), "qcow2 4 KiB falloc");
    }

    #[test]
    fn cluster_sizes_are_powers_of_two_from_512_bytes_to_2_mib() {
        for cluster in [512, 4096, 64 << 10, 2 << 20] {
            qcow2(Some(cluster), false).validate().unwrap();
        }
        for cluster in [0, 256, 3000, 4 << 20] {
            let text = message(&qcow2(Some(cluster), false));
            assert!(text.starts_with("invalid --cluster-size"), "{text}");
        }
    }

    #[test]
    fn extended_l2_needs_16_kib_clusters() {
        qcow2(Some(16 << 10), true).validate().unwrap();
        qcow2(None, true).validate().unwrap();
        assert_eq!(
            message(&qcow2(Some(8 << 10), true)),
            "--extended-l2 needs a --cluster-size of at least 16 KiB, not 8 KiB"
        );
    }

    #[test]
    fn qcow2_options_are_refused_on_raw_images() {
        let mut spec = raw(Format::RawSparse);
        spec.validate().unwrap();
        spec.cluster_size_bytes = Some(65536);
        assert!(message(&spec).starts_with("--cluster-size applies to qcow2 only"));
        let spec = ContainerSpec {
            extended_l2: true,
            ..raw(Format::RawSparse)
        };
        assert!(message(&spec).starts_with("--extended-l2 applies to qcow2 only"));
        let spec = ContainerSpec {
            preallocation: Preallocation::Full,
            ..raw(Format::RawPrealloc)
        };
        assert!(message(&spec).starts_with("--preallocation applies to qcow2 only"));
    }

    #[test]
    fn image_sizes_are_whole_sectors_and_fit_the_filesystem() {
        let spec = |fs, size| ContainerSpec {
            fs,
            image_size_bytes: size,
            ..raw(Format::RawSparse)
        };
        assert!(message(&spec(Filesystem::Ext4, 0)).starts_with("invalid --image-size 0"));
        assert!(message(&spec(Filesystem::Ext4, 1000)).starts_with("invalid --image-size"));
        assert_eq!(
            message(&spec(Filesystem::Xfs, 256 << 20)),
            "--image-size 256 MiB is too small for xfs: mkfs.xfs needs at least 300 MiB"
        );
        spec(Filesystem::Xfs, 300 << 20).validate().unwrap();
        spec(Filesystem::Btrfs, 109 << 20).validate().unwrap();
        assert!(spec(Filesystem::Btrfs, 100 << 20).validate().is_err());
    }

    #[test]
    fn host_space_is_the_whole_image_only_when_preallocated() {
        let sparse = raw(Format::RawSparse);
        assert_eq!(sparse.host_bytes(0), 64 << 20);
        assert_eq!(sparse.host_bytes(100 << 20), 164 << 20);
        assert_eq!(sparse.host_bytes(2 << 30), 1 << 30);
        assert_eq!(raw(Format::RawPrealloc).host_bytes(0), 1 << 30);
        // 16384 clusters of 64 KiB: 160 KiB of tables, and four clusters of headers.
        assert_eq!(
            qcow2(None, false).host_bytes(0),
            (64 << 20) + 16384 * 10 + (256 << 10)
        );
        let full = ContainerSpec {
            preallocation: Preallocation::Full,
            ..qcow2(Some(512), false)
        };
        assert_eq!(full.host_bytes(0), (1 << 30) + (2 << 20) * 10 + 2048);
    }

    #[test]
    fn only_raw_prealloc_and_reserving_qcow2_take_their_whole_size() {
        assert!(!raw(Format::RawSparse).preallocated());
        assert!(raw(Format::RawPrealloc).preallocated());
        let with = |preallocation| ContainerSpec {
            preallocation,
            ..qcow2(None, false)
        };
        assert!(!with(Preallocation::Off).preallocated());
        assert!(!with(Preallocation::Metadata).preallocated());
        assert!(with(Preallocation::Falloc).preallocated());
        assert!(with(Preallocation::Full).preallocated());
    }
}
