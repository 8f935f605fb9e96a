//! The cluster bus over turmoil's simulated network: a [`cluster_bus::Connect`] that opens
//! `turmoil::net::TcpStream`s, and [`serve_bus`], which runs a [`BusServer`] on a turmoil
//! listener through `BusServer::serve_with_incoming_shutdown`.

use std::io;

use cluster_bus::BusServer;
use cluster_bus::Connect;
use turmoil::net::TcpStream;

/// Opens bus connections over turmoil's network (`host:port`, resolved by turmoil's DNS).
#[derive(Debug, Clone, Copy, Default)]
pub struct TurmoilConnector;

impl Connect for TurmoilConnector {
    type Io = TcpStream;

    async fn connect(&self, addr: &str) -> io::Result<TcpStream> {
        TcpStream::connect(addr).await
    }
}

/// Serves `server` on turmoil port `port` of the current host until the host stops (a
/// crash drops the task). Accepted connections are fed to tonic through a channel.
pub async fn serve_bus(server: BusServer, port: u16) -> io::Result<()> {
    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", port)).await?;
    let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<TcpStream>>(16);
    tokio::task::spawn_local(async move {
        loop {
            let accepted = listener.accept().await.map(|(s, _)| s);
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
