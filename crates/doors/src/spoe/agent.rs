//! The agent's side of an SPOP connection: HELLO, then NOTIFY answered by ACK in the order the
//! frames arrive, until DISCONNECT, an error, the idle timeout or shutdown.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use netacl_edge::{AclDecision, AclVerdict, Enforcer};
use netacl_listener::ConnectionGate;
use spop::frames::{Ack, AgentDisconnect, AgentHello, FrameCapabilities, HaproxyHello};
use spop::{FramePayload, FrameType, SpopCodec, SpopFrame, StatusCode, VarScope};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::Decoder;

use super::message::{SpoeRequest, MESSAGE_NAME};

/// HAProxy's own default `max-frame-size` (`tune.bufsize` less 4): the largest frame the
/// agent offers unless configured otherwise.
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_380;

/// The agent's settings. The connection caps come from the [`ConnectionGate`] it is given.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SpoeConfig {
    /// The largest frame accepted and announced (HAProxy's offer, if smaller, wins). At least
    /// 256 (SPOP's minimum); a frame announced larger is refused with "frame is too big".
    pub max_frame_size: u32,
    /// Time for HAPROXY-HELLO to arrive after the connection opens, and for the rest of any
    /// frame once its first byte arrived.
    pub frame_timeout: Duration,
    /// Time a connection may stay open with no frame (HAProxy keeps idle connections for its
    /// `timeout idle`; set this above it).
    pub idle_timeout: Duration,
}

impl Default for SpoeConfig {
    /// 16,380-byte frames, 10 s for a frame, 60 s idle.
    fn default() -> Self {
        Self {
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            frame_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Accepts SPOP connections on `listener` until the task is dropped, each admitted by `gate`
/// (its caps; its shutdown closes them) and served on its own task, every decision made by
/// `enforcer` (the edge's: the same policy, metrics, counts and sample).
pub async fn serve_spoe(
    listener: TcpListener,
    gate: ConnectionGate,
    enforcer: Arc<Enforcer>,
    config: SpoeConfig,
) {
    let config = Arc::new(config);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "spoe: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if gate.is_closing() {
            return;
        }
        let admitted = match gate.admit(peer) {
            Ok(admitted) => admitted,
            Err(refused) => {
                tracing::debug!(%peer, %refused, "spoe: connection refused");
                continue;
            }
        };
        let enforcer = Arc::clone(&enforcer);
        let config = Arc::clone(&config);
        tokio::spawn(async move {
            let served = admitted.handshake(serve_connection(stream, peer, &enforcer, &config));
            if let Some(Err(e)) = served.await {
                tracing::debug!(%peer, error = %e, "spoe: connection closed");
            }
        });
    }
}

/// Why a connection ended early.
#[derive(Debug, thiserror::Error)]
enum ConnError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("timed out")]
    Timeout,
    #[error("closed by HAProxy")]
    Closed,
    #[error("refused: {1}")]
    Refused(StatusCode, String),
}

struct Connection {
    stream: TcpStream,
    read: BytesMut,
    write: Vec<u8>,
    codec: SpopCodec,
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    enforcer: &Enforcer,
    config: &SpoeConfig,
) -> Result<(), ConnError> {
    let _ = stream.set_nodelay(true);
    let mut conn = Connection {
        stream,
        read: BytesMut::with_capacity(4096),
        write: Vec::with_capacity(512),
        codec: SpopCodec::new(config.max_frame_size.max(spop::MIN_FRAME_SIZE)),
    };
    let result = conn.run(enforcer, config).await;
    if let Err(ConnError::Refused(status, message)) = &result {
        tracing::info!(%peer, status = status.to_u32(), %message, "spoe: disconnecting");
        let disconnect = AgentDisconnect {
            status_code: status.to_u32(),
            message: message.clone(),
        };
        conn.write.clear();
        if disconnect.serialize_into(&mut conn.write).is_ok() {
            let _ = tokio::time::timeout(config.frame_timeout, conn.stream.write_all(&conn.write))
                .await;
        }
    }
    result
}

impl Connection {
    async fn run(&mut self, enforcer: &Enforcer, config: &SpoeConfig) -> Result<(), ConnError> {
        let hello = self.next_frame(config.frame_timeout, config).await?;
        if *hello.frame_type() != FrameType::HaproxyHello {
            return Err(ConnError::Refused(
                StatusCode::Invalid,
                "expected HAPROXY-HELLO".into(),
            ));
        }
        let hello = HaproxyHello::try_from(hello.payload())
            .map_err(|reason| ConnError::Refused(StatusCode::Invalid, reason))?;
        let version = hello.negotiate_version().ok_or_else(|| {
            ConnError::Refused(
                StatusCode::BadVersion,
                StatusCode::BadVersion.message().into(),
            )
        })?;
        let max_frame_size = hello
            .negotiate_max_frame_size(self.codec.max_frame_size())
            .map_err(|status| ConnError::Refused(status, status.message().into()))?;
        let pipelining = hello.capabilities.contains(&FrameCapabilities::Pipelining);
        let reply = AgentHello {
            version,
            max_frame_size,
            capabilities: if pipelining {
                vec![FrameCapabilities::Pipelining]
            } else {
                Vec::new()
            },
        };
        self.send(&reply, config).await?;
        self.codec.set_max_frame_size(max_frame_size);
        if hello.healthcheck == Some(true) {
            return Ok(());
        }
        loop {
            let frame = match self.next_frame(config.idle_timeout, config).await {
                Err(ConnError::Closed) => return Ok(()),
                other => other?,
            };
            match frame.frame_type() {
                FrameType::Notify => {
                    let metadata = frame.metadata();
                    let FramePayload::ListOfMessages(messages) = frame.payload() else {
                        return Err(ConnError::Refused(
                            StatusCode::Invalid,
                            "NOTIFY without messages".into(),
                        ));
                    };
                    let mut ack = Ack::new(metadata.stream_id, metadata.frame_id);
                    for message in messages.iter().filter(|m| m.name == MESSAGE_NAME) {
                        let request = SpoeRequest::from_message(message)
                            .map_err(|e| ConnError::Refused(StatusCode::Invalid, e.to_string()))?;
                        let decision = enforcer.decide_request(
                            Some(&request.conn),
                            &request.method,
                            &request.uri,
                            &request.headers,
                        );
                        ack = answer(ack, &decision);
                    }
                    self.send(&ack, config).await?;
                }
                FrameType::HaproxyDisconnect => {
                    let bye = AgentDisconnect {
                        status_code: StatusCode::None.to_u32(),
                        message: StatusCode::None.message().into(),
                    };
                    self.send(&bye, config).await?;
                    return Ok(());
                }
                _ => {
                    return Err(ConnError::Refused(
                        StatusCode::Invalid,
                        "unexpected frame after HELLO".into(),
                    ))
                }
            }
        }
    }

