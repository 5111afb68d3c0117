//! The container deployments in `deploy/` and the `Containerfile`, checked without a container
//! engine: each example is exactly what `specie cluster package` writes for its cluster file, and
//! holds together as Compose and Kubernetes read it (every member a service or a StatefulSet with
//! its own address, volume and credentials, probes on its `/readyz` and `/livez`, every name it
//! refers to defined); the image builds the locked release binary with a toolchain every crate
//! accepts and runs it unprivileged. A cluster file with an address no container can have is
//! refused.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use specie_cluster::Topology;

use crate::cluster_harness::{specie, BIN};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Each member's address and the port its `/readyz` answers on, from the example's cluster file.
fn members(dir: &Path) -> BTreeMap<String, (std::net::IpAddr, u16)> {
    let path = dir.join("cluster.toml");
    let topology = Topology::load(&path).unwrap();
    assert!(topology.founding, "containers found their groups on their first start");
    let health: BTreeMap<String, SocketAddr> = (topology.scrape_targets().into_iter())
        .map(|t| match t.replica.is_empty() {
            true => (t.group, t.address),
            false => (format!("{}-{}", t.group, t.replica), t.address),
        })
        .collect();
    (specie_cluster::supervisor::members(&path, &topology).into_iter())
        .map(|m| {
            let address = health[&m.name];
            (m.name, (address.ip(), address.port()))
        })
        .collect()
}

