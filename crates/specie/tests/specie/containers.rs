//! The Compose deployment `specie cluster package` writes, run as Compose would run it, without a
//! container engine: each service in a network namespace of its own with the address the file
//! gives it, in a mount namespace of its own with exactly the file's mounts (read-only where it
//! says so; a new, empty directory for each named volume), running the file's command as the
//! image's unprivileged user. The
//! members' credentials come from the `credentials.sh` written beside it. Every member founds
//! or joins its group on its empty volume, each service's health check passes, and the demo's
//! payments end in the audit. The sentinel runs with `--listen-any`, as every member does in the
//! Kubernetes deployment (behind its service's address), and answers on its namespace's loopback
//! too.
//!
//! Like `netns::`, it needs root and `ip`; without them it says it skipped, except under CI.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use specie_cluster::Topology;

use crate::cluster_harness::{assert_audit, finish_demo, make_host, specie, start_demo, wait_healthy, Children, BIN};
use crate::netns::{made_and_stopped, relocate, Net};

/// The image's user (the `Containerfile`'s `specie`).
const UID: u32 = 10001;

/// Where the container's paths are mounted from, on this host.
struct Mounts {
    /// `(source, target, read_only)`, each source a path here.
    binds: Vec<(PathBuf, String, bool)>,
}

impl Mounts {
    /// The service's `volumes` as Compose would mount them: binds relative to `project`, each
    /// named volume a new directory under `volumes`.
    fn of(service: &Value, project: &Path, volumes: &Path) -> Mounts {
        let mut binds = vec![];
        for volume in service["volumes"].as_array().unwrap() {
            let (source, target) = (volume["source"].as_str().unwrap(), volume["target"].as_str().unwrap());
            let source = match volume["type"].as_str().unwrap() {
                "bind" => project.join(source),
                // A new named volume takes the owner of the image's directory: its user's.
                "volume" => {
                    let dir = volumes.join(source);
                    std::fs::create_dir_all(&dir).unwrap();
                    std::os::unix::fs::chown(&dir, Some(UID), Some(UID)).unwrap();
                    dir
                }
                other => panic!("volume type {other}"),
            };
            binds.push((source, target.to_string(), volume["read_only"] == true));
        }
        Mounts { binds }
    }

    /// A shell script that makes the mounts in a new mount namespace, then runs `command` as the
    /// image's user. A file is mounted over an empty file in a tmpfs made over its directory.
    fn script(&self, command: &[String]) -> String {
        let mut lines = vec!["set -e".to_string()];
        for (source, target, read_only) in &self.binds {
            if source.is_file() {
                let parent = Path::new(target).parent().unwrap().display().to_string();
                lines.push(format!("mountpoint -q {parent} || mount -t tmpfs container {parent}"));
                lines.push(format!("touch {target}"));
            }
            lines.push(format!("mount --bind '{}' {target}", source.display()));
            if *read_only {
                lines.push(format!("mount -o remount,bind,ro {target}"));
            }
        }
        let quoted: Vec<String> = command.iter().map(|a| format!("'{a}'")).collect();
        lines.push(format!(
            "exec setpriv --reuid {UID} --regid {UID} --clear-groups {BIN} {}",
            quoted.join(" ")
        ));
        lines.join("\n")
    }
}

/// Runs `script` in `namespace` and a mount namespace of its own.
fn contained(namespace: &str, script: &str) -> Command {
    let mut command = Command::new("ip");
    command
        .args([
            "netns",
            "exec",
            namespace,
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
        ])
        .arg(script);
    command
}

/// The mount points of the image's paths, made here if missing (and removed afterwards).
struct MountPoints(Vec<PathBuf>);

impl MountPoints {
    fn make() -> MountPoints {
        use specie_cluster::packaging::{CONFIG_DIR, DATA_DIR, PKI_DIR};
        let made = [CONFIG_DIR, PKI_DIR, DATA_DIR]
            .into_iter()
            .map(PathBuf::from)
            .filter(|dir| !dir.exists())
            .collect::<Vec<_>>();
        for dir in &made {
            std::fs::create_dir_all(dir).unwrap();
        }
        MountPoints(made)
    }
}

