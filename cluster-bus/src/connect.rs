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

/// An accepted server-side stream of any kind (TCP, turmoil), as tonic's server takes it:
/// tonic asks each connection for its `Connected` info, which the bus does not use.
pub(crate) struct Accepted<IO>(pub(crate) IO);

impl<IO> tonic::transport::server::Connected for Accepted<IO> {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl<IO: AsyncRead + Unpin> AsyncRead for Accepted<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Accepted<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}
