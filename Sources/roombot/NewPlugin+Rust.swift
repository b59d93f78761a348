extension Scaffold {
    /// A Rust plugin: a cdylib crate with the `extern "C"` descriptor written
    /// by hand (no bindgen, no dependencies, so it builds offline), and a
    /// `cargo test` that drives it through a fake host table.
    var rust: [String: String] {
        [
            "Cargo.toml": """
                [package]
                name = "\(name)"
                version = "0.1.0"
                edition = "2021"

                [lib]
                crate-type = ["cdylib", "rlib"]

                [dependencies]

                [profile.release]
                panic = "abort"

                """,
            "src/lib.rs": rustLib,
            "src/abi.rs": rustABI,
            "src/json.rs": rustJSON,
            "plugins.json": manifest(library: "target/release/lib\(identifier).so"),
            "scenario.json": scenario,
            "tests/simulate.rs": rustSimulateTest,
            "README.md": rustReadme,
            ".gitignore": "target/\nCargo.lock\n",
        ]
    }

    private var rustReadme: String {
        """
        # \(name)

        A RoomKit plugin in Rust, made by `roombot new-plugin \(name) --lang rust`.
        It has no dependencies (the ABI is declared by hand in `src/abi.rs`,
        mirroring `roomkit_plugin.h` 1.1), so it builds offline.

        ## Build, test and load (two commands)

            cargo build --release && cargo test     # target/release/lib\(identifier).so, then its test
            roombot check --manifest plugins.json   # loads it as the bot would

        ## Files

        - `src/lib.rs`: the plugin: `roomkit_plugin_entry` and its hooks.
        - `src/abi.rs`: `#[repr(C)]` copies of `roomkit_host_api` and
          `roomkit_plugin`. Members are only ever appended; check
          `host.has(...)` before using one marked 1.1.
        - `src/json.rs`: a tiny field reader for the payloads.

        A panic must never cross into the host: every hook catches it
        (`catch_unwind`), and the release profile aborts rather than unwinds.

        \(runSection)
        """
    }

    private var rustABI: String {
        """
        //! `#[repr(C)]` mirrors of roomkit_plugin.h (ABI 1.1). Members are only
        //! ever appended; a host's table may end early (an older host): check
        //! `has_member` before reading a member marked 1.1.
        #![allow(non_camel_case_types, dead_code)]
        use std::os::raw::{c_char, c_int, c_void};

        pub const ABI_MAJOR: u16 = 1;
        pub const ABI_MINOR: u16 = 1;
        pub const ROOM_MAGIX: i32 = 8;
        pub const LOG_INFO: c_int = 1;

        type Ctx = *mut c_void;
        type Str = *const c_char;

        #[repr(C)]
        pub struct HostApi {
            pub struct_size: u32,
            pub abi_major: u16,
            pub abi_minor: u16,
            pub context: Ctx,
            pub log: Option<unsafe extern "C" fn(Ctx, c_int, Str)>,
            pub dispatch_magix: Option<unsafe extern "C" fn(Ctx, Str, Str, Str, Str) -> c_int>,
            pub set_global_state: Option<unsafe extern "C" fn(Ctx, Str, Str) -> c_int>,
            pub insert_image: Option<unsafe extern "C" fn(Ctx, Str, Str) -> c_int>,
            pub put_scenes: Option<unsafe extern "C" fn(Ctx, Str, Str, Str, i32) -> c_int>,
            pub room_state_json: Option<unsafe extern "C" fn(Ctx, Str) -> *mut c_char>,
            pub set_timer: Option<unsafe extern "C" fn(Ctx, u64, u64, Option<unsafe extern "C" fn(*mut c_void, u64)>, *mut c_void) -> u64>,
            pub cancel_timer: Option<unsafe extern "C" fn(Ctx, u64)>,
            pub alloc_string: Option<unsafe extern "C" fn(Ctx, Str) -> *mut c_char>,
            pub free_string: Option<unsafe extern "C" fn(Ctx, *mut c_char)>,
            // 1.1 and later
            pub set_member_state: Option<unsafe extern "C" fn(Ctx, Str, Str) -> c_int>,
            pub set_extra_info: Option<unsafe extern "C" fn(Ctx, Str, Str, Str) -> c_int>,
            pub publish_stream: Option<unsafe extern "C" fn(Ctx, Str, Str, Str) -> c_int>,
            pub unpublish_stream: Option<unsafe extern "C" fn(Ctx, Str, Str) -> c_int>,
            pub login_room: Option<unsafe extern "C" fn(Ctx, Str) -> c_int>,
            pub logout_room: Option<unsafe extern "C" fn(Ctx, Str) -> c_int>,
            pub switch_room: Option<unsafe extern "C" fn(Ctx, Str, Str) -> c_int>,
            pub room_members_json: Option<unsafe extern "C" fn(Ctx, Str) -> *mut c_char>,
            pub config_get_json: Option<unsafe extern "C" fn(Ctx, Str) -> *mut c_char>,
            pub kv_get: Option<unsafe extern "C" fn(Ctx, Str) -> *mut c_char>,
            pub kv_set: Option<unsafe extern "C" fn(Ctx, Str, Str) -> c_int>,
            pub kv_delete: Option<unsafe extern "C" fn(Ctx, Str) -> c_int>,
            pub kv_scan_json: Option<unsafe extern "C" fn(Ctx, Str) -> *mut c_char>,
        }

        /// Whether the host's table reaches past `offset + size` bytes.
        pub fn has_member(host: &HostApi, offset: usize, size: usize) -> bool {
            host.struct_size as usize >= offset + size
        }

        #[repr(C)]
        pub struct Plugin {
            pub struct_size: u32,
            pub abi_major: u16,
            pub abi_minor: u16,
            pub self_: *mut c_void,
            pub on_load: Option<unsafe extern "C" fn(*mut c_void, *const HostApi, Str) -> c_int>,
            pub on_unload: Option<unsafe extern "C" fn(*mut c_void)>,
            pub throw_error: Option<unsafe extern "C" fn(*mut c_void, Str, i64, Str)>,
            pub url_interrupter: Option<unsafe extern "C" fn(*mut c_void, Str) -> *mut c_char>,
            pub on_room_event: Option<unsafe extern "C" fn(*mut c_void, i32, Str, Str)>,
            pub on_player_event: Option<unsafe extern "C" fn(*mut c_void, i32, Str, Str)>,
            // 1.1 and later
            pub on_config_changed: Option<unsafe extern "C" fn(*mut c_void, Str, Str)>,
            pub export_state: Option<unsafe extern "C" fn(*mut c_void) -> *mut c_char>,
            pub import_state: Option<unsafe extern "C" fn(*mut c_void, Str) -> c_int>,
        }

        /// The descriptor is immutable and lives as long as the library.
        unsafe impl Sync for Plugin {}

        """
    }

    private var rustJSON: String {
        #"""
        //! A tiny reader for top-level fields of a JSON object: enough for the
        //! payloads a plugin gets, with no dependencies.

        /// The raw text of the value of top-level `key` in `json`.
        pub fn field<'a>(json: &'a str, key: &str) -> Option<&'a str> {
            let bytes = json.as_bytes();
            let mut i = skip_ws(bytes, 0);
            if bytes.get(i) != Some(&b'{') { return None; }
            i += 1;
            loop {
                i = skip_ws(bytes, i);
                if bytes.get(i) != Some(&b'"') { return None; }
                let key_end = skip_value(bytes, i)?;
                let this_key = &json[i + 1..key_end - 1];
                i = skip_ws(bytes, key_end);
                if bytes.get(i) != Some(&b':') { return None; }
                let start = skip_ws(bytes, i + 1);
                let end = skip_value(bytes, start)?;
                if this_key == key { return Some(&json[start..end]); }
                i = skip_ws(bytes, end);
                match bytes.get(i) { Some(b',') => i += 1, _ => return None }
            }
        }

        /// The string value of top-level `key` (simple escapes decoded).
        pub fn string(json: &str, key: &str) -> Option<String> {
            let raw = field(json, key)?;
            if !raw.starts_with('"') { return None; }
            let mut out = String::new();
            let mut chars = raw[1..raw.len() - 1].chars();
            while let Some(c) = chars.next() {
                if c != '\\' { out.push(c); continue; }
                match chars.next()? {
                    'n' => out.push('\n'), 't' => out.push('\t'), 'r' => out.push('\r'),
                    'u' => { let hex: String = chars.by_ref().take(4).collect(); out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?).unwrap_or('\u{fffd}')); }
                    other => out.push(other),
                }
            }
            Some(out)
        }

        /// The integer value of top-level `key`.
        pub fn int(json: &str, key: &str) -> Option<i64> { field(json, key)?.parse().ok() }

        /// `text` as a JSON string literal.
        pub fn quote(text: &str) -> String {
            let mut out = String::from("\"");
            for c in text.chars() {
                match c {
                    '"' => out.push_str("\\\""), '\\' => out.push_str("\\\\"), '\n' => out.push_str("\\n"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }

        fn skip_ws(b: &[u8], mut i: usize) -> usize {
            while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') { i += 1; }
            i
        }

        fn skip_value(b: &[u8], i: usize) -> Option<usize> {
            match *b.get(i)? {
                b'"' => {
                    let mut j = i + 1;
                    while j < b.len() {
                        match b[j] { b'\\' => j += 2, b'"' => return Some(j + 1), _ => j += 1 }
                    }
                    None
                }
                b'{' | b'[' => {
                    let (mut depth, mut j) = (0usize, i);
                    while j < b.len() {
                        match b[j] {
                            b'"' => { j = skip_value(b, j)?; continue; }
                            b'{' | b'[' => depth += 1,
                            b'}' | b']' => { depth -= 1; if depth == 0 { return Some(j + 1); } }
                            _ => {}
                        }
                        j += 1;
                    }
                    None
                }
                _ => {
                    let mut j = i;
                    while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\n' | b'\t' | b'\r') { j += 1; }
                    if j == i { None } else { Some(j) }
                }
            }
        }

        """#
    }

    private var rustLib: String {
        #"""
        //! \#(name): a RoomKit plugin in Rust (roombot new-plugin). It answers the
        //! magix event "ping" with "pong" {"greeting": <config greeting>, "to": <sender>}.
        mod abi;
        mod json;

        use abi::{HostApi, Plugin};
        use std::ffi::{CStr, CString};
        use std::os::raw::{c_char, c_int, c_void};
        use std::sync::atomic::{AtomicPtr, Ordering};

        static HOST: AtomicPtr<HostApi> = AtomicPtr::new(std::ptr::null_mut());

        fn host() -> Option<&'static HostApi> {
            // The host's table is valid until on_unload returns.
            unsafe { HOST.load(Ordering::Acquire).as_ref() }
        }

        fn text(pointer: *const c_char) -> Option<&'static str> {
            if pointer.is_null() { return None; }
            unsafe { CStr::from_ptr(pointer) }.to_str().ok()
        }

        /// The plugin's config as resolved for `room` (ABI 1.1; the base config in a 1.0 host: none).
        fn config_for(host: &HostApi, room: &CStr) -> Option<String> {
            let offset = std::mem::offset_of!(HostApi, config_get_json);
            if !abi::has_member(host, offset, std::mem::size_of::<usize>()) { return None; }
            let get = host.config_get_json?;
            let raw = unsafe { get(host.context, room.as_ptr()) };
            if raw.is_null() { return None; }
            let config = unsafe { CStr::from_ptr(raw) }.to_str().ok().map(str::to_owned);
            unsafe { (host.free_string?)(host.context, raw) };
            config
        }

        unsafe extern "C" fn on_load(_self: *mut c_void, api: *const abi::HostApi, _config: *const c_char) -> c_int {
            HOST.store(api as *mut HostApi, Ordering::Release);
            if let (Some(host), Ok(message)) = (host(), CString::new("\#(name) loaded")) {
                if let Some(log) = host.log { log(host.context, abi::LOG_INFO, message.as_ptr()); }
            }
            0
        }

        unsafe extern "C" fn on_unload(_self: *mut c_void) {
            HOST.store(std::ptr::null_mut(), Ordering::Release);
        }

        /// The reply to a magix event, if any (pure, so it is easy to test).
        pub fn reply(payload: &str, config: Option<&str>) -> Option<(String, String)> {
            if json::string(payload, "event")?.as_str() != "ping" { return None; }
            let from = json::int(payload, "from").unwrap_or(0);
            let greeting = config.and_then(|c| json::string(c, "greeting")).unwrap_or_else(|| "hello".into());
            Some(("pong".into(), format!("{{\"greeting\":{},\"to\":{}}}", json::quote(&greeting), from)))
        }

        unsafe extern "C" fn on_room_event(_self: *mut c_void, kind: i32, room: *const c_char, payload: *const c_char) {
            // A panic must not unwind into the host.
            let _ = std::panic::catch_unwind(|| {
                let (Some(host), Some(payload)) = (host(), text(payload)) else { return };
                if kind != abi::ROOM_MAGIX || room.is_null() { return; }
                let room = unsafe { CStr::from_ptr(room) };
                let config = config_for(host, room);
                let Some((event, body)) = reply(payload, config.as_deref()) else { return };
                let (Ok(event), Ok(body)) = (CString::new(event), CString::new(body)) else { return };
                if let Some(dispatch) = host.dispatch_magix {
                    unsafe { dispatch(host.context, room.as_ptr(), event.as_ptr(), body.as_ptr(), std::ptr::null()) };
                }
            });
        }

        static DESCRIPTOR: Plugin = Plugin {
            struct_size: std::mem::size_of::<Plugin>() as u32,
            abi_major: abi::ABI_MAJOR,
            abi_minor: abi::ABI_MINOR,
            self_: std::ptr::null_mut(),
            on_load: Some(on_load),
            on_unload: Some(on_unload),
            throw_error: None,
            url_interrupter: None,
            on_room_event: Some(on_room_event),
            on_player_event: None,
            on_config_changed: None,
            export_state: None,
            import_state: None,
        };

        /// The entry point roombot calls after dlopen.
        #[no_mangle]
        pub extern "C" fn roomkit_plugin_entry(host_major: u16, _host_minor: u16) -> *const Plugin {
            if host_major == abi::ABI_MAJOR { &DESCRIPTOR } else { std::ptr::null() }
        }

        #[cfg(test)]
        mod tests {
            use super::*;
            use std::sync::Mutex;

            static SENT: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

            unsafe extern "C" fn fake_dispatch(_c: *mut c_void, _room: *const c_char, event: *const c_char,
                                               payload: *const c_char, _to: *const c_char) -> c_int {
                SENT.lock().unwrap().push((text(event).unwrap().into(), text(payload).unwrap().into()));
                0
            }
            unsafe extern "C" fn fake_config(_c: *mut c_void, _room: *const c_char) -> *mut c_char {
                CString::new("{\"greeting\":\"hi there\"}").unwrap().into_raw()
            }
            unsafe extern "C" fn fake_free(_c: *mut c_void, s: *mut c_char) { drop(CString::from_raw(s)); }

            #[test]
            fn answers_ping_through_the_c_abi() {
                let plugin = unsafe { &*roomkit_plugin_entry(abi::ABI_MAJOR, abi::ABI_MINOR) };
                assert!(roomkit_plugin_entry(abi::ABI_MAJOR + 1, 0).is_null());
                let mut host: HostApi = unsafe { std::mem::zeroed() };
                host.struct_size = std::mem::size_of::<HostApi>() as u32;
                host.dispatch_magix = Some(fake_dispatch);
                host.config_get_json = Some(fake_config);
                host.free_string = Some(fake_free);
                unsafe {
                    assert_eq!(plugin.on_load.unwrap()(plugin.self_, &host, c"{}".as_ptr()), 0);
                    let event = plugin.on_room_event.unwrap();
                    event(plugin.self_, abi::ROOM_MAGIX, c"lobby".as_ptr(),
                          c"{\"room\":\"lobby\",\"from\":7,\"event\":\"ping\",\"payload\":null}".as_ptr());
                    event(plugin.self_, abi::ROOM_MAGIX, c"lobby".as_ptr(),
                          c"{\"room\":\"lobby\",\"from\":7,\"event\":\"other\",\"payload\":null}".as_ptr());
                    plugin.on_unload.unwrap()(plugin.self_);
                }
                let sent = SENT.lock().unwrap();
                assert_eq!(sent.len(), 1);
                assert_eq!(sent[0], ("pong".to_string(), "{\"greeting\":\"hi there\",\"to\":7}".to_string()));
            }

            #[test]
            fn reply_reads_escaped_fields() {
                let (_, body) = reply("{\"event\":\"ping\",\"from\":3}", Some("{\"greeting\":\"a\\\"b\"}")).unwrap();
                assert_eq!(body, "{\"greeting\":\"a\\\"b\",\"to\":3}");
                assert!(reply("{\"event\":\"pong\"}", None).is_none());
            }
        }

        """#
    }

    /// An integration test that runs scenario.json in `roombot simulate`
    /// against the release library (`cargo build --release` first).
    var rustSimulateTest: String {
        """
        // scenario.json in roombot's simulator: the release library, loaded as
        // the bot loads it, against scripted rooms in virtual time.
        use std::path::Path;
        use std::process::Command;

        #[test]
        fn scenario_holds_in_the_simulator() {
            let dir = env!("CARGO_MANIFEST_DIR");
            let library = Path::new(dir).join("target/release/lib\(identifier).so");
            assert!(library.exists(), "build the library first: cargo build --release");
            let roombot = std::env::var("ROOMBOT").unwrap_or_else(|_| "roombot".to_string());
            let output = Command::new(&roombot)
                .args(["simulate", "--manifest", "plugins.json", "--script", "scenario.json"])
                .current_dir(dir)
                .output()
                .expect("roombot on PATH (make install of RoomKit), or ROOMBOT=/path/to/roombot");
            assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        }

        """
    }
}
