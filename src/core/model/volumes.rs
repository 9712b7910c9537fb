//! Lean models of the storage objects the volume plugins read —
//! PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode, CSIDriver —
//! and of the volumes a pod mounts, with the serde shapes they are decoded
//! from. Only what placement reads is kept; everything else is skipped while
//! parsing, as for pods and nodes (`wire.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::selector::LabelSelector;
use super::wire::{LabelSelectorWire, ObjectMetaWire, QuantityWire};
use super::{ModelError, NodeSelector, NodeSelectorTerm, Operator, PodKey, Quantity, Requirement};

/// A claim's identity: its namespace and name (the shape of a pod's key).
pub type ClaimKey = PodKey;

/// The annotation the scheduler sets on a `WaitForFirstConsumer` claim to ask
/// the provisioner for a volume reachable from that node.
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";

/// Upper bound on the volumes of one pod the model accepts (the API server
/// accepts far fewer in practice; this bounds hostile input).
pub const MAX_POD_VOLUMES: usize = 1024;

// ----- access modes -----

/// A set of access modes, as bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct AccessModes(u8);

impl AccessModes {
    pub const RWO: AccessModes = AccessModes(1);
    pub const ROX: AccessModes = AccessModes(2);
    pub const RWX: AccessModes = AccessModes(4);
    pub const RWOP: AccessModes = AccessModes(8);

    /// The modes named in `modes`; unknown names are an error (a claim the
    /// binder could not match correctly).
    pub fn parse(modes: &[String]) -> Result<Self, String> {
        let mut bits = 0;
        for m in modes {
            bits |= match m.as_str() {
                "ReadWriteOnce" => Self::RWO.0,
                "ReadOnlyMany" => Self::ROX.0,
                "ReadWriteMany" => Self::RWX.0,
                "ReadWriteOncePod" => Self::RWOP.0,
                other => return Err(format!("unknown access mode {other:?}")),
            };
        }
        Ok(AccessModes(bits))
    }

    pub fn contains(self, other: AccessModes) -> bool {
        self.0 & other.0 == other.0
    }
}

// ----- the volumes a pod mounts -----

/// One of a pod's volumes, reduced to what the volume plugins read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PodVolume {
    /// A `persistentVolumeClaim`, or an `ephemeral` volume (its claim is
    /// `<pod>-<volume>`, created by the ephemeral-volume controller).
    Claim {
        claim: Arc<str>,
        ephemeral: bool,
        /// For an ephemeral volume: its template's `storageClassName`.
        template_class: Option<Arc<str>>,
    },
    /// An inline CSI volume: counts toward the driver's limit.
    InlineCsi { driver: Arc<str>, volume: Arc<str> },
    /// An in-tree disk that two pods on a node may not share
    /// (VolumeRestrictions' disk conflicts).
    Disk(Disk),
}

/// In-tree disks with kube-scheduler's conflict rules.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Disk {
    /// `gcePersistentDisk`: the same `pdName` unless both are read-only.
    GcePd { pd_name: String, read_only: bool },
    /// `awsElasticBlockStore`: the same `volumeID`, read-only or not.
    AwsEbs { volume_id: String },
    /// `iscsi`: the same IQN unless both are read-only.
    Iscsi { iqn: String, read_only: bool },
    /// `rbd`: a shared monitor, the same pool and image, unless both are
    /// read-only.
    Rbd {
        monitors: Vec<String>,
        pool: String,
        image: String,
        read_only: bool,
    },
}

impl Disk {
    /// Whether two pods mounting these may not share a node.
    pub fn conflicts(&self, other: &Disk) -> bool {
        match (self, other) {
            (
                Disk::GcePd {
                    pd_name: a,
                    read_only: ra,
                },
                Disk::GcePd {
                    pd_name: b,
                    read_only: rb,
                },
            ) => a == b && !(*ra && *rb),
            (Disk::AwsEbs { volume_id: a }, Disk::AwsEbs { volume_id: b }) => a == b,
            (
                Disk::Iscsi {
                    iqn: a,
                    read_only: ra,
                },
                Disk::Iscsi {
                    iqn: b,
                    read_only: rb,
                },
            ) => a == b && !(*ra && *rb),
            (
                Disk::Rbd {
                    monitors: ma,
                    pool: pa,
                    image: ia,
                    read_only: ra,
                },
                Disk::Rbd {
                    monitors: mb,
                    pool: pb,
                    image: ib,
                    read_only: rb,
                },
            ) => ma.iter().any(|m| mb.contains(m)) && pa == pb && ia == ib && !(*ra && *rb),
            _ => false,
        }
    }
}

