//! One process per host (docs/operator-guide.md, "Running on several hosts"): `specie cluster
//! run` runs one member of the topology in the foreground, as a service manager or a container
//! runs it, and `specie cluster credentials` copies what that member needs of the PKI for its
//! host, and nothing more.

use std::path::{Path, PathBuf};

use crate::credentials::{
    self, attestation_key_path, authority_key_path, authority_next_key_path, cert_path, key_path,
    offline_operator_token_path, offline_seed_path, CA_CERT_FILE,
};
use crate::identity::{GroupRole, Identity};
use crate::supervisor::{self, io, Member, SupervisorError};
use crate::topology::{authority_group_name, Topology};

/// The name `cluster credentials` takes for the operator's files (what `cluster status` and
/// `cluster digests` need), beside the members' names.
pub const OPERATOR: &str = "operator";

/// The member of the cluster in `dir` called `name`, or an error listing every name.
fn member(dir: &Path, name: &str) -> Result<(Topology, Member), SupervisorError> {
    let (path, topology) = supervisor::load(dir)?;
    let mut members = supervisor::members(&path, &topology);
    match members.iter().position(|member| member.name == name) {
        Some(at) => Ok((topology, members.swap_remove(at))),
        None => Err(SupervisorError::UnknownMember {
            name: name.to_string(),
            names: members.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", "),
        }),
    }
}

/// `specie cluster run`: runs the member called `name` in this process's place (`exec`), in the
/// foreground, logging to stderr; it binds the addresses the cluster file gives it. Returns
/// only if it cannot start.
pub fn run(dir: &Path, name: &str, listen_any: bool) -> SupervisorError {
    use std::os::unix::process::CommandExt;
    let (_, member) = match member(dir, name) {
        Ok(found) => found,
        Err(error) => return error,
    };
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(source) => return io("cannot find the running program")(source),
    };
    let mut command = std::process::Command::new(program);
    if listen_any {
        command.env(crate::host::LISTEN_ANY_ENV, "1");
    }
    let error = command.args(&member.args).exec();
    io(format!("cannot start {name}"))(error)
}

/// `specie cluster ready`: what member `name`'s `/readyz` says (for a container's or a service
/// manager's health check).
pub fn ready(dir: &Path, name: &str) -> Result<specie_service::health::Probe, SupervisorError> {
    let (topology, _) = member(dir, name)?;
    Ok(crate::rolling::readiness(
        &crate::rolling::readiness_addresses(&topology),
        name,
    ))
}

/// The files of the cluster's PKI the process of `identity` reads: the CA certificate, its own
/// certificate and key, and its role's secrets (a sentinel's attestation key, an authority
/// seat's key and, while a rotation runs, its next one, the offline authority's seed and
/// operator token, the exchange's seed). Each with whether it is secret.
pub fn credential_files(topology: &Topology, identity: &Identity) -> Vec<(PathBuf, bool)> {
    let pki = &topology.pki_dir;
    let mut files = vec![
        (pki.join(CA_CERT_FILE), false),
        (cert_path(pki, identity), false),
        (key_path(pki, identity), true),
    ];
    match identity {
        Identity::Sentinel { name } => files.push((attestation_key_path(pki, name), true)),
        Identity::Replica { role, group, .. } => match role {
            GroupRole::Authority => {
                let seats = topology
                    .fastpay_committee
                    .iter()
                    .flat_map(|c| c.authorities.iter().enumerate());
                let seat = seats
                    .flat_map(|(seat, processes)| (0..processes.shards.len()).map(move |shard| (seat, shard)))
                    .find(|&(seat, shard)| authority_group_name(seat, shard) == *group)
                    .map(|(seat, _)| seat as u16);
                if let Some(seat) = seat {
                    let (key, next) = (authority_key_path(pki, seat), authority_next_key_path(pki, seat));
                    files.push((key.clone(), true));
                    // A rotation's next key, before or after the hand-over (rotation.rs).
                    let ready = PathBuf::from(format!("{}.ready", key.display()));
                    files.extend([next, ready].into_iter().filter(|p| p.exists()).map(|p| (p, true)));
                }
            }
            GroupRole::Offline => {
                files.extend([(offline_seed_path(pki), true), (offline_operator_token_path(pki), true)])
            }
            GroupRole::Exchange => files.push((credentials::exchange_seed_path(pki), true)),
            GroupRole::Shard | GroupRole::Coordinator | GroupRole::Archiver | GroupRole::Atomizer => {}
        },
        Identity::Operator => {}
    }
    files
}

/// `specie cluster credentials`: copies what the member called `name` (or the operator) needs
/// of the PKI into `out` (made private if new), under the same file names, secrets readable by
/// their owner alone. A file already in `out` is left if it is the same, refused if it differs.
/// Returns the files written.
pub fn export_credentials(dir: &Path, name: &str, out: &Path) -> Result<Vec<PathBuf>, SupervisorError> {
    let (topology, identity) = if name == OPERATOR {
        let (_, topology) = supervisor::load(dir)?;
        (topology, Identity::Operator)
    } else {
        let (topology, member) = member(dir, name)?;
        (topology, member.identity)
    };
    credentials::create_private_dir(out).map_err(supervisor::credentials("cannot make the credentials' directory"))?;
    let mut written = vec![];
    for (from, secret) in credential_files(&topology, &identity) {
        let file_name = from.file_name().expect("a file in the PKI directory");
        let to = out.join(file_name);
        let bytes = std::fs::read(&from).map_err(io(format!("cannot read {}", from.display())))?;
        match std::fs::read(&to) {
            Ok(existing) if existing == bytes => continue,
            Ok(_) => {
                return Err(SupervisorError::CredentialsDiffer {
                    path: to,
                    from: from.clone(),
                })
            }
            Err(_) => {}
        }
        let text = String::from_utf8(bytes).map_err(|_| {
            supervisor::credentials("cannot copy")(credentials::CredentialsError::NotText { path: from.clone() })
        })?;
        let write = if secret {
            credentials::write_secret
        } else {
            credentials::write_public
        };
        write(&to, &text).map_err(supervisor::credentials("cannot write the credentials"))?;
        written.push(to);
    }
    Ok(written)
}