/// `cluster package` of the example in `deploy/<target>` gives back the example, file for file.
fn regenerates(target: &str) -> PathBuf {
    let example = repository().join("deploy").join(target);
    let out = tempfile::tempdir().unwrap();
    let dir = example.to_str().unwrap();
    let written = specie(&[
        "cluster",
        "package",
        "--dir",
        dir,
        "--target",
        target,
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let written = String::from_utf8_lossy(&written.stdout).lines().count();
    assert_eq!(written, 3);
    for entry in std::fs::read_dir(out.path()).unwrap() {
        let made = entry.unwrap().path();
        let kept = example.join(made.file_name().unwrap());
        assert_eq!(
            std::fs::read_to_string(&made).unwrap(),
            std::fs::read_to_string(&kept).unwrap_or_default(),
            "{} is not what `specie cluster package --dir deploy/{target} --target {target} --out deploy/{target}` writes: run it",
            kept.display()
        );
    }
    example
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn strings(value: &Value) -> Vec<&str> {
    value.as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect()
}

#[test]
fn the_compose_example_is_what_package_writes_and_holds_together() {
    let example = regenerates("compose");
    let members = members(&example);
    let compose = json(&example.join("compose.yaml"));
    let subnet = compose["networks"]["specie"]["ipam"]["config"][0]["subnet"]
        .as_str()
        .unwrap();
    let services = compose["services"].as_object().unwrap();
    assert_eq!(services.keys().collect::<BTreeSet<_>>(), members.keys().collect());
    let declared: BTreeSet<&String> = compose["volumes"].as_object().unwrap().keys().collect();
    for (name, (ip, _)) in &members {
        let service = &services[name];
        assert_eq!(
            strings(&service["command"]),
            ["cluster", "run", "--dir", "/etc/specie", "--name", name]
        );
        assert_eq!(service["networks"]["specie"]["ipv4_address"], ip.to_string());
        assert!(
            subnet.starts_with(ip.to_string().rsplit_once('.').unwrap().0),
            "{ip} outside {subnet}"
        );
        let mut targets = BTreeSet::new();
        for volume in service["volumes"].as_array().unwrap() {
            targets.insert(volume["target"].as_str().unwrap());
            match volume["type"].as_str().unwrap() {
                "volume" => assert!(declared.contains(&volume["source"].as_str().unwrap().to_string())),
                "bind" => assert_eq!(volume["read_only"], true, "{volume}"),
                other => panic!("volume type {other}"),
            }
        }
        assert_eq!(
            targets,
            BTreeSet::from(["/etc/specie/cluster.toml", "/etc/specie-pki", "/var/lib/specie"])
        );
        let health = strings(&service["healthcheck"]["test"]);
        assert_eq!(
            health,
            [
                "CMD",
                "specie",
                "cluster",
                "ready",
                "--dir",
                "/etc/specie",
                "--name",
                name
            ]
        );
    }
}

/// A DNS-1123 label, as Kubernetes names objects and (within 15 characters) ports.
fn is_label(name: &str, most: usize) -> bool {
    !name.is_empty()
        && name.len() <= most
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

#[test]
fn the_kubernetes_example_is_what_package_writes_and_holds_together() {
    let example = regenerates("kubernetes");
    let members = members(&example);
    let list = json(&example.join("kubernetes.yaml"));
    assert_eq!(
        (list["apiVersion"].as_str(), list["kind"].as_str()),
        (Some("v1"), Some("List"))
    );
    let mut objects: BTreeMap<(String, String), &Value> = BTreeMap::new();
    for item in list["items"].as_array().unwrap() {
        let name = item["metadata"]["name"].as_str().unwrap();
        assert!(is_label(name, 63), "{name}");
        let kind = (item["apiVersion"].as_str().unwrap(), item["kind"].as_str().unwrap());
        assert!(
            matches!(kind, ("v1", "ConfigMap" | "Service") | ("apps/v1", "StatefulSet")),
            "{kind:?}"
        );
        assert!(
            objects.insert((kind.1.to_string(), name.to_string()), item).is_none(),
            "{name} twice"
        );
    }
    let config = objects[&("ConfigMap".to_string(), "specie-cluster".to_string())];
    assert_eq!(
        config["data"]["cluster.toml"].as_str().unwrap(),
        std::fs::read_to_string(example.join("cluster.toml")).unwrap()
    );
    for (name, (ip, health_port)) in &members {
        let service = objects[&("Service".to_string(), name.clone())];
        let set = objects[&("StatefulSet".to_string(), name.clone())];
        assert_eq!(service["spec"]["clusterIP"], ip.to_string());
        // Peers reach a replica before it is ready: it is ready once its group has a leader.
        assert_eq!(service["spec"]["publishNotReadyAddresses"], true);
        let spec = &set["spec"];
        assert_eq!(
            (spec["replicas"].as_u64(), spec["serviceName"].as_str()),
            (Some(1), Some(name.as_str()))
        );
        let labels = spec["template"]["metadata"]["labels"].as_object().unwrap();
        for (key, value) in spec["selector"]["matchLabels"].as_object().unwrap() {
            assert_eq!(labels.get(key), Some(value), "the selector picks the pod");
        }
        assert_eq!(&service["spec"]["selector"], &spec["selector"]["matchLabels"]);
        let pod = &spec["template"]["spec"];
        let container = &pod["containers"][0];
        assert_eq!(
            strings(&container["args"]),
            ["cluster", "run", "--dir", "/etc/specie", "--name", name, "--listen-any"]
        );
        let ports: BTreeMap<&str, u64> = (container["ports"].as_array().unwrap().iter())
            .map(|p| (p["name"].as_str().unwrap(), p["containerPort"].as_u64().unwrap()))
            .collect();
        for port in service["spec"]["ports"].as_array().unwrap() {
            let port_name = port["name"].as_str().unwrap();
            assert!(is_label(port_name, 15), "{port_name}");
            assert_eq!(port["port"], port["targetPort"]);
            assert_eq!(
                ports.get(port_name).copied(),
                port["port"].as_u64(),
                "{name}: {port_name}"
            );
        }
        for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/livez")] {
            assert_eq!(container[probe]["httpGet"]["path"], path);
            assert_eq!(
                container[probe]["httpGet"]["port"].as_u64(),
                Some(u64::from(*health_port))
            );
        }
        let mut volumes: BTreeSet<&str> = (pod["volumes"].as_array().unwrap().iter())
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        volumes.extend(
            (spec["volumeClaimTemplates"].as_array().unwrap().iter()).map(|c| c["metadata"]["name"].as_str().unwrap()),
        );
        let mounts: BTreeMap<&str, &str> = (container["volumeMounts"].as_array().unwrap().iter())
            .map(|m| (m["name"].as_str().unwrap(), m["mountPath"].as_str().unwrap()))
            .collect();
        assert_eq!(
            mounts.keys().copied().collect::<BTreeSet<_>>(),
            volumes,
            "every mount has its volume"
        );
        assert_eq!(mounts["data"], "/var/lib/specie");
        let secret = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "pki")
            .unwrap();
        assert_eq!(secret["secret"]["secretName"], format!("specie-pki-{name}"));
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        // The Secret's files belong to root; the pod's group reads them.
        let mode = secret["secret"]["defaultMode"].as_u64().unwrap();
        assert_eq!((mode & 0o040, mode & 0o007), (0o040, 0), "{mode:o}");
    }
    assert_eq!(objects.len(), 1 + 2 * members.len());
}

#[test]
fn the_image_builds_the_locked_release_binary_and_runs_it_unprivileged() {
    let root = repository();
    let containerfile = std::fs::read_to_string(root.join("Containerfile")).unwrap();
    let lines: Vec<&str> = containerfile
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect();
    let from: Vec<&str> = lines.iter().filter(|l| l.starts_with("FROM ")).copied().collect();
    assert_eq!(from.len(), 2, "a build stage and a runtime stage");
    // The toolchain of the build stage is one every crate of the workspace accepts.
    let tag = from[0].split(':').nth(1).unwrap();
    let version: Vec<u32> = tag
        .split('-')
        .next()
        .unwrap()
        .split('.')
        .map(|n| n.parse().unwrap())
        .collect();
    let mut needed = vec![];
    for manifest in glob_manifests(&root) {
        let text = std::fs::read_to_string(&manifest).unwrap();
        for line in text.lines().filter(|l| l.starts_with("rust-version")) {
            let wanted = line.split('"').nth(1).unwrap();
            let wanted: Vec<u32> = wanted.split('.').map(|n| n.parse().unwrap()).collect();
            assert!(
                version >= wanted,
                "{}: rust-version {wanted:?} above the image's {tag}",
                manifest.display()
            );
            needed.push(wanted);
        }
    }
    assert!(!needed.is_empty());
    assert!(containerfile.contains("cargo build --release --locked -p specie"));
    assert!(lines.iter().any(|l| l.starts_with("USER 10001")), "unprivileged");
    assert!(lines.contains(&r#"ENTRYPOINT ["specie"]"#));
    for dir in [
        specie_cluster::packaging::CONFIG_DIR,
        specie_cluster::packaging::PKI_DIR,
        specie_cluster::packaging::DATA_DIR,
    ] {
        assert!(containerfile.contains(dir), "the image makes {dir}");
    }
    let ignored = std::fs::read_to_string(root.join(".dockerignore")).unwrap();
    assert!(
        ignored.lines().any(|l| l == "/target"),
        "the build context leaves target/ out"
    );
    assert_eq!(ignored, std::fs::read_to_string(root.join(".containerignore")).unwrap());
}

fn glob_manifests(root: &Path) -> Vec<PathBuf> {
    let mut found = vec![root.join("Cargo.toml")];
    let mut pending = vec![root.join("crates")];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.file_name().is_some_and(|n| n == "Cargo.toml") {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn a_cluster_file_with_an_address_no_container_has_is_refused() {
    let temp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(repository().join("deploy/compose/cluster.toml")).unwrap();
    let split = text.replacen("172.28.0.11:7400", "127.0.0.1:7400", 1);
    let local = text.replace("172.28.0.11:", "127.0.0.1:");
    assert_ne!(split, text);
    for (file, refusal) in [(split, "differ in their IP"), (local, "cannot be a container's")] {
        std::fs::write(temp.path().join("cluster.toml"), file).unwrap();
        let out = temp.path().join("out");
        let refused = Command::new(BIN)
            .args([
                "cluster",
                "package",
                "--dir",
                temp.path().to_str().unwrap(),
                "--target",
                "compose",
            ])
            .args(["--out", out.to_str().unwrap()])
            .output()
            .unwrap();
        let message = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success());
        assert!(message.contains("shard-0-1") && message.contains(refusal), "{message}");
        assert!(!out.exists(), "nothing written");
    }
}