/// A pod's `spec.volumes` entry, only the sources the plugins read.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct VolumeWire {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<ClaimSourceWire>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<EphemeralWire>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csi: Option<CsiSourceWire>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gce_persistent_disk: Option<GcePdWire>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aws_elastic_block_store: Option<AwsEbsWire>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iscsi: Option<IscsiWire>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rbd: Option<RbdWire>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ClaimSourceWire {
    pub claim_name: String,
    pub read_only: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct EphemeralWire {
    pub volume_claim_template: Option<ClaimTemplateWire>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ClaimTemplateWire {
    pub spec: ClaimSpecWire,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct CsiSourceWire {
    pub driver: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct GcePdWire {
    pub pd_name: String,
    pub read_only: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct AwsEbsWire {
    #[serde(rename = "volumeID")]
    pub volume_id: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct IscsiWire {
    pub iqn: String,
    pub read_only: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct RbdWire {
    pub monitors: Vec<String>,
    pub pool: Option<String>,
    pub image: String,
    pub read_only: Option<bool>,
}

/// The pod's volumes the plugins read, in spec order. `pod` names the pod
/// (ephemeral claims are `<pod>-<volume>`).
pub fn pod_volumes(pod: &str, volumes: &[VolumeWire]) -> Result<Vec<PodVolume>, ModelError> {
    if volumes.len() > MAX_POD_VOLUMES {
        return Err(ModelError::invalid(format!(
            "spec.volumes: {} volumes exceed the limit of {MAX_POD_VOLUMES}",
            volumes.len()
        )));
    }
    let mut out = Vec::new();
    for (i, v) in volumes.iter().enumerate() {
        if let Some(c) = &v.persistent_volume_claim {
            if c.claim_name.is_empty() {
                return Err(ModelError::invalid(format!(
                    "spec.volumes[{i}].persistentVolumeClaim.claimName: must not be empty"
                )));
            }
            out.push(PodVolume::Claim {
                claim: Arc::from(c.claim_name.as_str()),
                ephemeral: false,
                template_class: None,
            });
        } else if let Some(e) = &v.ephemeral {
            out.push(PodVolume::Claim {
                claim: Arc::from(format!("{pod}-{}", v.name)),
                ephemeral: true,
                template_class: e
                    .volume_claim_template
                    .as_ref()
                    .and_then(|t| t.spec.storage_class_name.as_deref())
                    .map(Arc::from),
            });
        } else if let Some(c) = &v.csi {
            out.push(PodVolume::InlineCsi {
                driver: Arc::from(c.driver.as_str()),
                volume: Arc::from(v.name.as_str()),
            });
        } else if let Some(d) = &v.gce_persistent_disk {
            out.push(PodVolume::Disk(Disk::GcePd {
                pd_name: d.pd_name.clone(),
                read_only: d.read_only.unwrap_or(false),
            }));
        } else if let Some(d) = &v.aws_elastic_block_store {
            out.push(PodVolume::Disk(Disk::AwsEbs {
                volume_id: d.volume_id.clone(),
            }));
        } else if let Some(d) = &v.iscsi {
            out.push(PodVolume::Disk(Disk::Iscsi {
                iqn: d.iqn.clone(),
                read_only: d.read_only.unwrap_or(false),
            }));
        } else if let Some(d) = &v.rbd {
            out.push(PodVolume::Disk(Disk::Rbd {
                monitors: d.monitors.clone(),
                pool: d.pool.clone().unwrap_or_else(|| "rbd".into()),
                image: d.image.clone(),
                read_only: d.read_only.unwrap_or(false),
            }));
        }
    }
    Ok(out)
}

// ----- PersistentVolumeClaim -----

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ClaimWire {
    pub metadata: ObjectMetaWire,
    pub spec: ClaimSpecWire,
    pub status: ClaimStatusWire,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ClaimSpecWire {
    pub access_modes: Vec<String>,
    pub selector: Option<LabelSelectorWire>,
    pub resources: Option<ClaimResourcesWire>,
    pub volume_name: Option<String>,
    pub storage_class_name: Option<String>,
    pub volume_mode: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ClaimResourcesWire {
    pub requests: BTreeMap<String, QuantityWire>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ClaimStatusWire {
    pub phase: Option<String>,
}

/// A PersistentVolumeClaim.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub key: ClaimKey,
    pub uid: Arc<str>,
    pub deleting: bool,
    pub access_modes: AccessModes,
    /// `spec.resources.requests.storage` in bytes (0 when absent).
    pub request_bytes: i64,
    pub selector: Option<LabelSelector>,
    /// `spec.storageClassName`; `None` and `""` differ: `""` asks for a
    /// volume without a class, `None` for the default class (the API server
    /// fills it in; until it has, Muster reads it as "no class", as
    /// kube-scheduler does).
    pub storage_class: Option<Arc<str>>,
    /// `spec.volumeName`: the volume it is bound (or being bound) to.
    pub volume_name: Option<Arc<str>>,
    /// `Filesystem` unless set to `Block`.
    pub block: bool,
    /// `status.phase == Bound`.
    pub bound: bool,
}

impl Claim {
    pub fn from_wire(w: &ClaimWire) -> Result<Self, ModelError> {
        let name = non_empty(w.metadata.name.as_deref(), "claim has no metadata.name")?;
        let namespace = super::pod::namespace_or_default(w.metadata.namespace.as_deref());
        let ctx = |e: String| {
            ModelError::invalid(format!("persistentvolumeclaim {namespace}/{name}: {e}"))
        };
        let request_bytes = match w
            .spec
            .resources
            .as_ref()
            .and_then(|r| r.requests.get("storage"))
        {
            Some(q) => bytes(q).map_err(ctx)?,
            None => 0,
        };
        Ok(Claim {
            key: ClaimKey::new(namespace, name),
            uid: Arc::from(w.metadata.uid.as_deref().unwrap_or("")),
            deleting: w.metadata.deletion_timestamp.is_some(),
            access_modes: AccessModes::parse(&w.spec.access_modes).map_err(ctx)?,
            request_bytes,
            selector: w
                .spec
                .selector
                .as_ref()
                .map(|sel| {
                    LabelSelector::from_wire(Some(sel)).map_err(|e| format!("spec.selector: {e}"))
                })
                .transpose()
                .map_err(ctx)?,
            storage_class: w.spec.storage_class_name.as_deref().map(Arc::from),
            volume_name: w
                .spec
                .volume_name
                .as_deref()
                .filter(|v| !v.is_empty())
                .map(Arc::from),
            block: w.spec.volume_mode.as_deref() == Some("Block"),
            bound: w.status.phase.as_deref() == Some("Bound"),
        })
    }

    /// The class name a volume must carry to match (`""` for none).
    pub fn class_name(&self) -> &str {
        self.storage_class.as_deref().unwrap_or("")
    }
}

// ----- PersistentVolume -----

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PvWire {
    pub metadata: ObjectMetaWire,
    pub spec: PvSpecWire,
    pub status: ClaimStatusWire,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PvSpecWire {
    pub capacity: BTreeMap<String, QuantityWire>,
    pub access_modes: Vec<String>,
    pub claim_ref: Option<ClaimRefWire>,
    pub storage_class_name: Option<String>,
    pub node_affinity: Option<PvNodeAffinityWire>,
    pub csi: Option<PvCsiWire>,
    pub volume_mode: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ClaimRefWire {
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub uid: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PvNodeAffinityWire {
    pub required: Option<super::wire::NodeSelectorWire>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PvCsiWire {
    pub driver: String,
    pub volume_handle: String,
}

/// A claim reference on a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef {
    pub key: ClaimKey,
    /// Empty when the reference names no uid (pre-bound by name).
    pub uid: Arc<str>,
}

/// A PersistentVolume.
#[derive(Debug, Clone, PartialEq)]
pub struct PersistentVolume {
    pub name: Arc<str>,
    pub labels: BTreeMap<String, String>,
    pub deleting: bool,
    pub capacity_bytes: i64,
    pub access_modes: AccessModes,
    pub claim_ref: Option<ClaimRef>,
    pub storage_class: Arc<str>,
    /// `spec.nodeAffinity.required`: the nodes that can reach it.
    pub node_affinity: Option<NodeSelector>,
    /// `spec.csi`: (driver, volumeHandle).
    pub csi: Option<(Arc<str>, Arc<str>)>,
    pub block: bool,
    /// `status.phase`, as written.
    pub phase: Arc<str>,
}

impl PersistentVolume {
    pub fn from_wire(w: &PvWire) -> Result<Self, ModelError> {
        let name = non_empty(w.metadata.name.as_deref(), "volume has no metadata.name")?;
        let ctx = |e: String| ModelError::invalid(format!("persistentvolume {name}: {e}"));
        let capacity_bytes = match w.spec.capacity.get("storage") {
            Some(q) => bytes(q).map_err(ctx)?,
            None => 0,
        };
        let node_affinity = w
            .spec
            .node_affinity
            .as_ref()
            .and_then(|a| a.required.as_ref())
            .map(NodeSelector::from_wire)
            .transpose()
            .map_err(|e| ctx(e.to_string()))?;
        Ok(PersistentVolume {
            name: Arc::from(name),
            labels: w.metadata.labels.clone(),
            deleting: w.metadata.deletion_timestamp.is_some(),
            capacity_bytes,
            access_modes: AccessModes::parse(&w.spec.access_modes).map_err(ctx)?,
            claim_ref: w.spec.claim_ref.as_ref().and_then(|r| {
                Some(ClaimRef {
                    key: ClaimKey::new(
                        super::pod::namespace_or_default(r.namespace.as_deref()),
                        r.name.as_deref().filter(|n| !n.is_empty())?,
                    ),
                    uid: Arc::from(r.uid.as_deref().unwrap_or("")),
                })
            }),
            storage_class: Arc::from(w.spec.storage_class_name.as_deref().unwrap_or("")),
            node_affinity,
            csi: w.spec.csi.as_ref().map(|c| {
                (
                    Arc::from(c.driver.as_str()),
                    Arc::from(c.volume_handle.as_str()),
                )
            }),
            block: w.spec.volume_mode.as_deref() == Some("Block"),
            phase: Arc::from(w.status.phase.as_deref().unwrap_or("Pending")),
        })
    }

    /// Whether `node` (name and labels) can reach this volume.
    pub fn reachable_from(&self, node: &str, labels: &BTreeMap<String, String>) -> bool {
        self.node_affinity
            .as_ref()
            .is_none_or(|a| a.matches(node, labels))
    }

    /// Whether the volume can be bound to `claim` (the PV controller's
    /// matching: class, access modes, capacity, volume mode, selector, and a
    /// claim reference that is absent or names this claim).
    pub fn can_bind(&self, claim: &Claim) -> bool {
        if self.deleting || &*self.storage_class != claim.class_name() || self.block != claim.block
        {
            return false;
        }
        if let Some(r) = &self.claim_ref
            && (r.key != claim.key || (!r.uid.is_empty() && r.uid != claim.uid))
        {
            return false;
        }
        if self.claim_ref.is_none() && &*self.phase != "Available" && &*self.phase != "Pending" {
            // Released or Failed volumes are never rebound.
            return false;
        }
        self.access_modes.contains(claim.access_modes)
            && self.capacity_bytes >= claim.request_bytes
            && claim
                .selector
                .as_ref()
                .is_none_or(|s| s.matches(&self.labels))
    }
}

// ----- StorageClass -----

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct StorageClassWire {
    pub metadata: ObjectMetaWire,
    pub provisioner: String,
    pub volume_binding_mode: Option<String>,
    pub allowed_topologies: Vec<TopologyTermWire>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct TopologyTermWire {
    pub match_label_expressions: Vec<TopologyRequirementWire>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct TopologyRequirementWire {
    pub key: String,
    pub values: Vec<String>,
}

/// The provisioner name of classes that provision nothing (static volumes only).
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// A StorageClass.
#[derive(Debug, Clone, PartialEq)]
pub struct StorageClass {
    pub name: Arc<str>,
    pub provisioner: Arc<str>,
    pub wait_for_first_consumer: bool,
    /// `allowedTopologies` as a node selector (terms ORed, `In` requirements
    /// ANDed); `None` when the class allows every node.
    pub allowed_topologies: Option<NodeSelector>,
}

impl StorageClass {
    pub fn from_wire(w: &StorageClassWire) -> Result<Self, ModelError> {
        let name = non_empty(
            w.metadata.name.as_deref(),
            "storage class has no metadata.name",
        )?;
        let wait_for_first_consumer = match w.volume_binding_mode.as_deref() {
            None | Some("Immediate") => false,
            Some("WaitForFirstConsumer") => true,
            Some(other) => {
                return Err(ModelError::invalid(format!(
                    "storageclass {name}: volumeBindingMode {other:?} is not valid"
                )));
            }
        };
        let terms: Vec<NodeSelectorTerm> = w
            .allowed_topologies
            .iter()
            .map(|t| NodeSelectorTerm {
                match_expressions: t
                    .match_label_expressions
                    .iter()
                    .map(|e| Requirement {
                        key: e.key.clone(),
                        op: Operator::In,
                        values: e.values.clone(),
                    })
                    .collect(),
                match_fields: Vec::new(),
            })
            .collect();
        Ok(StorageClass {
            name: Arc::from(name),
            provisioner: Arc::from(w.provisioner.as_str()),
            wait_for_first_consumer,
            allowed_topologies: (!terms.is_empty()).then_some(NodeSelector { terms }),
        })
    }

    /// Whether the class provisions volumes dynamically.
    pub fn provisions(&self) -> bool {
        !self.provisioner.is_empty() && &*self.provisioner != NO_PROVISIONER
    }

    /// Whether a volume provisioned by this class may serve `node`.
    pub fn allows(&self, node: &str, labels: &BTreeMap<String, String>) -> bool {
        self.allowed_topologies
            .as_ref()
            .is_none_or(|t| t.matches(node, labels))
    }
}

// ----- CSINode and CSIDriver -----

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct CsiNodeWire {
    pub metadata: ObjectMetaWire,
    pub spec: CsiNodeSpecWire,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct CsiNodeSpecWire {
    pub drivers: Vec<CsiNodeDriverWire>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct CsiNodeDriverWire {
    pub name: String,
    pub allocatable: Option<AllocatableWire>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct AllocatableWire {
    pub count: Option<i64>,
}

/// A CSINode: per driver, how many of its volumes the node can attach
/// (`None`: no limit reported).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiNode {
    pub name: Arc<str>,
    pub limits: BTreeMap<Arc<str>, u32>,
}

impl CsiNode {
    pub fn from_wire(w: &CsiNodeWire) -> Result<Self, ModelError> {
        let name = non_empty(w.metadata.name.as_deref(), "csinode has no metadata.name")?;
        let mut limits = BTreeMap::new();
        for d in &w.spec.drivers {
            if let Some(count) = d.allocatable.as_ref().and_then(|a| a.count) {
                // A negative count is invalid in the API; read it as zero
                // rather than as "no limit".
                let count = u32::try_from(count.max(0)).unwrap_or(u32::MAX);
                limits.insert(Arc::from(d.name.as_str()), count);
            }
        }
        Ok(CsiNode {
            name: Arc::from(name),
            limits,
        })
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct CsiDriverWire {
    pub metadata: ObjectMetaWire,
    pub spec: CsiDriverSpecWire,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct CsiDriverSpecWire {
    pub attach_required: Option<bool>,
}

/// A CSIDriver (recorded for `kubectl`-visible state and future use; the
/// limits come from CSINode, as upstream).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiDriver {
    pub name: Arc<str>,
    pub attach_required: bool,
}

impl CsiDriver {
    pub fn from_wire(w: &CsiDriverWire) -> Result<Self, ModelError> {
        let name = non_empty(w.metadata.name.as_deref(), "csidriver has no metadata.name")?;
        Ok(CsiDriver {
            name: Arc::from(name),
            attach_required: w.spec.attach_required.unwrap_or(true),
        })
    }
}

// ----- the PreBind writes -----

/// One write the VolumeBinding PreBind makes for a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimWrite {
    /// Annotate the claim with `volume.kubernetes.io/selected-node` so the
    /// provisioner creates a volume reachable from the node.
    SelectNode { claim: ClaimKey },
    /// Bind a static volume to the claim: set the volume's `claimRef` (the
    /// PV controller completes the claim's side).
    BindVolume {
        claim: ClaimKey,
        claim_uid: Arc<str>,
        volume: Arc<str>,
    },
}

impl ClaimWrite {
    pub fn claim(&self) -> &ClaimKey {
        match self {
            ClaimWrite::SelectNode { claim } | ClaimWrite::BindVolume { claim, .. } => claim,
        }
    }
}

// ----- helpers -----

fn non_empty<'a>(v: Option<&'a str>, msg: &str) -> Result<&'a str, ModelError> {
    v.filter(|s| !s.is_empty())
        .ok_or_else(|| ModelError::invalid(msg))
}

/// A storage quantity in bytes; negative is refused.
fn bytes(q: &QuantityWire) -> Result<i64, String> {
    let s = q.as_string();
    let parsed = Quantity::parse(&s).map_err(|e| format!("storage {s:?}: {e}"))?;
    if parsed.is_negative() {
        return Err(format!("storage {s:?} must not be negative"));
    }
    Ok(parsed.value())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_volumes_read_claims_ephemeral_csi_and_disks() {
        let vols: Vec<VolumeWire> = serde_json::from_value(json!([
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "fast"}}}},
            {"name": "inline", "csi": {"driver": "ebs.csi.aws.com"}},
            {"name": "pd", "gcePersistentDisk": {"pdName": "d1", "readOnly": true}},
            {"name": "cm", "configMap": {"name": "x"}},
        ]))
        .unwrap();
        let v = pod_volumes("web-0", &vols).unwrap();
        assert_eq!(v.len(), 4, "the configMap is not a volume the plugins read");
        assert!(
            matches!(&v[0], PodVolume::Claim { claim, ephemeral: false, .. } if &**claim == "data-0")
        );
        assert!(
            matches!(&v[1], PodVolume::Claim { claim, ephemeral: true, template_class: Some(c) }
            if &**claim == "web-0-scratch" && &**c == "fast")
        );
        assert!(
            matches!(&v[2], PodVolume::InlineCsi { driver, .. } if &**driver == "ebs.csi.aws.com")
        );
        assert!(pod_volumes("p", &[]).unwrap().is_empty());
    }

    #[test]
    fn disk_conflicts_follow_each_type() {
        let gce = |n: &str, ro| Disk::GcePd {
            pd_name: n.into(),
            read_only: ro,
        };
        assert!(gce("a", false).conflicts(&gce("a", true)));
        assert!(!gce("a", true).conflicts(&gce("a", true)));
        assert!(!gce("a", false).conflicts(&gce("b", false)));
        let ebs = |id: &str| Disk::AwsEbs {
            volume_id: id.into(),
        };
        assert!(ebs("v").conflicts(&ebs("v")));
        let rbd = |m: &[&str], ro| Disk::Rbd {
            monitors: m.iter().map(|s| s.to_string()).collect(),
            pool: "p".into(),
            image: "i".into(),
            read_only: ro,
        };
        assert!(rbd(&["a", "b"], false).conflicts(&rbd(&["b"], true)));
        assert!(!rbd(&["a"], false).conflicts(&rbd(&["b"], false)));
        assert!(!rbd(&["a"], true).conflicts(&rbd(&["a"], true)));
        assert!(!ebs("v").conflicts(&gce("v", false)));
    }

    fn claim(spec: serde_json::Value) -> Claim {
        let w: ClaimWire = serde_json::from_value(
            json!({"metadata": {"name": "c", "namespace": "ns", "uid": "cu"}, "spec": spec}),
        )
        .unwrap();
        Claim::from_wire(&w).unwrap()
    }

    fn pv(spec: serde_json::Value, labels: serde_json::Value) -> PersistentVolume {
        let w: PvWire = serde_json::from_value(json!({"metadata": {"name": "v", "labels": labels},
            "spec": spec, "status": {"phase": "Available"}}))
        .unwrap();
        PersistentVolume::from_wire(&w).unwrap()
    }

    #[test]
    fn volume_matching_is_the_pv_controllers() {
        let c = claim(
            json!({"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
            "resources": {"requests": {"storage": "5Gi"}},
            "selector": {"matchLabels": {"tier": "db"}}}),
        );
        let base = json!({"accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
            "storageClassName": "local", "capacity": {"storage": "10Gi"}});
        assert!(pv(base.clone(), json!({"tier": "db"})).can_bind(&c));
        assert!(
            !pv(base.clone(), json!({"tier": "web"})).can_bind(&c),
            "selector"
        );
        let mut small = base.clone();
        small["capacity"]["storage"] = json!("1Gi");
        assert!(!pv(small, json!({"tier": "db"})).can_bind(&c), "capacity");
        let mut other_class = base.clone();
        other_class["storageClassName"] = json!("fast");
        assert!(
            !pv(other_class, json!({"tier": "db"})).can_bind(&c),
            "class"
        );
        let mut rox = base.clone();
        rox["accessModes"] = json!(["ReadOnlyMany"]);
        assert!(!pv(rox, json!({"tier": "db"})).can_bind(&c), "modes");
        let mut taken = base.clone();
        taken["claimRef"] = json!({"namespace": "ns", "name": "other"});
        assert!(!pv(taken, json!({"tier": "db"})).can_bind(&c), "claimed");
        let mut mine = base;
        mine["claimRef"] = json!({"namespace": "ns", "name": "c"});
        assert!(
            pv(mine, json!({"tier": "db"})).can_bind(&c),
            "pre-bound to it"
        );
    }

    #[test]
    fn hostile_claims_are_refused() {
        let bad = |spec| {
            let w: ClaimWire =
                serde_json::from_value(json!({"metadata": {"name": "c"}, "spec": spec})).unwrap();
            Claim::from_wire(&w).unwrap_err().to_string()
        };
        assert!(bad(json!({"accessModes": ["Sometimes"]})).contains("access mode"));
        assert!(bad(json!({"resources": {"requests": {"storage": "-1Gi"}}})).contains("negative"));
    }

    #[test]
    fn classes_read_binding_mode_and_topologies() {
        let w: StorageClassWire = serde_json::from_value(json!({"metadata": {"name": "local"},
            "provisioner": "p", "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [
                {"key": "topology.kubernetes.io/zone", "values": ["a"]}]}]}))
        .unwrap();
        let sc = StorageClass::from_wire(&w).unwrap();
        assert!(sc.wait_for_first_consumer && sc.provisions());
        let zone = |z: &str| BTreeMap::from([("topology.kubernetes.io/zone".into(), z.into())]);
        assert!(sc.allows("n", &zone("a")) && !sc.allows("n", &zone("b")));
        let csi: CsiNodeWire = serde_json::from_value(json!({"metadata": {"name": "n"},
            "spec": {"drivers": [{"name": "d", "allocatable": {"count": 3}}, {"name": "e"}]}}))
        .unwrap();
        let csi = CsiNode::from_wire(&csi).unwrap();
        assert_eq!(csi.limits.get("d"), Some(&3));
        assert!(!csi.limits.contains_key("e"));
    }
}
