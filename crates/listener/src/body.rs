//! The wrappers every request goes through: [`RequestBody`] (the body deadline), the response
//! body and future that keep the request counted as in flight until its answer is sent.
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

use crate::connection::{ConnState, InFlight};
use crate::stats::bump;

/// Why a [`RequestBody`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BodyError {
    /// The body did not arrive within its deadline (see
    /// [`ConnectionLimits::body_timeout`](crate::ConnectionLimits::body_timeout)).
    #[error("the request body did not arrive in time")]
    TimedOut,
    /// The connection failed while the body was read (the client went away, or sent a
    /// malformed body).
    #[error(transparent)]
    Transport(#[from] hyper::Error),
}

impl BodyError {
    /// Whether `error`, or any error in its source chain, is [`BodyError::TimedOut`]: how a
    /// service that forwarded the body (a proxy) tells a late client from a failed upstream.
    pub fn is_timeout(error: &(dyn std::error::Error + 'static)) -> bool {
        let mut next = Some(error);
        while let Some(error) = next {
            if matches!(error.downcast_ref::<BodyError>(), Some(BodyError::TimedOut)) {
                return true;
            }
            next = error.source();
        }
        false
    }
}

/// A request body under its deadline: every request a [`ConnectionGate`](crate::ConnectionGate)
/// serves carries one. It yields the client's body as it arrives and fails with
/// [`BodyError::TimedOut`] once the deadline passes (see
/// [`ConnectionLimits::body_timeout`](crate::ConnectionLimits::body_timeout)): the deadline is
/// `body_timeout` after the request head, moved one second later for every `min_body_rate`
/// bytes received.
///
/// A body that is complete when the request is dispatched (no body, or one that arrived with
/// the head) never starts a timer; a body that has to wait for the network gets one timer.
pub struct RequestBody {
    inner: Incoming,
    state: Arc<ConnState>,
    started: Instant,
    received: u64,
    timer: Option<Pin<Box<Sleep>>>,
    timed_out: bool,
}

impl std::fmt::Debug for RequestBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestBody")
            .field("received", &self.received)
            .field("timed_out", &self.timed_out)
            .finish_non_exhaustive()
    }
}

impl RequestBody {
    pub(crate) fn new(inner: Incoming, state: Arc<ConnState>) -> Self {
        Self {
            inner,
            state,
            started: Instant::now(),
            received: 0,
            timer: None,
            timed_out: false,
        }
    }

    /// When the body must have arrived, given what has arrived so far.
    fn deadline(&self) -> Instant {
        let limits = self.state.body;
        let earned = match limits.min_rate {
            0 => Duration::ZERO,
            rate => Duration::from_millis(self.received.saturating_mul(1000) / rate),
        };
        self.started + limits.timeout + earned
    }

    /// Polls the timer; `true` when the deadline has passed. The timer is set for the deadline
    /// known when it is made; bytes that arrive later move the deadline, which is looked at
    /// again only when the timer fires (no timer reset per chunk).
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        let deadline = self.deadline();
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        loop {
            if timer.as_mut().poll(cx).is_pending() {
                return false;
            }
            if Instant::now() >= deadline {
                return true;
            }
            timer.as_mut().reset(deadline);
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        if self.timed_out {
            return Poll::Ready(Some(Err(BodyError::TimedOut)));
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.received = self.received.saturating_add(data.len() as u64);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(err))) => Poll::Ready(Some(Err(BodyError::Transport(err)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                if self.expired(cx) {
                    self.timed_out = true;
                    self.timer = None;
                    bump(&self.state.counters.body_timeouts);
                    return Poll::Ready(Some(Err(BodyError::TimedOut)));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        !self.timed_out && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

pin_project_lite::pin_project! {
    /// The response body of a served request: the service's own, counting the request as in
    /// flight until it is sent in full (or dropped).
    pub struct ResponseBody<B> {
        #[pin]
        inner: B,
        request: Option<InFlight>,
    }
}

impl<B: Body> Body for ResponseBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

pin_project_lite::pin_project! {
    /// The future of a served request: the service's own, handing the in-flight mark to the
    /// response body.
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        request: Option<InFlight>,
    }
}

impl<F> ResponseFuture<F> {
    pub(crate) fn new(inner: F, request: InFlight) -> Self {
        Self {
            inner,
            request: Some(request),
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ResponseBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = ready!(this.inner.poll(cx))?;
        let request = this.request.take();
        Poll::Ready(Ok(response.map(|inner| ResponseBody { inner, request })))
    }
}
