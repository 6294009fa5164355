//! Hearing of committed changes: a dedicated connection that `LISTEN`s on [`CHANGES_CHANNEL`] and
//! reconnects by itself.
use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, NoTls};

use crate::TenantId;

/// The notification channel every committed network-ACL change is announced on, with the
/// payload `<tenant>:<version>`.
pub const CHANGES_CHANNEL: &str = "netacl_changes";

/// Notices kept for a slow reader; beyond that they are dropped (readers also check versions
/// periodically, so a dropped notice delays, never loses, a change).
const BUFFER: usize = 1024;

/// Shortest and longest pause before reconnecting.
const RETRY_MIN: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(2);

/// What the listener heard.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChangeNotice {
    /// A tenant's network ACLs were committed at this version.
    Changed {
        /// The tenant.
        tenant: TenantId,
        /// Its new rule-set version.
        version: u64,
    },
    /// A tenant's signing keys changed (a rotation or a revocation): reload them.
    KeysChanged {
        /// The tenant.
        tenant: TenantId,
    },
    /// A tenant was created or deleted: re-read the set of tenants.
    TenantsChanged,
    /// The listening connection was (re)established: changes made while it was down were not
    /// heard, so readers should compare versions now.
    Connected,
}

/// A running listener; dropping it stops it and closes its connection.
pub struct ChangeListener {
    notices: mpsc::Receiver<ChangeNotice>,
    connected: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for ChangeListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeListener")
            .field("connected", &self.is_connected())
            .finish()
    }
}

impl ChangeListener {
    pub(super) fn start(config: tokio_postgres::Config) -> Self {
        let (sender, notices) = mpsc::channel(BUFFER);
        let connected = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(run(config, sender, Arc::clone(&connected)));
        Self {
            notices,
            connected,
            task,
        }
    }

    /// The next notice; `None` only if the listener task ended (it does not, short of a panic).
    pub async fn recv(&mut self) -> Option<ChangeNotice> {
        self.notices.recv().await
    }

    /// Whether the listening connection is up right now.
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }
}

impl Drop for ChangeListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Connects, listens, forwards notifications; on any failure waits and starts over.
async fn run(
    config: tokio_postgres::Config,
    sender: mpsc::Sender<ChangeNotice>,
    connected: Arc<AtomicBool>,
) {
    let mut pause = RETRY_MIN;
    loop {
        match listen_once(&config, &sender, &connected).await {
            Ok(()) => return, // the reader is gone
            Err(reason) => {
                if connected.swap(false, Ordering::Relaxed) {
                    tracing::warn!(%reason, "change listener lost its database connection");
                    pause = RETRY_MIN;
                } else {
                    tracing::debug!(%reason, "change listener cannot connect yet");
                }
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RETRY_MAX);
    }
}

/// One connection's life. `Ok` when the reader went away, `Err` when the connection failed.
async fn listen_once(
    config: &tokio_postgres::Config,
    sender: &mpsc::Sender<ChangeNotice>,
    connected: &AtomicBool,
) -> Result<(), String> {
    let (client, mut connection) = config.connect(NoTls).await.map_err(|err| err.to_string())?;
    let (messages, mut incoming) = mpsc::unbounded_channel();
    // The connection must be polled for the client's queries to progress; it also yields the
    // notifications.
    let driver = tokio::spawn(async move {
        loop {
            match poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(message)) => {
                    if messages.send(Ok(message)).is_err() {
                        return;
                    }
                }
                Some(Err(err)) => {
                    let _ = messages.send(Err(err.to_string()));
                    return;
                }
                None => {
                    let _ = messages.send(Err("connection closed".to_owned()));
                    return;
                }
            }
        }
    });
    let _abort_driver = AbortOnDrop(driver);
    client
        .batch_execute(&format!("LISTEN {CHANGES_CHANNEL}"))
        .await
        .map_err(|err| err.to_string())?;
    connected.store(true, Ordering::Relaxed);
    tracing::info!("change listener connected");
    if sender.send(ChangeNotice::Connected).await.is_err() {
        return Ok(());
    }
    loop {
        tokio::select! {
            message = incoming.recv() => match message {
                Some(Ok(AsyncMessage::Notification(notification))) => {
                    let Some(notice) = parse(notification.payload()) else {
                        tracing::warn!(payload = notification.payload(), "unreadable change notice");
                        continue;
                    };
                    match sender.try_send(notice) {
                        Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => {}
                        Err(mpsc::error::TrySendError::Closed(_)) => return Ok(()),
                    }
                }
                Some(Ok(_)) => {} // notices and parameter changes
                Some(Err(reason)) => return Err(reason),
                None => return Err("connection closed".to_owned()),
            },
            () = sender.closed() => return Ok(()),
        }
    }
}

/// The payload suffix of a signing-key change.
pub(super) const KEYS_SUFFIX: &str = "keys";

/// `<tenant>:<version>`, `<tenant>:keys` or `tenants` → a notice.
fn parse(payload: &str) -> Option<ChangeNotice> {
    if payload == super::tenants::TENANTS_PAYLOAD {
        return Some(ChangeNotice::TenantsChanged);
    }
    let (tenant, version) = payload.rsplit_once(':')?;
    if version == KEYS_SUFFIX {
        return Some(ChangeNotice::KeysChanged {
            tenant: TenantId::new(tenant)?,
        });
    }
    Some(ChangeNotice::Changed {
        tenant: TenantId::new(tenant)?,
        version: version.parse().ok()?,
    })
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_parse_strictly() {
        assert_eq!(
            parse("default:42"),
            Some(ChangeNotice::Changed {
                tenant: TenantId::default_tenant(),
                version: 42
            })
        );
        assert_eq!(parse("default"), None);
        assert_eq!(parse("tenants"), Some(ChangeNotice::TenantsChanged));
        assert_eq!(parse("default:-1"), None);
        assert_eq!(parse("bad tenant:1"), None);
        assert_eq!(parse(":1"), None);
    }
}
