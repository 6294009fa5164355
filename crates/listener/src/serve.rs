//! Serving one admitted connection: hyper-util's auto builder (HTTP/1.1 and HTTP/2) under the
//! gate's limits, watched by a timer for the header and idle timeouts, eviction and shutdown.
use std::error::Error as StdError;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response, Version};
use http_body::Body;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use crate::body::{RequestBody, ResponseBody, ResponseFuture};
use crate::connection::{ConnState, Expiry, Watch};
use crate::gate::{Admitted, Slot};
use crate::stats::bump;

/// How long an HTTP/2 connection closed for idleness, eviction or shutdown with nothing in
/// flight is given to send its `GOAWAY` before it is dropped.
const GOAWAY_GRACE: Duration = Duration::from_secs(1);

/// The connection's byte stream: notes the bytes that start a request head, and holds the
/// connection's place in the gate until it is dropped (after an upgrade too).
struct TrackedIo<I> {
    inner: I,
    state: Arc<ConnState>,
    _slot: Slot,
}

impl<I> Drop for TrackedIo<I> {
    fn drop(&mut self) {
        self.state.close_io();
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for TrackedIo<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.state.on_read();
        }
        polled
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for TrackedIo<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.state.on_write(polled.is_pending());
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.state.on_write(polled.is_pending());
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The caller's service, each request marked in flight and its body under its deadline.
struct Tracked<S> {
    inner: S,
    state: Arc<ConnState>,
}

impl<S, B> hyper::service::Service<Request<Incoming>> for Tracked<S>
where
    S: hyper::service::Service<Request<RequestBody>, Response = Response<B>>,
{
    type Response = Response<ResponseBody<B>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let in_flight = self.state.begin(request.version() == Version::HTTP_2);
        let state = Arc::clone(&self.state);
        let request = request.map(|body| RequestBody::new(body, state));
        ResponseFuture::new(self.inner.call(request), in_flight)
    }
}

/// Why the serving loop ends a connection on its own.
enum Close {
    /// Drop it now.
    Now,
    /// `GOAWAY` (HTTP/2) or finish the request in flight (HTTP/1.1), then close.
    Gracefully,
}

impl Admitted {
    /// Serves HTTP/1.1 and HTTP/2 (with upgrades: WebSocket) on `io` with `service` until the
    /// connection ends, under the gate's limits:
    ///
    /// - the first request head is due within the header-read timeout of this call (the end of
    ///   any handshake), each later HTTP/1.1 head within the header-read timeout of its first
    ///   byte; a connection with nothing in flight closes after the idle timeout, and so does
    ///   one whose client reads nothing of its answer (its socket stays full) for that long;
    /// - every request body is a [`RequestBody`] under its deadline;
    /// - evicted (with nothing in flight), the connection closes at once;
    /// - when the gate closes, a connection with nothing in flight closes at once (HTTP/2 after
    ///   its `GOAWAY`), one serving a request finishes it first.
    ///
    /// The service sees `Request<RequestBody>`; insert per-connection extensions (the peer
    /// address) in it. Its response body is sent as it is produced.
    pub async fn serve<I, S, B>(self, io: I, service: S)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
        S: hyper::service::Service<Request<RequestBody>, Response = Response<B>> + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<Box<dyn StdError + Send + Sync>>,
        B: Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn StdError + Send + Sync>>,
    {
        let Admitted { slot } = self;
        let gate = Arc::clone(&slot.gate);
        let state = Arc::clone(&slot.state);
        state.start();
        let io = TokioIo::new(TrackedIo {
            inner: io,
            state: Arc::clone(&state),
            _slot: slot,
        });
        let service = Tracked {
            inner: service,
            state: Arc::clone(&state),
        };
        let limits = &gate.limits;
        let mut closing = gate.closing.subscribe();
        {
            let mut connection = pin!(gate.builder.serve_connection_with_upgrades(io, service));
            let timer = pin!(tokio::time::sleep(Duration::ZERO));
            let mut timer: Pin<&mut tokio::time::Sleep> = timer;
            // Set once the connection is told to close gracefully: when it must be gone.
            let mut winding_down: Option<Option<Instant>> = None;
            loop {
                let close = tokio::select! {
                    biased;
                    ended = connection.as_mut() => {
                        if let Err(err) = ended {
                            tracing::debug!(error = %err, "connection ended with an error");
                        }
                        break;
                    }
                    () = state.evict.notified(), if winding_down.is_none() => {
                        if !state.is_marked() {
                            continue;
                        }
                        nothing_in_flight(&state)
                    }
                    _ = closing.wait_for(|closing| *closing), if winding_down.is_none() => {
                        nothing_in_flight(&state)
                    }
                    () = timer.as_mut() => {
                        if let Some(until) = winding_down {
                            if until.is_some_and(|until| Instant::now() >= until) {
                                break;
                            }
                            timer.as_mut().reset(Instant::now() + GOAWAY_GRACE);
                            continue;
                        }
                        match state.watch(limits) {
                            Watch::Busy => {
                                timer.as_mut().reset(Instant::now() + limits.watch_period());
                                continue;
                            }
                            Watch::Until(ms, _) if state.now_ms() < ms => {
                                // Looked at again within the watch period however far the
                                // deadline is: a kept-alive connection's next head may begin
                                // (bytes arrive) while it sleeps toward its idle deadline, and
                                // from then on the header timeout is the one that counts.
                                let next = Instant::now() + limits.watch_period();
                                timer.as_mut().reset(state.instant(ms).min(next));
                                continue;
                            }
                            Watch::Until(_, Expiry::Send) => {
                                // The client does not read its answer: nothing to wait for.
                                bump(&state.counters.send_timeouts);
                                Close::Now
                            }
                            Watch::Until(_, expiry) => {
                                bump(match expiry {
                                    Expiry::Header => &state.counters.header_timeouts,
                                    _ => &state.counters.idle_timeouts,
                                });
                                nothing_in_flight(&state)
                            }
                        }
                    }
                };
                match close {
                    Close::Now => break,
                    Close::Gracefully => {
                        connection.as_mut().graceful_shutdown();
                        // With nothing in flight (HTTP/2), a short grace for the GOAWAY; with a
                        // request in flight, until it is answered.
                        let until = (state.in_flight() == 0).then(|| Instant::now() + GOAWAY_GRACE);
                        winding_down = Some(until);
                        timer.as_mut().reset(Instant::now() + GOAWAY_GRACE);
                    }
                }
            }
        }
        state.hold_if_upgraded();
    }
}

/// How to close a connection that is to go: at once with nothing in flight over HTTP/1.1 (or
/// before any request), gracefully otherwise.
fn nothing_in_flight(state: &ConnState) -> Close {
    if state.in_flight() == 0 && !state.is_h2() {
        Close::Now
    } else {
        Close::Gracefully
    }
}
