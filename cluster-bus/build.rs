//! Compiles `proto/bus.proto` with protox (pure Rust: no protoc needed) and generates the
//! tonic client and server with tonic-prost-build.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(["bus.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .bytes(".ember.bus.v1")
        .compile_fds(fds)?;
    Ok(())
}
