//! The cluster bus over turmoil's simulated network: a [`cluster_bus::Connect`] that opens
//! `turmoil::net::TcpStream`s, and [`serve_bus`], which runs a [`BusServer`] on a turmoil
//! listener through `BusServer::serve_with_incoming_shutdown`.

use std::io;
use std::pin::Pin;
use std::task::Context;
use std::task::Poll;

use cluster_bus::BusServer;
use cluster_bus::Connect;
use tokio::io::AsyncRead;
use tokio::io::AsyncWrite;
use tokio::io::ReadBuf;
use tonic::transport::server::Connected;

/// Opens bus connections over turmoil's network (`host:port`, resolved by turmoil's DNS).
#[derive(Debug, Clone, Copy, Default)]
pub struct TurmoilConnector;

impl Connect for TurmoilConnector {
    type Io = SimStream;

    async fn connect(&self, addr: &str) -> io::Result<SimStream> {
        turmoil::net::TcpStream::connect(addr).await.map(SimStream)
    }
}

/// A turmoil TCP stream that tonic's server accepts (it needs [`Connected`]).
#[derive(Debug)]
pub struct SimStream(pub turmoil::net::TcpStream);

impl Connected for SimStream {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl AsyncRead for SimStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for SimStream {
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
}

/// Serves `server` on turmoil port `port` of the current host until the host stops (a
/// crash drops the task). Accepted connections are fed to tonic through a channel.
pub async fn serve_bus(server: BusServer, port: u16) -> io::Result<()> {
    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", port)).await?;
    let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<SimStream>>(16);
    tokio::task::spawn_local(async move {
        loop {
            let accepted = listener.accept().await.map(|(s, _)| SimStream(s));
            if tx.send(accepted).await.is_err() {
                break;
            }
        }
    });
    let incoming = tokio_stream::wrappers::ReceiverStream::new(rx);
    server
        .serve_with_incoming_shutdown(incoming, std::future::pending())
        .await
        .map_err(io::Error::other)
}