    /// The next whole frame: `wait` for its first byte, then the frame timeout for the rest.
    async fn next_frame(
        &mut self,
        wait: Duration,
        config: &SpoeConfig,
    ) -> Result<Box<dyn SpopFrame>, ConnError> {
        loop {
            if let Some(frame) = decode_frame(&mut self.read, &mut self.codec)
                .map_err(|refusal| ConnError::Refused(refusal.status, refusal.reason))?
            {
                return Ok(frame);
            }
            let timeout = if self.read.is_empty() {
                wait
            } else {
                config.frame_timeout
            };
            let read = tokio::time::timeout(timeout, self.stream.read_buf(&mut self.read))
                .await
                .map_err(|_| {
                    if self.read.is_empty() {
                        ConnError::Timeout
                    } else {
                        ConnError::Refused(
                            StatusCode::Timeout,
                            StatusCode::Timeout.message().into(),
                        )
                    }
                })??;
            if read == 0 {
                return Err(ConnError::Closed);
            }
        }
    }

    async fn send<F: SpopFrame>(
        &mut self,
        frame: &F,
        config: &SpoeConfig,
    ) -> Result<(), ConnError> {
        self.encode(frame)?;
        tokio::time::timeout(config.frame_timeout, self.stream.write_all(&self.write))
            .await
            .map_err(|_| ConnError::Timeout)??;
        Ok(())
    }

    /// Writes `frame` into the write buffer (apart from [`send`](Self::send): a frame is
    /// neither `Sync` nor held across an await).
    fn encode(&mut self, frame: &dyn SpopFrame) -> std::io::Result<()> {
        self.write.clear();
        frame.serialize_into(&mut self.write)
    }
}

/// Why a frame is refused: the status and reason of the AGENT-DISCONNECT that answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The SPOP status code.
    pub status: StatusCode,
    /// The message.
    pub reason: String,
}

/// The next whole frame at the front of `read` (removed from it), `None` until one has arrived
/// in full. Refused: a frame announced over the codec's limit (before its bytes are awaited),
/// a fragment (FIN clear: the agent announces no fragmentation), or a frame the codec cannot
/// parse. This is what the agent runs on every byte HAProxy sends, and what the `spoe_frames`
/// fuzz target runs.
pub fn decode_frame(
    read: &mut BytesMut,
    codec: &mut SpopCodec,
) -> Result<Option<Box<dyn SpopFrame>>, Refusal> {
    let refuse = |status: StatusCode| Refusal {
        status,
        reason: status.message().to_string(),
    };
    if read.len() >= 4 {
        let announced = u32::from_be_bytes([read[0], read[1], read[2], read[3]]);
        if announced > codec.max_frame_size() {
            return Err(refuse(StatusCode::TooBig));
        }
    }
    // FLAGS follow the length and the type byte; FIN clear is a fragment.
    if read.len() >= 9 && read[8] & 1 == 0 {
        return Err(refuse(StatusCode::FragmentationNotSupported));
    }
    codec.decode(read).map_err(|e| Refusal {
        status: StatusCode::Invalid,
        reason: e.to_string(),
    })
}

/// The variables HAProxy reads (`option var-prefix netacl`: `txn.netacl.NAME`): `action`
/// (`allow`, `block`, `redirect`, `invalid_path`, `misdirected`), `decision` (the verdict:
/// `none` or `allow` where `action` says `allow`), `rule` (the deciding rule's id), `location`
/// (a redirect's target) and `monitored` (the matched `log` rules' ids, comma-separated).
fn answer(ack: Ack, decision: &AclDecision) -> Ack {
    let action = match decision.verdict {
        AclVerdict::None | AclVerdict::Allow => "allow",
        other => other.as_str(),
    };
    let mut ack = ack
        .set_var(VarScope::Transaction, "action", action)
        .set_var(VarScope::Transaction, "decision", decision.verdict.as_str());
    if let Some(rule) = &decision.rule_id {
        ack = ack.set_var(VarScope::Transaction, "rule", rule.to_string());
    }
    if let (AclVerdict::Redirect, Some(location)) = (decision.verdict, &decision.redirect_uri) {
        ack = ack.set_var(VarScope::Transaction, "location", location.to_string());
    }
    if !decision.monitored.is_empty() {
        let ids: Vec<String> = decision.monitored.iter().map(|id| id.to_string()).collect();
        ack = ack.set_var(VarScope::Transaction, "monitored", ids.join(","));
    }
    ack
}
