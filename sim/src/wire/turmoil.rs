//! The turmoil glue of the wire transport: a TCP connector for hyper-util's pooled client, a listener for
//! `axum::serve`, and a UDP datagram transport, all over turmoil's simulated sockets.
