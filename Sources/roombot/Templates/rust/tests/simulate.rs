// scenario.json in roombot's simulator: the release library, loaded as
// the bot loads it, against scripted rooms in virtual time.
use std::path::Path;
use std::process::Command;

#[test]
fn scenario_holds_in_the_simulator() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let library = Path::new(dir).join("target/release/lib@@identifier@@.so");
    assert!(library.exists(), "build the library first: cargo build --release");
    let roombot = std::env::var("ROOMBOT").unwrap_or_else(|_| "roombot".to_string());
    let output = Command::new(&roombot)
        .args(["simulate", "--manifest", "plugins.json", "--script", "scenario.json"])
        .current_dir(dir)
        .output()
        .expect("roombot on PATH (make install of RoomKit), or ROOMBOT=/path/to/roombot");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}
