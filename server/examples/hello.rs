//! An axum hello-world: the baseline `make bench-reads` measures the API
//! against, in the same run and on the same machine (docs/benchmarks.md).
//! Usage: `hello [ADDR]` (default `127.0.0.1:3951`).

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:3951".to_owned());
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "Hello, World!" }));
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    axum::serve(listener, app).await
}
