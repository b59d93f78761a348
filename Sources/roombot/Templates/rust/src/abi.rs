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
