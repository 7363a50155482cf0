//! scratch
fn main() {
    let text = r#"
schema_version = 1
description = "x"
seed = 1
duration_ms_max = 7_200_000
[fleet]
nodes = 50
[[step]]
at_ms = 600_000
kind = "partition"
a = "node-03"
b = "hub"
[[step]]
at_ms = 1_200_000
kind = "repair"
a = "node-03"
b = "hub"
[[step]]
at_ms = 2_000_000
kind = "crash"
target = "hub"
[[step]]
at_ms = 2_300_000
kind = "restart"
target = "hub"
[[step]]
at_ms = 3_000_000
kind = "crash"
target = "controller"
[[step]]
at_ms = 3_100_000
kind = "restart"
target = "controller"
"#;
    let s = sim::spec::parse_scenario("x.toml", text).unwrap();
    let id = sim::runner::RunIdentity { source: "x".into(), run_index: None, repro: "r".into() };
    #[expect(clippy::disallowed_methods, reason = "scratch timing")]
    let t = std::time::Instant::now();
    let out = sim::runner::run(&s.run, s.seed, &id, true);
    println!("{:?}", t.elapsed());
    let out2 = sim::runner::run(&s.run, s.seed, &id, false);
    println!("{}", serde_json::to_string_pretty(&out.record).unwrap());
    println!("same digest: {}", out.record.trace_digest == out2.record.trace_digest);
    for l in out.trace.iter().filter(|l| !l.contains("hub.heartbeat\"")).skip(102).take(40) {
        println!("{l}");
    }
}
