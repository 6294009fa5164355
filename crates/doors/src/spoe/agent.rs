//! The agent's side of an SPOP connection: HELLO, then NOTIFY answered by ACK in the order the
//! frames arrive, until DISCONNECT, an error, the idle timeout or shutdown.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use netacl_edge::{AclDecision, Enforcer};
use netacl_listener::ConnectionLimits;

use crate::door::{log_decision, status_of, Bound, DoorError, RunningDoor};
use crate::metrics::{DoorAnswer, DoorCounters};
use spop::frames::{Ack, AgentDisconnect, AgentHello, FrameCapabilities, HaproxyHello};
use spop::{FramePayload, FrameType, SpopCodec, SpopFrame, StatusCode, VarScope};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::codec::Decoder;

use super::message::{SpoeRequest, MESSAGE_NAME};

/// HAProxy's own default `max-frame-size` (`tune.bufsize` less 4): the largest frame the
/// agent offers unless configured otherwise.
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_380;

/// The `door` and `listener` label of the SPOE agent.
pub const DOOR: &str = "spoe";

/// The agent's settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SpoeConfig {
    /// Where to listen (`--spoe-listen`).
    pub listen: SocketAddr,
    /// Caps and timeouts: the edge's. HAPROXY-HELLO, and the rest of any frame once begun, must
    /// arrive within `header_read_timeout`; a connection with no frame is closed after
    /// `idle_timeout` (HAProxy keeps idle connections for its `timeout idle`: keep this above).
    pub limits: ConnectionLimits,
    /// The largest frame accepted and announced (HAProxy's offer, if smaller, wins). At least
    /// 256 (SPOP's minimum); a frame announced larger is refused with "frame is too big".
    pub max_frame_size: u32,
}

impl SpoeConfig {
    /// An agent on `listen` under `limits`, with 16,380-byte frames.
    pub fn new(listen: SocketAddr, limits: ConnectionLimits) -> Self {
        Self {
            listen,
            limits,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
        }
    }
}

/// What each connection needs: the decision, the counters, the timeouts.
struct Agent {
    enforcer: Arc<Enforcer>,
    counters: Arc<DoorCounters>,
    max_frame_size: u32,
    frame_timeout: Duration,
    idle_timeout: Duration,
}

/// Binds the agent and serves it in a background task: every connection admitted by a gate
/// under `config.limits`, every NOTIFY decided by `enforcer` (the edge's: the same policy,
/// metrics, counts and sample). Registers the agent's answer counters and listener counters
/// with the enforcer's metrics (`door="spoe"`).
///
/// # Errors
///
/// [`DoorError::Bind`] when the address cannot be bound.
pub async fn start_spoe(
    enforcer: Arc<Enforcer>,
    config: SpoeConfig,
) -> Result<RunningDoor, DoorError> {
    let frame_timeout = config.limits.header_read_timeout;
    let idle_timeout = config.limits.idle_timeout;
    let Bound {
        listener,
        addr,
        gate,
        counters,
    } = Bound::new(&enforcer, DOOR, config.listen, config.limits).await?;
    let agent = Arc::new(Agent {
        enforcer,
        counters: Arc::clone(&counters),
        max_frame_size: config.max_frame_size.max(spop::MIN_FRAME_SIZE),
        frame_timeout,
        idle_timeout,
    });
    let accepting = gate.clone();
    let task = tokio::spawn(async move {
        while let Some((stream, peer, admitted)) = accepting.accept(&listener).await {
            let agent = Arc::clone(&agent);
            tokio::spawn(async move {
                let served = admitted.handshake(serve_connection(stream, peer, &agent));
                if let Some(Err(e)) = served.await {
                    tracing::debug!(door = DOOR, %peer, error = %e, "connection closed");
                }
            });
        }
    });
    tracing::info!(door = DOOR, %addr, "netacl SPOE agent listening");
    Ok(RunningDoor::new(addr, gate, counters, task))
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
    agent: &Agent,
) -> Result<(), ConnError> {
    let _ = stream.set_nodelay(true);
    let mut conn = Connection {
        stream,
        read: BytesMut::with_capacity(4096),
        write: Vec::with_capacity(512),
        codec: SpopCodec::new(agent.max_frame_size),
    };
    let result = conn.run(agent).await;
    if let Err(ConnError::Refused(status, message)) = &result {
        tracing::info!(%peer, status = status.to_u32(), %message, "spoe: disconnecting");
        let disconnect = AgentDisconnect {
            status_code: status.to_u32(),
            message: message.clone(),
        };
        // After the ACKs of the frames answered before the refused one, if any.
        if disconnect.serialize_into(&mut conn.write).is_ok() {
            let _ =
                tokio::time::timeout(agent.frame_timeout, conn.stream.write_all(&conn.write)).await;
        }
    }
    result
}

