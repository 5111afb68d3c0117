//! `specie cluster package`: the cluster in a directory, as files for the engines operators run
//! containers with: a Compose file, or Kubernetes objects (a StatefulSet and a Service per
//! member, the cluster file as a ConfigMap). Written from the cluster file, so every member,
//! address and port comes from the one place; the container image is the repository's
//! `Containerfile`. No key is written: each member's credentials go into a mount (Compose) or a
//! Secret (Kubernetes) of its own, by the `credentials.sh` written beside them.
//!
//! Every member runs `specie cluster run --dir /etc/specie --name NAME`, its data on a volume of
//! its own at `/var/lib/specie`, and is ready when its `/readyz` answers 200. The cluster file
//! written says `founding = true`, so that each replica founds its group on its new, empty
//! volume; turn it off once every member has started (docs/operator-guide.md, "Containers").

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::identity::Identity;
use crate::supervisor::{self, io, SupervisorError, TOPOLOGY_FILE};
use crate::topology::Topology;

/// Where a container finds the cluster file, its credentials and its data.
pub const CONFIG_DIR: &str = "/etc/specie";
pub const PKI_DIR: &str = "/etc/specie-pki";
pub const DATA_DIR: &str = "/var/lib/specie";
/// The image `podman build -t specie .` (or `docker build`) makes from the `Containerfile`.
pub const DEFAULT_IMAGE: &str = "specie:latest";
/// The uid the image runs as (the `Containerfile`'s `specie` user).
const UID: u32 = 10001;
/// Each member's data volume in Kubernetes, until the operator sizes it.
const VOLUME_SIZE: &str = "10Gi";

/// What to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Compose,
    Kubernetes,
}

/// One member as a container sees it: its address (one per member) and its named ports.
struct Endpoint {
    name: String,
    ip: IpAddr,
    ports: Vec<(&'static str, u16)>,
    /// The port of its HTTP server: `/readyz`, `/livez`, `/metrics`.
    health_port: u16,
}

/// Every member's endpoint; refused unless each member's addresses share one IP that is neither
/// loopback nor unspecified.
fn endpoints(path: &Path, topology: &Topology) -> Result<Vec<Endpoint>, SupervisorError> {
    let health: BTreeMap<String, std::net::SocketAddr> = crate::rolling::readiness_addresses(topology);
    let mut wire = BTreeMap::new();
    for (_, group, replicas) in topology.replica_groups() {
        for replica in replicas {
            wire.insert(format!("{group}-{}", replica.id), replica.address);
        }
    }
    let mut endpoints = vec![];
    for member in supervisor::members(path, topology) {
        let unfit = |reason: String| SupervisorError::Packaging {
            reason: format!("{}: {reason}", member.name),
        };
        let health_address = *health.get(&member.name).ok_or_else(|| {
            unfit("it has no HTTP address (add `metrics = \"IP:PORT\"` to its entry in cluster.toml)".to_string())
        })?;
        let mut addresses = vec![("http", health_address)];
        match &member.identity {
            Identity::Sentinel { name } => {
                let sentinel = topology.sentinels.iter().find(|s| &s.name == name).expect("a member");
                addresses.extend(sentinel.endorser.map(|address| ("endorser", address)));
            }
            _ => addresses.push(("wire", wire[&member.name])),
        }
        let ip = health_address.ip();
        if let Some((_, other)) = addresses.iter().find(|(_, a)| a.ip() != ip) {
            return Err(unfit(format!(
                "its addresses {health_address} and {other} differ in their IP: a container has one"
            )));
        }
        if ip.is_loopback() || ip.is_unspecified() {
            return Err(unfit(format!(
                "its address {ip} cannot be a container's: give each member in cluster.toml the address it \
                 will have (Compose: one on the network's subnet; Kubernetes: a cluster IP of the service \
                 range), then run it again"
            )));
        }
        endpoints.push(Endpoint {
            name: member.name,
            ip,
            ports: addresses
                .iter()
                .map(|(name, address)| (*name, address.port()))
                .collect(),
            health_port: health_address.port(),
        });
    }
    Ok(endpoints)
}

/// `specie cluster package`: writes the cluster file as containers read it, the deployment
/// for `target`, and `credentials.sh`, into `out`; returns the files written.
pub fn package(dir: &Path, out: &Path, target: Target, image: &str) -> Result<Vec<PathBuf>, SupervisorError> {
    let (path, topology) = supervisor::load(dir)?;
    if topology.restored_from.is_some() {
        return Err(SupervisorError::Packaging {
            reason: "a restored cluster starts from its backup's states, which containers do not carry yet: \
                     package the cluster before restoring, or run the restored one with `cluster run`"
                .to_string(),
        });
    }
    let endpoints = endpoints(&path, &topology)?;
    let mut contained = topology.clone();
    contained.pki_dir = PathBuf::from(PKI_DIR);
    contained.data_dir = PathBuf::from(DATA_DIR);
    contained.founding = true;
    let toml = contained.to_toml();
    let (file, deployment) = match target {
        Target::Compose => ("compose.yaml", compose(&endpoints, image)?),
        Target::Kubernetes => ("kubernetes.yaml", kubernetes(&endpoints, image, &toml)),
    };
    std::fs::create_dir_all(out).map_err(io(format!("cannot create {}", out.display())))?;
    let written = [
        (TOPOLOGY_FILE, toml.clone()),
        (
            file,
            serde_json::to_string_pretty(&deployment).expect("JSON values serialise") + "\n",
        ),
        ("credentials.sh", credentials_script(&endpoints, target)),
    ];
    let mut paths = vec![];
    for (name, text) in written {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(io(format!("cannot write {}", path.display())))?;
        paths.push(path);
    }
    let script = out.join("credentials.sh");
    let executable = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&script, executable)
        .map_err(io(format!("cannot make {} executable", script.display())))?;
    Ok(paths)
}

