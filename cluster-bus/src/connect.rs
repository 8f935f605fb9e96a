//! The injectable connector: how the client side opens a byte stream to a peer. TCP by
//! default; a simulation (turmoil) supplies its own.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::Context;
use std::task::Poll;

use hyper_util::rt::TokioIo;
use tokio::io::AsyncRead;
use tokio::io::AsyncWrite;
use tonic::transport::Uri;

/// Opens a byte stream to a peer's bus address (`host:port`, as [`raft::Node::bus_addr`]
/// stores it). HTTP/2 runs over the stream; a simulation returns e.g. a
/// `turmoil::net::TcpStream`.
pub trait Connect: Clone + Send + Sync + 'static {
    /// The connected stream.
    type Io: AsyncRead + AsyncWrite + Send + Unpin + 'static;

    /// Connects to `addr` (`host:port`).
    fn connect(&self, addr: &str) -> impl Future<Output = io::Result<Self::Io>> + Send;
}

/// The default connector: a TCP connection with `TCP_NODELAY` (Raft messages are small and
/// latency-bound).
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpConnector;

impl Connect for TcpConnector {
    type Io = tokio::net::TcpStream;

    async fn connect(&self, addr: &str) -> io::Result<Self::Io> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(stream)
    }
}

/// A [`Connect`] as the `tower::Service<Uri>` that tonic's `Endpoint` takes.
#[derive(Clone)]
pub(crate) struct ConnectService<C>(pub(crate) C);

impl<C: Connect> tower::Service<Uri> for ConnectService<C> {
    type Response = TokioIo<C::Io>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<TokioIo<C::Io>>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connector = self.0.clone();
        Box::pin(async move {
            let addr = uri
                .authority()
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no host:port"))?
                .as_str()
                .to_string();
            connector.connect(&addr).await.map(TokioIo::new)
        })
    }
}