impl Connection {
    async fn run(&mut self, agent: &Agent) -> Result<(), ConnError> {
        let hello = self
            .next_frame(agent.idle_timeout.min(agent.frame_timeout), agent)
            .await?;
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
        self.write.clear();
        reply.serialize_into(&mut self.write)?;
        self.flush(agent).await?;
        self.codec.set_max_frame_size(max_frame_size);
        if hello.healthcheck == Some(true) {
            return Ok(());
        }
        loop {
            // Every frame already read is answered before the ACKs go out in one write: with
            // pipelining, HAProxy sends several NOTIFY frames at once, and their ACKs share
            // one system call on each side.
            if !self.write.is_empty() && !self.buffered_frame_pending() {
                self.flush(agent).await?;
            }
            let frame = match self.next_frame(agent.idle_timeout, agent).await {
                Err(ConnError::Closed) => return Ok(()),
                other => other?,
            };
            match frame.frame_type() {
                FrameType::Notify => {
                    // netacl's time for the frame, without the access events' writes.
                    let mut started = Instant::now();
                    let mut took = Duration::ZERO;
                    let metadata = frame.metadata();
                    let FramePayload::ListOfMessages(messages) = frame.payload() else {
                        return Err(ConnError::Refused(
                            StatusCode::Invalid,
                            "NOTIFY without messages".into(),
                        ));
                    };
                    let mut ack = Ack::new(metadata.stream_id, metadata.frame_id);
                    for message in messages.iter().filter(|m| m.name == MESSAGE_NAME) {
                        let request = SpoeRequest::from_message(message).map_err(|e| {
                            agent.counters.record(DoorAnswer::BadRequest);
                            ConnError::Refused(StatusCode::Invalid, e.to_string())
                        })?;
                        let decision = agent.enforcer.decide_facts(&request.request_facts());
                        agent.counters.record(DoorAnswer::Decided(decision.verdict));
                        ack = answer(ack, &decision);
                        took += started.elapsed();
                        log_decision(
                            DOOR,
                            &request.method,
                            request.uri.path(),
                            &decision,
                            status_of(&decision),
                        );
                        started = Instant::now();
                    }
                    ack.serialize_into(&mut self.write)?;
                    agent.counters.observe_check(took + started.elapsed());
                }
                FrameType::HaproxyDisconnect => {
                    let bye = AgentDisconnect {
                        status_code: StatusCode::None.to_u32(),
                        message: StatusCode::None.message().into(),
                    };
                    self.write.clear();
                    bye.serialize_into(&mut self.write)?;
                    self.flush(agent).await?;
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
        agent: &Agent,
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
                agent.frame_timeout
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

    /// Whether a whole frame is already in the read buffer (its length prefix says so).
    fn buffered_frame_pending(&self) -> bool {
        self.read.len() >= 4 && {
            let announced =
                u32::from_be_bytes([self.read[0], self.read[1], self.read[2], self.read[3]]);
            self.read.len() - 4 >= announced as usize
        }
    }

    /// Writes out the frames encoded so far and empties the write buffer.
    async fn flush(&mut self, agent: &Agent) -> Result<(), ConnError> {
        tokio::time::timeout(agent.frame_timeout, self.stream.write_all(&self.write))
            .await
            .map_err(|_| ConnError::Timeout)??;
        self.write.clear();
        Ok(())
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
    // A decision that stops the request is carried out as the edge answers it (a redirect
    // whose target cannot be sent is a block).
    let refusal = decision.refusal();
    let action = refusal.map_or("allow", |r| r.verdict.as_str());
    let mut ack = ack
        .set_var(VarScope::Transaction, "action", action)
        .set_var(VarScope::Transaction, "decision", decision.verdict.as_str());
    if let Some(rule) = &decision.rule_id {
        ack = ack.set_var(VarScope::Transaction, "rule", rule.to_string());
    }
    if let Some(location) = refusal.and_then(|r| r.location) {
        ack = ack.set_var(VarScope::Transaction, "location", location.to_string());
    }
    if !decision.monitored.is_empty() {
        let ids: Vec<String> = decision.monitored.iter().map(|id| id.to_string()).collect();
        ack = ack.set_var(VarScope::Transaction, "monitored", ids.join(","));
    }
    ack
}