/// The command every member's container runs.
fn run_args(name: &str, listen_any: bool) -> Vec<String> {
    let mut args = ["cluster", "run", "--dir", CONFIG_DIR, "--name", name]
        .map(String::from)
        .to_vec();
    if listen_any {
        args.push("--listen-any".to_string());
    }
    args
}

/// A Compose file: one service per member on a network of its own, with the member's address.
fn compose(endpoints: &[Endpoint], image: &str) -> Result<Value, SupervisorError> {
    let first = endpoints.first().map(|e| e.ip);
    let Some(IpAddr::V4(first)) = first else {
        return Err(SupervisorError::Packaging {
            reason: "the Compose network is IPv4: give the members IPv4 addresses".to_string(),
        });
    };
    let [a, b, c, _] = first.octets();
    let subnet = format!("{a}.{b}.{c}.0/24");
    let mut services = serde_json::Map::new();
    let mut volumes = serde_json::Map::new();
    for endpoint in endpoints {
        let inside = matches!(endpoint.ip, IpAddr::V4(ip) if ip.octets()[..3] == [a, b, c]);
        if !inside {
            return Err(SupervisorError::Packaging {
                reason: format!(
                    "{}: its address {} is not on the Compose network {subnet} (the first member's /24)",
                    endpoint.name, endpoint.ip
                ),
            });
        }
        let volume = format!("{}-data", endpoint.name);
        let mut health = vec!["CMD".to_string(), "specie".to_string()];
        health.extend(["cluster", "ready", "--dir", CONFIG_DIR, "--name", &endpoint.name].map(String::from));
        services.insert(
            endpoint.name.clone(),
            json!({
                "image": image,
                "command": run_args(&endpoint.name, false),
                "restart": "unless-stopped",
                "stop_grace_period": "15s",
                "networks": {"specie": {"ipv4_address": endpoint.ip.to_string()}},
                "volumes": [
                    {"type": "bind", "source": "./cluster.toml", "target": format!("{CONFIG_DIR}/cluster.toml"), "read_only": true},
                    {"type": "bind", "source": format!("./pki/{}", endpoint.name), "target": PKI_DIR, "read_only": true},
                    {"type": "volume", "source": volume, "target": DATA_DIR},
                ],
                "healthcheck": {"test": health, "interval": "5s", "timeout": "3s", "retries": 3, "start_period": "30s"},
            }),
        );
        volumes.insert(volume, json!({}));
    }
    Ok(json!({
        "name": "specie",
        "services": services,
        "networks": {"specie": {"ipam": {"config": [{"subnet": subnet}]}}},
        "volumes": volumes,
    }))
}