impl Drop for MountPoints {
    fn drop(&mut self) {
        for dir in &self.0 {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

#[test]
fn the_packaged_compose_deployment_runs_with_each_service_contained() {
    let Some(net) = Net::or_skip(7) else { return };
    let _points = MountPoints::make();
    let root = tempfile::tempdir().unwrap();
    let cluster = root.path().join("cluster");
    let cluster = cluster.to_str().unwrap();
    made_and_stopped(cluster);
    // The operator gives each member the address it will have on the Compose network.
    let path = Path::new(cluster).join("cluster.toml");
    let mut topology = Topology::load(&path).unwrap();
    let names: Vec<String> = (specie_cluster::supervisor::members(&path, &topology).into_iter())
        .map(|m| m.name)
        .collect();
    relocate(&mut topology, |member| {
        net.address(names.iter().position(|n| n == member).unwrap())
    });
    std::fs::write(&path, topology.to_toml()).unwrap();

    let project = root.path().join("project");
    let project_dir = project.to_str().unwrap();
    specie(&[
        "cluster",
        "package",
        "--dir",
        cluster,
        "--target",
        "compose",
        "--out",
        project_dir,
    ]);
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path_var = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let made = Command::new("sh")
        .args(["credentials.sh", cluster])
        .current_dir(&project)
        .env("PATH", path_var)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));

    let compose: Value = serde_json::from_str(&std::fs::read_to_string(project.join("compose.yaml")).unwrap()).unwrap();
    let volumes = root.path().join("volumes");
    let mut services = Children(vec![]);
    let mut checks = vec![];
    for (name, service) in compose["services"].as_object().unwrap() {
        let host = names.iter().position(|n| n == name).unwrap();
        assert_eq!(
            service["networks"]["specie"]["ipv4_address"],
            net.address(host).to_string()
        );
        let mounts = Mounts::of(service, &project, &volumes);
        let mut command: Vec<String> = (service["command"].as_array().unwrap().iter())
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        // The sentinel as Kubernetes runs every member: bound to every address of its own.
        if name == "sentinel-0" {
            command.push("--listen-any".to_string());
        }
        let log = std::fs::File::create(root.path().join(format!("{name}.log"))).unwrap();
        let child = contained(&net.namespace(host), &mounts.script(&command))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        services.0.push(child);
        let health: Vec<String> = (service["healthcheck"]["test"].as_array().unwrap().iter().skip(2))
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        checks.push((net.namespace(host), mounts.script(&health)));
    }

    let operator = root.path().join("operator");
    make_host(cluster, &operator, "operator");
    wait_healthy(operator.to_str().unwrap());
    // Compose runs each health check until it passes, past a start period.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    for (namespace, check) in &checks {
        loop {
            let output = contained(namespace, check).output().unwrap();
            if output.status.success() {
                break;
            }
            let why = String::from_utf8_lossy(&output.stderr);
            assert!(std::time::Instant::now() < deadline, "{check}: {why}");
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    }
    // Each replica's volume holds its data (a sentinel keeps none without an endorsement group).
    for name in names.iter().filter(|name| !name.starts_with("sentinel-")) {
        assert!(
            volumes.join(format!("{name}-data")).join(name).is_dir(),
            "{name}'s data"
        );
    }
    // Inside its namespace, the sentinel (--listen-any) answers on 127.0.0.1 too; a replica,
    // bound to its address alone, does not.
    let local = |member: &str, port: u16| {
        let host = names.iter().position(|n| n == member).unwrap();
        let get = format!("import urllib.request; urllib.request.urlopen('http://127.0.0.1:{port}/livez', timeout=5)");
        let ran = Command::new("ip")
            .args(["netns", "exec", &net.namespace(host), "python3", "-c", &get])
            .output();
        ran.unwrap().status.success()
    };
    assert!(local("sentinel-0", topology.sentinels[0].http.port()));
    let shard = &topology.shard_groups[0].replicas[0];
    assert!(!local("shard-0-1", shard.metrics.unwrap().port()));
    let sentinel = root.path().join("sentinel-host");
    make_host(cluster, &sentinel, "sentinel-0");
    std::fs::copy(Path::new(cluster).join("issuer.key"), sentinel.join("issuer.key")).unwrap();
    assert_audit(&finish_demo(start_demo(sentinel.to_str().unwrap(), "600", "41")));
}
