//! @@name@@: a RoomKit plugin in Rust (roombot new-plugin). It answers the
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
    if let (Some(host), Ok(message)) = (host(), CString::new("@@name@@ loaded")) {
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
