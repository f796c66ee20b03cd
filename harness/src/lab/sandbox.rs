//! The sandbox: before it creates anything, the harness moves into a fresh network namespace
//! and a private mount namespace of its own (and a user namespace when it is not root), so no
//! packet meant for a node can leave the machine and every mount, link and nftables rule it
//! makes disappears with it, even when it is killed.
//!
//! Must run while the process is still single-threaded: a user namespace can only be entered
//! then, and namespaces are per thread, so only threads started afterwards inherit them.

use anyhow::Context;
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::unistd::{getegid, geteuid};

/// How the sandbox was made, for run.json and error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Privilege {
    /// The harness runs as root: network and mount namespaces only.
    Root,
    /// An ordinary user: a user namespace maps the user to root inside it.
    UserNamespace,
}

/// Enters the sandbox: always a private mount namespace (the power-loss filesystems vanish
/// with the harness), and a fresh network namespace when `network` is true.
///
/// # Errors
/// The kernel refuses the namespaces; the message says what is missing and how to enable it.
pub fn enter(network: bool) -> anyhow::Result<Privilege> {
    let net = if network {
        CloneFlags::CLONE_NEWNET
    } else {
        CloneFlags::empty()
    };
    let privilege = if geteuid().is_root() {
        unshare(net | CloneFlags::CLONE_NEWNS).context(
            "cannot create network and mount namespaces as root (is this a container without \
             CAP_SYS_ADMIN? run with --network loopback to go without partitions)",
        )?;
        Privilege::Root
    } else {
        let (uid, gid) = (geteuid(), getegid());
        unshare(CloneFlags::CLONE_NEWUSER | net | CloneFlags::CLONE_NEWNS).context(
            "cannot create a user namespace as an ordinary user (unprivileged user \
                 namespaces are disabled: sysctl kernel.unprivileged_userns_clone=1 and \
                 user.max_user_namespaces > 0 enable them; or run as root; or run with \
                 --network loopback to go without partitions)",
        )?;
        std::fs::write("/proc/self/setgroups", "deny").context("cannot write setgroups")?;
        std::fs::write("/proc/self/uid_map", format!("0 {uid} 1"))
            .context("cannot map the user into the user namespace")?;
        std::fs::write("/proc/self/gid_map", format!("0 {gid} 1"))
            .context("cannot map the group into the user namespace")?;
        Privilege::UserNamespace
    };
    // Mounts made from here on (FUSE under the nodes' data directories) stay in this
    // namespace and vanish with it.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .context("cannot make the mount namespace private")?;
    Ok(privilege)
}