/// Kubernetes objects: the cluster file as a ConfigMap; per member a Service whose cluster IP is
/// the member's address, and a StatefulSet of one pod with a volume of its own, its Secret, and
/// readiness from `/readyz`.
fn kubernetes(endpoints: &[Endpoint], image: &str, toml: &str) -> Value {
    let mut items = vec![json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "specie-cluster", "labels": {"app.kubernetes.io/name": "specie"}},
        "data": {"cluster.toml": toml},
    })];
    for endpoint in endpoints {
        let labels = json!({"app.kubernetes.io/name": "specie", "app.kubernetes.io/instance": endpoint.name});
        let service_ports: Vec<Value> = (endpoint.ports.iter())
            .map(|(name, port)| json!({"name": name, "port": port, "targetPort": port, "protocol": "TCP"}))
            .collect();
        let container_ports: Vec<Value> = (endpoint.ports.iter())
            .map(|(name, port)| json!({"name": name, "containerPort": port, "protocol": "TCP"}))
            .collect();
        let probe = |path: &str, period: u32, failures: u32| json!({"httpGet": {"path": path, "port": endpoint.health_port}, "periodSeconds": period, "failureThreshold": failures});
        items.push(json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": endpoint.name, "labels": labels},
            // Replicas reach each other through their Services before any is ready (a replica is
            // ready once its group has a leader, which needs the others): route to pods that are
            // not ready too.
            "spec": {
                "clusterIP": endpoint.ip.to_string(),
                "selector": labels,
                "ports": service_ports,
                "publishNotReadyAddresses": true,
            },
        }));
        let pod = json!({
            "metadata": {"labels": labels},
            "spec": {
                "terminationGracePeriodSeconds": 15,
                "securityContext": {"runAsUser": UID, "runAsGroup": UID, "runAsNonRoot": true, "fsGroup": UID},
                "containers": [{
                    "name": "specie",
                    "image": image,
                    "args": run_args(&endpoint.name, true),
                    "ports": container_ports,
                    "readinessProbe": probe("/readyz", 5, 3),
                    "livenessProbe": probe("/livez", 10, 6),
                    "volumeMounts": [
                        {"name": "config", "mountPath": CONFIG_DIR, "readOnly": true},
                        {"name": "pki", "mountPath": PKI_DIR, "readOnly": true},
                        {"name": "data", "mountPath": DATA_DIR},
                    ],
                }],
                "volumes": [
                    {"name": "config", "configMap": {"name": "specie-cluster"}},
                    {"name": "pki", "secret": {"secretName": format!("specie-pki-{}", endpoint.name), "defaultMode": 0o440}},
                ],
            },
        });
        items.push(json!({
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": endpoint.name, "labels": labels},
            "spec": {
                "serviceName": endpoint.name,
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": pod,
                "volumeClaimTemplates": [{
                    "metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": VOLUME_SIZE}}},
                }],
            },
        }));
    }
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

/// What puts each member's credentials where its container reads them, and nothing more:
/// `cluster credentials` into `pki/<member>`, owned by the image's user for Compose's bind
/// mounts (so it runs as root), and for Kubernetes a Secret of each (readable by the pod's
/// `fsGroup`).
fn credentials_script(endpoints: &[Endpoint], target: Target) -> String {
    let names: Vec<&str> = endpoints.iter().map(|e| e.name.as_str()).collect();
    let secret = match target {
        Target::Compose => "\n  chown -R 10001:10001 \"pki/$member\"",
        Target::Kubernetes => {
            "\n  kubectl create secret generic \"specie-pki-$member\" --from-file=\"pki/$member\" --dry-run=client -o yaml \
             | kubectl apply -f -"
        }
    };
    format!(
        "#!/bin/sh\n\
         # Each member's credentials, and nothing more, from the cluster's directory on the operator's\n\
         # host (the one `specie cluster up` made): ./pki/<member>{}. Keys: keep pki/ private.\n\
         set -eu\n\
         DIR=${{1:?usage: credentials.sh CLUSTER_DIR}}\n\
         for member in {}; do\n  \
         specie cluster credentials --dir \"$DIR\" --name \"$member\" --out \"pki/$member\"{secret}\n\
         done\n",
        match target {
            Target::Compose => ", owned by the image's user (uid 10001: run it as root)",
            Target::Kubernetes => ", then a Secret specie-pki-<member> of each",
        },
        names.join(" ")
    )
}
